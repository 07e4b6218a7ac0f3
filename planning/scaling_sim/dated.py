"""``--dated-event NAME``: simulate the week (Monday to Monday) that holds one dated event.

The week's bounds are every action that fires in it, in time order: the weekly schedule less the
firings the event pauses, and its one-off ``at(...)`` actions (planning/dated_schedule.py), starting from
the bounds the last action before Monday 00:00 set. The demand is the configured week with the
event's minutes at least the usual demand then times ``demand_multiplier`` (a weekly release that
is larger still wins), the way app_config.dated_events sizes its floor.
"""

import datetime as dt
from dataclasses import dataclass

from app_config import ConfigError
from app_config.dated_events import DatedEventConfig
from app_config.traffic import TrafficConfig
from app_config.variants import VariantKey
from planning.dated_schedule import one_off_actions, paused_firings
from planning.demand_week import MINUTES_PER_DAY, base_rate
from planning.plan import Plan
from planning.weekly_cron import MINUTES_PER_WEEK
from planning.weekly_plan import Bounds


@dataclass(frozen=True)
class EventWeek:
    """The week of one dated event: its Monday, the bounds over it and the event's minutes in it."""

    monday: dt.datetime
    timeline: tuple[Bounds, ...]
    event: DatedEventConfig
    first_minute: int
    end_minute: int


def event_week(plan: Plan, variant_key: VariantKey, name: str) -> EventWeek:
    """The week of ``scaling.<variant_key>.dated_events`` ``name``.

    Raises:
        ConfigError: no event of that name (one line listing the configured ones).
    """
    variant = plan.variant(variant_key)
    scaling, hard_min, hard_max = variant.scaling, variant.serving.min_capacity, variant.serving.max_capacity
    events = {event.name: event for event in scaling.dated_events}
    if name not in events:
        known = ", ".join(events) or "none configured"
        raise ConfigError([f"--dated-event {name}: scaling.{variant_key}.dated_events has no such event ({known})"])
    event = events[name]
    monday = dt.datetime.combine(event.start.date() - dt.timedelta(days=event.start.weekday()), dt.time())
    # Paused weekly firings do not fire (their segments end before the window): a hold stands in.
    paused = {(moment, action.name) for _, moment, action in paused_firings(scaling, hard_min)}
    changes: list[tuple[dt.datetime, int, int, str]] = [
        (moment, action.min_capacity, action.ceiling(hard_max), action.name)
        for action in scaling.resolved_schedule
        for minute in action.minutes_of_week
        for base in (monday - dt.timedelta(days=7), monday)
        if ((moment := base + dt.timedelta(minutes=minute)), action.name) not in paused
    ]
    changes += [
        (one.at, one.min_capacity, one.max_capacity, one.name) for one in one_off_actions(scaling, hard_min, hard_max)
    ]
    changes.sort(key=lambda change: change[0])
    before = [change for change in changes if change[0] <= monday]
    start = before[-1] if before else (monday, hard_min, hard_max, "hard bounds")
    timeline = [Bounds(0, start[1], start[2], f"{start[3]} (before the week)")]
    for moment, low, high, set_by in changes:
        if monday < moment < monday + dt.timedelta(days=7):
            minute = int((moment - monday).total_seconds() // 60)
            timeline.append(Bounds(minute, low, high, set_by))
    first = int((event.start - monday).total_seconds() // 60)
    end = min(MINUTES_PER_WEEK, int((event.end - monday).total_seconds() // 60))
    return EventWeek(monday, tuple(timeline), event, first, end)


def overlay(demand: list[float], week: EventWeek, traffic: TrafficConfig, scale: float) -> list[float]:
    """``demand`` (the configured week x ``scale``) with the event's minutes at least the usual demand x its
    multiplier x ``scale``."""
    out = list(demand)
    for minute in range(week.first_minute, week.end_minute):
        usual = base_rate(minute % MINUTES_PER_DAY, traffic) * scale
        out[minute] = max(out[minute], usual * week.event.demand_multiplier)
    return out
