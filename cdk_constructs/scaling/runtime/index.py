"""Custom resource ``Custom::ScheduledCapacity``: put back the bounds the schedule has in force.

Why: ``AWS::ApplicationAutoScaling::ScalableTarget`` carries the variant's hard bounds
(``MinCapacity``/``MaxCapacity`` are required properties), and updating a scalable target is
RegisterScalableTarget with those bounds. A deploy that touches the target (a changed schedule,
a changed bound) therefore drops the floor a scheduled action set (e.g. min 8 from 16:00 on a
release day) back to the hard minimum until the next action fires: "Application Auto Scaling
does not keep track of previous values" (Application Auto Scaling user guide, scheduled
scaling). A new target starts at the hard bounds the same way. This handler runs after every
create or update of the target and registers the bounds the schedule has in force now.

Driven by CDK's ``custom_resources.Provider`` (``on_event`` only: one API call, no waiting).

Resource properties (CloudFormation passes numbers as strings):
    ``ServiceNamespace``, ``ResourceId``, ``ScalableDimension``: the scalable target.
    ``Timezone``: IANA name of the schedule (the scheduled actions' ``Timezone``).
    ``Timeline``: the week as ``[{"Start": minute of week, "MinCapacity", "MaxCapacity",
        "SetBy"}]``, sorted by ``Start``, the first at 0 (Monday 00:00), as
        ``planning.weekly_plan.effective_bounds`` computes it at synth.
    ``HardBounds``: the target's template bounds (only there so that changing them, which
    re-registers the target, also re-runs this handler).
    ``DatedEvents`` (optional): ``[{"Name", "Lift", "End", "MinCapacity"}]``, local times
    ``YYYY-MM-DDTHH:MM`` in ``Timezone``: while one is under way (lift <= now < end) its floor holds
    over the weekly one, as its one-off scheduled actions keep it (app_config.dated_events).

Time zones come from ``dateutil``, which ships in the Lambda Python runtime with botocore
and carries its own zone database (the runtime's OS may have none).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
from dateutil import tz

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

MINUTES_PER_WEEK = 7 * 24 * 60

AUTOSCALING = boto3.client("application-autoscaling")


@dataclass(frozen=True)
class Bounds:
    """Min/max capacity in force from ``start`` (minute of the week) and the action that set them."""

    start: int
    min_capacity: int
    max_capacity: int
    set_by: str


def parse_timeline(raw: Sequence[Mapping[str, Any]]) -> list[Bounds]:
    """The ``Timeline`` property as ``Bounds``, sorted.

    Raises:
        ValueError: empty, not starting at minute 0, or a value that is not a whole number.
    """
    timeline = sorted(
        (
            Bounds(int(item["Start"]), int(item["MinCapacity"]), int(item["MaxCapacity"]), str(item["SetBy"]))
            for item in raw
        ),
        key=lambda bounds: bounds.start,
    )
    if not timeline or timeline[0].start != 0:
        raise ValueError(f"Timeline must start at minute 0 (Monday 00:00), got {[b.start for b in timeline]}")
    return timeline


def minute_of_week(now: datetime, zone_name: str) -> int:
    """Minutes since Monday 00:00 of ``now`` in ``zone_name``.

    Raises:
        ValueError: an unknown time zone.
    """
    zone = tz.gettz(zone_name)
    if zone is None:
        raise ValueError(f"Timezone {zone_name!r} is not a known IANA time zone")
    local = now.astimezone(zone)
    return local.weekday() * 1440 + local.hour * 60 + local.minute


def bounds_at(timeline: Sequence[Bounds], minute: int) -> Bounds:
    """The bounds in force at ``minute`` of the week (the last change at or before it)."""
    current = timeline[0]
    for bounds in timeline:
        if bounds.start <= minute % MINUTES_PER_WEEK:
            current = bounds
    return current


def event_floor(raw: Sequence[Mapping[str, Any]], now: datetime, zone_name: str) -> tuple[int, str] | None:
    """The floor and name of the dated event under way at ``now`` in ``zone_name``, or None."""
    zone = tz.gettz(zone_name)
    local = now.astimezone(zone).replace(tzinfo=None)
    for item in raw:
        if datetime.fromisoformat(str(item["Lift"])) <= local < datetime.fromisoformat(str(item["End"])):
            return int(item["MinCapacity"]), str(item["Name"])
    return None


def on_event(event: Mapping[str, Any], _context: Any = None, *, now: datetime | None = None) -> dict[str, Any]:
    """Create/Update: RegisterScalableTarget with the bounds in force now. Delete: nothing
    (the scalable target goes with its own resource)."""
    props = event["ResourceProperties"]
    physical_id = f"{props['ResourceId']}/scheduled-capacity"
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event.get("PhysicalResourceId", physical_id)}
    timeline = parse_timeline(props["Timeline"])
    moment = now or datetime.now(UTC)
    minute = minute_of_week(moment, props["Timezone"])
    bounds = bounds_at(timeline, minute)
    dated = event_floor(props.get("DatedEvents", []), moment, props["Timezone"])
    if dated is not None and dated[0] > bounds.min_capacity:
        floor = min(dated[0], bounds.max_capacity)
        bounds = Bounds(bounds.start, floor, bounds.max_capacity, f"{dated[1]} (dated event)")
    LOG.info(
        "%s: minute %d of the week in %s, bounds %d-%d set by %s",
        props["ResourceId"],
        minute,
        props["Timezone"],
        bounds.min_capacity,
        bounds.max_capacity,
        bounds.set_by,
    )
    # Only the bounds: RoleARN and SuspendedState stay as the target has them.
    AUTOSCALING.register_scalable_target(
        ServiceNamespace=props["ServiceNamespace"],
        ResourceId=props["ResourceId"],
        ScalableDimension=props["ScalableDimension"],
        MinCapacity=bounds.min_capacity,
        MaxCapacity=bounds.max_capacity,
    )
    return {
        "PhysicalResourceId": physical_id,
        "Data": {
            "MinCapacity": str(bounds.min_capacity),
            "MaxCapacity": str(bounds.max_capacity),
            "SetBy": bounds.set_by,
        },
    }
