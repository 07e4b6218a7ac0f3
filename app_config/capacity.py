"""Per-instance capacity at the TTFT SLO: the one figure that sizes the fleet.

The concurrency target of target tracking, the scaling simulation's requests per minute and
base TTFT, the capacity plan's cost per million requests and ``ops load``'s suggestion all read
:func:`instance_capacity`. Its source, in order:

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
from typing import Any, Literal

from pydantic import Field

from app_config.base import ConfigModel
from app_config.gpu_instances import instance_gpus
from serving_contract.request_classes import RequestClass

PROJECTION = Path(__file__).with_name("instance_capacity.json")

CURVES: dict[str, str] = {"least_outstanding": "fresh", "session_affinity": "conversations"}
"""Routing -> measured curve. Behind least-outstanding routing a follow-up turn lands on the
instance holding its conversation's prefix about 1/N of the time, so requests reuse only the
shared system prefix (the ``fresh`` curve, ~25 % prefix-cache hits); with SageMaker stateful
sessions every turn of a conversation reaches one engine (``conversations``, ~80 % hits)."""

CURVE_CLASSES: dict[str, RequestClass] = {"fresh": RequestClass.COLD, "conversations": RequestClass.WARM}
"""Curve -> the request class whose SLO it is judged by: ``fresh`` requests reuse only the shared
system prefix, as a conversation's first turn does (cold); ``conversations`` is the curve with the
history in the prefix cache (warm). The conversations curve mixes in the first turns (~24 % of its
requests), so it overstates a warm request's TTFT: a conservative projection for warm."""
CLASS_CURVES: dict[RequestClass, str] = {klass: curve for curve, klass in CURVE_CLASSES.items()}


class MeasuredCapacity(ConfigModel):
    """One instance type's capacity at the SLO, as ``python -m ops load`` measured it."""

    concurrency: int = Field(ge=1, le=1024, description="Concurrent requests per instance at the SLO.")
    requests_per_minute: float = Field(gt=0, le=100000, description="Requests completed per minute at that level.")
    ttft_p50_ms: float = Field(gt=0, le=60000, description="TTFT p50 at one concurrent request, ms.")


class CapacityConfig(ConfigModel):
    """Where the per-instance capacity at the TTFT SLO comes from (see app_config/capacity.py)."""

    routing: Literal["least_outstanding", "session_affinity"] = Field(
        default="least_outstanding",
        description=(
            "How follow-up turns reach engines: least_outstanding (SageMaker's routing without sessions: the fresh "
            "curve) or session_affinity (clients use stateful sessions: the conversations curve)."
        ),
    )
    measured: dict[str, MeasuredCapacity] = Field(
        default={},
        description=(
            "Capacity measured in the account per instance type (python -m ops load prints the keys); overrides the "
            "projection of instance_capacity.json."
        ),
    )


@dataclass(frozen=True)
class InstanceCapacity:
    """One instance's serving capacity at the TTFT SLO.

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


def instance_capacity(
    instance_type: str, slo_ms: float, config: CapacityConfig, *, curve: str | None = None
) -> InstanceCapacity:
    """The capacity of one ``instance_type`` instance at TTFT p95 <= ``slo_ms``.

    ``curve``: ``fresh`` or ``conversations``; None takes the routing's (:data:`CURVES`). A
    measurement (``capacity.measured``) is one figure for every curve.

    Raises:
        ValueError: the instance type's GPU has no projection (one line naming it).
    """
    measured = config.measured.get(instance_type)
    if measured is not None:
        return InstanceCapacity(
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
    mode = curve or CURVES[config.routing]
    rows = curves[mode]
    holding = [row for row in rows if row["ttft_p95_ms"] <= slo_ms]
    row = max(holding, key=lambda r: r["concurrency"]) if holding else min(rows, key=lambda r: r["concurrency"])
    return InstanceCapacity(
        instance_type,
        int(row["concurrency"]),
        float(row["requests_per_minute"]),
        float(rows[0]["ttft_p50_ms"]),
        bool(holding),
        f"projected from {projection()['reference']} to {gpu.name} ({mode} curve, devtools/capacity_model.py)",
        float(row["ttft_p95_ms"]),
        mode,
    )
