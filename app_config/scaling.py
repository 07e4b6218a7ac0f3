"""Autoscaling, scheduled capacity and guarded rollouts of the production variants: the
``scaling`` section, and each variant's policies and schedule put together.

Sources of the defaults: seed 001 (user stories 3, 4 and 7: warm floor, off-peak/business-hours
schedule, manga-release pre-scale), seed 003 (§8 blue/green, §9 the JP evening peak) and seed
000 (canary 10%). The policies live in ``scaling_policies``, the scheduled actions in
``scheduled_actions``, the week they make in ``weekly_plan``, rollouts in ``rollout``.
"""

import math
import zoneinfo

from pydantic import Field, field_validator, model_validator

from app_config.base import ConfigModel
from app_config.dated_events import DatedEventConfig
from app_config.rollout import RolloutConfig
from app_config.scaling_policies import (
    KvCacheTrackingConfig,
    ScalingStepConfig,
    StepScalingConfig,
    TargetTrackingConfig,
)
from app_config.scheduled_actions import ReleaseEventConfig, ResolvedAction, ScheduledActionConfig
from planning.weekly_cron import MINUTES_PER_WEEK, weekly_cron
from serving_contract.env import MEASURED_CACHED_START_S, MEASURED_COLD_START_S, MEASURED_COLD_START_SOURCE

PROD_WARM_FLOOR = 2
"""Instances (variants mode) or copies (inference_components mode) production never goes below, and the
floor every scheduled action of the primary keeps in prod. Source: seed 001 user story 3, step 3 ("Minimum
Instance Count = 2 (Never Scale to Zero)": one may fail or roll while the other serves warm)."""


class VariantScalingConfig(ConfigModel):
    """Scaling of one production variant (its hard bounds are serving.<variant>.min/max_capacity)."""

    enabled: bool = Field(default=True, description="Register the scalable target and every policy.")
    target_tracking: TargetTrackingConfig = Field(default=TargetTrackingConfig(), description="Target tracking.")
    step_scaling: StepScalingConfig = Field(default=StepScalingConfig(), description="Queue-depth step scaling.")
    kv_cache_tracking: KvCacheTrackingConfig = Field(
        default=KvCacheTrackingConfig(), description="Scale-out on KV-cache usage before the prefix-cache cliff."
    )
    schedule: tuple[ScheduledActionConfig, ...] = Field(
        default=(), max_length=50, description="Recurring scheduled actions (times in scaling.timezone)."
    )
    events: tuple[ReleaseEventConfig, ...] = Field(
        default=(), max_length=20, description="Weekly events, each lifting capacity release_lead_time_min before."
    )
    dated_events: tuple[DatedEventConfig, ...] = Field(
        default=(),
        max_length=20,
        description=(
            "One-off events on a date or date range (seed 001's April 1 and October 1 seasons), each lifting the "
            "floor release_lead_time_min before it with at(...) scheduled actions; none by default."
        ),
    )
    release_lead_time_min: int = Field(
        default=120,
        ge=0,
        le=1440,
        description=(
            "Minutes before a weekly or dated event that its capacity lift fires. Source: seed 001 user story 7 (2 h)."
        ),
    )

    @model_validator(mode="after")
    def _names_unique(self) -> "VariantScalingConfig":
        names = [name for name, _ in self.action_times]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"scheduled action names must be unique; repeated: {', '.join(duplicates)}")
        dated = [event.name for event in self.dated_events]
        repeated = sorted({name for name in dated if dated.count(name) > 1})
        if repeated:
            raise ValueError(f"dated_events: names must be unique; repeated: {', '.join(repeated)}")
        return self

    @property
    def action_times(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """``(action name, minutes of the week it fires)`` of every scheduled action, events as their
        pre-scale action, in config order (events last); floors not needed."""
        times = [(a.name, a.minutes_of_week) for a in self.schedule]
        times += [(f"{event.name}-prescale", (self._lift(event),)) for event in self.events]
        return tuple(times)

    def _lift(self, event: ReleaseEventConfig) -> int:
        return (event.minute_of_week - self.release_lead_time_min) % MINUTES_PER_WEEK

    @property
    def floors_unset(self) -> bool:
        """Some scheduled action's or event's floor is left to the plan (``min_capacity`` unset)."""
        return any(a.min_capacity is None for a in self.schedule) or any(e.min_capacity is None for e in self.events)

    @property
    def resolved_schedule(self) -> tuple[ResolvedAction, ...]:
        """Every scheduled action, events included, in config order (events last).

        Raises:
            ValueError: a floor is unset: it is the plan's to derive; read ``Plan.scaling``
                (planning/plan.py), whose floors are set.
        """
        if self.floors_unset:
            raise ValueError(
                "a scheduled min_capacity is unset: read the derived one from the plan (planning.plan.Plan.scaling)"
            )
        actions = [
            ResolvedAction(a.name, a.schedule, a.min_capacity or 0, a.max_capacity, a.description, a.minutes_of_week)
            for a in self.schedule
        ]
        for event in self.events:
            lift = self._lift(event)
            actions.append(
                ResolvedAction(
                    f"{event.name}-prescale",
                    weekly_cron(lift),
                    event.min_capacity or 0,
                    event.max_capacity,
                    event.description or f"{event.name} at {event.day_of_week} {event.time}",
                    (lift,),
                )
            )
        return tuple(actions)


class ShadowScalingConfig(ConfigModel):
    """Scaling of the shadow variant (its bounds are serving.shadow.min/max_capacity): target tracking only.

    Its own target, and no schedule and no queue-depth steps: the shadow carries a copy of a share of the
    traffic, never the week's peaks, and nothing it does may move the primary's capacity."""

    enabled: bool = Field(default=True, description="Register the shadow's scalable target and its policy.")
    target_tracking: TargetTrackingConfig = Field(
        # Scales in too: the shadow has no low-load step policy to do it (a production variant's does).
        default=TargetTrackingConfig(disable_scale_in=False),
        description=(
            "Target tracking of the shadow (its concurrency target, unset, is its instance type's concurrency at the "
            "TTFT SLO, as the production variants'). It scales in as well (disable_scale_in false): the shadow has "
            "no step policy to do it."
        ),
    )


# --- the section -------------------------------------------------------------------------

# Floors only: every action's ceiling is the variant's hard max (ScheduledActionConfig.max_capacity
# unset), so serving.primary.max_capacity is the one ceiling and an unforeseen surge at any hour
# can scale to it. Seed 001 user story 4's off-peak "max 6" capped the One Piece-style surge of
# its own user story 7 at 6 instances at night (issue 21, finding 3; `make simulate --scenario surge`).
# The floors are unset: the plan derives each from the open-loop engine model (planning/resolved_plan.py:
# the busiest minute until the next action over one instance's arrival rate at the SLOs, at least
# the warm floor), so a change of traffic, fleet or model moves them; the times and names are the
# seeds'. `make plan` prints them; -c scaling.primary.schedule.off-peak.min_capacity=N pins one.
_PRIMARY_SCHEDULE = (
    ScheduledActionConfig(
        name="off-peak",
        schedule="cron(0 1 * * ? *)",
        description="Off-peak floor from 01:00 (seed 001 user story 4; its max 6 dropped, see above).",
    ),
    ScheduledActionConfig(
        name="business-hours",
        schedule="cron(0 8 * * ? *)",
        description="Business hours from 08:00 (seed 001 user story 4).",
    ),
    ScheduledActionConfig(
        name="jp-evening-peak",
        # Release days (MON/WED/FRI) already hold a higher floor from 16:00; a daily action
        # here would lower it to 6 before the 18:00 release (check_schedule rejects that).
        schedule="cron(45 17 ? * TUE,THU,SAT,SUN *)",
        description="JP evening peak 18:00-22:00, pre-provisioned 15 min early (seed 003 §9).",
    ),
    ScheduledActionConfig(
        name="jp-evening-end",
        schedule="cron(0 23 * * ? *)",
        description="Down to the late-evening floor after the evening peak (seed 003 §9).",
    ),
)

_PRIMARY_EVENTS = (
    ReleaseEventConfig(
        name="shonen-jump",
        day_of_week="MON",
        description="Weekly Shonen Jump release, MON 18:00 (seed 001 user story 7).",
    ),
    ReleaseEventConfig(
        name="shonen-magazine",
        day_of_week="WED",
        description="Weekly Shonen Magazine release, WED 18:00 (seed 001 user story 7).",
    ),
    ReleaseEventConfig(
        name="friday-release",
        day_of_week="FRI",
        description="Friday manga release day, 18:00 (seed 001 user story 4).",
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
    shadow: ShadowScalingConfig = Field(
        default=ShadowScalingConfig(), description="Shadow variant scaling: target tracking only (serving.shadow)."
    )
    rollout: RolloutConfig = Field(default=RolloutConfig(), description="Blue/green deployment guardrails.")
    hourly_price_usd: dict[str, float] = Field(
        default={},
        description=(
            "Overrides of the dated price table planning/instance_prices.json (SageMaker real-time "
            "inference, on-demand, us-east-1), USD per instance-hour by instance type: another region or a negotiated "
            "price (capacity plan and simulation only)."
        ),
    )
    hours_per_month: float = Field(
        default=730.0, gt=0, le=744, description="Hours in a billing month (AWS pricing convention, 730 h)."
    )
    instance_start_cold_s: float = Field(
        default=math.ceil(MEASURED_COLD_START_S),
        gt=0,
        le=3600,
        description=(
            "Seconds from a provisioned instance to a passing /ping with no compile cache (simulation and capacity "
            f"plan). Source: the slowest measured cold start, {MEASURED_COLD_START_S} s on an H100 on 4 CPUs "
            f"({MEASURED_COLD_START_SOURCE}); an ml.g5.xlarge is slower, so this is a floor."
        ),
    )
    instance_start_cached_s: float = Field(
        default=math.ceil(MEASURED_CACHED_START_S),
        gt=0,
        le=3600,
        description=(
            "Seconds from a provisioned instance to a passing /ping from the compile cache "
            f"(serving.compile_cache.enabled). Source: the slowest measured hit, {MEASURED_CACHED_START_S} s on an "
            "H100 on 4 CPUs with the engine defaults (benchmarks/results/h100-2026-11-25-startup); a floor too."
        ),
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
