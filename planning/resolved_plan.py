"""The resolved plan: every value the config leaves to be derived, derived once after validation.

Some settings are unset by default because they follow from others (seed 001's sizing, the
throughput at the TTFT SLOs of :mod:`planning.throughput_at_slo`):

* ``scaling.<variant>.target_tracking.concurrent_requests_target``: the variant's instance type's
  concurrency at the SLOs (with ``instance_pools``, the weakest member's: planning/hardware.py says
  which figure holds for every member);
* ``scaling.<variant>.step_scaling.scale_in_running_requests``: a quarter
  (``SCALE_IN_TARGET_FRACTION``) of the requests in flight per instance the variant tracks;
* ``scaling.<variant>.dated_events[].min_capacity``: the event's derived floor
  (:func:`planning.dated_schedule.derived_floor`);
* ``scaling.<variant>.schedule[].min_capacity`` and ``scaling.<variant>.events[].min_capacity``:
  the instances the busiest minute of the ``traffic`` week needs from the action's time until
  the next action's, on the variant's instance type at its throughput at the SLOs
  (:func:`planning.throughput_at_slo.instances_needed`), at least the variant's ``min_capacity``
  and, for the prod primary, the warm floor;
* ``scaling.<variant>.kv_cache_tracking.target_percent``: the KV cache's share in use at that rate;
* ``scaling.shadow.target_tracking.concurrent_requests_target``: the shadow's instance type's
  concurrency at the SLOs;
* ``serving.inference_components.scaling.concurrent_requests_per_copy_target``: one engine's
  share of the instance's concurrency at the SLOs (a copy is one engine).

:func:`resolve` returns them in a :class:`ResolvedPlan` beside the validated ``AppConfig``, which it
never changes: ``planning.plan.Plan`` holds it, and ``Plan.variant()`` hands out the resolved
``scaling.<key>``. Its sections have the config's own types, so a construct reads a derived value
where a set one would be, and the unresolved section's accessors (``target_value``,
``scale_in_threshold``) raise if a reader takes it from the config instead of the plan.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from app_config.dated_events import DatedEventConfig
from app_config.inference_components import InferenceComponentsConfig
from app_config.root import AppConfig
from app_config.scaling import PROD_WARM_FLOOR, ScalingConfig, ShadowScalingConfig, VariantScalingConfig
from app_config.scaling_policies import SCALE_IN_TARGET_FRACTION
from app_config.serving import ServingConfig, VariantConfig
from app_config.traffic import TrafficConfig
from app_config.variants import VARIANT_KEYS
from planning.dated_schedule import derived_floor, usual_peak_rpm
from planning.demand_week import week
from planning.hardware import Hardware, HardwareKey
from planning.planner import Planner
from planning.throughput_at_slo import instances_needed
from planning.throughput_figure import ThroughputAtSlo
from planning.weekly_cron import MINUTES_PER_WEEK


@dataclass(frozen=True)
class ResolvedPlan:
    """The derived values of one validated config, in the shape of the sections they belong to.

    Attributes:
        scaling: ``config.scaling`` with each variant's unset concurrency target, scale-in threshold
            and dated-event floors derived (module docstring); set values are kept as they are.
        inference_components: ``config.serving.inference_components`` with its unset copy target
            derived.
    """

    scaling: ScalingConfig
    inference_components: InferenceComponentsConfig


def resolve(config: AppConfig, planner: Planner, hardware: Mapping[HardwareKey, Hardware]) -> ResolvedPlan:
    """The :class:`ResolvedPlan` of ``config`` (the canary's too: enabling it is a ``-c`` away), from each
    variant's ``hardware`` (the primary's, the canary's and, when it runs, the shadow's).

    Raises:
        ValueError: an instance type's GPU has no throughput projection and no measurement (one line).
    """
    resolved: dict[str, VariantScalingConfig] = {
        key: _resolved_variant(
            config, planner, hardware[key], getattr(config.serving, key), getattr(config.scaling, key)
        )
        for key in VARIANT_KEYS
    }
    return ResolvedPlan(
        scaling=config.scaling.model_copy(update={**resolved, "shadow": _resolved_shadow(config, hardware)}),
        inference_components=_resolved_components(config.serving, hardware["primary"]),
    )


def _resolved_shadow(config: AppConfig, hardware: Mapping[HardwareKey, Hardware]) -> ShadowScalingConfig:
    """``scaling.shadow`` with its concurrency target derived when unset: the shadow's instance type's
    concurrency at the TTFT SLOs, as the production variants'. A shadow that is off gets none: its
    instance type need not fit the engine (``engine.tensor_parallel_size`` is checked when it is on)."""
    shadow = config.scaling.shadow
    if not config.serving.shadow.enabled or shadow.target_tracking.concurrent_requests_target is not None:
        return shadow
    concurrency = float(hardware["shadow"].concurrency)
    tracking = shadow.target_tracking.model_copy(update={"concurrent_requests_target": concurrency})
    return shadow.model_copy(update={"target_tracking": tracking})


def _resolved_variant(
    config: AppConfig, planner: Planner, hardware: Hardware, serving: VariantConfig, scaling: VariantScalingConfig
) -> VariantScalingConfig:
    if scaling.target_tracking.concurrent_requests_target is None:
        target = float(hardware.concurrency)
        tracking = scaling.target_tracking.model_copy(update={"concurrent_requests_target": target})
        scaling = scaling.model_copy(update={"target_tracking": tracking})
    if scaling.step_scaling.scale_in_running_requests is None:
        # A quarter of the requests in flight per instance the variant tracks: its concurrency
        # target, or its throughput at the SLO under another metric (SCALE_IN_TARGET_FRACTION).
        tracking = scaling.target_tracking
        in_flight = (
            tracking.target_value
            if tracking.metric == "concurrent_requests_high_resolution"
            else float(hardware.concurrency)
        )
        steps = scaling.step_scaling.model_copy(
            update={"scale_in_running_requests": in_flight * SCALE_IN_TARGET_FRACTION}
        )
        scaling = scaling.model_copy(update={"step_scaling": steps})
    if scaling.kv_cache_tracking.target_percent is None:
        # The KV cache's share in use at the rate the instance is sized for, in percent, rounded up.
        usage = hardware.kv_cache_usage
        target = min(max(math.ceil((usage or 0.0) * 100), 1), 100)
        kv = scaling.kv_cache_tracking.model_copy(update={"target_percent": float(target)})
        scaling = scaling.model_copy(update={"kv_cache_tracking": kv})
    if scaling.floors_unset:
        scaling = _scheduled_floors(config, planner, hardware, serving, scaling)
    if any(event.min_capacity is None for event in scaling.dated_events):
        events = _event_floors(config.traffic, hardware, serving.min_capacity, scaling.dated_events)
        scaling = scaling.model_copy(update={"dated_events": events})
    return scaling


def _scheduled_floors(
    config: AppConfig, planner: Planner, hardware: Hardware, serving: VariantConfig, scaling: VariantScalingConfig
) -> VariantScalingConfig:
    """``scaling`` with every unset weekly floor derived (module docstring); with ``instance_pools``, on the
    weakest member: every instance of the floor may be of that type."""
    demand = week(config.traffic)
    fires = sorted({minute for _, minutes in scaling.action_times for minute in minutes})
    instance_type = hardware.weakest.instance_type

    @cache
    def capacity_at(instances: int) -> ThroughputAtSlo:
        return planner.throughput(instance_type, instances=instances)

    lowest = serving.min_capacity
    if config.stage == "prod" and serving.variant_name == config.serving.primary.variant_name:
        lowest = max(lowest, PROD_WARM_FLOOR)

    def floor_from(minute: int) -> int:
        later = [m for m in fires if m > minute]
        end = later[0] if later else fires[0] + MINUTES_PER_WEEK
        busiest = max(demand[m % MINUTES_PER_WEEK] for m in range(minute, end))
        return min(max(instances_needed(busiest, capacity_at), lowest), serving.max_capacity)

    def derived(minutes: tuple[int, ...]) -> int:
        return max(floor_from(minute) for minute in minutes)

    schedule = tuple(
        action
        if action.min_capacity is not None
        else action.model_copy(update={"min_capacity": derived(action.minutes_of_week)})
        for action in scaling.schedule
    )
    lifts = dict(scaling.action_times)
    events = tuple(
        event
        if event.min_capacity is not None
        else event.model_copy(update={"min_capacity": derived(lifts[f"{event.name}-prescale"])})
        for event in scaling.events
    )
    return scaling.model_copy(update={"schedule": schedule, "events": events})


def _event_floors(
    traffic: TrafficConfig, hardware: Hardware, hard_min: int, events: tuple[DatedEventConfig, ...]
) -> tuple[DatedEventConfig, ...]:
    """``events`` with each unset ``min_capacity`` derived (app_config/dated_events.py: seed 001's
    usual peak x multiplier / one instance's requests per minute at the SLOs x 1.3, rounded up; the
    weakest member's with ``instance_pools``)."""
    instance_rpm = hardware.requests_per_minute
    return tuple(
        event
        if event.min_capacity is not None
        else event.model_copy(
            update={
                "min_capacity": derived_floor(
                    usual_peak_rpm(event, traffic), event.demand_multiplier, instance_rpm, hard_min
                )
            }
        )
        for event in events
    )


def _resolved_components(serving: ServingConfig, hardware: Hardware) -> InferenceComponentsConfig:
    components = serving.inference_components
    if components.scaling.concurrent_requests_per_copy_target is not None:
        return components
    # A copy is one engine: the instance's throughput at the SLOs over its engines.
    own = hardware.own
    per_copy = max(1.0, own.throughput.concurrency / own.engines)
    copies = components.scaling.model_copy(update={"concurrent_requests_per_copy_target": per_copy})
    return components.model_copy(update={"scaling": copies})
