"""The container environment carries every engine setting under a contract name."""

from app_config import load_config
from cdk_constructs.container_environment import container_environment
from serving_contract import env
from tests.synth_helpers import cdk_json_context


def test_every_variable_is_a_contract_name_with_a_string_value() -> None:
    variables = container_environment(load_config(cdk_json_context()))
    assert set(variables) <= set(env.ALL)
    assert all(isinstance(value, str) and value for value in variables.values())


def test_all_contract_names_but_the_per_variant_and_optional_ones_are_set() -> None:
    variables = container_environment(load_config(cdk_json_context()))
    # LORA_RUNTIME_ADAPTERS is set in inference_components mode only.
    assert set(env.ALL) - set(variables) == {env.VARIANT_NAME, env.LORA_MAX_CPU_LORAS, env.LORA_RUNTIME_ADAPTERS}


def test_optional_cpu_lora_cache_is_passed_when_set() -> None:
    config = load_config({**cdk_json_context(), "engine.max_cpu_loras": "8"})
    assert container_environment(config)[env.LORA_MAX_CPU_LORAS] == "8"


def test_no_vllm_prefixed_names() -> None:
    # vLLM reads VLLM_* itself (VLLM_PORT is its distributed port): never collide.
    assert not [name for name in env.ALL if name.startswith("VLLM_")]
