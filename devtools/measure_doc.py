"""docs/planning.md's "Measure before you buy" figures: what a capacity job costs, and how a measured
curve changes the plan (a planted curve, docs/examples/planted-g6-xlarge-curve.json: the shape the
capacity job writes, with made-up numbers, so the section shows the mechanism before anyone ran a job).

Registered in devtools/doc_figures.py's BLOCKS; ``make docs`` writes them, its ``--check`` compares.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app_config.loader import load_cli_config
from ops.measure.job import cost_bound
from planning import fleet_planner
from planning.make_plan import load_plan

REPO = Path(__file__).resolve().parents[1]
PLANTED = REPO / "docs" / "examples" / "planted-g6-xlarge-curve.json"
"""A curve in the capacity job's format whose numbers are invented (its job says so): an L4 that holds
both SLOs, which the engine model projects it cannot."""
COST_TYPES = ("ml.g6.xlarge", "ml.g6e.xlarge", "ml.g5.xlarge")


def planted_curve() -> dict[str, Any]:
    """The planted curve (module docstring)."""
    data: dict[str, Any] = json.loads(PLANTED.read_text())
    return data


def planted_override() -> str:
    """``throughput.measured=...`` with the planted curve, as ``make plan ARGS="-c ..."`` takes it."""
    curve = planted_curve()
    return f"throughput.measured={json.dumps({curve['instance_type']: curve}, separators=(',', ':'))}"


def _recommendation(overrides: list[str]) -> list[str]:
    """make plan's recommendation and its row, under ``overrides``."""
    config, plan = load_plan(overrides)
    slo = config.slo
    text = fleet_planner.format_planner(config, plan, slo.cold.ttft_p95_ms, slo.warm.ttft_p95_ms, runners_up=0)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Recommendation: "))
    return lines[start : start + 3]


def plan_change_block() -> str:
    """``make plan``'s recommendation on the projections, then with the planted curve."""
    return "\n".join(
        [
            "```",
            "$ make plan",
            *_recommendation([]),
            "",
            '$ make plan ARGS=\'-c throughput.measured={"ml.g6.xlarge": '
            "<docs/examples/planted-g6-xlarge-curve.json>}'",
            *_recommendation([planted_override()]),
            "```",
        ]
    )


def cost_block() -> str:
    """What ``ops throughput measure`` prints before it starts anything, for a few types."""
    config = load_cli_config([])
    return "\n".join(["```", *(f"  {cost_bound(config, t).line}" for t in COST_TYPES), "```"])
