"""The host KV offload runs (issue 56) side by side with the same engine without the host tier, for
docs/performance.md (``generated:offload-runs``, written by ``make docs`` through
devtools/doc_figures.py).

Each pair ran on one H200 with the same L40S-sized GPU KV cache (280,176 tokens), the same 2 cores
behind the gateway (an ml.g6e.xlarge's), the same pause, rates and seed, so a step of one meets the
same arrivals as the same step of the other: the table compares them step by step. The figures are
the harness's own (``cli_support.open_loop.summarise_step``, the verdict rule of
``cli_support.open_loop.Verdict``); nothing here is fitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cdk_constructs.capacity_job.runtime.sweep import COUNTERS, GAUGES
from cli_support.open_loop import StepSummary, verdict
from planning.engine_fit import RESULTS, RUN_SLO_MS, load_runs

OFFLOAD_PAIRS = (
    (
        "h200-2026-11-29-open-loop/ramp-think30-l40s-kv-gateway.json",
        "h200-2026-11-29b-open-loop/ramp-think30-l40s-kv-gateway-offload40.json",
        40,
    ),
    (
        "h200-2026-11-29b-open-loop/ramp-think60-l40s-kv-gateway.json",
        "h200-2026-11-29b-open-loop/ramp-think60-l40s-kv-gateway-offload40.json",
        40,
    ),
)
"""``(without the host tier, with it, host GiB)``: result files under benchmarks/results/."""


@dataclass(frozen=True)
class Ramp:
    """One committed ramp, summarised with the engine's gauges and counters."""

    think_s: float
    summaries: list[StepSummary]
    holds_per_min: float | None
    fails_per_min: float | None
    steps_held: int


def load(name: str, root: Path = RESULTS) -> Ramp:
    """The ramp in ``root/name`` as the harness summarises it (``engine_fit.load_runs``, with every gauge
    and counter the sweep reads) and judges it (the runs' objective, ``engine_fit.RUN_SLO_MS``)."""
    [run] = load_runs((name,), root, gauges=GAUGES, counters=COUNTERS)
    judged = verdict(run.summaries, RUN_SLO_MS)
    return Ramp(
        run.think_s,
        run.summaries,
        judged.holds_achieved_per_min["both"],
        judged.fails_achieved_per_min,
        judged.steps_held,
    )


def host_hit_share(summary: StepSummary) -> float | None:
    """Of the prefix lookups the GPU cache missed, the share the host tier answered (vLLM's
    ``external_prefix_cache_hits`` over ``external_prefix_cache_queries``, in tokens); None without them."""
    queries = summary.engine.get("external_prefix_queries_delta")
    hits = summary.engine.get("external_prefix_hits_delta")
    return None if not queries or hits is None else hits / queries


def _step(summary: StepSummary, held: bool) -> str:
    cold, warm = summary.classes["cold"].ttft_p95_ms, summary.classes["warm"].ttft_p95_ms
    itl = "-" if summary.itl_mean_ms is None else f"{summary.itl_mean_ms:.0f}"
    return (
        f"{summary.arrived_per_min:,.0f}, {summary.cold_share:.0%}, {_figure(cold)} / {_figure(warm)}, {itl}, "
        f"{'yes' if held else 'no'}"
    )


def _figure(value: float | None) -> str:
    """A rate or a latency, whole and with thousands separators; ``-`` where there is none."""
    return "-" if value is None else f"{value:,.0f}"


def table(pairs: tuple[tuple[str, str, int], ...] = OFFLOAD_PAIRS, root: Path = RESULTS) -> str:
    """Per pair and offered rate: arrived, cold share, TTFT p95 per class, ITL and held, without and
    with the host tier, and the host tier's hit share; then each ramp's verdict (achieved req/min)."""
    rows = [
        "| pause | offered /min | without: arrived /min, cold share, TTFT p95 cold / warm ms, ITL ms, held | "
        "with host offload: arrived, cold share, TTFT p95 cold / warm, ITL, held | host hits |",
        "|---:|---:|---|---|---:|",
    ]
    verdicts = []
    for bare_name, offload_name, gib in pairs:
        bare, offload = load(bare_name, root), load(offload_name, root)
        by_rate = {round(s.requests_per_min): (i, s) for i, s in enumerate(bare.summaries)}
        for index, summary in enumerate(offload.summaries):
            match = by_rate.get(round(summary.requests_per_min))
            without = "-, -, -, -, -" if match is None else _step(match[1], match[0] < bare.steps_held)
            hits = host_hit_share(summary)
            rows.append(
                f"| {offload.think_s:g} s | {summary.requests_per_min:,.0f} | {without} | "
                f"{_step(summary, index < offload.steps_held)} | "
                f"{'-' if hits is None else f'{hits:.0%}'} |"
            )
        verdicts.append(
            f"* {offload.think_s:g} s pause: without the host tier holds {_figure(bare.holds_per_min)} (fails at "
            f"{_figure(bare.fails_per_min)}); with {gib} GiB holds {_figure(offload.holds_per_min)} (fails at "
            f"{_figure(offload.fails_per_min)}), achieved requests/min"
        )
    return "\n".join([*rows, "", *verdicts])
