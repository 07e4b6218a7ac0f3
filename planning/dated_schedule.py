"""The scheduled actions a variant's dated events add, and how they change the weekly ones.

Scheduled actions set bounds absolutely, so a weekly action that fires inside an event's window
(``off-peak`` at 01:00 during a whole-day event) would lower the event's floor. Lowering the
minimum under a fleet that target tracking finds over-provisioned scales it in at once (its
low alarm is already in ALARM; ``make simulate --dated-event`` showed 12 -> 6 at 08:00 with a
"raise it again a minute later" design). So during each window:

* every weekly action that would fire inside it with a floor below the event's is **paused**: it
  is split into segments with ``EndTime``/``StartTime`` (UTC) around the window (Application Auto
  Scaling ``ScheduledAction`` StartTime/EndTime bound a recurring schedule), the first keeping its
  name, the next ``<name>-after-<event>``;
* at each of its firings inside the window, a one-off ``<event>-hold-<n>`` sets the event's floor
  instead (nothing else fires at that minute, so AWS needs no order);
* ``<event>-lift`` raises the floor ``release_lead_time_min`` before the event (a minute later when a
  weekly action fires at that very minute), ``<event>-end`` gives back the weekly bounds.

A weekly action whose floor is at least the event's still fires inside the window (a release's
pre-scale during a season), so the floor in force is the larger of the two.
"""

import datetime as dt
import math
import zoneinfo
from dataclasses import dataclass

from app_config.dated_events import SCHEDULED_ACTIONS_PER_TARGET, DatedEventConfig
from app_config.scaling import VariantScalingConfig
from app_config.scheduled_actions import ResolvedAction
from app_config.traffic import TrafficConfig
from planning.demand_week import base_rate
from planning.weekly_plan import bounds_at, effective_bounds

EVENT_HEADROOM = 1.3
"""Seed 001 user story 7, ``calculate_required_instances``: "Add 30% headroom buffer"."""


@dataclass(frozen=True)
class OneOffAction:
    """One ``at(...)`` scheduled action of a dated event; ``at`` is naive local time in ``scaling.timezone``."""

    name: str
    at: dt.datetime
    min_capacity: int
    max_capacity: int
    description: str

    @property
    def schedule(self) -> str:
        """Application Auto Scaling's one-time schedule expression."""
        return f"at({self.at:%Y-%m-%dT%H:%M:%S})"


def minute_of_week(moment: dt.datetime) -> int:
    """Minutes after the Monday 00:00 before ``moment`` (the weekly schedule's clock)."""
    return moment.weekday() * 1440 + moment.hour * 60 + moment.minute


def derived_floor(usual_peak_rpm: float, multiplier: float, instance_rpm: float, hard_min: int) -> int:
    """Seed 001's event floor, rounded up: ``ceil(usual_peak_rpm x multiplier / instance_rpm x 1.3)``,
    at least ``hard_min`` (the docstring of app_config/dated_events.py). Rates are requests per minute."""
    return max(hard_min, math.ceil(usual_peak_rpm * multiplier / max(instance_rpm, 1e-9) * EVENT_HEADROOM))


def usual_peak_rpm(event: DatedEventConfig, traffic: TrafficConfig) -> float:
    """The busiest minute of the usual demand (no weekly release) over the event's times of day,
    requests per minute, all variants together (the ``traffic`` section's week)."""
    return max(base_rate(minute, traffic) for minute in event.minutes_of_day())


@dataclass(frozen=True)
class EventWindow:
    """One event's window in naive local time: from its lift to its end, at ``floor``."""

    event: DatedEventConfig
    lift: dt.datetime
    floor: int

    @property
    def end(self) -> dt.datetime:
        return self.event.end


@dataclass(frozen=True)
class WeeklySegment:
    """A weekly action in force between ``start`` and ``end`` (naive local times; None = open)."""

    name: str
    action: ResolvedAction
    start: dt.datetime | None
    end: dt.datetime | None

    def utc(self, moment: dt.datetime | None, timezone: str) -> dt.datetime | None:
        """``moment`` (local in ``timezone``) in UTC, as ScheduledAction StartTime/EndTime take it."""
        if moment is None:
            return None
        return moment.replace(tzinfo=zoneinfo.ZoneInfo(timezone)).astimezone(dt.UTC)


def _firings(
    actions: tuple[ResolvedAction, ...], after: dt.datetime, before: dt.datetime
) -> list[tuple[dt.datetime, ResolvedAction]]:
    """The weekly actions' firings strictly between ``after`` and ``before`` (naive local times), in time order."""
    found = []
    day = dt.datetime.combine(after.date(), dt.time())
    while day < before:
        for action in actions:
            for minute in action.minutes_of_week:
                if minute // 1440 == day.weekday():
                    moment = day + dt.timedelta(minutes=minute % 1440)
                    if after < moment < before:
                        found.append((moment, action))
        day += dt.timedelta(days=1)
    return sorted(found, key=lambda item: item[0])


def event_windows(scaling: VariantScalingConfig, hard_min: int) -> list[EventWindow]:
    """Each dated event's window, in start order. An unset ``min_capacity`` counts as ``hard_min``
    (callers pass the resolved section, ``Plan.scaling.<key>``, whose floors are derived)."""
    windows = []
    for event in sorted(scaling.dated_events, key=lambda e: e.start):
        lift = event.start - dt.timedelta(minutes=scaling.release_lead_time_min)
        if any(minute_of_week(lift) in action.minutes_of_week for action in scaling.resolved_schedule):
            # A weekly action at that very minute (a weekly event's own pre-scale): AWS orders no two
            # actions of one minute, so the lift follows it a minute later.
            lift += dt.timedelta(minutes=1)
        windows.append(EventWindow(event, lift, event.min_capacity or hard_min))
    return windows


def paused_firings(
    scaling: VariantScalingConfig, hard_min: int
) -> list[tuple[EventWindow, dt.datetime, ResolvedAction]]:
    """The weekly firings that fall inside an event's window with a floor below the event's."""
    return [
        (window, moment, action)
        for window in event_windows(scaling, hard_min)
        for moment, action in _firings(scaling.resolved_schedule, window.lift, window.end)
        if action.min_capacity < window.floor
    ]


def weekly_segments(scaling: VariantScalingConfig, hard_min: int) -> tuple[WeeklySegment, ...]:
    """The weekly actions as the template holds them: one open segment each, or, for an action paused
    by dated events, one segment before the first window and one after each (module docstring)."""
    windows: dict[str, list[EventWindow]] = {}
    for window, _, action in paused_firings(scaling, hard_min):
        if window not in windows.setdefault(action.name, []):
            windows[action.name].append(window)
    segments = []
    for action in scaling.resolved_schedule:
        paused = windows.get(action.name, [])
        if not paused:
            segments.append(WeeklySegment(action.name, action, None, None))
            continue
        segments.append(WeeklySegment(action.name, action, None, paused[0].lift))
        for index, window in enumerate(paused):
            until = paused[index + 1].lift if index + 1 < len(paused) else None
            segments.append(WeeklySegment(f"{action.name}-after-{window.event.name}", action, window.end, until))
    return tuple(segments)


def one_off_actions(scaling: VariantScalingConfig, hard_min: int, hard_max: int) -> tuple[OneOffAction, ...]:
    """The one-off ``at(...)`` actions of the variant's dated events: lift, holds and end (module docstring).

    Each ceiling is the weekly ceiling in force; the end's bounds are the weekly ones in force then.
    """
    weekly = scaling.resolved_schedule
    timeline = effective_bounds(weekly, hard_min, hard_max)
    paused = paused_firings(scaling, hard_min)
    actions: list[OneOffAction] = []
    for window in event_windows(scaling, hard_min):
        event, floor = window.event, window.floor
        why = event.description or f"{event.name}: demand x{event.demand_multiplier:g} (dated event)"
        at_lift = bounds_at(timeline, minute_of_week(window.lift))
        actions.append(
            OneOffAction(f"{event.name}-lift", window.lift, max(floor, at_lift.min_capacity), at_lift.max_capacity, why)
        )
        holds = [(moment, action) for found, moment, action in paused if found == window]
        for number, (moment, action) in enumerate(holds, start=1):
            actions.append(
                OneOffAction(
                    f"{event.name}-hold-{number}",
                    moment,
                    floor,
                    action.ceiling(hard_max),
                    f"{event.name}: {floor} instead of {action.name}'s {action.min_capacity} (paused)",
                )
            )
        # Always, even when a weekly action fires at that minute too: it sets these very bounds, so
        # their order does not matter, and a paused action's segment may not fire at its StartTime.
        at_end = bounds_at(timeline, minute_of_week(event.end))
        actions.append(
            OneOffAction(
                f"{event.name}-end",
                event.end,
                at_end.min_capacity,
                at_end.max_capacity,
                f"{event.name} over: the weekly bounds of {at_end.set_by}",
            )
        )
    return tuple(actions)


def check_dated_events(
    variant_key: str, scaling: VariantScalingConfig, hard_min: int, hard_max: int, *, now: dt.datetime, timezone: str
) -> None:
    """Cross-check a variant's dated events: none over, none overlapping, floors within the bounds in
    force, the actions within AWS's quota. ``now`` is naive local time in ``timezone`` (``scaling.timezone``).

    Raises:
        ValueError: one line naming the event, the values and what is allowed.
    """
    key = f"scaling.{variant_key}.dated_events"
    previous: EventWindow | None = None
    for window in event_windows(scaling, hard_min):
        event, floor = window.event, window.floor
        if event.end <= now:
            raise ValueError(
                f"{key} {event.name}: ends {event.end:%Y-%m-%d %H:%M}, which has passed (now "
                f"{now:%Y-%m-%d %H:%M} {timezone}); remove it: a one-off scheduled action in the past never fires"
            )
        if previous is not None and window.lift < previous.end:
            raise ValueError(
                f"{key} {previous.event.name} ({previous.event.start:%Y-%m-%d %H:%M} - {previous.end:%Y-%m-%d %H:%M}) "
                f"and {event.name} (lift at {window.lift:%Y-%m-%d %H:%M}) overlap; merge them into one event or "
                "move one"
            )
        previous = window
        if floor > hard_max:
            raise ValueError(
                f"{key} {event.name}: floor {floor} exceeds serving.{variant_key}.max_capacity = {hard_max}; raise "
                "the hard max (and the instance quota) or set the event's min_capacity lower"
            )
        if floor < hard_min:
            raise ValueError(
                f"{key} {event.name}: min_capacity = {floor} is below serving.{variant_key}.min_capacity = "
                f"{hard_min} (the scalable target's hard min)"
            )
    actions = one_off_actions(scaling, hard_min, hard_max)
    for action in actions:
        if action.min_capacity > action.max_capacity:
            raise ValueError(
                f"{key}: {action.name} at {action.at:%Y-%m-%d %H:%M} would set min {action.min_capacity} above the "
                f"weekly ceiling {action.max_capacity} in force then; raise that scheduled action's max_capacity"
            )
    names = [segment.name for segment in weekly_segments(scaling, hard_min)] + [a.name for a in actions]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{key}: scheduled action names must be unique; repeated: {', '.join(repeated)}")
    if len(names) > SCHEDULED_ACTIONS_PER_TARGET:
        raise ValueError(
            f"{key}: {len(names)} scheduled actions ({len(actions)} of dated events); Application Auto Scaling "
            f"allows {SCHEDULED_ACTIONS_PER_TARGET} per scalable target (not adjustable); shorten or drop an event"
        )
