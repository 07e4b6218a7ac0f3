"""Environment variables the serving stack sets on each SageMaker model.

The container's entrypoint parses exactly these names; the stack builds them from the
validated app config. Names avoid the ``VLLM_`` prefix on purpose: vLLM reads its own
``VLLM_*`` variables (``VLLM_PORT`` is its distributed-communication port) and warns on
unknown ones, so reusing that prefix would collide with the engine.
"""

import math
from typing import Final

# Engine settings (one flag of the vLLM OpenAI server each).
ENGINE_GPU_MEMORY_UTILIZATION: Final = "ENGINE_GPU_MEMORY_UTILIZATION"
ENGINE_MAX_MODEL_LEN: Final = "ENGINE_MAX_MODEL_LEN"
ENGINE_MAX_NUM_SEQS: Final = "ENGINE_MAX_NUM_SEQS"
ENGINE_MAX_NUM_BATCHED_TOKENS: Final = "ENGINE_MAX_NUM_BATCHED_TOKENS"
ENGINE_BLOCK_SIZE: Final = "ENGINE_BLOCK_SIZE"
ENGINE_ENABLE_PREFIX_CACHING: Final = "ENGINE_ENABLE_PREFIX_CACHING"
ENGINE_QUANTIZATION: Final = "ENGINE_QUANTIZATION"
ENGINE_KV_CACHE_DTYPE: Final = "ENGINE_KV_CACHE_DTYPE"
ENGINE_ATTENTION_BACKEND: Final = "ENGINE_ATTENTION_BACKEND"
ENGINE_TENSOR_PARALLEL_SIZE: Final = "ENGINE_TENSOR_PARALLEL_SIZE"
# Engines in the container (vLLM data parallel, one per tensor_parallel_size GPUs); the stack
# derives it from the instance type in variants mode (planning.gpu_instances.engines_per_instance).
ENGINE_DATA_PARALLEL_SIZE: Final = "ENGINE_DATA_PARALLEL_SIZE"
ENGINE_ENFORCE_EAGER: Final = "ENGINE_ENFORCE_EAGER"
ENGINE_MAX_CUDAGRAPH_CAPTURE_SIZE: Final = "ENGINE_MAX_CUDAGRAPH_CAPTURE_SIZE"
# Not a flag: the engine process gets VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS from it.
ENGINE_CUDAGRAPH_MEMORY_ESTIMATE: Final = "ENGINE_CUDAGRAPH_MEMORY_ESTIMATE"
# KV blocks offloaded to host memory (vLLM 0.26's --kv-offloading-size GiB, 0 = off, and
# --kv-offloading-backend); the memory plan's host tier checks the size per instance type.
ENGINE_KV_OFFLOADING_SIZE_GIB: Final = "ENGINE_KV_OFFLOADING_SIZE_GIB"
ENGINE_KV_OFFLOADING_BACKEND: Final = "ENGINE_KV_OFFLOADING_BACKEND"
ENGINE_LOG_LEVEL: Final = "ENGINE_LOG_LEVEL"
ENGINE_SERVED_MODEL_NAME: Final = "ENGINE_SERVED_MODEL_NAME"

# LoRA adapters: comma-separated adapter names; each lives in <adapter dir>/<name>/.
LORA_ADAPTERS: Final = "LORA_ADAPTERS"
LORA_MAX_LORAS: Final = "LORA_MAX_LORAS"
LORA_MAX_RANK: Final = "LORA_MAX_RANK"
LORA_MAX_CPU_LORAS: Final = "LORA_MAX_CPU_LORAS"
LORA_SPECIALIZE_ACTIVE: Final = "LORA_SPECIALIZE_ACTIVE"
# A folder of vLLM's tuned LoRA kernel configs (benchmarks/lora_tune.py's output, one file per
# kernel and GPU name); the engine process gets it as VLLM_TUNED_CONFIG_FOLDER. Unset: vLLM's
# default kernel configs.
LORA_TUNED_CONFIG_DIR: Final = "LORA_TUNED_CONFIG_DIR"
# "true" in inference_components mode: the engine starts with LoRA on and no adapter, and
# SageMaker loads each adapter component's adapter at runtime (POST /adapters, DELETE
# /adapters/{name}); LORA_ADAPTERS is then empty.
LORA_RUNTIME_ADAPTERS: Final = "LORA_RUNTIME_ADAPTERS"
# JSON object {served model or adapter name: "<version>/<sha256>"}: the pins this variant's image bakes in.
# Every answer names the versions that produced it (container/serving_app/versions.py; issue 36).
MODEL_VERSIONS: Final = "MODEL_VERSIONS"
# The only folder tree POST /adapters may load from (the container's default: /opt/ml, where
# SageMaker places model data); the stack leaves it unset, tests point it at a temp dir.
ADAPTER_SRC_ROOT: Final = "ADAPTER_SRC_ROOT"
# JSON object {adapter name as SageMaker registers it: sha256}: POST /adapters loads only a
# folder whose serving_contract.model_artifacts.artifact_sha256 equals its entry (issue 22
# item 5). Set by the stack in inference_components mode from the adapters' pins.
ADAPTER_SHA256: Final = "ADAPTER_SHA256"

# "true" when the host AMI's NVIDIA driver is older than the image's CUDA needs: the engine then
# loads the image's cuda-compat-13-0 (vLLM's VLLM_ENABLE_CUDA_COMPATIBILITY); "false" keeps it off.
# Unset (a local run): the image's own VLLM_ENABLE_CUDA_COMPATIBILITY stands.
CUDA_FORWARD_COMPAT: Final = "CUDA_FORWARD_COMPAT"

# Lifecycle of the serving process (defaults and bounds: serving_contract.lifecycle).
STARTUP_TIMEOUT_S: Final = "STARTUP_TIMEOUT_S"
WARMUP_NUM_REQUESTS: Final = "WARMUP_NUM_REQUESTS"
WARMUP_PREFILL_TOKENS: Final = "WARMUP_PREFILL_TOKENS"
WARMUP_PREFILL_MIN_TOKENS: Final = 128
"""Smallest prefill warm-up: vLLM 0.26's LoRA shrink kernel switches to its prefill config at 128
tokens (vllm/lora/ops/triton_ops/utils.py, unchanged since 0.22), and engine.max_cudagraph_capture_size (64) caps the
batches compiled at start."""
WARMUP_PREFILL_MAX_TOKENS: Final = 2
"""Tokens a prefill warm-up request asks for: its prompt is the work; one decode step follows."""
DRAIN_TIMEOUT_S: Final = "DRAIN_TIMEOUT_S"
REQUEST_TIMEOUT_S: Final = "REQUEST_TIMEOUT_S"
REQUEST_READ_TIMEOUT_S: Final = "REQUEST_READ_TIMEOUT_S"

# Per-request limits on fields that multiply engine work (serving_contract.request_limits).
REQUEST_MAX_SEQUENCES: Final = "REQUEST_MAX_SEQUENCES"
REQUEST_MAX_LOGPROBS: Final = "REQUEST_MAX_LOGPROBS"
REQUEST_MAX_STOP_SEQUENCES: Final = "REQUEST_MAX_STOP_SEQUENCES"
REQUEST_MAX_STOP_SEQUENCE_CHARS: Final = "REQUEST_MAX_STOP_SEQUENCE_CHARS"
REQUEST_MAX_TOKEN_IDS: Final = "REQUEST_MAX_TOKEN_IDS"
REQUEST_MAX_BODY_BYTES_PER_TOKEN: Final = "REQUEST_MAX_BODY_BYTES_PER_TOKEN"

# SageMaker stateful sessions (container/serving_app/sessions; defaults in serving_contract.lifecycle).
SESSIONS_MAX: Final = "SESSIONS_MAX"
SESSION_TTL_S: Final = "SESSION_TTL_S"

# Context budget and OOM containment (serving_contract.context_budget, container/serving_app/context_budget).
CONTEXT_BUDGET_ENABLED: Final = "CONTEXT_BUDGET_ENABLED"
# The stack derives the reserve from engine.max_model_len and the budget's parts; the container
# needs only it and the summary's share.
CONTEXT_BUDGET_GENERATION_RESERVE_TOKENS: Final = "CONTEXT_BUDGET_GENERATION_RESERVE_TOKENS"
CONTEXT_BUDGET_SUMMARY_TOKENS: Final = "CONTEXT_BUDGET_SUMMARY_TOKENS"
CONTEXT_BUDGET_SUMMARIZE: Final = "CONTEXT_BUDGET_SUMMARIZE"
CONTEXT_BUDGET_SUMMARY_TIMEOUT_S: Final = "CONTEXT_BUDGET_SUMMARY_TIMEOUT_S"
OOM_RETRY_AFTER_S: Final = "OOM_RETRY_AFTER_S"

# Metrics: where EMF lines go and which dimensions they carry.
# A request is "warm" when at least this fraction of its prompt came from the prefix cache, else
# "cold" (serving_contract.request_classes; the stack sets it from slo.warm_min_cached_fraction).
REQUEST_CLASS_WARM_MIN_CACHED_FRACTION: Final = "REQUEST_CLASS_WARM_MIN_CACHED_FRACTION"
METRICS_NAMESPACE: Final = "METRICS_NAMESPACE"
METRICS_INTERVAL_S: Final = "METRICS_INTERVAL_S"
ENDPOINT_NAME: Final = "ENDPOINT_NAME"
VARIANT_NAME: Final = "VARIANT_NAME"

ALL: Final[tuple[str, ...]] = tuple(
    value for name, value in sorted(globals().items()) if name.isupper() and isinstance(value, str)
)

# Shutdown budget, shared by the config model (stack side) and the container's settings.
# SageMaker sends SIGKILL 30 s after SIGTERM (docs/sources.md, "Container contract"). After the gateway drains it
# gives vLLM ENGINE_STOP_GRACE_S to exit, then uvicorn gets UVICORN_SHUTDOWN_GRACE_S to close;
# a few seconds stay spare for process exit: 22 + 3 + 2 = 27 < 30.
SAGEMAKER_SIGKILL_AFTER_S: Final = 30
SAGEMAKER_INVOCATION_TIMEOUT_S: Final = 60
"""A real-time endpoint must answer /invocations within this; REQUEST_TIMEOUT_S stays below it."""
ENGINE_STOP_GRACE_S: Final = 3
UVICORN_SHUTDOWN_GRACE_S: Final = 2
SHUTDOWN_SPARE_S: Final = 3
"""Left over inside the SIGKILL window after the drain and both graces, for process exit."""
SHUTDOWN_BUDGET_S: Final = "SHUTDOWN_BUDGET_S"
"""Seconds from SIGTERM to the platform's SIGKILL, as the container plans its shutdown. The stack
never sets it: on SageMaker it is ``SAGEMAKER_SIGKILL_AFTER_S``. A local run (or the real-engine
SIGTERM test) that gives the drain more time than SageMaker would raises it, and ``DRAIN_TIMEOUT_S``
is then bounded by :func:`drain_timeout_max_s` of it instead of 22 s."""
SHUTDOWN_BUDGET_MAX_S: Final = 3600


def drain_timeout_max_s(shutdown_budget_s: float) -> float:
    """Longest drain (s) that leaves vLLM's stop grace, uvicorn's and the spare inside ``shutdown_budget_s``."""
    return shutdown_budget_s - ENGINE_STOP_GRACE_S - UVICORN_SHUTDOWN_GRACE_S - SHUTDOWN_SPARE_S


DRAIN_TIMEOUT_MAX_S: Final = int(drain_timeout_max_s(SAGEMAKER_SIGKILL_AFTER_S))
"""22 s: the drain cap on SageMaker, and the config's bound on ``container.drain_timeout_s``."""

# Start-up budget. SageMaker kills a container whose /ping is not 200 within the endpoint's
# ContainerStartupHealthCheckTimeoutInSeconds (60-3600 s). The gateway gives up a little
# earlier, so the failure is its own one-line log ("startup failed: ...") and exit code, not a
# silent kill: STARTUP_TIMEOUT_S = health-check timeout - STARTUP_REPORT_MARGIN_S. The stack
# derives both from serving.container_startup_health_check_timeout_s; the container's default
# (no variable set, e.g. a local run) uses the same default.
STARTUP_HEALTH_CHECK_TIMEOUT_DEFAULT_S: Final = 600
"""Default ContainerStartupHealthCheckTimeoutInSeconds: the measured cold start of the
A10G-sized engine was 168 s on an H100 (docs/performance.md, torch.compile 45-48 s of it); the
ml.g5.xlarge's 4 vCPUs compile slower and its A10G captures CUDA graphs slower, so seed 003's
300 s leaves too little margin."""
STARTUP_REPORT_MARGIN_S: Final = 30
MEASURED_COLD_START_S: Final = 205.8
"""Slowest measured time from engine start to ready with an empty torch.compile cache: the
A10G-sized engine (the container's entrypoint and argv, KV cache sized like an A10G's) on an H100
with the server confined to 4 CPUs, as on an ml.g5.xlarge
(benchmarks/results/h100-2026-11-25-startup/startup-1-default-before.json, lever ``gateway-make``,
``gateway_ready_s``; other cold starts: 134.9 s and 184.5 s on H100s, 166.9 s on an H200). A g5's
A10G and vCPUs are slower still, so this is a floor, not an estimate of the g5's start."""
MEASURED_COLD_START_SOURCE: Final = "benchmarks/results/h100-2026-11-25-startup/startup-1-default-before.json"
MEASURED_CACHED_START_S: Final = 82.6
"""Slowest measured time to ready from a made compile cache (the container's ``serve`` with
``COMPILE_CACHE_DIR``, a read-only copy and an empty ``VLLM_CACHE_ROOT``), same setup
(benchmarks/results/h100-2026-11-25-startup/startup-3-defaults.json; the other four hits with the
engine defaults took 61.3-67.4 s). Of it, ~45 s is vLLM's own process start on 4 CPUs: importing
its API server alone takes 14.7 s (importtime-api-server-top40.txt)."""
MEASURED_COLD_START_FASTEST_S: Final = 134.9
"""Fastest of the same cold starts (benchmarks/results/h100-2026-11-25-startup)."""
MEASURED_CACHED_START_FASTEST_S: Final = 61.3
"""Fastest of the same compile-cache hits (startup-3-defaults.json)."""


def start_up_ranges() -> tuple[str, str]:
    """The measured start-up as the docs, the plan and the simulation quote it: ``("135-206 s",
    "61-83 s")``, cold and from the compile cache, fastest-slowest rounded (the constants above are
    the one declaration; tests/unit/docs/test_start_up_figures.py holds every doc to these strings)."""
    return (
        f"{round(MEASURED_COLD_START_FASTEST_S)}-{round(MEASURED_COLD_START_S)} s",
        f"{round(MEASURED_CACHED_START_FASTEST_S)}-{round(MEASURED_CACHED_START_S)} s",
    )


STARTUP_HEALTH_CHECK_TIMEOUT_FLOOR_S: Final = math.ceil(MEASURED_COLD_START_S) + STARTUP_REPORT_MARGIN_S
"""The lowest ``serving.container_startup_health_check_timeout_s`` accepted (236 s): below it the
container's own budget (timeout - report margin) is shorter than the slowest cold start measured
(and an A10G starts slower than the GPUs measured), so starts would fail (issue 20)."""


def startup_budget_s(health_check_timeout_s: int) -> int:
    """The container's STARTUP_TIMEOUT_S for a SageMaker startup health-check timeout, seconds.

    Raises:
        ValueError: the timeout leaves no budget (<= STARTUP_REPORT_MARGIN_S).
    """
    budget = health_check_timeout_s - STARTUP_REPORT_MARGIN_S
    if budget <= 0:
        raise ValueError(
            f"startup health-check timeout = {health_check_timeout_s} s leaves no start-up budget after the "
            f"{STARTUP_REPORT_MARGIN_S} s report margin"
        )
    return budget
