"""The container environment carries every engine setting under a contract name."""

import json

import pytest

from app_config import load_config
from cdk_constructs.endpoint.container_environment import container_environment, model_versions_environment
from serving_app.settings import Settings
from serving_contract import env
from tests.config_helpers import PREBUILT_DEV
from tests.synth_helpers import cdk_json_context


def test_every_variable_is_a_contract_name_with_a_string_value() -> None:
    variables = container_environment(load_config(cdk_json_context()))
    assert set(variables) <= set(env.ALL)
    assert all(isinstance(value, str) and value for value in variables.values())


def test_all_contract_names_but_the_per_variant_and_optional_ones_are_set() -> None:
    variables = container_environment(load_config(cdk_json_context()))
    # LORA_RUNTIME_ADAPTERS and ADAPTER_SHA256 are set in inference_components mode only.
    assert set(env.ALL) - set(variables) == {
        env.VARIANT_NAME,
        env.ENGINE_DATA_PARALLEL_SIZE,  # per variant, on multi-GPU instance types only (serving_model)
        env.MODEL_VERSIONS,  # per variant: the pins its image bakes in (model_versions_environment)
        env.LORA_MAX_CPU_LORAS,
        env.LORA_RUNTIME_ADAPTERS,
        env.ADAPTER_SHA256,
        env.ADAPTER_SRC_ROOT,  # the container default (/opt/ml) is where SageMaker puts model data
        env.LORA_TUNED_CONFIG_DIR,  # tuned kernel configs exist per GPU; none is shipped for the A10G yet
    }


def test_each_variant_names_the_pins_its_image_bakes_in() -> None:
    sha = "e" * 64
    names = ("general_support_v2", "jp_style_v1", "manga_domain_v3")
    adapters = {name: f"v3/{sha}" for name in names}
    primary = {"base_model": f"v1/{sha}", "adapters": adapters}
    canary = {"base_model": f"v2/{sha}", "adapters": {**adapters, "manga_domain_v3": f"v4/{sha}"}}
    config = load_config({**cdk_json_context(), "image.build.primary": primary, "image.build.canary": canary})
    assert json.loads(model_versions_environment(config, "canary")[env.MODEL_VERSIONS]) == {
        "llama-3-8b-instruct-awq": f"v2/{sha}",
        "general_support_v2": f"v3/{sha}",
        "jp_style_v1": f"v3/{sha}",
        "manga_domain_v3": f"v4/{sha}",
    }
    without_canary_set = load_config({**cdk_json_context(), "image.build.primary": primary})
    assert model_versions_environment(without_canary_set, "canary") == model_versions_environment(
        without_canary_set, "primary"
    )  # it runs the primary's image
    prebuilt = load_config({**cdk_json_context(), **PREBUILT_DEV, "image.primary.tag": "v1"})
    assert model_versions_environment(prebuilt, "primary") == {}


def test_optional_cpu_lora_cache_is_passed_when_set() -> None:
    config = load_config({**cdk_json_context(), "engine.max_cpu_loras": "8"})
    assert container_environment(config)[env.LORA_MAX_CPU_LORAS] == "8"


def test_no_vllm_prefixed_names() -> None:
    # vLLM reads VLLM_* itself (VLLM_PORT is its distributed port): never collide.
    assert not [name for name in env.ALL if name.startswith("VLLM_")]


def test_the_container_gives_up_before_sagemaker_kills_it() -> None:
    # One value sets both: SageMaker's startup health-check timeout and, a report margin
    # below it, the gateway's own start-up budget (so a failed start logs why and exits).
    for context in ({}, {"serving.container_startup_health_check_timeout_s": "900"}):
        config = load_config({**cdk_json_context(), **context})
        timeout = config.serving.container_startup_health_check_timeout_s
        budget = int(container_environment(config)[env.STARTUP_TIMEOUT_S])
        assert budget == timeout - env.STARTUP_REPORT_MARGIN_S
        assert 0 < budget < timeout


def test_the_containers_own_default_budget_fits_the_default_health_check() -> None:
    config = load_config(cdk_json_context())
    default_budget = Settings.model_fields["startup_timeout_s"].default
    assert default_budget < config.serving.container_startup_health_check_timeout_s


def test_a_health_check_timeout_without_room_for_a_budget_is_refused() -> None:
    with pytest.raises(ValueError) as error:
        env.startup_budget_s(30)
    assert str(error.value) == (
        "startup health-check timeout = 30 s leaves no start-up budget after the 30 s report margin"
    )


def test_a_configured_session_cap_reaches_the_container() -> None:
    # The defaults travel as declared (test_stack_container_contract.py, every shared setting).
    config = load_config({**cdk_json_context(), "container.sessions_max": "64"})
    assert container_environment(config)[env.SESSIONS_MAX] == "64"


def test_a_session_cap_below_one_is_refused_at_synth() -> None:
    with pytest.raises(ValueError) as error:
        load_config({**cdk_json_context(), "container.sessions_max": "0"})
    assert str(error.value) == "config error: container.sessions_max = '0': must be >= 1"


@pytest.mark.parametrize(
    ("ami", "compat"),
    [
        # Driver 580 runs the image's CUDA 13.0 torch natively: the compat libcuda stays off.
        ("al2023-ami-sagemaker-inference-gpu-4-1", "false"),
        # Driver 550 needs the image's cuda-compat-13-0.
        ("al2-ami-sagemaker-inference-gpu-3-1", "true"),
    ],
)
def test_cuda_forward_compat_follows_the_host_amis_driver(ami: str, compat: str) -> None:
    config = load_config({**cdk_json_context(), "serving.inference_ami_version": ami})
    assert container_environment(config)[env.CUDA_FORWARD_COMPAT] == compat


def test_the_default_host_ami_is_driver_580() -> None:
    config = load_config(cdk_json_context())
    assert config.serving.inference_ami_version == "al2023-ami-sagemaker-inference-gpu-4-1"
    assert container_environment(config)[env.CUDA_FORWARD_COMPAT] == "false"


def test_an_unknown_host_ami_is_refused_naming_the_accepted_ones() -> None:
    with pytest.raises(ValueError) as error:
        load_config({**cdk_json_context(), "serving.inference_ami_version": "al2023-ami-sagemaker-inference-gpu-5"})
    message = str(error.value)
    assert message.startswith("config error: serving.inference_ami_version = 'al2023-ami-sagemaker-inference-gpu-5'")
    assert "al2-ami-sagemaker-inference-gpu-3-1" in message
    assert "al2023-ami-sagemaker-inference-gpu-4-1" in message


def test_the_request_class_threshold_reaches_the_container_from_the_slo() -> None:
    config = load_config({**cdk_json_context(), "slo.warm_min_cached_fraction": "0.7"})
    assert container_environment(config)[env.REQUEST_CLASS_WARM_MIN_CACHED_FRACTION] == "0.7"
