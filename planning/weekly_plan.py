"""The weekly plan: a variant's fleet bounds over the week, from its scheduled actions, and the checks on them
(the dated events' one-off actions: planning/dated_schedule.py)."""

from dataclasses import dataclass

from app_config.scaling import VariantScalingConfig
from app_config.scheduled_actions import ResolvedAction
from planning.weekly_cron import format_minute_of_week


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
        # The resolved plan's events: every floor is set (planning/resolved_plan.py).
        if event.min_capacity is not None and at_event.min_capacity < event.min_capacity:
            raise ValueError(
                f"scaling.{variant_key}.events {event.name}: at {event.day_of_week} {event.time} the floor is "
                f"{at_event.min_capacity} (set by {at_event.set_by}), below the event's min_capacity = "
                f"{event.min_capacity}; a later scheduled action undoes the pre-scale"
            )
