"""The minute loop: schedules, launches, serving, alarms and policies, one record per minute.

Within minute ``t``:

1. the scheduled min/max in force at ``t`` apply; a desired capacity outside them is moved to
   the bound (AAS: a scheduled action that raises the minimum above the current capacity
   scales out to it; one that lowers the maximum below it scales in);
2. launches whose provisioning + start-up is over join the service;
3. the InService instances serve the minute's demand plus the backlog (:mod:`.fleet`);
4. every policy's alarms see the minute's metrics, the policies in ALARM propose capacities,
   :func:`.policies.decide` picks one, clamped to the bounds; new instances are InService
   ``provision_min + startup_min`` minutes later.

With ``warmup`` the demand is run once before the recorded pass, so a weekly curve starts from
the state the previous week left (Monday 00:00 follows Sunday night), not from the floor.
"""

from dataclasses import dataclass

from app_config.scaling_policies import KvCacheTrackingConfig, StepScalingConfig, TargetTrackingConfig
from planning.scaling_sim.fleet import Fleet, ServiceModel
from planning.scaling_sim.policies import (
    KvCacheTrackingPolicy,
    Policy,
    StepScalingPolicy,
    TargetTrackingPolicy,
    decide,
)
from planning.weekly_cron import MINUTES_PER_WEEK
from planning.weekly_plan import Bounds

_FULL_EPSILON = 1e-6


@dataclass(frozen=True)
class SimInputs:
    """Everything one run needs besides the demand.

    Attributes:
        service: per-instance concurrency, throughput and base TTFT.
        provision_min: minutes SageMaker takes to provision an instance.
        startup_min: minutes the container takes to pass its health check after that.
        timeline: the scheduled bounds over the week (``planning.weekly_plan``).
        target_tracking: the target-tracking policy, None = none.
        step_scaling: the step-scaling policies, None = none.
        ttft_slo_ms: minutes whose TTFT estimate exceeds this count as SLO misses.
        initial_capacity: InService instances at minute 0; None = the minimum in force then.
        kv_cache_tracking: the KV-cache (leading-signal) policy, None = none.
    """

    service: ServiceModel
    provision_min: int
    startup_min: int
    timeline: tuple[Bounds, ...]
    target_tracking: TargetTrackingConfig | None
    step_scaling: StepScalingConfig | None
    ttft_slo_ms: float
    initial_capacity: int | None = None
    kv_cache_tracking: KvCacheTrackingConfig | None = None

    @property
    def launch_delay_min(self) -> int:
        return self.provision_min + self.startup_min


@dataclass(frozen=True, slots=True)
class MinuteRecord:
    """One simulated minute. Totals are requests; per-instance figures are Averages.

    ``desired`` is the desired capacity after the minute's decisions; ``in_service`` the
    instances that served the minute. ``scheduled_change`` and ``policy_change`` are the
    desired-capacity changes made by the schedule and by a policy (``policy`` names it).
    """

    minute: int
    demand: float
    served: float
    queued: float
    running_per_instance: float
    ttft_ms: float
    desired: int
    in_service: int
    min_capacity: int
    max_capacity: int
    scheduled_change: int
    policy_change: int
    policy: str
    at_full_load: bool
    above_slo: bool
    abandoned: float = 0.0
    kv_cache_usage: float = 0.0
    past_cliff: bool = False


def bounds_per_minute(timeline: tuple[Bounds, ...]) -> list[tuple[int, int]]:
    """(min, max) in force at each minute of the week."""
    grid: list[tuple[int, int]] = []
    for index, bounds in enumerate(timeline):
        end = timeline[index + 1].start if index + 1 < len(timeline) else MINUTES_PER_WEEK
        grid += [(bounds.min_capacity, bounds.max_capacity)] * (end - bounds.start)
    return grid


def make_policies(inputs: SimInputs) -> list[Policy]:
    policies: list[Policy] = []
    if inputs.target_tracking is not None and inputs.target_tracking.enabled:
        policies.append(TargetTrackingPolicy(inputs.target_tracking))
    if inputs.step_scaling is not None and inputs.step_scaling.enabled:
        policies.append(StepScalingPolicy(inputs.step_scaling))
    if inputs.kv_cache_tracking is not None and inputs.kv_cache_tracking.enabled:
        policies.append(KvCacheTrackingPolicy(inputs.kv_cache_tracking))
    return policies


def run(inputs: SimInputs, demand: list[float], *, warmup: bool = False) -> list[MinuteRecord]:
    """Simulate ``len(demand)`` minutes; minute ``i`` is minute ``i % 10080`` of the week."""
    grid = bounds_per_minute(inputs.timeline)
    low, high = grid[0]
    start = inputs.initial_capacity if inputs.initial_capacity is not None else low
    fleet = Fleet(inputs.service, inputs.launch_delay_min, in_service=max(low, min(high, start)))
    policies = make_policies(inputs)
    concurrency = inputs.service.concurrency
    length = len(demand)
    first = length if warmup else 0
    records: list[MinuteRecord] = []
    for t in range(first + length):
        index = t % length
        low, high = grid[index % MINUTES_PER_WEEK]
        before = fleet.desired
        if not low <= before <= high:
            fleet.set_desired(max(low, min(high, before)), t)
        scheduled_change = fleet.desired - before
        fleet.admit(t)
        load = fleet.serve(demand[index])
        desired = fleet.desired
        proposals = [p for p in (policy.evaluate(t, load, desired) for policy in policies) if p is not None]
        chosen = decide(proposals, desired)
        policy_change, policy_name = 0, ""
        if chosen is not None:
            target = max(low, min(high, chosen.capacity))
            if target != desired:
                fleet.set_desired(target, t)
                chosen.policy.applied(t, chosen, desired)
                policy_change, policy_name = target - desired, chosen.policy.name
        if t < first:
            continue
        records.append(
            MinuteRecord(
                minute=index,
                demand=demand[index],
                served=load.served,
                queued=load.queued,
                running_per_instance=load.running_per_instance,
                ttft_ms=load.ttft_ms,
                desired=fleet.desired,
                in_service=load.in_service,
                min_capacity=low,
                max_capacity=high,
                scheduled_change=scheduled_change,
                policy_change=policy_change,
                policy=policy_name,
                at_full_load=load.running_per_instance >= concurrency - _FULL_EPSILON,
                above_slo=load.ttft_ms > inputs.ttft_slo_ms,
                abandoned=load.abandoned,
                kv_cache_usage=load.kv_cache_usage,
                past_cliff=load.past_cliff,
            )
        )
    return records
