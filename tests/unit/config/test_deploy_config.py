"""Config that a first deploy depends on (issue 20): the start-up budget floor, the ECR lifecycle
key, and which pins a deploy would refuse."""

import json
from pathlib import Path

import pytest

from app_config import load_config
from app_config.pins import placeholder_pin_problem, placeholder_pins
from serving_contract.env import (
    MEASURED_CACHED_START_FASTEST_S,
    MEASURED_CACHED_START_S,
    MEASURED_COLD_START_FASTEST_S,
    MEASURED_COLD_START_S,
    STARTUP_HEALTH_CHECK_TIMEOUT_FLOOR_S,
    startup_budget_s,
)
from tests.config_helpers import PREBUILT_DEV, config_error
from tests.synth_helpers import cdk_json_context

PINNED_SET = {
    "base_model": "v1/" + "a" * 64,
    "adapters": {
        "manga_domain_v3": "v3/" + "b" * 64,
        "general_support_v2": "v2/" + "c" * 64,
        "jp_style_v1": "v1/" + "d" * 64,
    },
}


UV_PINNED = "ghcr.io/astral-sh/uv:0.13.8@sha256:" + "f" * 64


def _load(**overrides: str):  # type: ignore[no-untyped-def]
    return load_config({**cdk_json_context(), **{k.replace("__", "."): v for k, v in overrides.items()}})


def test_a_startup_budget_below_the_measured_cold_start_is_refused_in_one_line() -> None:
    assert config_error(serving__container_startup_health_check_timeout_s="60") == (
        "config error: serving.container_startup_health_check_timeout_s = '60': must be >= 236: the container "
        "gives up 30 s before SageMaker, and the slowest measured cold start took 205.8 s to start "
        "(benchmarks/results/h100-2026-11-25-startup/startup-1-default-before.json); a 4-vCPU L4 or A10G instance "
        "needs more, keep the default 600"
    )


def test_the_floor_leaves_the_container_at_least_the_measured_cold_start() -> None:
    floor = STARTUP_HEALTH_CHECK_TIMEOUT_FLOOR_S
    assert startup_budget_s(floor) >= MEASURED_COLD_START_S > startup_budget_s(floor - 1)
    assert (
        _load(
            serving__container_startup_health_check_timeout_s=str(floor)
        ).serving.container_startup_health_check_timeout_s
        == floor
    )


def test_the_measured_start_times_are_the_slowest_recorded_runs() -> None:
    """The floor and the simulation cite files in the repo: they must hold the numbers used."""
    results = Path(__file__).resolve().parents[3] / "benchmarks/results"
    cold = [json.loads((results / "h200-2026-11-25/capacity.json").read_text())["ready_s"]]
    cached = []
    for path in sorted((results / "h100-2026-11-25-startup").glob("startup-*.json")):
        for run in json.loads(path.read_text()):
            start = run.get("start", {})
            if start.get("compile_cache") == "made":
                cold.append(start["gateway_ready_s"])
            elif start.get("compile_cache") == "hit" and "defaults" in path.stem:  # today's engine defaults
                cached.append(start["gateway_ready_s"])
    assert max(cold) == MEASURED_COLD_START_S
    assert len(cached) == 5 and max(cached) == MEASURED_CACHED_START_S
    assert (min(cold), min(cached)) == (MEASURED_COLD_START_FASTEST_S, MEASURED_CACHED_START_FASTEST_S)


def test_the_removed_keep_last_images_key_says_what_replaced_it() -> None:
    assert config_error(image__keep_last_images="10") == (
        "config error: image.keep_last_images: removed: a 'keep the newest N' rule could expire the image a "
        "variant runs or a rollback returns to; tagged images no longer expire, and "
        "image.untagged_image_expiry_days sets when untagged ones do (docs/image-build.md)"
    )


def test_untagged_expiry_is_bounded() -> None:
    assert config_error(image__untagged_image_expiry_days="0") == (
        "config error: image.untagged_image_expiry_days = '0': must be >= 1"
    )


def test_defaults_name_every_placeholder_pin_a_build_deploy_uses() -> None:
    keys = [key for key, _ in placeholder_pins(_load())]
    assert keys == [
        "image.build.primary.adapters.general_support_v2",
        "image.build.primary.adapters.jp_style_v1",
        "image.build.primary.adapters.manga_domain_v3",
        "image.build.primary.base_model",
    ]


def test_a_pinned_primary_leaves_nothing_to_refuse() -> None:
    config = _load(image__build__primary=json.dumps(PINNED_SET))
    assert placeholder_pins(config) == []
    assert placeholder_pin_problem(config) == (
        "placeholder pin(s) image.build.uv_image: set these keys in cdk.json before deploying (artifacts: upload "
        "them and pin them with `python -m ops.pin_artifacts`; base images: their registry digest) "
        "(docs/deploy.md)"
    )
    assert (
        placeholder_pin_problem(_load(image__build__primary=json.dumps(PINNED_SET), image__build__uv_image=UV_PINNED))
        is None
    )


def test_a_built_canary_counts_and_an_unbuilt_one_does_not() -> None:
    canary = {**PINNED_SET, "base_model": "v2/" + "0" * 64}
    built = _load(image__build__primary=json.dumps(PINNED_SET), image__build__canary=json.dumps(canary))
    assert placeholder_pins(built) == [("image.build.canary.base_model", "v2/" + "0" * 64)]
    disabled = _load(
        image__build__primary=json.dumps(PINNED_SET),
        image__build__canary=json.dumps(canary),
        serving__canary__enabled="false",
    )
    assert placeholder_pins(disabled) == []


def test_prebuilt_images_have_no_pins_to_refuse() -> None:
    config = load_config({**cdk_json_context(), **PREBUILT_DEV, "image.primary.digest": "sha256:" + "e" * 64})
    assert placeholder_pins(config) == []


def test_the_refusal_fits_cloudformations_assert_description() -> None:
    problem = placeholder_pin_problem(_load())
    assert problem is not None and len(problem) <= 1024
    assert problem.startswith("placeholder pin(s) image.build.primary.adapters.general_support_v2, ")


def test_an_endpoint_name_past_sagemakers_63_characters_is_refused_in_one_line() -> None:
    assert config_error(serving__endpoint_name="e" * 64) == (
        f"config error: serving.endpoint_name = '{'e' * 64}': 64 characters: must be 1-63 letters, digits and "
        "hyphens, starting and ending with a letter or digit, [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62} "
        "(SageMaker EndpointName)"
    )


def test_component_names_past_63_characters_name_the_endpoint_key() -> None:
    message = config_error(serving__endpoint_name="e" * 51, serving__mode="inference_components")
    assert message.startswith(f"config error: serving.endpoint_name = '{'e' * 51}': inference component name ")
    assert message.endswith("shorten serving.endpoint_name or the adapter name")


def test_hyphens_count_toward_the_63_characters() -> None:
    """SageMaker's pattern counts letters and digits only; a name can match it and still be too long."""
    hyphenated = "-".join(["ab"] * 22)  # 44 letters, 21 hyphens: 65 characters
    assert config_error(serving__endpoint_name=hyphenated).startswith(
        f"config error: serving.endpoint_name = '{hyphenated}': 65 characters: must be 1-63"
    )
    message = config_error(serving__endpoint_name="e" * 47, serving__mode="inference_components")
    assert f"inference component name '{'e' * 47}-general-support-v2' (66 characters) must be 1-63" in message


def test_the_docker_hub_secret_must_be_a_pull_through_cache_secret() -> None:
    wrong = "arn:aws:secretsmanager:us-east-1:123456789012:secret:dockerhub-AbCdEf"
    assert config_error(image__build__docker_hub_credentials_secret_arn=wrong).startswith(
        f"config error: image.build.docker_hub_credentials_secret_arn = '{wrong}': must match ^arn:aws"
    )


def test_the_docker_hub_cache_prefix_must_fit_ecrs_30_characters() -> None:
    secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/docker-hub-AbCdEf"
    assert config_error(project_name="A" * 32, image__build__docker_hub_credentials_secret_arn=secret) == (
        f"config error: project_name = '{'A' * 32}': the Docker Hub cache's repository prefix "
        f"'{'a' * 32}-prod-hub' is 41 characters, ECR allows 30; shorten project_name or unset "
        "image.build.docker_hub_credentials_secret_arn"
    )


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        # The custom resource waits max_runtime_s + 15 min + two polls inside CloudFormation's 3600 s less
        # 300 s head room (issue 49, finding 3: 5,400 was accepted, and CloudFormation gave up at 3,600).
        (
            "serving.compile_cache.max_runtime_s",
            "5400",
            "serving.compile_cache.max_runtime_s = '5400': must be <= 2340",
        ),
        (
            "serving.compile_cache.max_runtime_s",
            "2341",
            "serving.compile_cache.max_runtime_s = '2341': must be <= 2340",
        ),
        ("serving.compile_cache.volume_size_gb", "0", "serving.compile_cache.volume_size_gb = '0': must be >= 1"),
        (
            "serving.compile_cache.lora_tuning_budget_s",
            "30",
            "serving.compile_cache.lora_tuning_budget_s = '30': must be >= 60",
        ),
        (
            "serving.compile_cache.lora_tuning_budget_s",
            "3600",
            "serving.compile_cache.lora_tuning_budget_s = '3600': must be <= 1800",
        ),
        ("scaling.instance_start_cached_s", "0", "scaling.instance_start_cached_s = '0': must be > 0"),
    ],
)
def test_compile_cache_and_start_time_keys_are_bounded_in_one_line(key: str, value: str, message: str) -> None:
    assert config_error(**{key.replace(".", "__"): value}) == f"config error: {message}"


def test_the_lora_tuning_budget_must_leave_the_job_half_its_runtime_for_the_engine() -> None:
    assert config_error(
        serving__compile_cache__max_runtime_s="1200", serving__compile_cache__lora_tuning_budget_s="900"
    ) == (
        "config error: serving.compile_cache: lora_tuning_budget_s = 900 must be at most half of max_runtime_s = "
        "1200: the job's engine cold start needs the rest (lower the budget, raise max_runtime_s or set lora_tuning "
        "to false)"
    )
    # With tuning off the budget is not used, so it does not have to fit.
    config = _load(
        serving__compile_cache__max_runtime_s="1200",
        serving__compile_cache__lora_tuning_budget_s="900",
        serving__compile_cache__lora_tuning="false",
    )
    assert config.serving.compile_cache.job_lora_tuning_budget_s == 0
