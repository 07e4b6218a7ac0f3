"""What the serving stack sets on each model is exactly what the container accepts.

Both sides are real code: the stack's ``container_environment`` and the container's
``Settings.from_env`` / ``build_vllm_args`` (the argv is checked against vLLM's own parser in
tests/container/test_vllm_contract.py). Engine settings are declared once
(``serving_contract.engine_settings``); these tests prove each one travels from a context value
to vLLM's argv.
"""

from pathlib import Path
from typing import Any

import annotated_types
import pytest
from pydantic import BaseModel

from app_config import load_config
from app_config.container import ContainerConfig
from cdk_constructs.endpoint.container_environment import container_environment
from serving_app.settings import Settings
from serving_app.vllm_args import EnginePaths, build_vllm_args, engine_environment
from serving_contract import engine_settings as spec
from serving_contract import env
from tests.synth_helpers import SEEDS_G5, cdk_json_context

PATHS = EnginePaths(model_dir=Path("/opt/model/base"), adapter_dir=Path("/opt/model/adapters"), port=8081)


def _container_view(overrides: dict[str, str]) -> tuple[Settings, list[str]]:
    config = load_config({**cdk_json_context(), **overrides})
    variables = {**container_environment(config), env.VARIANT_NAME: config.serving.primary.variant_name}
    settings = Settings.from_env(variables)
    return settings, build_vllm_args(settings, PATHS)


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.mark.parametrize("stage", ["prod", "dev"])
def test_default_environment_reaches_vllm_as_the_declared_defaults(stage: str) -> None:
    settings, argv = _container_view({"stage": stage})
    variables = container_environment(load_config({**cdk_json_context(), "stage": stage}))
    for setting in spec.ENGINE_SETTINGS:
        expected = setting.default
        if setting is spec.MAX_CPU_LORAS:
            expected = None  # unset: the container makes room for every adapter
        # The stack states every set value itself: the container's own defaults never decide.
        assert variables.get(setting.env_var) == setting.to_env(expected), setting.key
        assert getattr(settings, setting.key) == expected, setting.key
    assert _flag(argv, "--max-cpu-loras") == "3"  # max(max_loras 3, 3 adapters)
    # The fast kernel: no --quantization, vLLM upgrades the AWQ checkpoint to Marlin itself.
    assert "--quantization" not in argv
    modules = argv[argv.index("--lora-modules") + 1 : argv.index("--lora-modules") + 4]
    assert [m.split("=")[0] for m in modules] == ["manga_domain_v3", "general_support_v2", "jp_style_v1"]


@pytest.mark.parametrize(
    "overrides",
    [
        {"stage": "prod"},
        {"stage": "dev"},
        {"stage": "prod", "engine.max_loras": "2", "engine.max_cpu_loras": "3"},
    ],
    ids=["prod", "dev", "two-slots-three-in-cpu"],
)
def test_inference_components_mode_starts_lora_with_room_for_every_adapter_component(
    overrides: dict[str, str],
) -> None:
    """The container starts with LoRA on and no adapter; SageMaker then registers each adapter
    component through POST /adapters, and the container's capacity admits all of them."""
    config = load_config({**cdk_json_context(), "serving.mode": "inference_components", **overrides})
    settings, argv = _container_view({"serving.mode": "inference_components", **overrides})
    assert settings.lora_runtime_adapters
    assert settings.lora_adapters == ()
    assert "--enable-lora" in argv
    assert "--lora-modules" not in argv
    assert settings.runtime_adapter_capacity >= len(config.model.adapters)
    # vLLM's CPU cache holds exactly what the gateway admits, so no registration evicts another.
    assert _flag(argv, "--max-cpu-loras") == str(settings.runtime_adapter_capacity)


# A non-default value for every engine setting that the rest of the default config allows.
NON_DEFAULTS: dict[str, tuple[str, dict[str, str]]] = {
    "gpu_memory_utilization": ("0.9", {}),
    "max_model_len": ("8192", {}),
    "max_num_seqs": ("96", {}),
    "max_num_batched_tokens": ("16384", {}),
    "block_size": ("32", {}),
    "enable_prefix_caching": ("false", {}),
    "quantization": ("awq", {}),
    "kv_cache_dtype": ("fp8", {}),
    "attention_backend": ("TRITON_ATTN", {}),
    "tensor_parallel_size": (
        "4",
        # Four A10Gs, with the cold SLO the seeds' fleet holds (SEEDS_G5).
        {
            **SEEDS_G5,
            "serving.primary.instance_type": "ml.g5.12xlarge",
            "serving.canary.instance_type": "ml.g5.12xlarge",
        },
    ),
    "enforce_eager": ("true", {}),
    "max_cudagraph_capture_size": ("128", {}),
    "cudagraph_memory_estimate": ("true", {}),
    "log_level": ("warning", {}),
    "max_loras": ("8", {}),
    "max_lora_rank": ("32", {}),
    "max_cpu_loras": ("12", {}),
    "specialize_active_lora": ("false", {}),
}


@pytest.mark.parametrize("setting", spec.ENGINE_SETTINGS, ids=lambda s: s.key)
def test_every_engine_setting_travels_from_context_to_the_vllm_flag(setting: spec.EngineSetting) -> None:
    value, extra = NON_DEFAULTS[setting.key]
    settings, argv = _container_view({f"engine.{setting.key}": value, **extra})
    parsed = getattr(settings, setting.key)
    assert parsed != setting.default
    if not setting.flag:
        # Read by vLLM from its environment, not its argv.
        assert engine_environment(settings, {})["VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"] == "1"
    elif isinstance(parsed, bool):
        flag = setting.flag if parsed else setting.flag.replace("--", "--no-", 1)
        assert flag in argv
    else:
        assert _flag(argv, setting.flag) == value


def test_unquantized_model_with_auto_passes_no_quantization_flag() -> None:
    _, argv = _container_view({"model.quantization": "null"})
    assert "--quantization" not in argv


def test_shutdown_budget_fits_sagemakers_sigkill() -> None:
    settings, argv = _container_view({"container.drain_timeout_s": str(env.DRAIN_TIMEOUT_MAX_S)})
    assert settings.drain_timeout_s == env.DRAIN_TIMEOUT_MAX_S
    # vLLM exits on its own inside the gateway's stop grace, and the whole budget fits.
    assert int(_flag(argv, "--shutdown-timeout")) < env.ENGINE_STOP_GRACE_S
    budget = env.DRAIN_TIMEOUT_MAX_S + env.ENGINE_STOP_GRACE_S + env.UVICORN_SHUTDOWN_GRACE_S
    assert budget < env.SAGEMAKER_SIGKILL_AFTER_S


def _bounds(model: type[BaseModel]) -> list[tuple[str, Any]]:
    """(field, value) for the lowest and highest value config accepts of each bounded field."""
    cases: list[tuple[str, Any]] = []
    for name, field in model.model_fields.items():
        for meta in field.metadata:
            if isinstance(meta, annotated_types.Ge):
                cases.append((name, meta.ge))
            if isinstance(meta, annotated_types.Le):
                cases.append((name, meta.le))
            if isinstance(meta, annotated_types.Lt):
                cases.append((name, meta.lt - 1))  # type: ignore[operator]
    return cases


@pytest.mark.parametrize(("key", "value"), _bounds(ContainerConfig))
def test_every_lifecycle_value_config_accepts_the_container_accepts_too(key: str, value: float) -> None:
    # The lifecycle settings are declared on each side (types differ: whole seconds in
    # config, float in the container); a value that passes synth but makes every container
    # exit at start would take the endpoint down on deploy.
    _container_view({f"container.{key}": str(value)})
