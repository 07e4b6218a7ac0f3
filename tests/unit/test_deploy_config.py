"""Config that a first deploy depends on (issue 20): the start-up budget floor, the ECR lifecycle
key, and which pins a deploy would refuse."""

import json
from pathlib import Path

import pytest

from app_config import ConfigError, load_config
from app_config.pins import placeholder_pin_problem, placeholder_pins
from serving_contract.env import MEASURED_COLD_START_S, STARTUP_HEALTH_CHECK_TIMEOUT_FLOOR_S, startup_budget_s
from tests.synth_helpers import cdk_json_context

PINNED_SET = {
    "base_model": "v1/" + "a" * 64,
    "adapters": {
        "manga_domain_v3": "v3/" + "b" * 64,
        "general_support_v2": "v2/" + "c" * 64,
        "jp_style_v1": "v1/" + "d" * 64,
    },
}


def _load(**overrides: str):  # type: ignore[no-untyped-def]
    return load_config({**cdk_json_context(), **{k.replace("__", "."): v for k, v in overrides.items()}})


def _error(**overrides: str) -> str:
    with pytest.raises(ConfigError) as info:
        _load(**overrides)
    message = str(info.value)
    assert "\n" not in message, message
    return message


def test_a_startup_budget_below_the_measured_cold_start_is_refused_in_one_line() -> None:
    assert _error(serving__container_startup_health_check_timeout_s="60") == (
        "config error: serving.container_startup_health_check_timeout_s = '60': must be >= 197: the container "
        "gives up 30 s before SageMaker, and the slowest measured cold start took 166.9 s to start "
        "(benchmarks/results/h200-2026-11-25/capacity.json); an ml.g5.xlarge needs more, keep the default 600"
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


def test_the_measured_cold_start_is_the_slowest_recorded_run() -> None:
    """The floor cites a file in the repo: it must hold the number the floor is built on."""
    recorded = json.loads(
        (Path(__file__).resolve().parents[2] / "benchmarks/results/h200-2026-11-25/capacity.json").read_text()
    )["ready_s"]
    assert recorded == MEASURED_COLD_START_S


def test_the_removed_keep_last_images_key_says_what_replaced_it() -> None:
    assert _error(image__keep_last_images="10") == (
        "config error: image.keep_last_images: removed: a 'keep the newest N' rule could expire the image a "
        "variant runs or a rollback returns to; tagged images no longer expire, and "
        "image.untagged_image_expiry_days sets when untagged ones do (docs/image-build.md)"
    )


def test_untagged_expiry_is_bounded() -> None:
    assert _error(image__untagged_image_expiry_days="0") == (
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
    assert placeholder_pin_problem(config) is None


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
    config = _load(image__source="prebuilt", image__primary__digest="sha256:" + "e" * 64)
    assert placeholder_pins(config) == []


def test_the_refusal_fits_cloudformations_assert_description() -> None:
    problem = placeholder_pin_problem(_load())
    assert problem is not None and len(problem) <= 1024
    assert problem.startswith("placeholder artifact pin(s) image.build.primary.adapters.general_support_v2, ")
