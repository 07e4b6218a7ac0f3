"""Per-instance throughput at the TTFT SLO: the one figure that sizes the fleet.

"Throughput at the SLO" is one of the three things the project once called capacity; the others
are a variant's fleet bounds (``min_capacity``/``max_capacity``, ``app_config.topology.FleetBounds``)
and the weekly plan of those bounds (:mod:`app_config.planning.weekly_plan`).

The concurrency target of target tracking, the scaling simulation's requests per minute and
base TTFT, the capacity plan's cost per million requests and ``ops load``'s suggestion all read
:func:`throughput_at_slo`. Its source, in order:

1. ``capacity.measured.<instance type>``: what ``python -m ops load`` measured in the account
   (it prints the override); a measurement on the real instance type beats any model.
2. The projection in ``instance_capacity.json``: one engine's load curve measured on a GPU at
   MangaAssist's request shape (benchmarks/results/h200-2026-11-25/capacity.json: ~2,396 prompt
   tokens of which 600 are the shared system prefix, 180 output tokens, 4.2 turns per
   conversation) carried to the instance type's GPU by the model in
   ``devtools/capacity_model.py`` (``make capacity`` regenerates it; docs/performance.md).

Seed 001's "~1,200 requests/minute" per ml.g5.xlarge is not used: measured at the request shape,
a whole H100 completes ~250-280 requests a minute within a 500 ms TTFT p95.
"""

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from app_config.planning.gpu_instances import instance_gpus
from app_config.throughput_config import ThroughputConfig
from serving_contract.request_classes import RequestClass

PROJECTION = Path(__file__).with_name("instance_capacity.json")

CURVES: dict[str, str] = {
    "least_outstanding": "fresh",
    "session_affinity": "conversations",
    "prefix_aware": "conversations",
}
"""Routing -> measured curve. Behind least-outstanding routing a follow-up turn lands on the
instance holding its conversation's prefix about 1/N of the time, so requests reuse only the
shared system prefix (the ``fresh`` curve, ~25 % prefix-cache hits); with SageMaker stateful
sessions, or SageMaker's prefix-aware routing (requests sharing their first PrefixLength bytes go
to one instance until it holds ConcurrencyThreshold in flight, which the stack sets at this
capacity), every turn of a conversation reaches one engine (``conversations``, ~80 % hits).
With several data-parallel engines in one instance, vLLM's own balancer sends a follow-up to the
engine with its history about 1/N of the time, so those instances read the ``fresh`` curve."""


def row_at_slos(rows: list[dict[str, Any]], cold_p95_ms: float, warm_p95_ms: float) -> tuple[dict[str, Any], bool]:
    """The highest-concurrency row whose first turns hold ``cold_p95_ms`` and follow-ups
    ``warm_p95_ms`` (TTFT p95, ms), and True; or the lowest-concurrency row and False when none does.

    A row without class columns (an older projection) is judged on its ``ttft_p95_ms``.
    """
    holding = [
        row
        for row in rows
        if row.get("cold_ttft_p95_ms", row["ttft_p95_ms"]) <= cold_p95_ms
        and row.get("warm_ttft_p95_ms", row["ttft_p95_ms"]) <= warm_p95_ms
    ]
    if holding:
        return max(holding, key=lambda r: r["concurrency"]), True
    return min(rows, key=lambda r: r["concurrency"]), False


CURVE_CLASSES: dict[str, RequestClass] = {"fresh": RequestClass.COLD, "conversations": RequestClass.WARM}
"""Curve -> the request class whose SLO it is judged by: ``fresh`` requests reuse only the shared
system prefix, as a conversation's first turn does (cold); ``conversations`` is the curve with the
history in the prefix cache (warm). The conversations curve mixes in the first turns (~24 % of its
requests), so it overstates a warm request's TTFT: a conservative projection for warm."""
CLASS_CURVES: dict[RequestClass, str] = {klass: curve for curve, klass in CURVE_CLASSES.items()}


@dataclass(frozen=True)
class ThroughputAtSlo:
    """One instance's throughput at the TTFT SLO.

    Attributes:
        instance_type: e.g. ``ml.g5.xlarge``.
        concurrency: concurrent requests per instance at the SLO (>= 1).
        requests_per_minute: requests one instance completes per minute at ``concurrency``.
        base_ttft_ms: TTFT p50 at one concurrent request, ms.
        holds_slo: False when even one concurrent request misses the SLO; the other figures are
            then those of one concurrent request, the lowest TTFT the instance offers.
        source: where the figures come from, for reports.
        ttft_p95_ms: the projected TTFT p95 at ``concurrency``, ms; None for a measurement
            (``ops load`` gives the concurrency at the SLO, not the curve).
        curve: the projected curve read (``fresh`` or ``conversations``); None for a measurement.
    """

    instance_type: str
    concurrency: int
    requests_per_minute: float
    base_ttft_ms: float
    holds_slo: bool
    source: str
    ttft_p95_ms: float | None = None
    curve: str | None = None


@cache
def projection() -> dict[str, Any]:
    """``instance_capacity.json``, parsed once."""
    data: dict[str, Any] = json.loads(PROJECTION.read_text())
    return data


def throughput_at_slo(
    instance_type: str,
    slo_ms: float,
    config: ThroughputConfig,
    engines: int = 1,
    warm_slo_ms: float | None = None,
    *,
    curve: str | None = None,
) -> ThroughputAtSlo:
    """The capacity of one ``instance_type`` instance where first turns hold TTFT p95 <= ``slo_ms``
    and follow-up turns <= ``warm_slo_ms`` (default: ``slo_ms``), on the routing's curve.

    ``curve`` (``fresh`` or ``conversations``) judges one class on its own curve instead: first turns
    (cold) on ``fresh``, follow-ups (warm) on ``conversations``, against ``slo_ms`` alone
    (``app_config.planning.slo_holds``). A projection is one engine's; ``engines`` (data-parallel engines per
    instance, ``gpu_instances.engines_per_instance``) multiplies its concurrency and requests per
    minute, each engine serving on GPUs of its own. A measurement (``capacity.measured``) is the whole
    instance's already, and one figure for every curve.

    Raises:
        ValueError: the instance type's GPU has no projection (one line naming it).
    """
    measured = config.measured.get(instance_type)
    if measured is not None:
        return ThroughputAtSlo(
            instance_type,
            measured.concurrency,
            measured.requests_per_minute,
            measured.ttft_p50_ms,
            measured.ttft_p50_ms <= slo_ms,
            f"capacity.measured.{instance_type} (ops load)",
        )
    gpu = instance_gpus(instance_type).gpu
    curves = projection()["gpus"].get(gpu.name)
    if curves is None:
        raise ValueError(f"{instance_type}: no capacity projection for its GPU {gpu.name} (make capacity)")
    mode = curve or (CURVES[config.routing] if engines == 1 else "fresh")
    rows = curves[mode]
    if curve is None:
        row, holds = row_at_slos(rows, slo_ms, slo_ms if warm_slo_ms is None else warm_slo_ms)
        ttft_p95_ms = float(row["ttft_p95_ms"])
    else:  # one class, on its own curve, by its own column where the projection carries one
        column = f"{CURVE_CLASSES[curve]}_ttft_p95_ms"
        holding = [r for r in rows if r.get(column, r["ttft_p95_ms"]) <= slo_ms]
        row = max(holding, key=lambda r: r["concurrency"]) if holding else min(rows, key=lambda r: r["concurrency"])
        holds, ttft_p95_ms = bool(holding), float(row.get(column, row["ttft_p95_ms"]))
    per_engine = "" if engines == 1 else f" x {engines} engines"
    return ThroughputAtSlo(
        instance_type,
        int(row["concurrency"]) * engines,
        float(row["requests_per_minute"]) * engines,
        float(rows[0]["ttft_p50_ms"]),
        holds,
        f"projected from {projection()['reference']} to {gpu.name} ({mode} curve, devtools/capacity_model.py)"
        + per_engine,
        ttft_p95_ms,
        mode,
    )
