"""The KV-cache and GPU-memory plan of one engine, from config alone (no weights, no GPU).

It mirrors how vLLM 0.22.0 sizes its KV cache at start (``determine_available_memory`` in
vllm/v1/worker/gpu_worker.py, ``request_memory`` in vllm/v1/worker/utils.py)::

    KV bytes = ceil(total GPU memory x gpu_memory_utilization)
               - model loading  (checkpoint weights + the LoRA slot buffers)
               - peak activation of the profile run + non-torch memory + CUDA-graph estimate

and turns KV bytes into tokens the way ``vllm/v1/core/kv_cache_utils.py`` does (whole blocks
of ``block_size`` tokens, each layer its own page). The last term cannot be derived from the
shapes alone; it is the measured ``runtime_overhead_gib``. The result is checked against
what vLLM itself reported on an H100 in ``tests/unit/planning/test_memory_plan.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planning.gpu_instances import GIB, InstanceGpus

FP16_BYTES = 2
"""Bytes of one element of the model dtype (AWQ checkpoints compute in float16)."""

KV_DTYPE_BYTES = {"auto": FP16_BYTES, "fp8": 1}
"""Bytes per KV-cache element for ``engine.kv_cache_dtype``."""


@dataclass(frozen=True, slots=True)
class ModelShape:
    """The decoder shape that sizes weights, LoRA slots and the KV cache.

    Field names follow Hugging Face ``config.json``; ``weights_bytes`` is the checkpoint's size
    in GPU memory (for AWQ: packed int4 weights, zeros and scales, plus fp16 embeddings).
    """

    num_hidden_layers: int
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int
    weights_bytes: int

    def kv_bytes_per_token(self, kv_cache_dtype: str = "auto") -> int:
        """K and V of one token over every layer: layers x KV heads x head dim x 2 x dtype bytes.

        Llama-3-8B in fp16: 32 x 8 x 128 x 2 x 2 = 131,072 bytes (128 KiB).
        """
        return self.num_hidden_layers * self.num_key_value_heads * self.head_dim * 2 * KV_DTYPE_BYTES[kv_cache_dtype]

    def lora_slot_bytes(self, max_loras: int, max_lora_rank: int) -> int:
        """GPU buffers vLLM 0.22 allocates for ``max_loras`` adapter slots of ``max_lora_rank``.

        Every LoRA-wrapped linear layer holds ``lora_a_stacked`` (max_loras, 1, rank, in) and
        ``lora_b_stacked`` (max_loras, 1, out, rank) per output slice
        (vllm/lora/layers/base_linear.py ``create_lora_weights``): for a Llama layer, merged
        qkv (3 slices), o_proj, merged gate_up (2 slices) and down_proj. The input embedding
        and the LM head get (max_loras, vocab, rank) + (max_loras, hidden, rank) each
        (vocal_parallel_embedding.py, logits_processor.py). The buffers are in the model dtype
        and count as "Model loading" memory (gpu_model_runner.py ``load_model``).

        Llama-3-8B, 4 slots of rank 16: 369,426,432 bytes (0.34 GiB).
        """
        h, inter = self.hidden_size, self.intermediate_size
        q_out = self.num_attention_heads * self.head_dim
        kv_out = self.num_key_value_heads * self.head_dim
        per_layer = (
            3 * h
            + (q_out + 2 * kv_out)  # qkv_proj: three A slices of width h, B of the three outputs
            + q_out
            + h  # o_proj
            + 2 * h
            + 2 * inter  # gate_up_proj: two slices
            + inter
            + h  # down_proj
        )
        embeddings = 2 * (self.vocab_size + h)  # embed_tokens and lm_head
        return max_loras * max_lora_rank * (self.num_hidden_layers * per_layer + embeddings) * FP16_BYTES


def awq_checkpoint_bytes(shape: ModelShape, group_size: int = 128) -> int:
    """Size of an AWQ-INT4 GEMM checkpoint of ``shape`` (what vLLM loads onto the GPU).

    Per quantized linear layer of ``in x out`` weights: packed int4 ``qweight`` (in x out / 2
    bytes), int4 ``qzeros`` (in / group x out / 2 bytes) and fp16 ``scales`` (in / group x out x
    2 bytes). Embeddings, LM head and norms stay fp16. Llama-3-8B-Instruct (vocabulary
    128,256, group 128): 5,727,854,592 bytes = 5.33 GiB, the published AWQ checkpoint's 5.73 GB.
    """
    h, inter = shape.hidden_size, shape.intermediate_size
    q_out = shape.num_attention_heads * shape.head_dim
    kv_out = shape.num_key_value_heads * shape.head_dim
    linear = [(h, q_out), (h, kv_out), (h, kv_out), (q_out, h), (h, inter), (h, inter), (inter, h)]
    per_layer = sum(i * o // 2 + (i // group_size) * o // 2 + (i // group_size) * o * FP16_BYTES for i, o in linear)
    norms = (2 * shape.num_hidden_layers + 1) * h * FP16_BYTES
    embeddings = 2 * shape.vocab_size * h * FP16_BYTES
    return shape.num_hidden_layers * per_layer + norms + embeddings


@dataclass(frozen=True, slots=True)
class EngineMemoryInputs:
    """The engine settings that move the plan (``engine.*`` in config)."""

    gpu_memory_utilization: float
    tensor_parallel_size: int
    max_model_len: int
    max_num_seqs: int
    block_size: int
    kv_cache_dtype: str
    lora_enabled: bool
    max_loras: int
    max_lora_rank: int


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """What one engine's GPU memory holds, and the sequences its KV cache fits.

    Byte figures are for the whole engine (all ``tensor_parallel_size`` GPUs together).

    Attributes:
        budget_bytes: total memory x gpu_memory_utilization, per GPU rounded up, summed.
        weights_bytes: the checkpoint.
        lora_bytes: the LoRA slot buffers (0 without adapters).
        overhead_bytes: activation peak + non-torch + CUDA-graph estimate, all GPUs.
        kv_bytes: what is left for the KV cache (negative: not even the weights fit).
        kv_tokens: KV-cache tokens, whole blocks only (vLLM's "GPU KV cache size").
        sequences_at_max_len: sequences of ``max_model_len`` tokens that fit at once
            (vLLM's "Maximum concurrency for N tokens per request", rounded down).
        sequences_at_typical_len: sequences of the typical conversation length that fit.
        concurrency_ceiling: sequences an instance can run without preemption at the typical
            length: min(max_num_seqs, sequences_at_typical_len).
    """

    budget_bytes: int
    weights_bytes: int
    lora_bytes: int
    overhead_bytes: int
    kv_bytes: int
    kv_bytes_per_token: int
    kv_tokens: int
    max_model_len: int
    typical_sequence_tokens: int
    sequences_at_max_len: int
    sequences_at_typical_len: int
    concurrency_ceiling: int

    @property
    def fits_one_sequence(self) -> bool:
        """vLLM starts only if one ``max_model_len`` sequence fits (``check_enough_kv_cache_memory``)."""
        return self.kv_tokens >= self.max_model_len


def plan_engine_memory(
    *,
    shape: ModelShape,
    gpus: InstanceGpus,
    engine: EngineMemoryInputs,
    runtime_overhead_bytes: int,
    typical_sequence_tokens: int,
) -> MemoryPlan:
    """Plan one engine on ``engine.tensor_parallel_size`` GPUs of ``gpus``.

    Args:
        shape: the model (``model.shape``).
        gpus: the instance's GPUs (only ``tensor_parallel_size`` of them serve the engine).
        engine: the engine settings.
        runtime_overhead_bytes: activation peak + non-torch + CUDA-graph estimate per GPU
            (``memory_plan.runtime_overhead_gib``).
        typical_sequence_tokens: prompt + answer of a typical request.

    Raises:
        ValueError: ``tensor_parallel_size`` is above the instance's GPU count.
    """
    tp = engine.tensor_parallel_size
    if tp > gpus.count:
        raise ValueError(f"tensor_parallel_size {tp} is above the {gpus.count} GPU(s) of the instance")
    budget = tp * math.ceil(gpus.gpu.memory_bytes * engine.gpu_memory_utilization)
    lora = shape.lora_slot_bytes(engine.max_loras, engine.max_lora_rank) if engine.lora_enabled else 0
    overhead = tp * runtime_overhead_bytes
    kv_bytes = budget - shape.weights_bytes - lora - overhead
    per_token = shape.kv_bytes_per_token(engine.kv_cache_dtype)
    # kv_cache_utils: num_blocks = available // (page size of one layer) // layers, pages of
    # block_size tokens; with tensor parallelism each GPU holds its share of the KV heads.
    block_bytes = per_token * engine.block_size
    blocks = max(kv_bytes, 0) // block_bytes
    kv_tokens = blocks * engine.block_size
    at_max = kv_tokens // engine.max_model_len
    at_typical = kv_tokens // typical_sequence_tokens
    return MemoryPlan(
        budget_bytes=budget,
        weights_bytes=shape.weights_bytes,
        lora_bytes=lora,
        overhead_bytes=overhead,
        kv_bytes=kv_bytes,
        kv_bytes_per_token=per_token,
        kv_tokens=kv_tokens,
        max_model_len=engine.max_model_len,
        typical_sequence_tokens=typical_sequence_tokens,
        sequences_at_max_len=at_max,
        sequences_at_typical_len=at_typical,
        concurrency_ceiling=min(engine.max_num_seqs, at_typical),
    )


def minimum_utilization(
    *,
    shape: ModelShape,
    gpus: InstanceGpus,
    engine: EngineMemoryInputs,
    runtime_overhead_bytes: int,
) -> float:
    """The lowest ``gpu_memory_utilization`` at which one ``max_model_len`` sequence fits."""
    tp = engine.tensor_parallel_size
    lora = shape.lora_slot_bytes(engine.max_loras, engine.max_lora_rank) if engine.lora_enabled else 0
    kv_needed = math.ceil(engine.max_model_len / engine.block_size) * engine.block_size
    needed = (
        shape.weights_bytes
        + lora
        + tp * runtime_overhead_bytes
        + kv_needed * shape.kv_bytes_per_token(engine.kv_cache_dtype)
    )
    return needed / (tp * gpus.gpu.memory_bytes)


def power_of_two_ceil(value: int) -> int:
    """The smallest power of two >= ``value`` (0 for 0): what torch's pinned host allocator reserves
    for a ``value``-byte tensor (``c10::llvm::PowerOf2Ceil`` in ATen/core/CachingHostAllocator.h,
    torch 2.11)."""
    return 0 if value <= 0 else 1 << (value - 1).bit_length()


@dataclass(frozen=True, slots=True)
class HostOffload:
    """What vLLM 0.26's native KV offload takes from host memory for one engine.

    vLLM turns ``--kv-offloading-size`` GiB into whole offload blocks (one GPU block of every
    layer each: ``CPUOffloadingSpec`` in vllm/v1/kv_offload/cpu/spec.py, ``blocks_per_chunk`` 1)
    and each worker allocates one pinned CPU tensor per KV-cache tensor, i.e. per layer, of
    blocks x its page (``CPUOffloadingWorker`` in vllm/v1/kv_offload/cpu/gpu_worker.py:
    ``torch.zeros(..., pin_memory=True)``; the H200 log of benchmarks/results/h200-2026-11-29-open-loop
    says "Allocating 32 CPU tensors" for Llama-3-8B). torch's pinned allocator rounds every
    allocation up to a power of two (:func:`power_of_two_ceil`), so the engine pins more than it
    asked unless each layer's share is a power of two: 40 GiB over 32 layers is 1.25 GiB per
    layer, pinned as 2 GiB, 64 GiB in all (vLLM PR #50094 measured the same rounding: 6 GiB pinned
    as 8, 10 and 12 as 16). On a CPU-only build vLLM pins nothing and refuses to offload at start.

    Attributes:
        asked_bytes: ``--kv-offloading-size`` in bytes (0: off).
        blocks: offload blocks of ``block_size`` tokens across every layer.
        tokens: the tokens those blocks hold (blocks x block_size).
        pinned_bytes: host memory the engine's workers pin, all of them together.
        buffers: the pinned tensors (layers x tensor-parallel workers).
    """

    asked_bytes: int
    blocks: int
    tokens: int
    pinned_bytes: int
    buffers: int


def _offload_page_bytes(shape: ModelShape, *, block_size: int, kv_cache_dtype: str) -> int:
    """One layer's K and V of one block of ``block_size`` tokens, over every tensor-parallel rank."""
    return shape.kv_bytes_per_token(kv_cache_dtype) // shape.num_hidden_layers * block_size


def plan_host_offload(
    shape: ModelShape, *, size_gib: float, tensor_parallel_size: int, block_size: int, kv_cache_dtype: str
) -> HostOffload:
    """The host memory ``--kv-offloading-size size_gib`` pins for one engine (:class:`HostOffload`).

    Llama-3-8B, fp16 KV, block 16, one GPU: 16 GiB -> 8,192 blocks, 131,072 tokens, 16 GiB pinned;
    40 GiB -> 20,480 blocks, 327,680 tokens, 64 GiB pinned.
    """
    layers, tp = shape.num_hidden_layers, tensor_parallel_size
    page = _offload_page_bytes(shape, block_size=block_size, kv_cache_dtype=kv_cache_dtype)
    asked = int(size_gib * GIB)  # vLLM: kv_offloading_size * (1 << 30), then int() (vllm/config/vllm.py)
    blocks = asked // (page * layers)
    per_buffer = blocks * (page // tp)  # each rank holds its share of the KV heads
    buffers = layers * tp if blocks else 0
    return HostOffload(
        asked_bytes=asked,
        blocks=blocks,
        tokens=blocks * block_size,
        pinned_bytes=buffers * power_of_two_ceil(per_buffer),
        buffers=buffers,
    )


def largest_host_offload_gib(
    shape: ModelShape, *, available_bytes: int, tensor_parallel_size: int, block_size: int, kv_cache_dtype: str
) -> float:
    """The largest ``--kv-offloading-size`` (GiB, whole offload blocks) whose pinned memory fits
    ``available_bytes``: the largest power-of-two buffer ``2^k`` with layers x ranks x ``2^k`` <=
    ``available_bytes``, filled with whole blocks (0.0 when not even one block fits).

    Llama-3-8B on one GPU: 16.0 for anything from 16 to just under 32 GiB available.
    """
    layers, tp = shape.num_hidden_layers, tensor_parallel_size
    page = _offload_page_bytes(shape, block_size=block_size, kv_cache_dtype=kv_cache_dtype)
    per_buffer_max = available_bytes // (layers * tp)
    if per_buffer_max <= 0:
        return 0.0
    buffer = 1 << (per_buffer_max.bit_length() - 1)  # the largest power of two <= per_buffer_max
    blocks = buffer // (page // tp)
    return blocks * page * layers / GIB


@dataclass(frozen=True, slots=True)
class HostTier:
    """One instance's host memory, and what is left for KV offload per engine.

    Attributes:
        host_bytes: the instance's memory (``planning.gpu_instances``, EC2 specifications).
        os_reserve_bytes: kept for the kernel, Docker and SageMaker's agents, per instance.
        engines: vLLM engines on the instance (one per ``tensor_parallel_size`` GPUs).
        engine_process_bytes: one engine's gateway, API server and engine core, per engine.
        cpu_lora_slots: adapters vLLM keeps in host memory per engine (``--max-cpu-loras``; 0 without LoRA).
        cpu_lora_bytes: those slots' bytes, per engine.
        offload: the KV offload of one engine.
    """

    host_bytes: int
    os_reserve_bytes: int
    engines: int
    engine_process_bytes: int
    cpu_lora_slots: int
    cpu_lora_bytes: int
    offload: HostOffload

    @property
    def available_bytes(self) -> int:
        """Host memory left for one engine's offload: (host - OS) / engines - its processes - its LoRA slots."""
        per_engine = (self.host_bytes - self.os_reserve_bytes) // self.engines
        return per_engine - self.engine_process_bytes - self.cpu_lora_bytes

    @property
    def fits(self) -> bool:
        """The offload's pinned memory fits what is left (always, when offload is off)."""
        return self.offload.pinned_bytes <= self.available_bytes


def plan_host_tier(
    *,
    shape: ModelShape,
    gpus: InstanceGpus,
    engine: EngineMemoryInputs,
    kv_offloading_size_gib: float,
    cpu_lora_slots: int,
    os_reserve_bytes: int,
    engine_process_bytes: int,
) -> HostTier:
    """The host tier of ``gpus``'s instance with one engine per ``engine.tensor_parallel_size`` GPUs.

    Args:
        shape: the model.
        gpus: the instance (its ``memory_gib`` is the host memory).
        engine: the engine settings (tensor parallelism, block size, KV dtype, LoRA rank).
        kv_offloading_size_gib: ``engine.kv_offloading_size_gib`` (0: off).
        cpu_lora_slots: ``--max-cpu-loras`` as the container passes it (0 without LoRA).
        os_reserve_bytes: ``memory_plan.host_os_reserve_gib`` in bytes.
        engine_process_bytes: ``memory_plan.host_engine_process_gib`` in bytes.
    """
    return HostTier(
        host_bytes=gpus.memory_gib * GIB,
        os_reserve_bytes=os_reserve_bytes,
        engines=max(gpus.count // engine.tensor_parallel_size, 1),
        engine_process_bytes=engine_process_bytes,
        cpu_lora_slots=cpu_lora_slots,
        # An adapter in the CPU cache holds at most what one GPU slot of max_lora_rank holds.
        cpu_lora_bytes=shape.lora_slot_bytes(cpu_lora_slots, engine.max_lora_rank),
        offload=plan_host_offload(
            shape,
            size_gib=kv_offloading_size_gib,
            tensor_parallel_size=engine.tensor_parallel_size,
            block_size=engine.block_size,
            kv_cache_dtype=engine.kv_cache_dtype,
        ),
    )


def gib(value: int) -> str:
    """Bytes as GiB with two decimals, e.g. ``5.33``."""
    return f"{value / GIB:.2f}"
