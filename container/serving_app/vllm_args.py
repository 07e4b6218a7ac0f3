"""Settings -> the argv of vLLM 0.26.0's OpenAI server.

Every flag here exists in vLLM 0.26.0; ``tests/container/test_vllm_contract.py`` parses the
output with vLLM's own parser. Flags the seeds used that are gone or wrong today:
``--disable-log-requests`` (removed; request logs are off by default) and
``--no-custom-all-reduce`` (only meaningful with tensor parallelism).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from serving_app.settings import Settings
from serving_contract import engine_settings as spec
from serving_contract import env

ENGINE_MODULE: Final = "vllm.entrypoints.openai.api_server"
"""Module run as the engine: it parses ``--model`` (not the positional of ``vllm serve``)."""

ENGINE_HOST: Final = "127.0.0.1"
"""vLLM listens on loopback only: every client goes through the gateway on :8080."""

TUNED_CONFIG_FOLDER: Final = "VLLM_TUNED_CONFIG_FOLDER"
"""Where vLLM 0.26 reads tuned LoRA kernel configs (vllm/envs.py; vllm/lora/ops/triton_ops/utils.py)."""

CUDAGRAPH_ESTIMATE: Final = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
"""vLLM 0.26's switch for reserving its CUDA-graph memory estimate out of the KV cache (vllm/envs.py)."""

RUNTIME_LORA_UPDATING: Final = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
"""vLLM 0.26's gate for loading and unloading adapters over HTTP (vllm/envs.py: "1" or "true")."""


@dataclass(frozen=True, slots=True)
class EnginePaths:
    """Where the image keeps the weights (see the Dockerfile) and where vLLM listens."""

    model_dir: Path
    adapter_dir: Path
    port: int


def default_engine_command() -> list[str]:
    """``python -m vllm.entrypoints.openai.api_server`` with this interpreter."""
    return [sys.executable, "-m", ENGINE_MODULE]


def build_vllm_args(settings: Settings, paths: EnginePaths) -> list[str]:
    """Return vLLM's arguments (without the executable) for ``settings``.

    The drain flag: ``--shutdown-timeout N`` (vLLM >= 0.18) makes vLLM finish in-flight
    requests for up to N s on SIGTERM instead of aborting them (default 0). The gateway
    drains in-flight requests itself before it sends vLLM SIGTERM, and then SIGKILLs vLLM
    after ``ENGINE_STOP_GRACE_S``; N is one second less, so vLLM exits on its own first.
    """
    args = [
        "--model",
        str(paths.model_dir),
        "--served-model-name",
        settings.served_model_name,
        "--host",
        ENGINE_HOST,
        "--port",
        str(paths.port),
        spec.TENSOR_PARALLEL_SIZE.flag,
        str(settings.tensor_parallel_size),
        spec.GPU_MEMORY_UTILIZATION.flag,
        f"{settings.gpu_memory_utilization:g}",
        spec.MAX_MODEL_LEN.flag,
        str(settings.max_model_len),
        spec.MAX_NUM_SEQS.flag,
        str(settings.max_num_seqs),
        spec.MAX_NUM_BATCHED_TOKENS.flag,
        str(settings.max_num_batched_tokens),
        spec.BLOCK_SIZE.flag,
        str(settings.block_size),
        spec.ENABLE_PREFIX_CACHING.flag if settings.enable_prefix_caching else "--no-enable-prefix-caching",
        spec.KV_CACHE_DTYPE.flag,
        settings.kv_cache_dtype,
        spec.LOG_LEVEL.flag,
        settings.log_level,
        "--disable-uvicorn-access-log",
        # usage.prompt_tokens_details.cached_tokens: the gateway's cold/warm request class
        # (serving_contract.request_classes); off by default in vLLM 0.26 (cli_args.py).
        "--enable-prompt-tokens-details",
        "--shutdown-timeout",
        str(env.ENGINE_STOP_GRACE_S - 1),
    ]
    # auto: no flag, so vLLM reads the checkpoint's quantization_config and picks Marlin
    # where the GPU allows it; an explicit "awq" would force the slow kernel.
    if settings.data_parallel_size > 1:
        # One engine per GPU group behind vLLM's own API server (the stack sets it on multi-GPU
        # instance types in variants mode); 1 is vLLM's default and passes no flag.
        args += [spec.DATA_PARALLEL_SIZE.flag, str(settings.data_parallel_size)]
    if settings.quantization != spec.AUTO:
        args += [spec.QUANTIZATION.flag, settings.quantization]
    if settings.attention_backend != spec.AUTO:
        args += [spec.ATTENTION_BACKEND.flag, settings.attention_backend]
    if settings.kv_offloading_size_gib > 0:
        # vLLM 0.26 turns offloading on only when the size is set (vllm/config/vllm.py,
        # _post_init_kv_transfer_config); 0, the default, passes neither flag.
        args += [
            spec.KV_OFFLOADING_SIZE.flag,
            f"{settings.kv_offloading_size_gib:g}",
            spec.KV_OFFLOADING_BACKEND.flag,
            settings.kv_offloading_backend,
        ]
    if settings.enforce_eager:
        args.append(spec.ENFORCE_EAGER.flag)
    else:
        args += [spec.MAX_CUDAGRAPH_CAPTURE_SIZE.flag, str(settings.max_cudagraph_capture_size)]
    if settings.lora_adapters or settings.lora_runtime_adapters:
        # Runtime adapters: the CPU cache holds as many adapters as the gateway lets SageMaker
        # register (Settings.runtime_adapter_capacity, which says why).
        cpu_loras = (
            settings.runtime_adapter_capacity if settings.lora_runtime_adapters else settings.effective_max_cpu_loras
        )
        args += [
            "--enable-lora",
            spec.MAX_LORAS.flag,
            str(settings.max_loras),
            spec.MAX_LORA_RANK.flag,
            str(settings.max_lora_rank),
            spec.MAX_CPU_LORAS.flag,
            str(cpu_loras),
        ]
        specialize = spec.SPECIALIZE_ACTIVE_LORA.flag
        args.append(specialize if settings.specialize_active_lora else specialize.replace("--", "--no-", 1))
    if settings.lora_adapters:
        args += ["--lora-modules", *(f"{name}={paths.adapter_dir / name}" for name in settings.lora_adapters)]
    return args


def engine_environment(settings: Settings, base: dict[str, str]) -> dict[str, str]:
    """Environment for the vLLM process: the parent's, vLLM's logging level, its CUDA-graph
    memory estimate switch (``engine.cudagraph_memory_estimate``), the runtime-LoRA
    gate when SageMaker loads adapters at runtime, the tuned LoRA kernel configs' folder
    (``LORA_TUNED_CONFIG_DIR`` as ``VLLM_TUNED_CONFIG_FOLDER``), and the CUDA forward-compatibility
    libraries first on ``LD_LIBRARY_PATH`` when enabled.

    vLLM 0.26 itself only edits ``os.environ`` before importing torch
    (``vllm/env_override.py``), which reaches its child processes but not the dynamic
    loader of the API-server process; setting it here makes every engine process start
    with it. Enabled by the image (``VLLM_ENABLE_CUDA_COMPATIBILITY=1``, see Dockerfile) unless
    ``CUDA_FORWARD_COMPAT`` says otherwise (the stack sets it from the host AMI's driver).
    """
    environ = dict(base)
    environ["VLLM_LOGGING_LEVEL"] = settings.log_level.upper()
    # vllm/envs.py reads "1"/"0" (int); engine.cudagraph_memory_estimate says why off is the default.
    environ[CUDAGRAPH_ESTIMATE] = "1" if settings.cudagraph_memory_estimate else "0"
    if settings.lora_runtime_adapters:
        # vLLM 0.26 registers /v1/load_lora_adapter and /v1/unload_lora_adapter only with this
        # set (vllm/entrypoints/serve/lora/api_router.py, attach_router), and warns that it is
        # for local development: anyone who reaches the API server can load files as adapters.
        # Here vLLM listens on 127.0.0.1 only (ENGINE_HOST); the gateway owns the public routes
        # (POST /adapters, DELETE /adapters/{name}) and checks every request before it calls these.
        environ[RUNTIME_LORA_UPDATING] = "true"
    if settings.lora_tuned_config_dir is not None:
        # vLLM reads <GPU name>_SHRINK.json / _EXPAND_<add_inputs>.json from it at the first LoRA
        # kernel launch (load_lora_op_config) and falls back to its defaults per missing file.
        environ[TUNED_CONFIG_FOLDER] = str(settings.lora_tuned_config_dir)
    environ.setdefault("PYTHONUNBUFFERED", "1")
    if settings.cuda_forward_compat is not None:
        # The stack knows the host's driver (InferenceAmiVersion); vLLM's env_override reads this too.
        environ["VLLM_ENABLE_CUDA_COMPATIBILITY"] = "1" if settings.cuda_forward_compat else "0"
    enabled = environ.get("VLLM_ENABLE_CUDA_COMPATIBILITY", "0").strip().lower() in ("1", "true")
    compat = environ.get("VLLM_CUDA_COMPATIBILITY_PATH", "")
    if enabled and compat and Path(compat).is_dir():
        rest = [p for p in environ.get("LD_LIBRARY_PATH", "").split(":") if p and p != compat]
        environ["LD_LIBRARY_PATH"] = ":".join([compat, *rest])
    return environ
