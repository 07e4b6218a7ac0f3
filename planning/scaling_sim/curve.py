"""The engine curve of a variant's instance type: the open-loop engine model, sampled for the minute loop.

``planning/engine_model.py`` solves one engine at one arrival rate; the minute loop needs its
TTFT p95, KV-cache usage and running requests at every rate up to the cliff, thousands of times a
week, so they are sampled once here and interpolated in :class:`planning.scaling_sim.fleet.EngineCurve`.
"""

from app_config.root import AppConfig
from planning.engine_model import CLASSES, solve
from planning.engines import conversation_shape, engine_on
from planning.gpu_instances import engines_per_instance
from planning.plan import Plan
from planning.scaling_sim.fleet import EngineCurve
from planning.throughput_at_slo import LEAST_OUTSTANDING_INSTANCES

SAMPLES = 48
"""Rates sampled from 0 to just below the cliff (linear in between; the curve bends at the cliff only)."""


def engine_curve(config: AppConfig, plan: Plan, instance_type: str) -> EngineCurve | None:
    """The curve of one ``instance_type`` instance (its engines together), or None when its capacity
    is measured (``throughput.measured``: the measurement gives no curve) or it holds the SLO at no rate.
    """
    capacity = plan.planner.throughput(instance_type)
    if capacity.measured or not capacity.holds_slo:
        return None
    engines = engines_per_instance(instance_type, config.engine.tensor_parallel_size)
    projected = engine_on(instance_type, model=config.model, engine=config.engine, memory=config.memory_plan)
    shape = conversation_shape(config.traffic, config.engine, len(config.model.adapters))
    routing = config.throughput.routing if engines == 1 else "least_outstanding"
    instances = LEAST_OUTSTANDING_INSTANCES * engines if routing == "least_outstanding" else 1
    cliff = capacity.cliff_per_minute / engines
    rates = [cliff * index / SAMPLES for index in range(SAMPLES)] + [cliff * (1 - 0.5 / SAMPLES)]
    states = [solve(projected.parts, shape, rate, routing=routing, instances=instances) for rate in rates]
    slo = config.slo.ttft_p95_ms()
    return EngineCurve(
        rates=tuple(rate * engines for rate in rates),
        ttft_p95_ms=tuple(max(state.ttft_p95_ms[k] for k in CLASSES) for state in states),
        kv_cache_usage=tuple(state.kv_in_use for state in states),
        running=tuple(state.running * engines for state in states),
        cliff_per_minute=capacity.cliff_per_minute,
        collapsed_ttft_ms=2 * max(slo.values()),
    )
