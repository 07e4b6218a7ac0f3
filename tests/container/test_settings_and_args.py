"""Environment -> settings -> vLLM argv: defaults, every validation message, flag shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from serving_app.settings import Settings, SettingsError
from serving_app.vllm_args import EnginePaths, build_vllm_args, engine_environment
from serving_contract import engine_settings as spec
from serving_contract.engine_settings import LORA_RANKS

PATHS = EnginePaths(model_dir=Path("/opt/model/base"), adapter_dir=Path("/opt/model/adapters"), port=8081)


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_an_empty_environment_gives_each_declared_default_its_flag() -> None:
    settings = Settings.from_env({})
    argv = build_vllm_args(settings, PATHS)
    assert flag(argv, "--model") == "/opt/model/base"
    assert flag(argv, "--host") == "127.0.0.1"
    assert flag(argv, "--port") == "8081"
    for setting in (spec.GPU_MEMORY_UTILIZATION, spec.MAX_MODEL_LEN, spec.MAX_NUM_SEQS, spec.BLOCK_SIZE):
        assert flag(argv, setting.flag) == str(setting.default)
    assert flag(argv, "--kv-cache-dtype") == "auto"
    # auto: no --quantization, so vLLM picks the Marlin kernel for an AWQ checkpoint itself.
    assert "--quantization" not in argv
    # The gateway drains; vLLM only needs to exit inside its stop grace (serving_contract.env).
    assert flag(argv, "--shutdown-timeout") == "2"
    assert "--enable-prefix-caching" in argv
    assert "--enable-lora" not in argv
    assert "--disable-log-requests" not in argv  # removed from vLLM (docs/sources.md, "vLLM")


def test_cuda_graphs_are_captured_up_to_64_sequences_outside_the_kv_cache_estimate_by_default() -> None:
    settings = Settings.from_env({})
    argv = build_vllm_args(settings, PATHS)
    assert flag(argv, "--max-cudagraph-capture-size") == "64"
    assert engine_environment(settings, {})["VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"] == "0"
    on = Settings.from_env({"ENGINE_CUDAGRAPH_MEMORY_ESTIMATE": "true", "ENGINE_MAX_CUDAGRAPH_CAPTURE_SIZE": "256"})
    assert engine_environment(on, {})["VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"] == "1"
    assert flag(build_vllm_args(on, PATHS), "--max-cudagraph-capture-size") == "256"
    # Eager mode captures nothing: no capture size to pass.
    assert "--max-cudagraph-capture-size" not in build_vllm_args(
        Settings.from_env({"ENGINE_ENFORCE_EAGER": "1"}), PATHS
    )


def test_kv_offload_passes_vllms_size_and_backend_only_when_on() -> None:
    default = build_vllm_args(Settings.from_env({}), PATHS)
    assert "--kv-offloading-size" not in default and "--kv-offloading-backend" not in default
    on = build_vllm_args(Settings.from_env({"ENGINE_KV_OFFLOADING_SIZE_GIB": "16"}), PATHS)
    assert (flag(on, "--kv-offloading-size"), flag(on, "--kv-offloading-backend")) == ("16", "native")
    small = Settings.from_env({"ENGINE_KV_OFFLOADING_SIZE_GIB": "0.25", "ENGINE_KV_OFFLOADING_BACKEND": "lmcache"})
    argv = build_vllm_args(small, PATHS)
    assert (flag(argv, "--kv-offloading-size"), flag(argv, "--kv-offloading-backend")) == ("0.25", "lmcache")
    # A backend without a size turns nothing on (vLLM reads the backend only with a size).
    assert "--kv-offloading-backend" not in build_vllm_args(
        Settings.from_env({"ENGINE_KV_OFFLOADING_BACKEND": "lmcache"}), PATHS
    )


def test_an_explicit_kernel_is_passed_through() -> None:
    argv = build_vllm_args(Settings.from_env({"ENGINE_QUANTIZATION": "awq"}), PATHS)
    assert flag(argv, "--quantization") == "awq"


def test_adapters_become_lora_flags() -> None:
    settings = Settings.from_env(
        {
            "LORA_ADAPTERS": "manga_domain_v3, jp_style_v1",
            "LORA_MAX_RANK": "16",
            "LORA_MAX_LORAS": "2",
        }
    )
    argv = build_vllm_args(settings, PATHS)
    assert "--enable-lora" in argv
    assert flag(argv, "--max-lora-rank") == "16"
    assert flag(argv, "--max-loras") == "2"
    assert flag(argv, "--max-cpu-loras") == "2"
    start = argv.index("--lora-modules") + 1
    assert argv[start : start + 2] == [
        "manga_domain_v3=/opt/model/adapters/manga_domain_v3",
        "jp_style_v1=/opt/model/adapters/jp_style_v1",
    ]
    assert settings.model_names == ("base", "manga_domain_v3", "jp_style_v1")


def test_runtime_adapters_enable_lora_without_baked_modules() -> None:
    settings = Settings.from_env(
        {"LORA_RUNTIME_ADAPTERS": "true", "LORA_ADAPTERS": "", "LORA_MAX_LORAS": "2", "LORA_MAX_RANK": "32"}
    )
    argv = build_vllm_args(settings, PATHS)
    assert "--enable-lora" in argv
    assert flag(argv, "--max-loras") == "2"
    assert flag(argv, "--max-lora-rank") == "32"
    # The CPU cache holds exactly what the gateway registers: LORA_MAX_LORAS when LORA_MAX_CPU_LORAS is unset.
    assert flag(argv, "--max-cpu-loras") == "2"
    assert "--lora-modules" not in argv
    assert (settings.runtime_adapter_capacity, settings.runtime_adapter_capacity_variable) == (2, "LORA_MAX_LORAS")
    assert engine_environment(settings, {})["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "true"


def test_runtime_adapter_capacity_is_the_cpu_cache_when_set() -> None:
    settings = Settings.from_env({"LORA_RUNTIME_ADAPTERS": "yes", "LORA_MAX_LORAS": "2", "LORA_MAX_CPU_LORAS": "6"})
    assert flag(build_vllm_args(settings, PATHS), "--max-cpu-loras") == "6"
    assert (settings.runtime_adapter_capacity, settings.runtime_adapter_capacity_variable) == (6, "LORA_MAX_CPU_LORAS")


def test_runtime_lora_updating_stays_off_without_runtime_adapters() -> None:
    baked = Settings.from_env({"LORA_ADAPTERS": "manga_domain_v3", "LORA_RUNTIME_ADAPTERS": "false"})
    assert baked.lora_runtime_adapters is False
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING" not in engine_environment(baked, {})
    assert Settings.from_env({}).lora_runtime_adapters is False


def test_booleans_and_optional_flags() -> None:
    settings = Settings.from_env(
        {
            "ENGINE_ENABLE_PREFIX_CACHING": "false",
            "ENGINE_ENFORCE_EAGER": "1",
            "ENGINE_QUANTIZATION": "auto",
            "DRAIN_TIMEOUT_S": "7",
            "ENGINE_LOG_LEVEL": "warning",
        }
    )
    argv = build_vllm_args(settings, PATHS)
    assert "--no-enable-prefix-caching" in argv
    assert "--enforce-eager" in argv
    assert "--quantization" not in argv
    assert flag(argv, "--shutdown-timeout") == "2"
    assert flag(argv, "--uvicorn-log-level") == "warning"
    assert engine_environment(settings, {})["VLLM_LOGGING_LEVEL"] == "WARNING"


def test_a_longer_shutdown_budget_admits_a_longer_drain() -> None:
    # SageMaker's SIGKILL window bounds the drain to 22 s; a local run that gives more time says so.
    assert Settings.from_env({}).shutdown_budget_s == 30
    longer = Settings.from_env({"SHUTDOWN_BUDGET_S": "300", "DRAIN_TIMEOUT_S": "292"})
    assert (longer.shutdown_budget_s, longer.drain_timeout_s) == (300, 292)


def test_data_parallel_engines_get_their_flag_only_above_one() -> None:
    assert "--data-parallel-size" not in build_vllm_args(Settings.from_env({}), PATHS)
    argv = build_vllm_args(Settings.from_env({"ENGINE_DATA_PARALLEL_SIZE": "4"}), PATHS)
    assert flag(argv, "--data-parallel-size") == "4"
    with pytest.raises(ValueError, match="must be one of 1, 2, 4 or 8"):
        Settings.from_env({"ENGINE_DATA_PARALLEL_SIZE": "3"})


def test_lora_kernel_grids_follow_the_active_adapters_by_default() -> None:
    # Issue 35 (H200, docs/performance.md, multi-LoRA): 62.8 vs 82.5 ms adapters' TTFT p50 at 1 request.
    argv = build_vllm_args(
        Settings.from_env({"LORA_ADAPTERS": "manga_domain_v3,jp_style_v1,general_support_v2"}), PATHS
    )
    assert "--specialize-active-lora" in argv
    assert flag(argv, "--max-loras") == "3"
    off = Settings.from_env({"LORA_ADAPTERS": "manga_domain_v3", "LORA_SPECIALIZE_ACTIVE": "false"})
    assert "--no-specialize-active-lora" in build_vllm_args(off, PATHS)
    # Without LoRA there is no LoRA kernel to specialise.
    assert not [a for a in build_vllm_args(Settings.from_env({}), PATHS) if "specialize" in a]


def test_the_tuned_lora_config_folder_becomes_vllms_variable(tmp_path: Path) -> None:
    settings = Settings.from_env({"LORA_TUNED_CONFIG_DIR": str(tmp_path)})
    assert engine_environment(settings, {})["VLLM_TUNED_CONFIG_FOLDER"] == str(tmp_path)
    assert "VLLM_TUNED_CONFIG_FOLDER" not in engine_environment(Settings.from_env({}), {})


def test_the_prefill_warmup_defaults_to_the_first_turn_and_can_be_off() -> None:
    assert Settings.from_env({}).warmup_prefill_tokens == 2048
    assert Settings.from_env({"WARMUP_PREFILL_TOKENS": "0"}).warmup_prefill_tokens == 0


def test_empty_values_take_defaults() -> None:
    assert Settings.from_env({"ENGINE_MAX_NUM_SEQS": ""}).max_num_seqs == 128


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (
            {"LORA_MAX_RANK": "24"},
            "LORA_MAX_RANK = '24': must be one of 1, 8, 16, 32, 64, 128, 256, 320 or 512",
        ),
        (
            {"ENGINE_GPU_MEMORY_UTILIZATION": "0.99"},
            "ENGINE_GPU_MEMORY_UTILIZATION = '0.99': must be <= 0.98",
        ),
        (
            {"ENGINE_GPU_MEMORY_UTILIZATION": "lots"},
            "ENGINE_GPU_MEMORY_UTILIZATION = 'lots': must be a number",
        ),
        (
            {"ENGINE_MAX_NUM_SEQS": "12.5"},
            "ENGINE_MAX_NUM_SEQS = '12.5': must be a whole number",
        ),
        ({"ENGINE_BLOCK_SIZE": "12"}, "ENGINE_BLOCK_SIZE = '12': must be one of 16, 32, 64 or 128"),
        (
            {"ENGINE_QUANTIZATION": "none"},
            "ENGINE_QUANTIZATION = 'none': must be one of auto, awq_marlin, awq, gptq_marlin, gptq or fp8",
        ),
        ({"ENGINE_KV_CACHE_DTYPE": "fp4"}, "ENGINE_KV_CACHE_DTYPE = 'fp4': must be one of auto or fp8"),
        ({"ENGINE_KV_OFFLOADING_SIZE_GIB": "-1"}, "ENGINE_KV_OFFLOADING_SIZE_GIB = '-1': must be >= 0"),
        ({"ENGINE_KV_OFFLOADING_SIZE_GIB": "lots"}, "ENGINE_KV_OFFLOADING_SIZE_GIB = 'lots': must be a number"),
        (
            {"ENGINE_KV_OFFLOADING_BACKEND": "disk"},
            "ENGINE_KV_OFFLOADING_BACKEND = 'disk': must be one of native or lmcache",
        ),
        (
            {"ENGINE_ENFORCE_EAGER": "maybe"},
            "ENGINE_ENFORCE_EAGER = 'maybe': must be true or false",
        ),
        (
            {"DRAIN_TIMEOUT_S": "23"},
            "DRAIN_TIMEOUT_S = '23': must be <= 22",
        ),
        (
            {"DRAIN_TIMEOUT_S": "293", "SHUTDOWN_BUDGET_S": "300"},
            "DRAIN_TIMEOUT_S = '293': must be <= 292 "
            "(SHUTDOWN_BUDGET_S = 300 s less vLLM's 3 s stop grace, uvicorn's 2 s and 3 s spare)",
        ),
        ({"SHUTDOWN_BUDGET_S": "29"}, "SHUTDOWN_BUDGET_S = '29': must be >= 30"),
        ({"REQUEST_TIMEOUT_S": "60"}, "REQUEST_TIMEOUT_S = '60': must be < 60"),
        ({"STARTUP_TIMEOUT_S": "0"}, "STARTUP_TIMEOUT_S = '0': must be > 0"),
        ({"WARMUP_NUM_REQUESTS": "0"}, "WARMUP_NUM_REQUESTS = '0': must be >= 1"),
        ({"SESSIONS_MAX": "0"}, "SESSIONS_MAX = '0': must be >= 1"),
        (
            {"WARMUP_PREFILL_TOKENS": "100"},
            "WARMUP_PREFILL_TOKENS = 100: must be 0 (off) or from 128 to ENGINE_MAX_MODEL_LEN - 2 = 4094 (shorter "
            "prompts are not prefill-sized; the warm-up prompt and its answer must fit one sequence)",
        ),
        (
            {"WARMUP_PREFILL_TOKENS": "4096"},
            "WARMUP_PREFILL_TOKENS = 4096: must be 0 (off) or from 128 to ENGINE_MAX_MODEL_LEN - 2 = 4094 (shorter "
            "prompts are not prefill-sized; the warm-up prompt and its answer must fit one sequence)",
        ),
        (
            {"LORA_TUNED_CONFIG_DIR": "/nonexistent/lora-configs"},
            "LORA_TUNED_CONFIG_DIR = '/nonexistent/lora-configs': must be an existing folder "
            "(benchmarks/lora_tune.py's output)",
        ),
        (
            {"LORA_SPECIALIZE_ACTIVE": "perhaps"},
            "LORA_SPECIALIZE_ACTIVE = 'perhaps': must be true or false",
        ),
        ({"CUDA_FORWARD_COMPAT": "sometimes"}, "CUDA_FORWARD_COMPAT = 'sometimes': "),
        ({"SESSION_TTL_S": "86401"}, "SESSION_TTL_S = '86401': must be <= 86400"),
        (
            {"LORA_ADAPTERS": "good,bad name"},
            "LORA_ADAPTERS = 'good,bad name': adapter name 'bad name' must match",
        ),
        (
            {"LORA_ADAPTERS": "a,b,a"},
            "LORA_ADAPTERS = 'a,b,a': adapter names must be unique, repeated: a",
        ),
        (
            {"LORA_ADAPTERS": "base"},
            "LORA_ADAPTERS = 'base': adapter names must differ from ENGINE_SERVED_MODEL_NAME = 'base'",
        ),
        (
            {"LORA_MAX_LORAS": "4", "LORA_MAX_CPU_LORAS": "2"},
            "LORA_MAX_CPU_LORAS = 2: must be >= LORA_MAX_LORAS = 4",
        ),
        (
            {"LORA_RUNTIME_ADAPTERS": "true", "LORA_ADAPTERS": "manga_domain_v3,jp_style_v1"},
            "LORA_ADAPTERS = 'manga_domain_v3,jp_style_v1': must be empty when LORA_RUNTIME_ADAPTERS = true "
            "(SageMaker then loads every adapter through POST /adapters)",
        ),
        (
            {"LORA_RUNTIME_ADAPTERS": "sometimes"},
            "LORA_RUNTIME_ADAPTERS = 'sometimes': must be true or false",
        ),
        (
            {"METRICS_NAMESPACE": "AWS/SageMaker"},
            "METRICS_NAMESPACE = 'AWS/SageMaker': must be 1-255",
        ),
        (
            {"ENGINE_TENSOR_PARALLEL_SIZE": "3"},
            "ENGINE_TENSOR_PARALLEL_SIZE = '3': must be one of 1, 2, 4 or 8",
        ),
    ],
)
def test_bad_values_name_variable_value_and_rule(environ: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env(environ)
    text = str(caught.value)
    assert text.startswith(message), text
    assert "\n" not in text


def test_every_allowed_rank_is_accepted() -> None:
    for rank in LORA_RANKS:
        assert Settings.from_env({"LORA_MAX_RANK": str(rank)}).max_lora_rank == rank


def test_cuda_compat_libraries_lead_the_engine_loader_path(tmp_path: Path) -> None:
    settings = Settings.from_env({})
    base = {
        "VLLM_ENABLE_CUDA_COMPATIBILITY": "1",
        "VLLM_CUDA_COMPATIBILITY_PATH": str(tmp_path),
        "LD_LIBRARY_PATH": f"/usr/lib:{tmp_path}",
    }
    assert engine_environment(settings, base)["LD_LIBRARY_PATH"] == f"{tmp_path}:/usr/lib"
    disabled = {**base, "VLLM_ENABLE_CUDA_COMPATIBILITY": "0"}
    assert engine_environment(settings, disabled)["LD_LIBRARY_PATH"] == f"/usr/lib:{tmp_path}"
    missing = {**base, "VLLM_CUDA_COMPATIBILITY_PATH": str(tmp_path / "absent")}
    assert engine_environment(settings, missing)["LD_LIBRARY_PATH"] == f"/usr/lib:{tmp_path}"


@pytest.mark.parametrize(("value", "flag", "first"), [("false", "0", False), ("true", "1", True)])
def test_the_stacks_cuda_forward_compat_overrides_the_images_default(
    tmp_path: Path, value: str, flag: str, first: bool
) -> None:
    # The image enables compat (driver 550 hosts); on a driver-580 host (gpu-4-1) the stack says
    # false and the compat libcuda must not lead the loader path.
    settings = Settings.from_env({"CUDA_FORWARD_COMPAT": value})
    image = {"VLLM_ENABLE_CUDA_COMPATIBILITY": "1", "VLLM_CUDA_COMPATIBILITY_PATH": str(tmp_path)}
    environ = engine_environment(settings, {**image, "LD_LIBRARY_PATH": "/usr/lib"})
    assert environ["VLLM_ENABLE_CUDA_COMPATIBILITY"] == flag
    assert environ["LD_LIBRARY_PATH"].startswith(str(tmp_path)) is first


def test_scraper_sums_labels_and_derives_rates() -> None:
    from serving_app.metrics.scraper import EngineMetricsCalculator, parse_samples

    def exposition(hits: float, queries: float, generated: float) -> str:
        return (
            "\n".join(
                [
                    "# TYPE vllm:num_requests_waiting gauge",
                    'vllm:num_requests_waiting{engine="0",model_name="base"} 2.0',
                    'vllm:num_requests_waiting{engine="1",model_name="base"} 1.0',
                    'vllm:kv_cache_usage_perc{engine="0",model_name="base"} 0.5',
                    f'vllm:prefix_cache_hits_total{{engine="0",model_name="base"}} {hits}',
                    f'vllm:prefix_cache_queries_total{{engine="0",model_name="base"}} {queries}',
                    f'vllm:generation_tokens_total{{engine="0",model_name="base"}} {generated}',
                    'vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf"} 3.0',
                ]
            )
            + "\n"
        )

    calculator = EngineMetricsCalculator()
    first = calculator.update(parse_samples(exposition(10, 20, 100)), now_s=100.0)
    assert first == {"QueueDepth": 3.0, "KvCacheUsagePercent": 50.0}
    second = calculator.update(parse_samples(exposition(25, 40, 300)), now_s=110.0)
    assert second["PrefixCacheHitRatePercent"] == 75.0  # (25-10)/(40-20)
    assert second["GenerationTokensPerSecond"] == 20.0  # 200 tokens / 10 s
