"""Application Auto Scaling's dynamic policies on one variant: target tracking and step scaling.

Every minute each policy's alarms see that minute's metric; a policy whose alarm is in ALARM
is invoked again every minute. CloudWatch user guide, "Using Amazon CloudWatch alarms": "For
Auto Scaling actions, the alarm continues to invoke the action once per minute that the alarm
remains in the new state." :func:`decide` picks among the proposals; the engine clamps the
result to the scheduled min/max in force.

Sources (Application Auto Scaling user guide and API reference; quotes collected in the
research notes for issue 16, sections 1-2):

* "How target tracking scaling for Application Auto Scaling works"
  (https://docs.aws.amazon.com/autoscaling/application/userguide/target-tracking-scaling-policy-overview.html):
  "Application Auto Scaling scales out proportionally to the metric as fast as it can, but
  scales in more gradually" and "always acts conservatively by rounding up or down". AWS gives
  no formula; this model uses ceil(current capacity x metric / target) both ways.
* Cooldowns, same page and "How step scaling for Application Auto Scaling works"
  (https://docs.aws.amazon.com/autoscaling/application/userguide/step-scaling-policy-overview.html):
  "While the cooldown period is in effect, capacity added by the initiating scale-out activity
  is calculated as part of the desired capacity for the next scale-out activity ... the previous
  increase of 2 is considered part of the current capacity. Therefore, only 1 is added";
  "scale-in activities are blocked until the cooldown period has expired. However, if another
  alarm triggers a scale-out activity during the scale-in cooldown period, Application Auto
  Scaling scales out the target immediately. In this case, the scale-in cooldown period stops".
  Scheduled actions ignore cooldowns. That a target-tracking scale-in also waits out the
  policy's scale-out cooldown is an ASSUMPTION of this model (not in the docs).
* ``PutScalingPolicy`` (https://docs.aws.amazon.com/autoscaling/application/APIReference/API_PutScalingPolicy.html):
  "Application Auto Scaling gives precedence to the policy that provides the largest capacity
  for both scale out and scale in", and a step scale-in "will not be blocked" by a
  target-tracking policy that is not ready to scale in.

"Current capacity" is the variant's desired instance count (the scalable dimension is
``sagemaker:variant:DesiredInstanceCount``), pending launches included. Cooldowns start when a
policy changes the desired count, not when the new instances are InService.
"""

import math
from dataclasses import dataclass
from typing import Literal, Protocol

from app_config.scaling_policies import KvCacheTrackingConfig, StepScalingConfig, TargetTrackingConfig
from planning.scaling_sim.alarms import Alarm
from planning.scaling_sim.fleet import MinuteLoad

# The alarms AAS creates for a target-tracking policy on a 1-minute metric. AWS does not publish
# them (UNCONFIRMED; read the deployed ones with DescribeScalingPolicies -> Alarms[]). Observed on
# accounts: "Both High and Low alarms are created with a 60 second period, 3 out of 3 Datapoints
# to alarm" (hashicorp/terraform-provider-aws#42553, ECS), a low alarm of "15 datapoints within 15
# minutes" (aws/containers-roadmap#638, ECS capacity providers); the target-tracking page says
# scale-in waits until the metric is "typically more than 10% lower" than the target.
TT_SCALE_OUT_DATAPOINTS = 3
TT_SCALE_IN_DATAPOINTS = 15
TT_SCALE_IN_FRACTION = 0.9
# SageMaker developer guide, "Define a scaling policy": the high-resolution metrics "emit data
# every 10 seconds. Therefore, as the concurrent traffic to your models increases, your policy
# reacts by scaling out much more quickly ... as the traffic to your models decreases, your policy
# scales in at the same speed as it would for standard metrics." The alarm's datapoint count is
# UNCONFIRMED (AWS ML blog: "up to 6x faster"); at this model's 1-minute resolution the
# high-resolution scale-out alarm fires on the first breaching minute, scale-in as above.
TT_HIGH_RES_SCALE_OUT_DATAPOINTS = 1

_EPSILON = 1e-9
Direction = Literal["out", "in"]


def cooldown_minutes(seconds: int) -> int:
    """A cooldown in whole minutes of the simulation (rounded up)."""
    return math.ceil(seconds / 60)


@dataclass
class Cooldown:
    """One direction's cooldown of one policy: when it started and the capacity before it."""

    minutes: int
    started: int | None = None
    base_capacity: int = 0

    def active(self, minute: int) -> bool:
        return self.started is not None and minute < self.started + self.minutes

    def start(self, minute: int, capacity_before: int) -> None:
        self.started, self.base_capacity = minute, capacity_before


@dataclass(frozen=True)
class Proposal:
    """A capacity a policy asks for this minute."""

    policy: "Policy"
    capacity: int
    direction: Direction


class Policy(Protocol):
    name: str

    def evaluate(self, minute: int, load: MinuteLoad, desired: int) -> Proposal | None: ...

    def applied(self, minute: int, proposal: Proposal, capacity_before: int) -> None: ...


def _ceil(value: float) -> int:
    return math.ceil(value - _EPSILON)


class TargetTrackingPolicy:
    """Target tracking on InvocationsPerInstance or the high-resolution concurrency metric."""

    def __init__(self, config: TargetTrackingConfig) -> None:
        self.name = f"target-tracking({config.metric})"
        self.metric = config.metric
        self.target = config.target_value
        high_res = config.metric == "concurrent_requests_high_resolution"
        out_datapoints = TT_HIGH_RES_SCALE_OUT_DATAPOINTS if high_res else TT_SCALE_OUT_DATAPOINTS
        self.high = Alarm(self.target, ">", out_datapoints)
        self.low = Alarm(self.target * TT_SCALE_IN_FRACTION, "<", TT_SCALE_IN_DATAPOINTS)
        self.out_cooldown = Cooldown(cooldown_minutes(config.scale_out_cooldown_s))
        self.in_cooldown = Cooldown(cooldown_minutes(config.scale_in_cooldown_s))
        self.scales_in = not config.disable_scale_in

    def metric_value(self, load: MinuteLoad) -> float:
        if self.metric == "invocations_per_instance":
            return load.invocations_per_instance
        return load.concurrent_per_instance

    def evaluate(self, minute: int, load: MinuteLoad, desired: int) -> Proposal | None:
        value = self.metric_value(load)
        high = self.high.observe(minute, value)
        low = self.low.observe(minute, value)
        if high:
            # In cooldown the initiating scale-out's capacity counts: size from the capacity before it.
            base = self.out_cooldown.base_capacity if self.out_cooldown.active(minute) else desired
            wanted = _ceil(base * value / self.target)
            return Proposal(self, wanted, "out") if wanted > desired else None
        if self.scales_in and low and not (self.out_cooldown.active(minute) or self.in_cooldown.active(minute)):
            wanted = _ceil(desired * value / self.target)
            return Proposal(self, wanted, "in") if wanted < desired else None
        return None

    def applied(self, minute: int, proposal: Proposal, capacity_before: int) -> None:
        cooldown = self.out_cooldown if proposal.direction == "out" else self.in_cooldown
        if not cooldown.active(minute):
            cooldown.start(minute, capacity_before)
        if proposal.direction == "out":
            self.in_cooldown.started = None  # "the scale-in cooldown period stops and doesn't complete"


class KvCacheTrackingPolicy:
    """Target tracking on the container's KvCacheUsagePercent, scale-out only (DisableScaleIn).

    A customized 1-minute metric: the alarm Application Auto Scaling creates is modelled like the
    standard-resolution one above (3 breaching minutes), scaling out to ceil(capacity x metric /
    target) as target tracking does.
    """

    def __init__(self, config: KvCacheTrackingConfig) -> None:
        self.name = "kv-cache-tracking"
        self.target = config.target_value
        self.high = Alarm(self.target, ">", TT_SCALE_OUT_DATAPOINTS)
        self.out_cooldown = Cooldown(cooldown_minutes(config.scale_out_cooldown_s))

    def evaluate(self, minute: int, load: MinuteLoad, desired: int) -> Proposal | None:
        value = load.kv_cache_usage_percent
        if not self.high.observe(minute, value):
            return None
        base = self.out_cooldown.base_capacity if self.out_cooldown.active(minute) else desired
        wanted = _ceil(base * value / self.target)
        return Proposal(self, wanted, "out") if wanted > desired else None

    def applied(self, minute: int, proposal: Proposal, capacity_before: int) -> None:
        if not self.out_cooldown.active(minute):
            self.out_cooldown.start(minute, capacity_before)


class StepScalingPolicy:
    """The queue-depth scale-out policy and the running-requests scale-in policy (two AAS policies)."""

    def __init__(self, config: StepScalingConfig) -> None:
        self.name = "step-scaling"
        self.steps = config.scale_out_steps
        self.scale_in_adjustment = config.scale_in_adjustment
        self.out_alarm = Alarm(
            config.scale_out_threshold,
            ">=",
            config.scale_out_evaluation_periods,
            cooldown_minutes(config.scale_out_period_s),
            config.statistic,
        )
        self.in_alarm = Alarm(
            config.scale_in_threshold,
            "<",
            config.scale_in_evaluation_periods,
            cooldown_minutes(config.scale_in_period_s),
        )
        self.out_cooldown = Cooldown(cooldown_minutes(config.scale_out_cooldown_s))
        self.in_cooldown = Cooldown(cooldown_minutes(config.scale_in_cooldown_s))

    def adjustment_for(self, queue_depth: float) -> int:
        """The step whose [lower, upper) holds ``queue_depth``; 0 below the first step."""
        for step in self.steps:
            if step.lower <= queue_depth and (step.upper is None or queue_depth < step.upper):
                return step.adjustment
        return 0

    def evaluate(self, minute: int, load: MinuteLoad, desired: int) -> Proposal | None:
        out = self.out_alarm.observe(minute, load.queue_per_instance)
        low = self.in_alarm.observe(minute, load.running_per_instance)
        if out and self.out_alarm.last_datapoint is not None:
            step = self.adjustment_for(self.out_alarm.last_datapoint)
            # In cooldown a larger step adds only the difference; a smaller or equal one adds nothing.
            base = self.out_cooldown.base_capacity if self.out_cooldown.active(minute) else desired
            wanted = base + step
            return Proposal(self, wanted, "out") if wanted > desired else None
        if low and not self.in_cooldown.active(minute):
            # A separate policy: AAS does not block it on the scale-out policy's cooldown (PutScalingPolicy).
            return Proposal(self, desired + self.scale_in_adjustment, "in")
        return None

    def applied(self, minute: int, proposal: Proposal, capacity_before: int) -> None:
        cooldown = self.out_cooldown if proposal.direction == "out" else self.in_cooldown
        if not cooldown.active(minute):
            cooldown.start(minute, capacity_before)


def decide(proposals: list[Proposal], desired: int) -> Proposal | None:
    """The proposal AAS acts on: the largest capacity, scale-out before scale-in (PutScalingPolicy)."""
    outs = [p for p in proposals if p.capacity > desired]
    if outs:
        return max(outs, key=lambda p: p.capacity)
    ins = [p for p in proposals if p.capacity < desired]
    return max(ins, key=lambda p: p.capacity) if ins else None
