"""Autoscaling, scheduled capacity and guarded rollouts of the production variants.

Sources of the defaults: seed 001 (user stories 3, 4 and 7: warm floor, cooldowns,
off-peak/business-hours schedule, manga-release pre-scale, step scaling), seed 003 (§8
blue/green, §9 queue-depth triggers and the JP evening peak) and seed 000 (canary 10%).
AWS limits: CONVENTIONS.md ("Deployment guardrails", "Scaling") and the Application Auto
Scaling user guide, "Schedule recurring scaling actions using cron expressions"
(six fields ``[Minutes] [Hours] [Day_of_Month] [Month] [Day_of_Week] [Year]``).
"""

import re
import zoneinfo
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator, model_validator

from app_config.base import ConfigModel, IntChoice
from app_config.rollout import RolloutConfig
from app_config.weekly_cron import DAY_NAMES, MINUTES_PER_WEEK, parse_weekly_cron, weekly_cron

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")

DayOfWeek = Literal["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"]

LAUNCH_TIME_S = 660
"""Seconds from a scale-out to a new instance serving: provisioning 8 min (seed 001 user story 7,
"SageMaker scale-up: 5-8 minutes", the slow end; AWS publishes no figure) plus the measured
~168 s cold start of the A10G-sized engine (docs/performance.md), rounded to 11 min. The default
scale-out cooldowns: shorter ones compound while instances boot (make simulate)."""


# --- scaling policies --------------------------------------------------------------------


class TargetTrackingConfig(ConfigModel):
    """Target tracking on a SageMaker predefined metric."""

    enabled: bool = Field(default=True, description="Create the target-tracking policy.")
    metric: Literal["invocations_per_instance", "concurrent_requests_high_resolution"] = Field(
        default="concurrent_requests_high_resolution",
        description=(
            "concurrent_requests_high_resolution = SageMakerVariantConcurrentRequestsPerModelHighResolution "
            "(10 s datapoints, CONVENTIONS.md): what an LLM engine runs out of, bounded by the memory plan; "
            "invocations_per_instance = SageMakerVariantInvocationsPerInstance (per minute). The simulation "
            "(make simulate) showed seed 001's 200 invocations/min holding the fleet at its max of 20 all day: "
            "one g5 serves ~1,200/min (seed 001 user story 4), so the target sat at 1/6 of capacity."
        ),
    )
    invocations_per_instance_target: float = Field(
        default=200.0,
        gt=0,
        le=100000,
        description=(
            "Target invocations per minute per instance. Source: seed 001 user story 3 (200/min, the same "
            "level its step alarms and One Piece trigger are set against); seed 003's 50/min belongs to its "
            "8-instance ceiling and would hold the fleet near max at <1 request/s per GPU."
        ),
    )
    concurrent_requests_target: float = Field(
        default=32.0,
        gt=0,
        le=1024,
        description=(
            "Target concurrent requests per instance (high-resolution metric). Source: the memory plan: 41 "
            "requests of the typical 2,560 tokens fit the KV cache of an ml.g5.xlarge at the default engine "
            "settings; 32 keeps ~20 % headroom. Seed 003's ~60 (its observed peak) is above what fits: vLLM would "
            "preempt and queue before the fleet scaled out. `make synth` warns when the target is above the fit."
        ),
    )
    scale_out_cooldown_s: int = Field(
        default=LAUNCH_TIME_S,
        ge=0,
        le=3600,
        description=(
            "Seconds between scale-outs: the time a new instance takes to serve (LAUNCH_TIME_S, 660 s). Within it, "
            "capacity already added counts toward the next scale-out (AAS user guide, target tracking "
            "cooldowns), so a rising metric still adds the difference; seed 001's 60 s let the metric of a fleet "
            "whose new instances were still booting compound the desired count to max."
        ),
    )
    scale_in_cooldown_s: int = Field(
        default=600, ge=0, le=86400, description="Seconds between scale-ins. Source: seed 001 (600 s)."
    )

    @property
    def target_value(self) -> float:
        """The target value of the selected metric."""
        if self.metric == "invocations_per_instance":
            return self.invocations_per_instance_target
        return self.concurrent_requests_target


class ScalingStepConfig(ConfigModel):
    """One scale-out step: when the metric is in [lower, upper), add ``adjustment`` instances."""

    lower: float = Field(ge=0, description="Inclusive lower bound of the metric, in queued requests per instance.")
    upper: float | None = Field(default=None, description="Exclusive upper bound; None = unbounded (last step).")
    adjustment: int = Field(ge=1, le=100, description="Instances to add.")


class StepScalingConfig(ConfigModel):
    """Step scaling on the container's queue-depth metric (serving_contract EngineMetric.QUEUE_DEPTH).

    The scale-out alarm fires at the first step's ``lower``; steps must be contiguous.
    """

    enabled: bool = Field(default=True, description="Create the step-scaling policies and their alarms.")
    statistic: Literal["Average", "Maximum"] = Field(
        default="Average",
        description="How per-instance QueueDepth datapoints combine (Average = queued requests per instance).",
    )
    scale_out_steps: tuple[ScalingStepConfig, ...] = Field(
        default=(
            ScalingStepConfig(lower=50, upper=100, adjustment=2),
            ScalingStepConfig(lower=100, upper=200, adjustment=4),
            ScalingStepConfig(lower=200, upper=None, adjustment=8),
        ),
        min_length=1,
        max_length=20,
        description=(
            "Scale-out steps. Source: seed 001 user story 7 (+2/+4/+8 at 1x/2x/4x the trigger) with seed 003 §9's "
            "queue_depth > 50 trigger."
        ),
    )
    # No 10/30 s: the queue-depth metric is standard resolution (EMF without StorageResolution,
    # so 60 s datapoints); a sub-minute alarm period on it sees no data and, with missing data
    # treated as notBreaching, never fires.
    scale_out_period_s: IntChoice[Literal[60, 120, 300]] = Field(
        default=60,
        description=(
            "Alarm period, seconds; 60, 120 or 300 (the metric has 1-minute resolution). "
            "Source: seed 001 (1-minute alarm, 1 evaluation)."
        ),
    )
    scale_out_evaluation_periods: int = Field(default=1, ge=1, le=10, description="Periods above threshold.")
    scale_out_cooldown_s: int = Field(
        default=LAUNCH_TIME_S,
        ge=0,
        le=3600,
        description=(
            "Seconds (LAUNCH_TIME_S, 660 s). A larger step during the cooldown adds only the difference to the "
            "step that started it (AAS user guide, 'Step scaling policies', cooldown period), so +2 then +8 adds "
            "6 more and nothing stalls; seed 001's 60 s re-fired every minute while instances booted (an alarm in "
            "ALARM re-invokes its scaling action once a minute, CloudWatch user guide) and reached max."
        ),
    )
    # Scale-in keys on low load, not on a short queue: a healthy vLLM keeps QueueDepth near 0
    # under ordinary load (it queues only when its max_num_seqs slots or KV cache are full), so
    # seed 003's "queue < 5 for 300 s" would remove an instance every cooldown while target
    # tracking adds it back. 8 running sequences per instance is 1/16 of max_num_seqs (128) and
    # well below target tracking's 32 concurrent: removing one of N >= 2 instances leaves at most
    # 8 x N / (N - 1) <= 16 per instance, still half the scale-out target.
    scale_in_running_requests: float = Field(
        default=8,
        gt=0,
        description=(
            "Scale in while RunningRequests (vLLM sequences in the batch, Average per instance) stays below this. "
            "Source: 1/16 of engine.max_num_seqs 128, a quarter of target tracking's default 32."
        ),
    )
    scale_in_adjustment: int = Field(default=-1, ge=-100, le=-1, description="Instances removed per scale-in.")
    scale_in_period_s: IntChoice[Literal[60, 120, 300]] = Field(
        default=60, description="Scale-in alarm period, seconds; 60, 120 or 300 (1-minute metric)."
    )
    scale_in_evaluation_periods: int = Field(
        default=5, ge=1, le=60, description="Periods below threshold (5 x 60 s = seed 003's 300 s)."
    )
    scale_in_cooldown_s: int = Field(default=600, ge=0, le=86400, description="Seconds. Source: seed 001 (600 s).")

    @model_validator(mode="after")
    def _steps_contiguous(self) -> "StepScalingConfig":
        steps = self.scale_out_steps
        for index, step in enumerate(steps):
            last = index == len(steps) - 1
            if step.upper is None and not last:
                raise ValueError(
                    f"scale_out_steps[{index}].upper is unbounded but step {index + 1} follows; only the last "
                    "step may have upper = null"
                )
            if step.upper is not None and step.upper <= step.lower:
                raise ValueError(f"scale_out_steps[{index}]: lower = {step.lower:g} must be < upper = {step.upper:g}")
            if not last and step.upper != steps[index + 1].lower:
                raise ValueError(
                    f"scale_out_steps[{index}].upper = {step.upper:g} must equal scale_out_steps[{index + 1}].lower = "
                    f"{steps[index + 1].lower:g} (steps must be contiguous and non-overlapping)"
                )
            if not last and steps[index + 1].adjustment < step.adjustment:
                raise ValueError(
                    f"scale_out_steps[{index + 1}].adjustment = {steps[index + 1].adjustment} is below "
                    f"scale_out_steps[{index}].adjustment = {step.adjustment}; steps must not shrink as load grows"
                )
        if steps[-1].upper is not None:
            raise ValueError(
                f"scale_out_steps[{len(steps) - 1}].upper = {steps[-1].upper:g}: the last step must be unbounded (null)"
            )
        return self

    @property
    def scale_out_threshold(self) -> float:
        """Queue depth at which the scale-out alarm fires (the first step's lower bound)."""
        return self.scale_out_steps[0].lower


# --- schedules ---------------------------------------------------------------------------


def _check_name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError(
            "must be 1-64 characters of lowercase letters, digits and '-', starting with a letter or digit"
        )
    return value


class ScheduledActionConfig(ConfigModel):
    """A recurring scheduled action: at ``schedule`` set the target's min/max capacity."""

    name: str = Field(description="Scheduled action name (unique per variant), e.g. off-peak.")
    schedule: str = Field(description="Weekly cron(min hour dom month dow year) in scaling.timezone.")
    min_capacity: int = Field(ge=0, le=100, description="Floor from this time on, in instances.")
    max_capacity: int = Field(ge=1, le=100, description="Ceiling from this time on, in instances.")
    description: str = Field(default="", max_length=200, description="Why (shown by the capacity plan).")

    _name = field_validator("name")(_check_name)

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str) -> str:
        parse_weekly_cron(value)
        return value

    @model_validator(mode="after")
    def _bounds(self) -> "ScheduledActionConfig":
        if self.min_capacity > self.max_capacity:
            raise ValueError(
                f"{self.name}: min_capacity = {self.min_capacity} must be <= max_capacity = {self.max_capacity}"
            )
        return self

    @property
    def minutes_of_week(self) -> tuple[int, ...]:
        return parse_weekly_cron(self.schedule).minutes_of_week


class ReleaseEventConfig(ConfigModel):
    """A weekly traffic event (a manga release); capacity is lifted ``lead_time_min`` before it."""

    name: str = Field(description="Event name, e.g. shonen-jump (the action is <name>-prescale).")
    day_of_week: DayOfWeek = Field(description="Day of the event in scaling.timezone.")
    time: str = Field(default="18:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$", description="Event start, HH:MM.")
    min_capacity: int = Field(ge=0, le=100, description="Floor from the lift on, in instances.")
    max_capacity: int = Field(ge=1, le=100, description="Ceiling from the lift on, in instances.")
    description: str = Field(default="", max_length=200, description="Why (shown by the capacity plan).")

    _name = field_validator("name")(_check_name)

    @model_validator(mode="after")
    def _bounds(self) -> "ReleaseEventConfig":
        if self.min_capacity > self.max_capacity:
            raise ValueError(
                f"{self.name}: min_capacity = {self.min_capacity} must be <= max_capacity = {self.max_capacity}"
            )
        return self

    @property
    def minute_of_week(self) -> int:
        hour, minute = (int(part) for part in self.time.split(":"))
        return DAY_NAMES.index(self.day_of_week) * 1440 + hour * 60 + minute


@dataclass(frozen=True)
class ResolvedAction:
    """A scheduled action as deployed: events already turned into their pre-scale action."""

    name: str
    schedule: str
    min_capacity: int
    max_capacity: int
    description: str
    minutes_of_week: tuple[int, ...]


class VariantScalingConfig(ConfigModel):
    """Scaling of one production variant (its hard bounds are serving.<variant>.min/max_capacity)."""

    enabled: bool = Field(default=True, description="Register the scalable target and every policy.")
    target_tracking: TargetTrackingConfig = Field(default=TargetTrackingConfig(), description="Target tracking.")
    step_scaling: StepScalingConfig = Field(default=StepScalingConfig(), description="Queue-depth step scaling.")
    schedule: tuple[ScheduledActionConfig, ...] = Field(
        default=(), max_length=50, description="Recurring scheduled actions (times in scaling.timezone)."
    )
    events: tuple[ReleaseEventConfig, ...] = Field(
        default=(), max_length=20, description="Weekly events, each lifting capacity release_lead_time_min before."
    )
    release_lead_time_min: int = Field(
        default=120,
        ge=0,
        le=1440,
        description="Minutes before an event that its capacity lift fires. Source: seed 001 user story 7 (2 h).",
    )

    @model_validator(mode="after")
    def _names_unique(self) -> "VariantScalingConfig":
        names = [action.name for action in self.resolved_schedule]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"scheduled action names must be unique; repeated: {', '.join(duplicates)}")
        return self

    @property
    def resolved_schedule(self) -> tuple[ResolvedAction, ...]:
        """Every scheduled action, events included, in config order (events last)."""
        actions = [
            ResolvedAction(a.name, a.schedule, a.min_capacity, a.max_capacity, a.description, a.minutes_of_week)
            for a in self.schedule
        ]
        for event in self.events:
            lift = (event.minute_of_week - self.release_lead_time_min) % MINUTES_PER_WEEK
            actions.append(
                ResolvedAction(
                    f"{event.name}-prescale",
                    weekly_cron(lift),
                    event.min_capacity,
                    event.max_capacity,
                    event.description or f"{event.name} at {event.day_of_week} {event.time}",
                    (lift,),
                )
            )
        return tuple(actions)


# --- the section -------------------------------------------------------------------------

_PRIMARY_SCHEDULE = (
    ScheduledActionConfig(
        name="off-peak",
        schedule="cron(0 1 * * ? *)",
        min_capacity=2,
        max_capacity=6,
        description="Off-peak floor from 01:00 (seed 001 user story 4).",
    ),
    ScheduledActionConfig(
        name="business-hours",
        schedule="cron(0 8 * * ? *)",
        min_capacity=4,
        max_capacity=20,
        description="Business hours from 08:00 (seed 001 user story 4).",
    ),
    ScheduledActionConfig(
        name="jp-evening-peak",
        # Release days (MON/WED/FRI) already hold a higher floor from 16:00; a daily action
        # here would lower it to 6 before the 18:00 release (check_schedule rejects that).
        schedule="cron(45 17 ? * TUE,THU,SAT,SUN *)",
        min_capacity=6,
        max_capacity=20,
        description="JP evening peak 18:00-22:00, pre-provisioned 15 min early (seed 003 §9).",
    ),
    ScheduledActionConfig(
        name="jp-evening-end",
        schedule="cron(0 23 * * ? *)",
        min_capacity=4,
        max_capacity=20,
        description="Back to business-hours bounds after the evening peak (seed 003 §9).",
    ),
)

_PRIMARY_EVENTS = (
    ReleaseEventConfig(
        name="shonen-jump",
        day_of_week="MON",
        min_capacity=8,
        max_capacity=20,
        description="Weekly Shonen Jump release, MON 18:00 (seed 001 user story 7).",
    ),
    ReleaseEventConfig(
        name="shonen-magazine",
        day_of_week="WED",
        min_capacity=8,
        max_capacity=20,
        description="Weekly Shonen Magazine release, WED 18:00 (seed 001 user story 7).",
    ),
    ReleaseEventConfig(
        name="friday-release",
        day_of_week="FRI",
        min_capacity=8,
        max_capacity=20,
        description="Friday manga release day, 18:00, min 8 / max 20 (seed 001 user story 4).",
    ),
)


class ScalingConfig(ConfigModel):
    """Autoscaling per production variant, scheduled capacity, rollout guardrails and prices."""

    timezone: str = Field(
        default="Asia/Tokyo",
        description="IANA time zone of every scheduled action and event (AAS Timezone). Source: seeds (JST).",
    )
    primary: VariantScalingConfig = Field(
        default=VariantScalingConfig(schedule=_PRIMARY_SCHEDULE, events=_PRIMARY_EVENTS),
        description="Primary variant scaling (seeds 001 and 003).",
    )
    canary: VariantScalingConfig = Field(
        default=VariantScalingConfig(
            step_scaling=StepScalingConfig(scale_out_steps=(ScalingStepConfig(lower=50, upper=None, adjustment=1),)),
        ),
        description="Canary variant scaling: same policies, one +1 step, no schedule (bounds serving.canary).",
    )
    rollout: RolloutConfig = Field(default=RolloutConfig(), description="Blue/green deployment guardrails.")
    hourly_price_usd: dict[str, float] = Field(
        default={"ml.g5.xlarge": 1.408},
        description="On-demand price per instance-hour by instance type, USD (capacity plan only). Source: seed 003.",
    )
    hours_per_month: float = Field(
        default=730.0, gt=0, le=744, description="Hours in a billing month (AWS pricing convention, 730 h)."
    )

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError("must be an IANA time zone name such as Asia/Tokyo") from None
        return value

    @field_validator("hourly_price_usd")
    @classmethod
    def _prices(cls, value: dict[str, float]) -> dict[str, float]:
        for instance_type, price in value.items():
            if price <= 0:
                raise ValueError(f"{instance_type}: price = {price} must be > 0 USD per hour")
        return value
