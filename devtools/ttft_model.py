"""TTFT of one engine as a fixed part plus a part that scales with the GPU's tensor throughput.

Fitted from the H100 runs of 2026-11-26 (benchmarks/results/h100-2026-11-26, copied from the
shared measurements), the H200 curve made beside them (benchmarks/results/h200-2026-11-25, the bandwidth check) and
the defaults' H200 runs (benchmarks/results/h200-2026-11-26-defaults). At one
request, with ``N`` uncached prompt tokens (prompt x (1 - prefix-cache hit rate)):

    TTFT_1 = F + (L x adapters + C_fmt x T_ref / T_gpu) x N

* ``F``, ms: launches, scheduling, sampling, HTTP; what a request costs whatever its length. The
  intercept of the H200's TTFT p50 at one request against ``N`` (``FIXED_REFERENCE``): fresh
  requests (~1,778 uncached tokens, 68.6 ms) and conversation follow-ups whose history is cached
  (~220 tokens, 19.7 ms), vLLM 0.26.0 with the default options.
* ``L``, ms per token: the LoRA path with the default engine options, from one engine serving
  adapters and base-only requests side by side (``LORA_DEFAULTS``, H200 2026-11-26; issue 35's
  levers and vLLM 0.26.0 cut it from the H100 runs' 20.7 us per token to 10.9). It does not move with the weight
  format's tensor throughput (LoRA runs in 16 bits over any kernel) and at one request much of it
  is CPU: 12 CPUs instead of 4 cut AWQ + adapters from 88 to 66 ms (H100, old LoRA options).
* ``C_fmt``, ms per token on the reference GPU: the base model's prefill (base-only runs minus
  ``F``), per weight format; it scales with ``T``, the GPU's dense FP16 tensor TFLOPS (AWQ-INT4
  dequantizes into FP16 tensor cores, bf16 runs on them, and FP8 W8A8's measured gain on Hopper
  is kept as measured, not the datasheet's 2x).

Under load (concurrency ``c``) the extra TTFT over one request is other requests' prefill and
LoRA work on the GPU (the 12-CPU run did not move c = 4: 237 vs 234 ms), so it scales whole:

    TTFT_c = TTFT_1 + (TTFT_ref(c) - TTFT_ref(1)) x T_ref / T_gpu

:func:`check` reports the model's error against every run it can be checked on.

Usage::

    python -m devtools.ttft_model
"""

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app_config.planning.gpu_instances import H100_80GB, H200, Gpu

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "benchmarks" / "results" / "h100-2026-11-26"
DEFAULTS_RUNS = REPO / "benchmarks" / "results" / "h200-2026-11-26-defaults"
REFERENCE = DEFAULTS_RUNS / "capacity-v026.json"
"""The H200 curve with the default engine (issue 35's LoRA levers: max_loras 3, specialised
kernels, tuned configs, prefill warm-up): the projections' reference and two of the checks."""
FIXED_REFERENCE = REFERENCE
"""Whose one-request levels give ``F``: the engine's own fixed cost, so the engine the image runs
(vLLM 0.26.0: 12.8 ms; the 2026-11-25 run of 0.22.0 gave 17.4 and the defaults' run of 0.22.0
22.5). ``C`` is the H100 base-only runs less this ``F``: 76 % of the H100's dense FP16 peak for
AWQ, a plausible prefill; ``F`` = 22.5 ms would have put it at 103 %, which no prefill reaches."""
LORA_DEFAULTS = DEFAULTS_RUNS / "lora-levers-v026.json"
"""Adapters and base-only requests on one engine with the defaults, side by side: ``L``."""
FORMATS = ("awq", "bf16", "fp8")
MODEL_PARAMETERS = 8.03e9
"""Llama-3-8B's parameters (Meta's model card), for the implied tensor utilization only."""


@dataclass(frozen=True)
class Run:
    """The one-request level of one measured engine."""

    name: str
    fmt: str
    adapters: bool
    cpus: int
    ttft_p50_ms: float
    uncached_tokens: float
    gpu: Gpu = H100_80GB


def _at_one(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The one-request level of a measured sweep (exactly one)."""
    (level,) = [row for row in rows if row["concurrency"] == 1]
    return level


def _uncached_tokens(level: dict[str, Any]) -> float:
    """A level's mean prompt less its measured prefix-cache hits: the tokens it prefilled."""
    return float(level["prompt_tokens_mean"]) * (1 - float(level["prefix_cache_hit_rate"]))


def _level_one(path: Path, key: str) -> dict[str, float]:
    level = _at_one(json.loads(path.read_text())["configs"][key]["fresh"])
    return {name: float(value) for name, value in level.items() if isinstance(value, int | float)}


def load_runs(folder: Path = RUNS) -> list[Run]:
    """Every H100 run at one request (``fresh``), named by file and engine."""
    specs = [
        ("quant-awq-fp8-lora.json", "awq", "awq", True, 4),
        ("quant-awq-fp8-lora.json", "fp8", "fp8", True, 4),
        ("bf16-lora.json", "bf16", "bf16", True, 4),
        ("awq-base-requests.json", "awq", "awq", False, 4),
        ("base-only-fp8-awq.json", "awq", "awq", False, 4),
        ("base-only-fp8-awq.json", "fp8", "fp8", False, 4),
        ("base-only-bf16.json", "bf16", "bf16", False, 4),
        ("awq-lora-12cpus.json", "awq", "awq", True, 12),
    ]
    runs = []
    for file, key, fmt, adapters, cpus in specs:
        level = _level_one(folder / file, key)
        runs.append(Run(f"{file}:{key}", fmt, adapters, cpus, float(level["ttft_p50_ms"]), _uncached_tokens(level)))
    return runs


@dataclass(frozen=True)
class TtftFit:
    """The fitted parts (module docstring); per-token figures are ms per uncached token."""

    fixed_ms: float
    lora_ms_per_token: float
    compute_ms_per_token: dict[str, float]
    reference_gpu: Gpu

    def one_request_ms(self, gpu: Gpu, fmt: str, adapters: bool, uncached_tokens: float) -> float:
        """TTFT at one request on ``gpu``, ms."""
        compute = self.compute_ms_per_token[fmt] * self.reference_gpu.dense_fp16_tflops / gpu.dense_fp16_tflops
        lora = self.lora_ms_per_token if adapters else 0.0
        return self.fixed_ms + (lora + compute) * uncached_tokens

    def compute_share(self, fmt: str, adapters: bool, uncached_tokens: float) -> float:
        """The share of the reference GPU's one-request TTFT that scales with tensor throughput."""
        total = self.one_request_ms(self.reference_gpu, fmt, adapters, uncached_tokens)
        return self.compute_ms_per_token[fmt] * uncached_tokens / total


def fixed_part_ms(reference: Path = FIXED_REFERENCE) -> tuple[float, float, float]:
    """``(F, fresh tokens, follow-up tokens)`` from the reference's one-request levels.

    Follow-ups carry the last answer and the new user turn uncached (180 + 40 tokens at the
    measured shape); fresh requests their whole prompt less the measured prefix-cache hits.
    """
    data = json.loads(reference.read_text())
    shape = data["shape"]
    fresh, conversation = _at_one(data["fresh"]), _at_one(data["conversations"])
    fresh_tokens = _uncached_tokens(fresh)
    follow_tokens = float(shape["output_tokens"] + shape["turn_tokens"])
    fresh_ms, follow_ms = float(fresh["ttft_p50_ms"]), float(conversation["follow_up_ttft_p50_ms"])
    slope = (fresh_ms - follow_ms) / (fresh_tokens - follow_tokens)
    return follow_ms - slope * follow_tokens, fresh_tokens, follow_tokens


def lora_part_ms_per_token(fixed_ms: float, path: Path = LORA_DEFAULTS) -> float:
    """``L`` from one engine's one-request levels with adapters and with base-only requests:
    ``(TTFT_adapters - F) / N_adapters - (TTFT_base - F) / N_base``, ms per uncached token."""
    (config,) = json.loads(path.read_text())["configs"].values()
    per_token = []
    for key in ("adapters", "base_only"):
        level = _at_one(config[key])
        per_token.append((float(level["ttft_p50_ms"]) - fixed_ms) / _uncached_tokens(level))
    return per_token[0] - per_token[1]


def fit(runs: list[Run], fixed_ms: float, lora_ms_per_token: float | None = None) -> TtftFit:
    """``C_fmt`` from the base-only runs on 4 CPUs; ``L`` as given, else adapters minus base per
    format (the H100 runs, made with the LoRA options before issue 35)."""
    base = [r for r in runs if not r.adapters and r.cpus == 4]
    compute = {
        fmt: sum((r.ttft_p50_ms - fixed_ms) / r.uncached_tokens for r in base if r.fmt == fmt)
        / sum(1 for r in base if r.fmt == fmt)
        for fmt in FORMATS
    }
    if lora_ms_per_token is None:
        lora = [
            (r.ttft_p50_ms - fixed_ms) / r.uncached_tokens - compute[r.fmt] for r in runs if r.adapters and r.cpus == 4
        ]
        lora_ms_per_token = sum(lora) / len(lora)
    return TtftFit(fixed_ms, lora_ms_per_token, compute, H100_80GB)


def check(model: TtftFit, runs: list[Run], reference: Path = REFERENCE) -> list[tuple[str, float, float]]:
    """``(what, predicted ms, measured ms)`` for every run the model can be checked on: the H100
    runs (including the 12-CPU one, which the model has no term for) and the H200's one-request
    levels (same dense FP16 throughput as the H100, so the model predicts the H100's figure)."""
    rows = [
        (
            f"H100 {r.name} ({'adapters, LoRA options before issue 35' if r.adapters else 'base'}, {r.cpus} CPUs, "
            f"{r.uncached_tokens:,.0f} tok)",
            model.one_request_ms(r.gpu, r.fmt, r.adapters, r.uncached_tokens),
            r.ttft_p50_ms,
        )
        for r in runs
    ]
    _, fresh_tokens, follow_tokens = fixed_part_ms(reference)  # the reference's token counts
    data = json.loads(reference.read_text())
    fresh, conversation = _at_one(data["fresh"]), _at_one(data["conversations"])
    rows.append(
        (
            f"H200 fresh, AWQ + adapters ({fresh_tokens:,.0f} tok)",
            model.one_request_ms(H200, "awq", True, fresh_tokens),
            float(fresh["ttft_p50_ms"]),
        )
    )
    rows.append(
        (
            f"H200 follow-up with history cached ({follow_tokens:,.0f} tok)",
            model.one_request_ms(H200, "awq", True, follow_tokens),
            float(conversation["follow_up_ttft_p50_ms"]),
        )
    )
    return rows


def default_fit() -> TtftFit:
    """The fit of the committed measurements."""
    fixed, _, _ = fixed_part_ms()
    return fit(load_runs(), fixed, lora_part_ms_per_token(fixed))


def report(model: TtftFit, runs: list[Run]) -> list[str]:
    """The fitted parts, the implied tensor utilization and the error against every run."""
    lines = [
        f"fixed part F = {model.fixed_ms:.1f} ms (launches, scheduling, HTTP; H200 fresh vs follow-up intercept)",
        f"LoRA part L = {model.lora_ms_per_token * 1000:.1f} us per uncached token (adapters minus base-only "
        f"requests on one engine with the default LoRA options, {LORA_DEFAULTS.relative_to(REPO)})",
    ]
    for fmt in FORMATS:
        per_token = model.compute_ms_per_token[fmt]
        tflops = 2 * MODEL_PARAMETERS / (per_token / 1000) / 1e12
        lines.append(
            f"compute part C_{fmt} = {per_token * 1000:.1f} us per uncached token on the H100 "
            f"(= {tflops:,.0f} TFLOPS of 2 x 8B x tokens, {tflops / model.reference_gpu.dense_fp16_tflops:.0%} of its "
            f"dense FP16 {model.reference_gpu.dense_fp16_tflops:g})"
        )
    lines.append(
        "  (dense GEMMs rarely pass ~70-80 % of peak in a prefill, so part of F or L is likely compute too: on a "
        "slower GPU the projected TTFT is then a floor; ops load measures the real instance type)"
    )
    lines.append("error against every run it can be checked on (TTFT p50 at one request):")
    for what, predicted, measured in check(model, runs):
        lines.append(f"  {what:<78} {predicted:6.1f} vs {measured:6.1f} ms ({predicted / measured - 1:+.0%})")
    return lines


def main() -> int:
    runs = load_runs()
    print("\n".join(report(default_fit(), runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
