"""The vLLM engine settings, declared once for the config model and the container.

``app_config.engine.EngineConfig`` (validated at synth) and the container's
``serving_app.settings.Settings`` (validated at start from the environment) both build their
fields from these declarations: the key, the environment variable, the vLLM flag, the
default, the bounds or allowed values and the source of each. So a value that passes synth
is one the container accepts, and neither side can drift from the other.

Standard library only: the image copies this package as it is (``container/Dockerfile``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from serving_contract import env
from serving_contract.setting import Setting, T


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSetting(Setting[T]):
    """One setting of vLLM 0.26.0's OpenAI server: a :class:`~serving_contract.setting.Setting`
    (key under ``engine.``) with the flag the container passes.

    Attributes:
        flag: vLLM's command-line flag ("" for a setting vLLM reads from its environment).
    """

    flag: str


LORA_RANKS: Final[tuple[int, ...]] = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""Ranks vLLM 0.26.0's ``--max-lora-rank`` accepts (``MaxLoRARanks`` in vllm/config/lora.py)."""

BLOCK_SIZES: Final[tuple[int, ...]] = (16, 32, 64, 128)
"""KV-cache block sizes (tokens) for the GPU: vLLM 0.26's FlashAttention backend takes
multiples of 16 (``get_supported_kernel_block_sizes`` in vllm/v1/attention/backends/flash_attn.py)."""

AUTO: Final = "auto"
"""The quantization/KV-dtype value that passes no flag: vLLM decides from the checkpoint."""

QUANTIZATIONS: Final[tuple[str, ...]] = (AUTO, "awq_marlin", "awq", "gptq_marlin", "gptq", "fp8")
"""Kernel choices. ``auto`` passes no ``--quantization``: vLLM reads the checkpoint's
``quantization_config``. In vLLM 0.26 ``awq`` and ``awq_marlin`` name one method, ``AutoAWQConfig``
(and ``gptq``/``gptq_marlin`` ``AutoGPTQConfig``; vllm/model_executor/layers/quantization/__init__.py),
which an AWQ checkpoint gets with or without the flag (``override_quantization_method`` in
auto_awq.py); it picks the linear kernel per GPU (``choose_mp_linear_kernel``; Machete on an H200,
benchmarks/results/h200-2026-11-26-defaults). vLLM 0.22's explicit ``awq`` forced the slow AWQ GEMM
kernel instead (awq_marlin.py): 4.6x lower throughput at 32 concurrent on an H100
(docs/performance.md); 0.26 has no such path (source read, not measured)."""

KV_CACHE_DTYPES: Final[tuple[str, ...]] = (AUTO, "fp8")
"""``auto`` stores the KV cache in the model dtype (2 bytes); ``fp8`` in one byte."""

ATTENTION_BACKENDS: Final[tuple[str, ...]] = (AUTO, "FLASH_ATTN", "FLASHINFER", "TRITON_ATTN")
"""``--attention-backend`` values that started this model on a GPU with vLLM 0.22 (H200, option
matrix, benchmarks/results/h200-2026-11-25/matrix*.json); vLLM 0.26 still offers each. ``auto``
passes no flag: vLLM picks per GPU and KV dtype (vllm/platforms/cuda.py), FLASH_ATTN first."""

KV_OFFLOADING_BACKENDS: Final[tuple[str, ...]] = ("native", "lmcache")
"""``--kv-offloading-backend`` values of vLLM 0.26 (``KVOffloadingBackend`` in vllm/config/cache.py)."""

LOG_LEVELS: Final[tuple[str, ...]] = ("debug", "info", "warning", "error", "critical")
TENSOR_PARALLEL_SIZES: Final[tuple[int, ...]] = (1, 2, 4, 8)
"""Divisors of Llama-3-8B's 8 KV heads: vLLM needs the KV heads to split evenly across GPUs."""

GPU_MEMORY_UTILIZATION: Final = EngineSetting(
    key="gpu_memory_utilization",
    env_var=env.ENGINE_GPU_MEMORY_UTILIZATION,
    flag="--gpu-memory-utilization",
    default=0.92,
    gt=0.0,
    le=0.98,
    description=(
        "Fraction of each GPU's memory vLLM may take for weights, activations, CUDA graphs and the KV cache. "
        "Source: seed 003 (0.92; 0.95 caused OOM under bursts)."
    ),
)
MAX_MODEL_LEN: Final = EngineSetting(
    key="max_model_len",
    env_var=env.ENGINE_MAX_MODEL_LEN,
    flag="--max-model-len",
    default=4096,
    ge=256,
    le=131072,
    description=(
        "Context window in tokens (prompt + output); at most the model's max_position_embeddings and the "
        "KV-cache tokens that fit (checked at synth). Source: seed 003."
    ),
)
MAX_NUM_SEQS: Final = EngineSetting(
    key="max_num_seqs",
    env_var=env.ENGINE_MAX_NUM_SEQS,
    flag="--max-num-seqs",
    default=128,
    ge=1,
    le=1024,
    description=(
        "Most sequences in one batch. Above the sequences whose KV cache fits, vLLM preempts and queues "
        "instead of failing (see the memory plan). Source: seed 003."
    ),
)
MAX_NUM_BATCHED_TOKENS: Final = EngineSetting(
    key="max_num_batched_tokens",
    env_var=env.ENGINE_MAX_NUM_BATCHED_TOKENS,
    flag="--max-num-batched-tokens",
    default=8192,
    ge=256,
    le=131072,
    description="Token budget of one scheduler step (prefill chunk + decodes). Source: seed 003.",
)
BLOCK_SIZE: Final = EngineSetting(
    key="block_size",
    env_var=env.ENGINE_BLOCK_SIZE,
    flag="--block-size",
    default=16,
    choices=BLOCK_SIZES,
    description="Tokens per KV-cache block. Source: seed 003 (16, also vLLM's default).",
)
ENABLE_PREFIX_CACHING: Final = EngineSetting(
    key="enable_prefix_caching",
    env_var=env.ENGINE_ENABLE_PREFIX_CACHING,
    flag="--enable-prefix-caching",
    default=True,
    description="Reuse KV-cache blocks of shared prompt prefixes. Source: seed 002; on by default in vLLM V1.",
)
QUANTIZATION: Final = EngineSetting(
    key="quantization",
    env_var=env.ENGINE_QUANTIZATION,
    flag="--quantization",
    default=AUTO,
    choices=QUANTIZATIONS,
    description=(
        "Quantized-linear kernel. auto (no --quantization flag) lets vLLM pick from the checkpoint's "
        "quantization_config. In vLLM 0.26 awq and awq_marlin are one method (AutoAWQ) that picks the kernel "
        "per GPU, Machete on an H200. In vLLM 0.22 awq forced the slow AWQ GEMM kernel: measured on an H100 "
        "with three rank-16 adapters and 128 output tokens, 6.58 vs 30.44 req/s at 32 concurrent (4.6x), "
        "0.216 vs 1.300 at 1 (6.0x), 23.6 vs 74.0 at 128 (3.1x). Source: vLLM 0.26 "
        "model_executor/layers/quantization/__init__.py and auto_awq.py; docs/performance.md."
    ),
)
KV_CACHE_DTYPE: Final = EngineSetting(
    key="kv_cache_dtype",
    env_var=env.ENGINE_KV_CACHE_DTYPE,
    flag="--kv-cache-dtype",
    default=AUTO,
    choices=KV_CACHE_DTYPES,
    description=(
        "KV-cache element type: auto = the model dtype (2 bytes), fp8 = 1 byte, twice the tokens per GiB at "
        "some accuracy cost. FlashAttention takes fp8 only on Hopper (FA3); on an A10G vLLM then runs its "
        "FlashInfer or Triton attention backend (vllm/v1/attention/backends/flash_attn.py). Not measured here. "
        "Source: vLLM's --kv-cache-dtype (default auto)."
    ),
)
ATTENTION_BACKEND: Final = EngineSetting(
    key="attention_backend",
    env_var=env.ENGINE_ATTENTION_BACKEND,
    flag="--attention-backend",
    default=AUTO,
    choices=ATTENTION_BACKENDS,
    description=(
        "Attention kernel: auto (no flag) lets vLLM choose, FlashAttention first. With kv_cache_dtype=fp8 on "
        "Hopper (p5, p5e, p5en) vLLM's choice, FlashAttention 3, crashes the engine at start (fp8 KV with a "
        "float16 model); FLASHINFER and TRITON_ATTN start, synth refuses auto there. Measured on an H200 at the "
        "request shape, 8 concurrent: FLASHINFER 297 req/min, FLASH_ATTN 279, fp8 KV + FLASHINFER 280, fp8 KV + "
        "TRITON_ATTN 271 (docs/performance.md, option matrix)."
    ),
)
TENSOR_PARALLEL_SIZE: Final = EngineSetting(
    key="tensor_parallel_size",
    env_var=env.ENGINE_TENSOR_PARALLEL_SIZE,
    flag="--tensor-parallel-size",
    default=1,
    choices=TENSOR_PARALLEL_SIZES,
    description="GPUs one engine spans; at most the instance's GPU count (checked at synth). 1 on ml.g5.xlarge.",
)
DATA_PARALLEL_SIZE: Final = EngineSetting(
    key="data_parallel_size",
    env_var=env.ENGINE_DATA_PARALLEL_SIZE,
    flag="--data-parallel-size",
    default=1,
    choices=(1, 2, 4, 8),
    description=(
        "Engines in one container, each on tensor_parallel_size GPUs of its own (vLLM 0.26's data parallel: one "
        "API server balancing requests over the engines by their waiting and running counts, "
        "vllm/v1/engine/core_client.py DPLBAsyncMPClient). Not a config key: the stack derives it per production "
        "variant, GPUs // tensor_parallel_size in variants mode (inference_components mode runs one copy per GPU "
        "group instead). 1 passes no flag."
    ),
)
ENFORCE_EAGER: Final = EngineSetting(
    key="enforce_eager",
    env_var=env.ENGINE_ENFORCE_EAGER,
    flag="--enforce-eager",
    default=False,
    description="Skip CUDA-graph capture: starts faster, decodes slower; for debugging. Source: seed 001.",
)
MAX_CUDAGRAPH_CAPTURE_SIZE: Final = EngineSetting(
    key="max_cudagraph_capture_size",
    env_var=env.ENGINE_MAX_CUDAGRAPH_CAPTURE_SIZE,
    flag="--max-cudagraph-capture-size",
    default=64,
    ge=1,
    le=512,
    description=(
        "Largest batch vLLM captures a CUDA graph for (larger batches run without one). vLLM's default is "
        "min(2 x max_num_seqs, 512) = 256 here. 64 holds every batch an engine runs at the TTFT SLO (its "
        "concurrency at the request shape is ~12-16, docs/performance.md) and, measured on an H100 on 4 CPUs "
        "with a compile-cache hit, captures in 5 s instead of 14-25 s with 0.22 GiB of graphs instead of 0.62 "
        "at the same throughput (4.30-4.35 vs 4.31-4.32 req/s at 8 concurrent; docs/performance.md, start-up)."
    ),
)
CUDAGRAPH_MEMORY_ESTIMATE: Final = EngineSetting(
    key="cudagraph_memory_estimate",
    env_var=env.ENGINE_CUDAGRAPH_MEMORY_ESTIMATE,
    flag="",
    default=False,
    description=(
        "Let vLLM's start-up profile reserve its CUDA-graph memory estimate out of the KV cache "
        "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, on by default since vLLM 0.21). Off: with a compile-cache "
        "hit vLLM 0.22 estimates 1.76 GiB for 0.62 GiB of graphs and keeps 8.3 % fewer KV tokens (97,712 vs "
        "106,608); off, with max_cudagraph_capture_size 64, a hit kept 112,048 and the 0.22 GiB of graphs sit "
        "in the headroom gpu_memory_utilization leaves (H100 on 4 CPUs, docs/performance.md, start-up)."
    ),
)
KV_OFFLOADING_SIZE: Final = EngineSetting(
    key="kv_offloading_size_gib",
    env_var=env.ENGINE_KV_OFFLOADING_SIZE_GIB,
    flag="--kv-offloading-size",
    default=0.0,
    ge=0.0,
    le=2048.0,
    description=(
        "Host memory for KV blocks evicted from the GPU, GiB per engine (all its tensor-parallel GPUs together); "
        "0 = off (no flag). vLLM 0.26's --kv-offloading-size (CacheConfig.kv_offloading_size in "
        "vllm/config/cache.py: 'Size of the KV cache offloading buffer in GiB. When TP > 1, this is the total "
        "buffer size summed across all TP ranks'); with the native backend a follow-up turn whose history left the "
        "GPU comes back over PCIe instead of a full prefill. vLLM 0.26 pins one buffer per layer and torch rounds "
        "each up to a power of two, so 40 GiB pins 64 for Llama-3-8B (the memory plan's host tier, checked per "
        "instance type at synth; docs/memory-plan.md). Bound: 2048, the most host memory of any instance type in "
        "planning/gpu_instances.py."
    ),
)
KV_OFFLOADING_BACKEND: Final = EngineSetting(
    key="kv_offloading_backend",
    env_var=env.ENGINE_KV_OFFLOADING_BACKEND,
    flag="--kv-offloading-backend",
    default="native",
    choices=KV_OFFLOADING_BACKENDS,
    description=(
        "Who holds the offloaded KV blocks (vLLM 0.26's --kv-offloading-backend, vllm/config/cache.py; read only "
        "with kv_offloading_size_gib > 0): native = vLLM's OffloadingConnector in the engine's own pinned host "
        "memory; lmcache = LMCacheMPConnector, which passes no size and needs the lmcache package and an LMCache "
        "server (vllm/config/vllm.py, _post_init_kv_transfer_config). The image has neither, so synth refuses "
        "lmcache. Source: vLLM's default (native)."
    ),
)
LOG_LEVEL: Final = EngineSetting(
    key="log_level",
    env_var=env.ENGINE_LOG_LEVEL,
    flag="--uvicorn-log-level",
    default="info",
    choices=LOG_LEVELS,
    description="Engine log level. Source: seed 003 (debug floods logs in prod).",
)
MAX_LORAS: Final = EngineSetting(
    key="max_loras",
    env_var=env.LORA_MAX_LORAS,
    flag="--max-loras",
    default=3,
    ge=1,
    le=64,
    description=(
        "LoRA adapters in one batch, i.e. GPU slots; each slot reserves GPU memory at start (see the memory "
        "plan). 3: MangaAssist's three adapters (seed 003 said 4); vLLM launches its LoRA kernels over "
        "max_loras + 1 slots, so a spare slot is pure cost (H200, issue 35: 77.8 vs 79.4 ms TTFT p50 at 1 "
        "request; docs/performance.md, multi-LoRA)."
    ),
)
MAX_LORA_RANK: Final = EngineSetting(
    key="max_lora_rank",
    env_var=env.LORA_MAX_RANK,
    flag="--max-lora-rank",
    default=16,
    choices=LORA_RANKS,
    description="Largest LoRA rank the GPU slots hold; an adapter of a higher rank fails to load. Source: seed 003.",
)
MAX_CPU_LORAS: Final[EngineSetting[int | None]] = EngineSetting(
    key="max_cpu_loras",
    env_var=env.LORA_MAX_CPU_LORAS,
    flag="--max-cpu-loras",
    default=None,
    ge=1,
    le=256,
    description=(
        "Adapters kept loaded in CPU memory (vLLM evicts the least recently used beyond it); at least "
        "max_loras. None: room for every configured adapter, max(max_loras, number of adapters). In "
        "inference_components mode also the most adapters the container registers at runtime (None: max_loras)."
    ),
)

SPECIALIZE_ACTIVE_LORA: Final = EngineSetting(
    key="specialize_active_lora",
    env_var=env.LORA_SPECIALIZE_ACTIVE,
    flag="--specialize-active-lora",
    default=True,
    description=(
        "Size vLLM's LoRA kernel grids by the adapters active in the batch, with CUDA graphs per active "
        "count, instead of by max_loras + 1 (vLLM's default: off). Measured on an H200 at the request "
        "shape (issue 35, docs/performance.md, multi-LoRA), with max_loras 3 and tuned kernel configs: "
        "adapters' TTFT p50 at 1 request 62.8 ms against 82.5 without, base model only 51.6 ms; capacity at "
        "the TTFT SLO 315 vs 309 req/min."
    ),
)

ENGINE_SETTINGS: Final[tuple[EngineSetting[Any], ...]] = (
    GPU_MEMORY_UTILIZATION,
    MAX_MODEL_LEN,
    MAX_NUM_SEQS,
    MAX_NUM_BATCHED_TOKENS,
    BLOCK_SIZE,
    ENABLE_PREFIX_CACHING,
    QUANTIZATION,
    KV_CACHE_DTYPE,
    ATTENTION_BACKEND,
    TENSOR_PARALLEL_SIZE,
    ENFORCE_EAGER,
    MAX_CUDAGRAPH_CAPTURE_SIZE,
    CUDAGRAPH_MEMORY_ESTIMATE,
    KV_OFFLOADING_SIZE,
    KV_OFFLOADING_BACKEND,
    LOG_LEVEL,
    MAX_LORAS,
    MAX_LORA_RANK,
    MAX_CPU_LORAS,
    SPECIALIZE_ACTIVE_LORA,
)
"""Every engine setting, in the order the config reference lists them."""

BY_KEY: Final[dict[str, EngineSetting[Any]]] = {setting.key: setting for setting in ENGINE_SETTINGS}


def effective_max_cpu_loras(max_cpu_loras: int | None, max_loras: int, adapter_count: int) -> int:
    """The ``--max-cpu-loras`` value passed to vLLM: the configured one, else room for every adapter.

    vLLM's own default (``max_loras``, vllm/config/lora.py) would evict an adapter as soon as
    more adapters than GPU slots are configured; every configured adapter stays loaded instead.
    """
    if max_cpu_loras is not None:
        return max_cpu_loras
    return max(max_loras, adapter_count)
