"""docs/scaling.md's cost and simulation figures, and docs/img/scaling-week.png, from the tools.

The blocks ``generated:cost`` and ``generated:simulation`` are what ``python -m planning.cost_plan``
and ``python -m planning.scaling_sim`` print for the committed ``cdk.json``; ``devtools/doc_figures.py``
writes them with every other generated figure (``make docs``). This module makes their text and the
week's PNG, which carries a digest of the run it draws in its ``Source-Digest`` text chunk, so a
check needs no pixel comparison (matplotlib's rendering differs between versions; the run does not).

Usage: ``python -m devtools.scaling_doc [--check]`` writes (or checks) the PNG.
"""

import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from app_config import AppConfig
from app_config.serving import ServingConfig
from planning import cost_plan
from planning.make_plan import load_plan
from planning.plan import Plan
from planning.scaling_sim import __main__ as sim
from planning.scaling_sim import engine, report, surge
from serving_contract.env import start_up_ranges

REPO = Path(__file__).resolve().parent.parent
SCALING_DOC = REPO / "docs" / "scaling.md"
WEEK_PNG = REPO / "docs" / "img" / "scaling-week.png"
DIGEST_KEY = "Source-Digest"

COMPARE_OVERRIDE = "scaling.primary.release_lead_time_min=180"
"""The override whose ``--compare`` the cost section shows (a 3 h lead instead of 2 h)."""

SURGE_ARGS = ("--scenario", "surge", "--instance-rpm", "280", "-c", "traffic.peak_requests_per_minute=8000")
"""The surge row: seed 001's volume with an H200-measured instance (279.7 req/min at the TTFT SLO,
benchmarks/results/h200-2026-11-25/capacity.json ``fresh_at_slo``), as tests/unit/planning/test_scaling_sim_surge.py."""


@dataclass(frozen=True)
class Run:
    """One simulation run as the CLI makes it."""

    args: tuple[str, ...]
    summary: report.Summary
    records: list[engine.MinuteRecord]
    events: list[tuple[str, int]]
    title: str
    surge: surge.SurgeWindow | None


def simulate(args: Sequence[str]) -> Run:
    """``python -m planning.scaling_sim ARGS``'s run, in-process (its own loader and defaults)."""
    parsed = sim.parse_args(list(args))
    config, plan = load_plan(parsed.context)
    title = f"Scaling simulation of {config.endpoint_name} (stage {config.stage}), {config.scaling.timezone}"
    summary, records, events = sim.simulate(sim.with_surge(sim.build_scenario(parsed, config, plan), parsed), title)
    window = surge.window(records, parsed.surge_at) if parsed.scenario == "surge" else None
    return Run(tuple(args), summary, records, events, title, window)


def cost_block(config: AppConfig, plan: Plan) -> list[str]:
    """The cost table and the ``--compare`` hours of ``python -m planning.cost_plan``."""
    plans = cost_plan.plan(config, plan)
    lines = [
        "| Variant | Instance type, $/h | Floor instance-hours a week | Ceiling | On-demand band a month |",
        "|---|---|---|---|---|",
    ]
    for p in plans:
        low, high = p.monthly_cost_band_usd
        lines.append(
            f"| {p.variant_name} | {p.instance_type}, ${p.price_usd_per_hour:.4f} | {p.floor_hours_per_week:,.2f} | "
            f"{p.ceiling_hours_per_week:,.2f} | ${low:,.2f} .. ${high:,.2f} |"
        )
    if len(plans) > 1:
        low = sum(p.monthly_cost_band_usd[0] for p in plans)
        high = sum(p.monthly_cost_band_usd[1] for p in plans)
        lines.append(f"| endpoint | | | | ${low:,.2f} .. ${high:,.2f} |")
    changed = cost_plan.plan(*load_plan([COMPARE_OVERRIDE]))
    comparison = cost_plan.format_comparison(plans, changed).splitlines()
    primary = comparison[comparison.index(f"== {plans[0].variant_name} ==") + 1 :]
    floor_line = next(line for line in primary if line.strip().startswith("floor hours/week:"))
    hours = [line.strip() for line in primary if line.startswith("    ")]
    lines += [
        "",
        f"`python -m planning.cost_plan --compare -c {COMPARE_OVERRIDE}` (a 3 h lead):",
        "",
        "```",
        floor_line.strip(),
        *hours,
        "```",
    ]
    return lines


def _row(label: str, runs: Sequence[Run], value: Callable[[Run], str]) -> str:
    return f"| {label} | " + " | ".join(value(run) for run in runs) + " |"


def simulation_block(serving: ServingConfig, runs: Sequence[Run]) -> list[str]:
    """The simulation table (one column per run) and the default run's inputs."""
    cold, cached = start_up_ranges()
    default = runs[0]
    inputs = [line for line in default.summary.inputs if line.startswith(("per instance:", "launch:", "clients"))]
    lines = [
        "| Figure | " + " | ".join(f"`{' '.join(run.args) or '(no arguments)'}`" for run in runs) + " |",
        "|---|" + "---|" * len(runs),
        _row(
            "minutes with a queue / above the TTFT SLO",
            runs,
            lambda r: f"{r.summary.queue_minutes:,} / {r.summary.slo_minutes:,}",
        ),
        _row("peak queue (requests)", runs, lambda r: f"{r.summary.peak_queue:,.0f}"),
        _row("abandoned requests", runs, lambda r: f"{r.summary.abandoned:,.0f} ({r.summary.abandoned_share:.2%})"),
        _row("peak instances InService", runs, lambda r: f"{r.summary.peak_in_service}"),
        _row("instance-hours a week", runs, lambda r: f"{r.summary.instance_hours:,.1f}"),
        _row("monthly cost (USD)", runs, lambda r: f"{r.summary.monthly_cost_usd:,.2f}"),
        _row("scale-ins at full load", runs, lambda r: f"{r.summary.scale_ins_at_full_load}"),
        _row(
            "surge window: queue minutes, peak queue",
            runs,
            lambda r: f"{r.surge.queue_minutes:,}, {r.surge.peak_queue:,.0f}" if r.surge else "",
        ),
        "",
        f"Default inputs (`python -m planning.scaling_sim`, {serving.primary.instance_type}):",
        "",
        *(f"- {line}" for line in inputs),
        f"- measured start-up: {cold} cold, {cached} from the compile cache (H100 on 4 CPUs, "
        "serving_contract/env.py; [performance.md](performance.md))",
    ]
    return lines


def run_digest(run: Run) -> str:
    """sha256 of what the plot draws: every minute's demand, served, queue, abandoned and fleet."""
    rows = [
        (round(r.demand, 3), round(r.served, 3), round(r.queued, 3), round(r.abandoned, 3), r.desired, r.in_service,
         r.min_capacity, r.max_capacity)
        for r in run.records
    ]  # fmt: skip
    payload = json.dumps({"title": run.title, "events": run.events, "rows": rows}, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def png_digest(path: Path) -> str | None:
    """The ``Source-Digest`` text chunk of a PNG written by :func:`main`, or None."""
    from PIL import Image  # noqa: PLC0415 - pillow comes with matplotlib, a dev dependency

    with Image.open(path) as image:
        return image.info.get(DIGEST_KEY)


def runs() -> list[Run]:
    """The default week, an unforeseen 1.5x week and the surge (the table's columns)."""
    return [simulate(()), simulate(("--demand-scale", "1.5")), simulate(SURGE_ARGS)]


@cache
def cached_runs() -> tuple[Run, ...]:
    """:func:`runs`, made once per process (the docs' blocks and the PNG read the same runs)."""
    return tuple(runs())


def main(argv: Sequence[str]) -> int:
    found = cached_runs()
    digest = run_digest(found[0])
    if "--check" in argv:
        if not WEEK_PNG.exists() or png_digest(WEEK_PNG) != digest:
            print(f"{WEEK_PNG} is stale: run make docs", file=sys.stderr)
            return 1
        return 0
    from planning.scaling_sim import plot  # noqa: PLC0415 - matplotlib only when writing

    plot.write_png(found[0].records, found[0].events, WEEK_PNG, found[0].title, metadata={DIGEST_KEY: digest})
    print(f"wrote {WEEK_PNG}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
