"""A variant's capacity bounds over the week, from its scheduled actions, its dated events'
one-off actions over that week, and the checks on both."""

import datetime as dt
from dataclasses import dataclass

from app_config.dated_events import SCHEDULED_ACTIONS_PER_TARGET, OneOffAction, minute_of_week
from app_config.scaling import VariantScalingConfig
from app_config.scheduled_actions import ResolvedAction
from app_config.weekly_cron import format_minute_of_week


@dataclass(frozen=True)
class Bounds:
    """Min/max capacity in force from ``start`` (minute of week) and the action that set them."""

    start: int
    min_capacity: int
    max_capacity: int
    set_by: str


def effective_bounds(actions: tuple[ResolvedAction, ...], hard_min: int, hard_max: int) -> list[Bounds]:
    """The week as a list of bounds changes, sorted by time, first entry at minute 0.

    The week repeats, so the bounds at Monday 00:00 are those of the week's last action.
    With no actions the variant's hard bounds hold all week. An action without max_capacity
    sets ``hard_max`` (the variant's serving.<variant>.max_capacity). When two actions fire at the
    same minute, the later one in config order wins (deterministic here; AWS gives no order,
    so :func:`check_schedule` rejects such collisions).
    """
    firings = sorted(
        ((minute, index, action) for index, action in enumerate(actions) for minute in action.minutes_of_week),
        key=lambda item: (item[0], item[1]),
    )
    if not firings:
        return [Bounds(0, hard_min, hard_max, "hard bounds")]
    last = firings[-1][2]
    timeline = [Bounds(0, last.min_capacity, last.ceiling(hard_max), f"{last.name} (previous week)")]
    for minute, _, action in firings:
        bounds = Bounds(minute, action.min_capacity, action.ceiling(hard_max), action.name)
        if timeline[-1].start == minute:
            timeline[-1] = bounds
        else:
            timeline.append(bounds)
    return timeline


def bounds_at(timeline: list[Bounds], minute_of_week: int) -> Bounds:
    """The bounds in force at ``minute_of_week`` (after every action at or before it)."""
    current = timeline[0]
    for bounds in timeline:
        if bounds.start <= minute_of_week:
            current = bounds
    return current


def check_schedule(
    variant_key: str, scaling: VariantScalingConfig, hard_min: int, hard_max: int, warm_floor: int | None
) -> None:
    """Cross-check a variant's schedule against its hard bounds, warm floor and events.

    Raises:
        ValueError: one line naming the action, the fields and the values.
    """
    actions = scaling.resolved_schedule
    # Every offender in one line, so lowering serving.<variant>.max_capacity is one edit, not seven.
    above = [f"{a.name} max_capacity = {a.max_capacity}" for a in actions if a.ceiling(hard_max) > hard_max]
    if above:
        raise ValueError(
            f"scaling.{variant_key}: scheduled action(s) {', '.join(above)} exceed serving.{variant_key}.max_capacity "
            f"= {hard_max} (the scalable target's hard max); leave their max_capacity unset to follow it"
        )
    too_high = [f"{a.name} min_capacity = {a.min_capacity}" for a in actions if a.min_capacity > hard_max]
    if too_high:
        raise ValueError(
            f"scaling.{variant_key}: scheduled action(s) {', '.join(too_high)} exceed "
            f"serving.{variant_key}.max_capacity = {hard_max}; lower those floors or raise the hard max"
        )
    for action in actions:
        if warm_floor is not None and action.min_capacity < warm_floor:
            raise ValueError(
                f"scaling.{variant_key}: scheduled action {action.name} min_capacity = {action.min_capacity}: must be "
                f">= {warm_floor} in prod (the warm floor, seed 001 user story 3)"
            )
        if action.min_capacity < hard_min:
            raise ValueError(
                f"scaling.{variant_key}: scheduled action {action.name} min_capacity = {action.min_capacity} is below "
                f"serving.{variant_key}.min_capacity = {hard_min} (the scalable target's hard min)"
            )
    seen: dict[int, str] = {}
    for action in actions:
        for minute in action.minutes_of_week:
            if minute in seen:
                raise ValueError(
                    f"scaling.{variant_key}: scheduled actions {seen[minute]} and {action.name} both fire at "
                    f"{format_minute_of_week(minute)}; AWS gives no order between them, move one"
                )
            seen[minute] = action.name
    timeline = effective_bounds(actions, hard_min, hard_max)
    for event in scaling.events:
        at_event = bounds_at(timeline, event.minute_of_week)
        if at_event.min_capacity < event.min_capacity:
            raise ValueError(
                f"scaling.{variant_key}.events {event.name}: at {event.day_of_week} {event.time} the floor is "
                f"{at_event.min_capacity} (set by {at_event.set_by}), below the event's min_capacity = "
                f"{event.min_capacity}; a later scheduled action undoes the pre-scale"
            )


def _weekly_firings(
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


def one_off_actions(scaling: VariantScalingConfig, hard_min: int, hard_max: int) -> tuple[OneOffAction, ...]:
    """The one-off ``at(...)`` actions of the variant's dated events (app_config.dated_events).

    For each event: ``<name>-lift`` ``release_lead_time_min`` before its start (a minute later when a
    weekly action fires at that minute), at the larger of the event's floor and the weekly floor
    then; ``<name>-hold-<n>`` one minute after each weekly action inside the window that sets a
    lower floor; ``<name>-end`` at its end with the weekly bounds in
    force then (left out when a weekly action fires at that very minute and sets them itself). Each
    ceiling is the weekly ceiling in force. An event's ``min_capacity`` unset counts as ``hard_min``
    (``AppConfig`` fills in the derived floor before this runs).
    """
    weekly = scaling.resolved_schedule
    timeline = effective_bounds(weekly, hard_min, hard_max)
    actions: list[OneOffAction] = []
    for event in scaling.dated_events:
        floor = event.min_capacity or hard_min
        lift = event.start - dt.timedelta(minutes=scaling.release_lead_time_min)
        if any(minute_of_week(lift) in action.minutes_of_week for action in weekly):
            # A weekly action at that very minute (a weekly event's own pre-scale): AWS gives no order
            # between two actions of one minute, so the dated lift follows it a minute later.
            lift += dt.timedelta(minutes=1)
        why = event.description or f"{event.name}: demand x{event.demand_multiplier:g} (dated event)"
        at_lift = bounds_at(timeline, minute_of_week(lift))
        actions.append(
            OneOffAction(f"{event.name}-lift", lift, max(floor, at_lift.min_capacity), at_lift.max_capacity, why)
        )
        holds = 0
        for moment, action in _weekly_firings(weekly, lift, event.end):
            hold_at = moment + dt.timedelta(minutes=1)
            if action.min_capacity < floor and hold_at < event.end:
                holds += 1
                actions.append(
                    OneOffAction(
                        f"{event.name}-hold-{holds}",
                        hold_at,
                        floor,
                        action.ceiling(hard_max),
                        f"{event.name}: back to {floor} after {action.name} set {action.min_capacity}",
                    )
                )
        end_minute = minute_of_week(event.end)
        if not any(end_minute in action.minutes_of_week for action in weekly):
            at_end = bounds_at(timeline, end_minute)
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
    """Cross-check a variant's dated events: none over, none overlapping, floors within the bounds
    in force, no one-off action at a weekly action's minute, the actions within AWS's quota.

    ``now`` is naive local time in ``timezone`` (``scaling.timezone``).

    Raises:
        ValueError: one line naming the event, the values and what is allowed.
    """
    key = f"scaling.{variant_key}.dated_events"
    lead = dt.timedelta(minutes=scaling.release_lead_time_min)
    previous = None
    for event in sorted(scaling.dated_events, key=lambda e: e.start):
        if event.end <= now:
            raise ValueError(
                f"{key} {event.name}: ends {event.end:%Y-%m-%d %H:%M}, which has passed (now "
                f"{now:%Y-%m-%d %H:%M} {timezone}); remove it: a one-off scheduled action in the past never fires"
            )
        if previous is not None and event.start - lead < previous.end:
            raise ValueError(
                f"{key} {previous.name} ({previous.start:%Y-%m-%d %H:%M} - {previous.end:%Y-%m-%d %H:%M}) and "
                f"{event.name} (lift at {event.start - lead:%Y-%m-%d %H:%M}) overlap; merge them into one event "
                "or move one"
            )
        previous = event
        floor = event.min_capacity or hard_min
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
        minute = minute_of_week(action.at)
        clash = [weekly.name for weekly in scaling.resolved_schedule if minute in weekly.minutes_of_week]
        if clash:
            raise ValueError(
                f"{key}: {action.name} at {action.at:%Y-%m-%d %H:%M} fires at the minute of scheduled action "
                f"{clash[0]}; AWS gives no order between them, move the event by a minute"
            )
    names = [a.name for a in scaling.resolved_schedule] + [a.name for a in actions]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{key}: scheduled action names must be unique; repeated: {', '.join(repeated)}")
    if len(names) > SCHEDULED_ACTIONS_PER_TARGET:
        raise ValueError(
            f"{key}: {len(names)} scheduled actions ({len(actions)} of dated events); Application Auto Scaling "
            f"allows {SCHEDULED_ACTIONS_PER_TARGET} per scalable target (not adjustable); shorten or drop an event"
        )
