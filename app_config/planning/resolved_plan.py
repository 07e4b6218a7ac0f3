"""The resolved plan: every value the config leaves to be derived, derived once after validation.

Some settings are unset by default because they follow from others (seed 001's sizing, the
throughput at the TTFT SLOs of :mod:`app_config.planning.throughput_at_slo`):

* ``scaling.<variant>.target_tracking.concurrent_requests_target``: the variant's instance type's
  concurrency at the SLOs;
* ``scaling.<variant>.step_scaling.scale_in_running_requests``: a quarter
  (``SCALE_IN_TARGET_FRACTION``) of the requests in flight per instance the variant tracks;
* ``scaling.<variant>.dated_events[].min_capacity``: the event's derived floor
  (:func:`app_config.planning.dated_schedule.derived_floor`);
* ``serving.inference_components.scaling.concurrent_requests_per_copy_target``: one engine's
  share of the instance's concurrency at the SLOs (a copy is one engine).

:func:`resolve` returns them in a :class:`ResolvedPlan` beside the validated ``AppConfig``, which it
never changes: ``AppConfig.plan`` holds it, and ``AppConfig.variant()`` hands out the resolved
``scaling.<key>``. Its sections have the config's own types, so a construct reads a derived value
where a set one would be, and the unresolved section's accessors (``target_value``,
``scale_in_threshold``) raise if a reader takes it from the config instead of the plan.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app_config.dated_events import DatedEventConfig
from app_config.inference_components import InferenceComponentsConfig
from app_config.planning.dated_schedule import derived_floor, usual_peak_rpm
from app_config.planning.gpu_instances import engines_per_instance
from app_config.scaling import ScalingConfig, VariantScalingConfig
from app_config.scaling_policies import SCALE_IN_TARGET_FRACTION
from app_config.serving import VariantConfig
from app_config.variants import VARIANT_KEYS

if TYPE_CHECKING:
    from app_config.root import AppConfig


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


def resolve(config: "AppConfig") -> ResolvedPlan:
    """The :class:`ResolvedPlan` of ``config`` (the canary's too: enabling it is a ``-c`` away).

    Raises:
        ValueError: an instance type's GPU has no throughput projection and no measurement (one line).
    """
    resolved: dict[str, VariantScalingConfig] = {
        key: _resolved_variant(config, getattr(config.serving, key), getattr(config.scaling, key))
        for key in VARIANT_KEYS
    }
    return ResolvedPlan(
        scaling=config.scaling.model_copy(update=resolved),
        inference_components=_resolved_components(config),
    )


def _resolved_variant(
    config: "AppConfig", serving: VariantConfig, scaling: VariantScalingConfig
) -> VariantScalingConfig:
    instance_type = serving.instance_type
    if scaling.target_tracking.concurrent_requests_target is None:
        target = float(config.throughput_of(instance_type).concurrency)
        tracking = scaling.target_tracking.model_copy(update={"concurrent_requests_target": target})
        scaling = scaling.model_copy(update={"target_tracking": tracking})
    if scaling.step_scaling.scale_in_running_requests is None:
        # A quarter of the requests in flight per instance the variant tracks: its concurrency
        # target, or its throughput at the SLO under another metric (SCALE_IN_TARGET_FRACTION).
        tracking = scaling.target_tracking
        in_flight = (
            tracking.target_value
            if tracking.metric == "concurrent_requests_high_resolution"
            else float(config.throughput_of(instance_type).concurrency)
        )
        steps = scaling.step_scaling.model_copy(
            update={"scale_in_running_requests": in_flight * SCALE_IN_TARGET_FRACTION}
        )
        scaling = scaling.model_copy(update={"step_scaling": steps})
    if any(event.min_capacity is None for event in scaling.dated_events):
        events = _event_floors(config, instance_type, serving.min_capacity, scaling.dated_events)
        scaling = scaling.model_copy(update={"dated_events": events})
    return scaling


def _event_floors(
    config: "AppConfig", instance_type: str, hard_min: int, events: tuple[DatedEventConfig, ...]
) -> tuple[DatedEventConfig, ...]:
    """``events`` with each unset ``min_capacity`` derived (app_config/dated_events.py: seed 001's
    usual peak x multiplier / one instance's requests per minute at the SLOs x 1.3, rounded up)."""
    instance_rpm = config.throughput_of(instance_type).requests_per_minute
    return tuple(
        event
        if event.min_capacity is not None
        else event.model_copy(
            update={
                "min_capacity": derived_floor(
                    usual_peak_rpm(event, config.traffic), event.demand_multiplier, instance_rpm, hard_min
                )
            }
        )
        for event in events
    )


def _resolved_components(config: "AppConfig") -> InferenceComponentsConfig:
    components = config.serving.inference_components
    if components.scaling.concurrent_requests_per_copy_target is not None:
        return components
    # A copy is one engine: the instance's throughput at the SLOs over its engines.
    instance_type = config.serving.primary.instance_type
    engines = engines_per_instance(instance_type, config.engine.tensor_parallel_size)
    per_copy = max(1.0, config.throughput_of(instance_type).concurrency / engines)
    copies = components.scaling.model_copy(update={"concurrent_requests_per_copy_target": per_copy})
    return components.model_copy(update={"scaling": copies})
