"""Per-instance throughput at the TTFT SLOs: the one figure that sizes the fleet.

"Throughput at the SLO" is one of the three things the project once called capacity; the others
are a variant's fleet bounds (``min_capacity``/``max_capacity``, ``planning.topology.FleetBounds``)
and the weekly plan of those bounds (:mod:`planning.weekly_plan`).

The fleet's size at a demand, the concurrency target of target tracking, the KV-cache target of
the leading-signal policy, the simulation, the dated-event floors, the prefix-aware routing
threshold and every "holds the SLO" verdict read :func:`throughput_at_slo`. Its source, in order:

1. ``throughput.measured.<instance type>``: what the capacity job (``python -m ops throughput measure``)
   or ``python -m ops load`` measured on that instance type in the account: a measurement beats
   any model, and is labelled ``measured <date> (<job or ops load>)`` (planning/measured_capacity.py);
2. the open-loop engine model (``planning/engine_model.py``): the highest arrival rate at which
   one engine holds each class's TTFT p95 with conversations arriving at random and users
   pausing ``traffic.think_s`` between turns, fitted on the H200 runs and projected to the
   instance type's GPU (``planning/gpu_projection.py``). A GPU the runs were not made on holds an
   SLO only with the projection's margin (the model's error, plus the spread of the card's
   published matmul throughput), and says so: ``projected from H200 to L4 (model error 30 %)``.

Seed 001's "~1,200 requests/minute" per ml.g5.xlarge is not used: measured at the request shape,
an H200 engine with an ml.g5.xlarge's KV cache holds ~540-593 requests a minute at a 500 ms TTFT
p95 (docs/performance.md), and an A10G's prefill cannot hold a 500 ms cold p95 at all.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

from app_config.engine import EngineConfig
from app_config.llm import ModelConfig
from app_config.memory_plan_config import MemoryPlanConfig
from app_config.slo import SloConfig
from app_config.throughput_config import ThroughputConfig
from app_config.traffic import TrafficConfig
from planning.engine_model import CLASSES, Capacity, ConversationShape, EngineParts, Routing, capacity, solve
from planning.engines import conversation_shape, engine_on
from planning.gpu_instances import engines_per_instance
from planning.measured_capacity import from_measurement
from planning.throughput_figure import ThroughputAtSlo
from serving_contract.request_classes import RequestClass

LEAST_OUTSTANDING_INSTANCES = 10
"""Instances assumed behind ``least_outstanding`` routing when the caller does not say: a
follow-up then reaches its conversation's engine 1 time in 10 (the per-instance figure falls as a
fleet grows, so a small fleet's figure would be optimistic for a large one)."""


def throughput_at_slo(
    instance_type: str,
    *,
    slo: SloConfig,
    throughput_config: ThroughputConfig,
    traffic: TrafficConfig,
    engine: EngineConfig,
    model: ModelConfig,
    memory: MemoryPlanConfig,
    request_class: RequestClass | None = None,
    instances: int | None = None,
) -> ThroughputAtSlo:
    """One ``instance_type`` instance at the SLOs of ``slo`` (``request_class`` None: both
    classes; else that class alone), from the sections the throughput depends on.

    ``instances`` is the fleet behind ``least_outstanding`` routing (default
    :data:`LEAST_OUTSTANDING_INSTANCES`); the other routings send follow-ups to their engine.

    Raises:
        ValueError: the instance type is unknown or the model does not fit its GPU (one line).
    """
    measured = throughput_config.measured.get(instance_type)
    slo_ms = slo.ttft_p95_ms()
    if measured is not None:
        judged = (request_class.value,) if request_class else tuple(slo_ms)
        return from_measurement(instance_type, measured, slo_ms, max_error_rate=slo.max_error_rate, judged=judged)
    return _modelled(
        instance_type,
        tuple(sorted(slo_ms.items())),
        throughput_config.routing,
        traffic,
        engine,
        model,
        memory,
        request_class.value if request_class else None,
        instances or LEAST_OUTSTANDING_INSTANCES,
    )


@lru_cache(maxsize=1024)
def _modelled(  # noqa: PLR0917 (positional: the arguments are lru_cache's key)
    instance_type: str,
    slo_items: tuple[tuple[str, float], ...],
    routing: Routing,
    traffic: TrafficConfig,
    engine: EngineConfig,
    model: ModelConfig,
    memory: MemoryPlanConfig,
    klass: str | None,
    instances: int,
) -> ThroughputAtSlo:
    projected = engine_on(instance_type, model=model, engine=engine, memory=memory)
    shape = conversation_shape(traffic, engine, len(model.adapters))
    engines = engines_per_instance(instance_type, engine.tensor_parallel_size)
    # Several data-parallel engines in one instance: vLLM's balancer sends a follow-up to the engine
    # with its history about 1/engines of the time, whatever the endpoint's routing.
    routing_in: Routing = routing if engines == 1 else "least_outstanding"
    fleet = instances if routing == "least_outstanding" else 1
    result = _capacity(
        projected.parts,
        shape,
        slo_items,
        routing_in,
        max(fleet, 1) * engines if routing_in == "least_outstanding" else 1,
        projected.margin,
    )
    rate = result.holds_per_min["both" if klass is None else klass]
    lightest = solve(projected.parts, shape, 1.0, routing=routing_in, instances=max(fleet, 1) * engines)
    at = solve(projected.parts, shape, max(rate, 1.0), routing=routing_in, instances=max(fleet, 1) * engines)
    judged = CLASSES if klass is None else (klass,)
    p95 = max(at.ttft_p95_ms[k] for k in judged)
    running = at.running + 0.0
    return ThroughputAtSlo(
        instance_type=instance_type,
        requests_per_minute=rate * engines,
        concurrency=max(1, math.ceil(running)) * engines,
        base_ttft_ms=lightest.ttft_p50_ms["cold"],
        holds_slo=rate > 0,
        source=projected.source,
        measured=False,
        margin=projected.margin,
        ttft_p95_ms=p95 if math.isfinite(p95) else None,
        cliff_per_minute=result.cliff_per_min * engines,
        kv_cache_usage=at.kv_in_use,
        cold_share=at.cold_share,
        lightest_ttft_p95_ms=max(lightest.ttft_p95_ms[k] for k in judged),
        projected=not projected.parts.measured,
        model_requests_per_minute=result.model_holds_per_min["both" if klass is None else klass] * engines,
    )


@lru_cache(maxsize=4096)
def _capacity(  # noqa: PLR0917 (positional: the arguments are lru_cache's key)
    parts: EngineParts,
    shape: ConversationShape,
    slo_items: tuple[tuple[str, float], ...],
    routing: Routing,
    instances: int,
    margin: float,
) -> Capacity:
    """:func:`planning.engine_model.capacity`, once per engine: instance types with the same GPU and
    KV cache (an ``xlarge`` and a ``16xlarge`` of one family) share their engine's figures."""
    return capacity(parts, shape, dict(slo_items), routing=routing, instances=instances, margin=margin)


CapacityAt = Callable[[int], ThroughputAtSlo]
"""One instance's throughput at the SLOs in a fleet of n instances (it depends on n behind
least-outstanding routing only)."""

MAX_FLEET = 1000
"""The largest fleet the planner sizes (SageMaker's per-variant instance limit is far below it)."""


def instances_needed(rate_rpm: float, capacity_at: CapacityAt) -> int:
    """The fewest instances (at least 1) each of which holds its share of ``rate_rpm`` (requests per
    minute), its figure taken at that fleet size (module docstring); :data:`MAX_FLEET` + 1 when
    none does (the type cannot hold the SLO).

    ``capacity_at(n)`` must not grow with ``n`` (it falls behind least-outstanding routing and is
    constant otherwise). The search uses that to ask for a handful of fleet sizes, not every one up
    to the answer: no fleet below ``rate / capacity_at(n)`` holds if ``n`` does not, and from the
    size where the figure reaches the largest fleet's it stays there.
    """
    if rate_rpm <= 0:
        return 1
    if capacity_at(1).requests_per_minute <= 0:
        return MAX_FLEET + 1
    settled_from, settled = _settled(capacity_at)
    count = max(1, math.ceil(rate_rpm / capacity_at(1).requests_per_minute))
    while count <= MAX_FLEET:
        per_instance = settled if count >= settled_from else capacity_at(count).requests_per_minute
        if per_instance <= 0:
            return MAX_FLEET + 1
        if rate_rpm / count <= per_instance:
            return count
        count = max(count + 1, math.ceil(rate_rpm / per_instance))
    return MAX_FLEET + 1


def _settled(capacity_at: CapacityAt) -> tuple[int, float]:
    """``(n, figure)``: the smallest fleet whose per-instance figure is the largest fleet's, and that
    figure (bisection: the figure never grows with the fleet)."""
    settled = capacity_at(MAX_FLEET).requests_per_minute
    low, high = 1, MAX_FLEET  # capacity_at(high) is settled; capacity_at(low - 1) is not, or low is 1
    while low < high:
        middle = (low + high) // 2
        if capacity_at(middle).requests_per_minute <= settled:
            high = middle
        else:
            low = middle + 1
    return high, settled
