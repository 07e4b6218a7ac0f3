"""What the serving stack sets on each model is exactly what the container accepts.

Both sides are real code: the stack's ``container_environment`` and the container's
``Settings.from_env`` / ``build_vllm_args`` (the argv is checked against vLLM's own parser in
tests/container/test_vllm_contract.py). Every shared setting is declared once
(``serving_contract.setting``: engine settings, lifecycle, request limits, context budget); these
tests prove each engine setting travels from a context value to vLLM's argv, and that a value at
a declared bound passes both sides while one past it gets the same line from both.
"""

from pathlib import Path
from typing import Any

import pytest

from app_config import load_config
from app_config.errors import ConfigError
from cdk_constructs.endpoint.container_environment import container_environment
from serving_app.settings import Settings, SettingsError
from serving_app.vllm_args import EnginePaths, build_vllm_args, engine_environment
from serving_contract import context_budget as budget
from serving_contract import engine_settings as spec
from serving_contract import env, lifecycle
from serving_contract import request_limits as limits
from serving_contract.setting import Setting
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
    "kv_offloading_size_gib": ("16", {}),
    # vLLM reads the backend only with a size (synth then refuses lmcache: the image cannot run it).
    "kv_offloading_backend": ("lmcache", {"engine.kv_offloading_size_gib": "8"}),
    "log_level": ("warning", {}),
    "max_loras": ("8", {}),
    "max_lora_rank": ("32", {}),
    "max_cpu_loras": ("12", {}),
    "specialize_active_lora": ("false", {}),
}


@pytest.mark.parametrize("setting", spec.ENGINE_SETTINGS, ids=lambda s: s.key)
def test_every_engine_setting_travels_from_context_to_the_vllm_flag(setting: spec.EngineSetting[Any]) -> None:
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


# Every setting the stack passes from a config key to the container, with the config section it sits in.
SHARED_SETTINGS: list[tuple[str, Setting[Any]]] = [
    *(("container", setting) for setting in (*lifecycle.LIFECYCLE_SETTINGS, *limits.REQUEST_LIMITS)),
    *(("container.context_budget", s) for s in budget.CONTAINER_SETTINGS if s is not budget.GENERATION_RESERVE),
]


def _edges(setting: Setting[Any]) -> list[tuple[str, str]]:
    """(a value at each declared bound, the nearest value past it), as context/environment text."""
    if isinstance(setting.default, bool):
        return []
    step = 1
    edges = []
    if setting.ge is not None:
        edges.append((setting.ge, setting.ge - step))
    if setting.gt is not None:
        edges.append((setting.gt + step, setting.gt))
    if setting.le is not None:
        edges.append((setting.le, setting.le + step))
    if setting.lt is not None:
        edges.append((setting.lt - step, setting.lt))
    return [(_text(inside), _text(outside)) for inside, outside in edges]


def _text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _case_id(case: Any) -> str:
    return case if isinstance(case, str) else getattr(case, "key", "")


EDGES = [
    (section, setting, inside, outside) for section, setting in SHARED_SETTINGS for inside, outside in _edges(setting)
]


def _container_field(setting: Setting[Any]) -> str:
    return next(name for name, field in Settings.model_fields.items() if field.alias == setting.env_var)


@pytest.mark.parametrize(("section", "setting", "inside", "outside"), EDGES, ids=_case_id)
def test_a_value_at_a_declared_bound_passes_synth_and_reaches_the_container(
    section: str, setting: Setting[Any], inside: str, outside: str
) -> None:
    settings, _ = _container_view({f"{section}.{setting.key}": inside})
    assert getattr(settings, _container_field(setting)) == float(inside)


@pytest.mark.parametrize(("section", "setting", "inside", "outside"), EDGES, ids=_case_id)
def test_a_value_past_a_declared_bound_gets_the_same_line_at_synth_and_at_start(
    section: str, setting: Setting[Any], inside: str, outside: str
) -> None:
    with pytest.raises(ConfigError) as at_synth:
        load_config({**cdk_json_context(), f"{section}.{setting.key}": outside})
    with pytest.raises(SettingsError) as at_start:
        Settings.from_env({setting.env_var: outside})
    line = str(at_start.value)
    assert line.startswith(f"{setting.env_var} = '{outside}': must be ")
    assert str(at_synth.value) == f"config error: {section}.{setting.key}{line.removeprefix(setting.env_var)}"


WHOLE_NUMBER_SETTINGS = [
    (section, setting)
    for section, setting in SHARED_SETTINGS
    if isinstance(setting.default, int) and not isinstance(setting.default, bool)
]


@pytest.mark.parametrize(("section", "setting"), WHOLE_NUMBER_SETTINGS, ids=_case_id)
def test_a_whole_number_setting_refuses_a_fraction_on_both_sides(section: str, setting: Setting[Any]) -> None:
    with pytest.raises(ConfigError) as at_synth:
        load_config({**cdk_json_context(), f"{section}.{setting.key}": "1.5"})
    with pytest.raises(SettingsError) as at_start:
        Settings.from_env({setting.env_var: "1.5"})
    assert str(at_start.value) == f"{setting.env_var} = '1.5': must be a whole number"
    assert str(at_synth.value) == f"config error: {section}.{setting.key} = '1.5': must be a whole number"


def test_the_stack_sets_every_shared_setting_as_declared() -> None:
    variables = container_environment(load_config(cdk_json_context()))
    for _, setting in SHARED_SETTINGS:
        assert variables[setting.env_var] == setting.to_env(setting.default), setting.key


def test_a_local_run_with_a_longer_shutdown_budget_gets_a_longer_drain_and_says_why() -> None:
    assert Settings.from_env({env.SHUTDOWN_BUDGET_S: "300", env.DRAIN_TIMEOUT_S: "292"}).drain_timeout_s == 292
    with pytest.raises(SettingsError) as error:
        Settings.from_env({env.SHUTDOWN_BUDGET_S: "300", env.DRAIN_TIMEOUT_S: "293"})
    assert str(error.value) == (
        "DRAIN_TIMEOUT_S = '293': must be <= 292 (SHUTDOWN_BUDGET_S = 300 s less vLLM's 3 s stop grace, "
        "uvicorn's 2 s and 3 s spare)"
    )
