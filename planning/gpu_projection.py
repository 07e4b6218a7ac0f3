"""The engine's parts on any GPU: measured where the runs were made, projected elsewhere.

The runs (``planning/engine_fit.py``) were made on an H200. On another GPU (docs/planning.md,
"GPUs never measured here"):

* prefill's GPU part scales with the card's *measured* FP16 matmul throughput, not its datasheet
  (``Gpu.matmul_tflops``; docs/sources.md, "GPU matmul throughput, measured"): the L4 is a 72 W
  card that reaches about half of its datasheet, so it prefills like an A10G, not 1.7x faster;
* a decode step keeps its floor (kernel launches, sampling: ``Fit.step_floor_ms``) and reads the
  weights and each running request's KV at the card's bandwidth (datasheet, as the floor was
  separated at the H200's datasheet bandwidth);
* the fixed part, the host's per-step work and its TTFT tail are the host's, not the GPU's: they
  are carried over as measured, the per-request part scaled to the instance's cores and the
  gateway that shares them (``engine_model.host_scale``).

Every figure carries a margin, on the reference GPU too: the model's largest error on a run it was
not fitted on (``Fit.model_error``), plus for another GPU the spread of its published matmul
measurements, or :data:`SINGLE_SOURCE_SPREAD` where only one source gives it. The margin divides
the rate the model holds (``engine_model.capacity``).
"""

from __future__ import annotations

from dataclasses import dataclass

from planning.engine_fit import KV_BYTES_PER_TOKEN, PROBE_CONTEXT_TOKENS, WEIGHTS_BYTES, Fit
from planning.engine_model import EngineParts
from planning.gpu_instances import H200, Gpu

SINGLE_SOURCE_SPREAD = 0.13
"""The spread counted for a card whose matmul throughput one source gives (A10G, L40S, A100 40 GB):
the widest spread among the cards two sources measure (the L4: 53-69 TFLOPS around the 61 used,
13 % below it; docs/sources.md, "GPU matmul throughput, measured"), until a second source agrees."""


@dataclass(frozen=True)
class ProjectedEngine:
    """One engine on ``parts.gpu``, and how far to trust it.

    Attributes:
        parts: the engine's parts.
        margin: how far the model may be off here, a fraction: its held-out error, plus the card's
            matmul spread on a GPU the runs were not made on. ``engine_model.capacity`` divides the
            holding rate by ``1 + margin`` (and grows the TTFT p95 by it).
        source: one line saying measured or projected, from what, with the error.
    """

    parts: EngineParts
    margin: float
    source: str


def matmul_spread(gpu: Gpu) -> float:
    """How far the card's slowest published matmul measurement is below the one used;
    :data:`SINGLE_SOURCE_SPREAD` when one source gives it."""
    low, high = gpu.matmul_tflops_range
    if low == high:
        return SINGLE_SOURCE_SPREAD
    return max(0.0, 1 - low / gpu.matmul_tflops)


def project(
    fit: Fit, gpu: Gpu, kv_cache_tokens: int, *, max_num_seqs: int = 128, host_scale: float = 1.0
) -> ProjectedEngine:
    """The engine on ``gpu`` with ``kv_cache_tokens`` (the memory plan's) on a host ``host_scale``
    times the runs' (``engine_model.host_scale``), from the fit on the reference."""
    if gpu.name == fit.gpu:
        return ProjectedEngine(
            fit.parts(kv_cache_tokens, max_num_seqs=max_num_seqs, host_scale=host_scale),
            fit.model_error,
            f"model fitted on this GPU's open-loop runs ({gpu.name}; held-out error {fit.model_error:.0%})",
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
        host_scale=host_scale,
        prefill_interference=fit.prefill_interference,
    )
    spread = matmul_spread(gpu)
    margin = fit.model_error + spread
    low, high = gpu.matmul_tflops_range
    kind = "one source's matmul figure" if low == high else "matmul spread"
    return ProjectedEngine(
        parts,
        margin,
        f"projected from the {fit.gpu} runs to {gpu.name} (held-out error {fit.model_error:.0%} + {spread:.0%} {kind})",
    )
