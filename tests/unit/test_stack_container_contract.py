"""What the serving stack sets on each model is exactly what the container accepts.

Both sides are real code: the stack's ``container_environment`` and the container's
``Settings.from_env`` / ``build_vllm_args`` (the argv is checked against vLLM's own parser in
tests/container/test_vllm_contract.py).
"""

from pathlib import Path
from typing import Any

import annotated_types
import pytest
from pydantic import BaseModel

from app_config import load_config
from app_config.container import ContainerConfig
from app_config.engine import EngineConfig
from cdk_constructs.container_environment import container_environment
from serving_app.settings import Settings
from serving_app.vllm_args import EnginePaths, build_vllm_args
from serving_contract import env
from tests.synth_helpers import cdk_json_context

PATHS = EnginePaths(model_dir=Path("/opt/model/base"), adapter_dir=Path("/opt/model/adapters"), port=8081)


def _container_view(overrides: dict[str, str]) -> tuple[Settings, list[str]]:
    config = load_config({**cdk_json_context(), **overrides})
    variables = {**container_environment(config), env.VARIANT_NAME: config.serving.primary.variant_name}
    settings = Settings.from_env(variables)
    return settings, build_vllm_args(settings, PATHS)


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.mark.parametrize("stage", ["prod", "dev"])
def test_default_environment_parses_into_the_seed_engine_settings(stage: str) -> None:
    _, argv = _container_view({"stage": stage})
    assert _flag(argv, "--gpu-memory-utilization") == "0.92"
    assert _flag(argv, "--max-num-seqs") == "128"
    assert _flag(argv, "--max-model-len") == "4096"
    assert _flag(argv, "--max-num-batched-tokens") == "8192"
    assert _flag(argv, "--block-size") == "16"
    assert _flag(argv, "--quantization") == "awq"
    assert _flag(argv, "--max-lora-rank") == "16"
    assert "--enable-lora" in argv
    assert "--enable-prefix-caching" in argv
    modules = argv[argv.index("--lora-modules") + 1 : argv.index("--lora-modules") + 4]
    assert [m.split("=")[0] for m in modules] == ["manga_domain_v3", "general_support_v2", "jp_style_v1"]


def test_context_override_reaches_vllm_argv() -> None:
    _, argv = _container_view({"engine.max_num_seqs": "96", "engine.gpu_memory_utilization": "0.9"})
    assert _flag(argv, "--max-num-seqs") == "96"
    assert _flag(argv, "--gpu-memory-utilization") == "0.9"


def test_unquantized_model_passes_no_quantization_flag() -> None:
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


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [("container", k, v) for k, v in _bounds(ContainerConfig)] + [("engine", k, v) for k, v in _bounds(EngineConfig)],
)
def test_every_value_config_accepts_the_container_accepts_too(section: str, key: str, value: float) -> None:
    # A value that passes synth but makes every container exit at start would take the
    # endpoint down on deploy: the two validators must agree on each bound.
    overrides = {f"{section}.{key}": str(value)}
    if key == "max_num_seqs":
        overrides["engine.max_num_batched_tokens"] = str(max(value, 8192))
    if key == "max_loras":
        overrides["engine.max_cpu_loras"] = "64"
    if key == "max_cpu_loras":
        overrides["engine.max_loras"] = "1"
        overrides["model.adapters"] = '[{"name": "manga_domain_v3"}]'
        overrides["image.source"] = "prebuilt"  # no build pins for the two dropped adapters
    if key == "gpu_memory_utilization":
        overrides["monitoring.gpu_memory_utilization.threshold"] = "99"
    _container_view(overrides)
