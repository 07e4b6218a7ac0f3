"""The memory-plan inputs that are not vLLM flags (``memory_plan.*``); the plan itself is
:mod:`planning.engine_memory`."""

from pydantic import Field

from app_config.base import ConfigModel
from serving_contract import context_budget as budget

SAFETY_PROMPT_TOKENS = 200
"""Guardrail rules after the system prompt (seed 002 §3: ~200 tokens)."""
RECENT_TURN_TOKENS = 190
"""One recent turn of a typical conversation (seed 002 §3)."""
TYPICAL_ANSWER_TOKENS = 180
"""A typical answer (seed 003 median)."""
TYPICAL_SEQUENCE_TOKENS = (
    budget.SYSTEM.default
    + SAFETY_PROMPT_TOKENS
    + budget.RETRIEVAL.default
    + 2 * RECENT_TURN_TOKENS
    + TYPICAL_ANSWER_TOKENS
)
"""2,560: the context budget's system and retrieval shares (serving_contract.context_budget, seed 002
§5), the safety rules, two recent turns and the answer."""


class MemoryPlanConfig(ConfigModel):
    """What the memory plan assumes beyond the model shape and the engine flags."""

    runtime_overhead_gib: float = Field(
        default=1.6,
        gt=0,
        le=64,
        description=(
            "GPU memory per GPU that vLLM's start-up profile takes besides the plan's weights and LoRA slots, GiB: "
            "the activation peak of a max_num_batched_tokens forward pass, non-torch allocations and the ~0.1 GiB "
            "of model memory vLLM holds beyond the plan's weights and slots. Source: budget 20.71 - weights and "
            "LoRA 5.67 - KV cache 13.43 = 1.61 GiB, measured with vLLM 0.22.0 on an H100, Llama-3-8B shapes in "
            "AWQ, max_num_batched_tokens 8192, the engine defaults (CUDA graphs up to 64 sequences, their memory "
            "estimate off) and an empty compile cache, the slowest case (110,000 KV tokens; 112,144 with the "
            "compile cache; benchmarks/results/h100-2026-11-25-startup, docs/performance.md); grows with "
            "max_num_batched_tokens. With vLLM's CUDA-graph estimate on (engine.cudagraph_memory_estimate) add "
            "0.41 GiB cold, 1.76 GiB with a compile-cache hit."
        ),
    )
    cudagraph_estimate_gib: float = Field(
        default=0.41,
        ge=0,
        le=64,
        description=(
            "GPU memory per GPU that vLLM's CUDA-graph memory estimate takes out of the KV cache when "
            "engine.cudagraph_memory_estimate is on, GiB. Source: vLLM 0.22.0's 'Estimated CUDA graph memory' with "
            "an empty compile cache, H100, the default engine (docs/performance.md); with a compile-cache hit it "
            "estimated 1.76 GiB for the same graphs."
        ),
    )
    host_os_reserve_gib: float = Field(
        default=2.0,
        ge=0,
        le=64,
        description=(
            "Host memory per instance the serving processes cannot have, GiB: what Linux keeps out of MemTotal (its "
            "page array alone is 64 bytes per 4 KiB page, 1/64 of memory: 0.5 GiB of an ml.g6e.xlarge's 32), the "
            "Docker daemon and SageMaker's agents. A stated reserve, not measured on a SageMaker host; the memory "
            "plan's host tier subtracts it before KV offload (engine.kv_offloading_size_gib)."
        ),
    )
    host_engine_process_gib: float = Field(
        default=4.0,
        ge=0,
        le=256,
        description=(
            "Host memory of one engine's processes besides its KV offload and CPU LoRA slots, GiB: vLLM's engine "
            "core on a GPU (~3 GB = 2.8 GiB resident beyond its offload buffer, measured per GPU worker in vLLM PR "
            "#48436: '32GB + 3', '40GB + 3'), vLLM 0.26's API server (895,468 KiB = 0.85 GiB resident in the "
            "real-engine tests' CPU build with three adapters and --max-cpu-loras 3, 2026-11-29) and the gateway "
            "(52 MiB after import, without the tests' engine shim): 3.7, rounded up to 4. Counted per engine, so a "
            "data-parallel instance, whose engines share one gateway and API server, is overcounted by ~0.9 GiB per "
            "extra engine. Not measured on a SageMaker GPU host."
        ),
    )
    typical_sequence_tokens: int = Field(
        default=TYPICAL_SEQUENCE_TOKENS,
        ge=16,
        le=1048576,
        description=(
            "Prompt + answer of a typical MangaAssist request, tokens: system 400 + safety 200 + retrieval 1,400 "
            "(seed 002 §3 and §5 context budget) + two recent turns of ~190 (seed 002 §3) + a 180-token answer "
            "(seed 003 median). Sizes the concurrency an instance holds without preemption."
        ),
    )
