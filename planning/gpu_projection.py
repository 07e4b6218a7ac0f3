"""The engine's parts on any GPU: measured where the runs were made, projected elsewhere.

The runs (``planning/engine_fit.py``) were made on an H200. On another GPU (docs/planning.md,
"GPUs never measured here"):

* prefill's GPU part scales with the card's *measured* FP16 matmul throughput, not its datasheet
  (``Gpu.matmul_tflops``; docs/sources.md, "GPU matmul throughput, measured"): the L4 is a 72 W
  card that reaches about half of its datasheet, so it prefills like an A10G, not 1.7x faster;
* a decode step keeps its floor (kernel launches, sampling: ``Fit.step_floor_ms``) and reads the
  weights and each running request's KV at the card's bandwidth (datasheet, as the floor was
  separated at the H200's datasheet bandwidth);
* the fixed part, the host's per-step work and its TTFT tail stay as measured: they are the
  4 vCPUs of an ``xlarge`` and vLLM, not the GPU. Larger sizes have more vCPUs, which this
  counts as no faster (conservative).

A projection counts as holding an SLO only with a margin: the model's error on the runs
(``Fit.model_error``) plus, for prefill, the spread of the card's published matmul measurements.
"""

from __future__ import annotations

from dataclasses import dataclass

from planning.engine_fit import KV_BYTES_PER_TOKEN, PROBE_CONTEXT_TOKENS, WEIGHTS_BYTES, Fit
from planning.engine_model import EngineParts
from planning.gpu_instances import H200, Gpu


@dataclass(frozen=True)
class ProjectedEngine:
    """One engine on ``parts.gpu``, and how far to trust it.

    Attributes:
        parts: the engine's parts.
        margin: the relative error a projected TTFT p95 is grown by before it is held against an
            SLO; 0 on the GPU the runs were made on (the issue-45 rule: a GPU never measured counts
            as holding an SLO only with a margin equal to the model's error).
        source: one line saying measured or projected, from what, with the error.
    """

    parts: EngineParts
    margin: float
    source: str


def matmul_spread(gpu: Gpu) -> float:
    """How far the card's slowest published matmul measurement is below the one used (0 if one)."""
    low, _ = gpu.matmul_tflops_range
    return max(0.0, 1 - low / gpu.matmul_tflops)


def project(fit: Fit, gpu: Gpu, kv_cache_tokens: int, *, max_num_seqs: int = 128) -> ProjectedEngine:
    """The engine on ``gpu`` with ``kv_cache_tokens`` (the memory plan's), from the fit on the reference."""
    if gpu.name == fit.gpu:
        return ProjectedEngine(
            fit.parts(kv_cache_tokens, max_num_seqs=max_num_seqs),
            0.0,
            f"model fitted on this GPU's open-loop runs ({gpu.name}; error {fit.model_error:.0%} against them)",
        )
    if fit.gpu != H200.name:
        raise ValueError(f"engine fit: reference GPU {fit.gpu!r} has no catalogue entry to project from")
    ratio = H200.matmul_tflops / gpu.matmul_tflops
    bandwidth_mb_per_ms = gpu.memory_bandwidth_gbs * 1e6
    o0, o1 = fit.step_floor_ms
    parts = EngineParts(
        gpu=gpu.name,
        kv_cache_tokens=kv_cache_tokens,
        fixed_ms=fit.fixed_ms,
        gpu_prefill_ms_per_token=fit.gpu_prefill_ms_per_token * ratio,
        host_prefill_ms_per_token=fit.host_prefill_ms_per_token,
        gpu_step_ms=(
            o0 + WEIGHTS_BYTES / bandwidth_mb_per_ms,
            o1 + PROBE_CONTEXT_TOKENS * KV_BYTES_PER_TOKEN / bandwidth_mb_per_ms,
        ),
        host_step_ms=fit.host_step_ms,
        host_wait_ms=fit.host_wait_ms,
        max_num_seqs=max_num_seqs,
        measured=False,
    )
    spread = matmul_spread(gpu)
    margin = fit.model_error + spread
    spread_text = f" + {spread:.0%} matmul spread" if spread else ""
    return ProjectedEngine(
        parts,
        margin,
        f"projected from the {fit.gpu} runs to {gpu.name} (model error {fit.model_error:.0%}{spread_text})",
    )
