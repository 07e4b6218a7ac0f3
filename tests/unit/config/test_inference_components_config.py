"""serving.mode = inference_components: what stops synth, one line each, and what the container is told."""

import json

import pytest

from app_config import load_config
from cdk_constructs.endpoint.container_environment import container_environment
from planning.make_plan import make_plan
from planning.topology import serving_topology
from serving_contract import env
from tests.config_helpers import config_error
from tests.synth_helpers import cdk_json_context

COMPONENTS = {"serving.mode": "inference_components"}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"stage": "dev", "serving.inference_components.min_copy_count": "1"},
            "config error: serving.inference_components: scale_to_zero = true needs min_copy_count = 0 and "
            "min_instance_count = 0 (got 1 and 0): a floor above 0 never lets it reach zero",
        ),
        (
            {"serving.inference_components.scale_to_zero": "true"},
            "config error: serving.inference_components: scale_to_zero = true needs min_copy_count = 0 and "
            "min_instance_count = 0 (got 2 and 2): a floor above 0 never lets it reach zero",
        ),
        (
            {
                "serving.inference_components.min_copy_count": "0",
                "serving.inference_components.initial_copy_count": "1",
            },
            "config error: serving.inference_components: min_copy_count = 0, min_instance_count = 2: 0 needs "
            "scale_to_zero = true, or nothing would wake the endpoint",
        ),
        (
            {
                "serving.inference_components.scale_to_zero": "true",
                "serving.inference_components.min_copy_count": "0",
                "serving.inference_components.min_instance_count": "0",
            },
            "config error: serving.inference_components.min_copy_count = 0, scale_to_zero = true: prod keeps at least "
            "2 warm copies (seed 001)",
        ),
        (
            {"engine.max_loras": "2"},
            "config error: model.adapters has 3 adapters but engine.max_loras = 2: the engine holds that many runtime "
            "adapters; raise engine.max_cpu_loras",
        ),
        (
            {"model.adapters": json.dumps([{"name": "manga_domain_v3", "rank": 64}]), "engine.max_lora_rank": "32"},
            "config error: model.adapters rank 64 exceeds engine.max_lora_rank = 32; raise engine.max_lora_rank or "
            "retrain the adapters",
        ),
        (
            {"model.adapters": json.dumps([{"name": "manga_domain_v3"}])},
            "config error: serving.inference_components.adapter_artifacts pins [general_support_v2, jp_style_v1, "
            "manga_domain_v3] but model.adapters is [manga_domain_v3]; pin exactly one artifact per configured adapter",
        ),
        (
            {"serving.inference_components.max_copy_count": "30", "serving.primary.instance_type": "ml.g6e.xlarge"},
            "config error: serving.inference_components.max_copy_count = 30 needs more than "
            "serving.inference_components.max_instance_count = 20 instances of 1 copy each (ml.g6e.xlarge, 1 GPU(s), "
            "engine.tensor_parallel_size = 1)",
        ),
        (
            {
                "serving.inference_components.memory_per_copy_mib": "40000",
                "serving.primary.instance_type": "ml.g6e.xlarge",
            },
            "config error: serving.inference_components.memory_per_copy_mib = 40000 x 1 copy(ies) per instance is "
            "above the 32768 MiB of ml.g6e.xlarge",
        ),
        (
            {"image.source": "prebuilt", "image.primary.tag": "v1"},
            "config error: serving.mode = inference_components with image.source = prebuilt needs "
            "image.build.artifacts_bucket_name: the bucket that holds the adapter components' artifacts",
        ),
        (
            {"serving.inference_components.rollout.maximum_execution_timeout_s": "3600"},
            "config error: serving.inference_components.rollout.maximum_execution_timeout_s = 3600 must exceed 20 "
            "batch(es) of 1 at serving.inference_components.max_copy_count = 20 x "
            "(serving.container_startup_health_check_timeout_s = 600 + "
            "serving.inference_components.rollout.wait_interval_s = 600) = 24000 s; raise it (at most 28800) or "
            "serving.inference_components.rollout.maximum_batch_size_copies",
        ),
        (
            {"serving.endpoint_name": "e" * 50},
            f"config error: serving.endpoint_name = '{'e' * 50}': inference component name "
            f"'{'e' * 50}-manga-domain-v3' (66 characters) must be 1-63 letters, digits and hyphens (SageMaker "
            "InferenceComponentName); shorten serving.endpoint_name or the adapter name",
        ),
        (
            {"model.adapters": '[{"name": "base"}]'},
            "config error: model.adapters: adapter 'base' gets inference component name 'mangaassist-vllm-prod-base', "
            "as the base component does; rename the adapter",
        ),
        (
            {"serving.mode": "components"},
            "config error: serving.mode = 'components': must be one of 'variants' or 'inference_components'",
        ),
    ],
)
def test_bad_combinations_stop_synth_with_one_line(overrides: dict[str, str], expected: str) -> None:
    assert config_error({**COMPONENTS, **overrides}) == expected


def test_the_container_loads_adapters_at_runtime_and_monitoring_names_components() -> None:
    config = load_config({**cdk_json_context(), **COMPONENTS, "stage": "dev"})
    variables = container_environment(config)
    assert variables[env.LORA_RUNTIME_ADAPTERS] == "true"
    assert variables[env.LORA_ADAPTERS] == ""
    topology = serving_topology(make_plan(config))
    assert topology.variant_names == ("primary",)
    assert topology.components == {"primary": "mangaassist-vllm-dev-base"}
    assert topology.guardrail_labels == {"primary": "base"}
    assert topology.adapter_dimensions["jp_style_v1"] == "mangaassist-vllm-dev-jp-style-v1"
    (capacity,) = topology.fleet_bounds
    assert (capacity.unit, capacity.min_capacity, capacity.max_capacity) == ("copies", 0, 2)


def test_variants_mode_keeps_adapters_baked_in() -> None:
    variables = container_environment(load_config(cdk_json_context()))
    assert env.LORA_RUNTIME_ADAPTERS not in variables
    assert variables[env.LORA_ADAPTERS] == "manga_domain_v3,general_support_v2,jp_style_v1"
