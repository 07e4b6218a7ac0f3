"""Dated one-off events: a date or date range whose demand is a multiple of the usual demand then.

Seed 001 user story 7 names seasonal events beside the weekly releases ("Spring anime
announcement season", April 1, x2.5; "Fall anime announcement season", October 1, x2.5) and
sizes each event's pre-scale as ``max(4, int((base_rps * multiplier / instance_capacity_rps) *
1.3))`` ("Add 30% headroom buffer", ``calculate_required_instances``). Here:

* the **demand** is the busiest minute of the usual demand (the ``traffic`` section's daily
  shape and volume, weekly releases left out, as the seed's ``base_rps``) over the event's times
  of day, times ``demand_multiplier``;
* the **capacity** is one instance's requests per minute at the TTFT SLOs
  (``AppConfig.throughput_of``), as for the weekly floors;
* the **floor** is ``ceil(demand / capacity x EVENT_HEADROOM)``, at least the variant's hard
  minimum (``derived_floor`` in planning/dated_schedule.py). The seed's ``int()`` rounds
  down, which can leave the event one instance short of its own headroom; its ``max(4, ...)`` is its
  own fleet's floor, here ``serving.<variant>.min_capacity``.
  ``min_capacity`` set on the event overrides the derived floor.

A dated event becomes one-off Application Auto Scaling scheduled actions, ``at(yyyy-mm-ddThh:mm:ss)``
with the scalable target's ``Timezone`` (Application Auto Scaling user guide, "Create a one-time
scheduled action that specifies a time zone"): ``<name>-lift`` raises the floor
``release_lead_time_min`` before the event (seed 001: "Pre-scale 2 hours before every known
high-traffic event"), ``<name>-hold-<n>`` stand in for the weekly actions it pauses, ``<name>-end``
puts back the weekly bounds in force at its end (planning/dated_schedule.py says why and how).
"""

import datetime as dt
import zoneinfo
from collections.abc import Callable

from pydantic import Field, field_validator, model_validator

from app_config.base import ConfigModel

SCHEDULED_ACTIONS_PER_TARGET = 200
"""Application Auto Scaling quota "Scheduled actions per scalable target": 200, not adjustable
(Application Auto Scaling user guide, "Quotas for Application Auto Scaling")."""

_HHMM = r"^([01]\d|2[0-3]):[0-5]\d$"


def _now(timezone: str) -> dt.datetime:
    """Wall-clock time in ``timezone``, naive (tests replace this to pin the date)."""
    return dt.datetime.now(zoneinfo.ZoneInfo(timezone)).replace(tzinfo=None, second=0, microsecond=0)


clock: Callable[[str], dt.datetime] = _now
"""What "now" is for the past-date check; a test pins it."""


class DatedEventConfig(ConfigModel):
    """A one-off event from ``date`` ``start_time`` to ``last_date`` ``end_time`` in ``scaling.timezone``."""

    name: str = Field(
        pattern=r"^[a-z0-9][a-z0-9-]{0,40}$",
        description="Event name, e.g. spring-anime (actions <name>-lift, -hold-<n>, -end); 1-41 of a-z, 0-9, '-'.",
    )
    date: dt.date = Field(description="First day, YYYY-MM-DD in scaling.timezone.")
    last_date: dt.date | None = Field(
        default=None, description="Last day of a date range, YYYY-MM-DD (inclusive); unset = date."
    )
    start_time: str = Field(default="00:00", pattern=_HHMM, description="Start on date, HH:MM.")
    end_time: str = Field(
        default="24:00",
        pattern=r"^(([01]\d|2[0-3]):[0-5]\d|24:00)$",
        description="End on last_date, HH:MM; 24:00 = the end of that day.",
    )
    demand_multiplier: float = Field(
        ge=1.0,
        le=20.0,
        description="Demand during the event over the usual demand then. Source: seed 001 user story 7 (x2.5).",
    )
    min_capacity: int | None = Field(
        default=None,
        ge=1,
        le=100,
        description=(
            "Floor during the event, in instances; unset = derived: ceil(usual peak x demand_multiplier / one "
            "instance's requests per minute at the SLOs x 1.3) (seed 001 user story 7), at least the hard min."
        ),
    )
    description: str = Field(default="", max_length=200, description="Why (shown by the capacity plan).")

    @field_validator("date", "last_date", mode="before")
    @classmethod
    def _iso_date(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return dt.date.fromisoformat(value.strip())
            except ValueError:
                raise ValueError("must be a date YYYY-MM-DD that exists") from None
        return value

    @model_validator(mode="after")
    def _window(self) -> "DatedEventConfig":
        if self.last_date is not None and self.last_date < self.date:
            raise ValueError(f"{self.name}: last_date = {self.last_date} is before date = {self.date}")
        if self.end <= self.start:
            raise ValueError(
                f"{self.name}: ends {_label(self.end)}, not after its start {_label(self.start)}; "
                "set last_date or end_time later"
            )
        return self

    @property
    def start(self) -> dt.datetime:
        """Start, naive local time in ``scaling.timezone``."""
        return dt.datetime.combine(self.date, dt.time.fromisoformat(self.start_time))

    @property
    def end(self) -> dt.datetime:
        """End (exclusive), naive local time in ``scaling.timezone``."""
        last = self.last_date or self.date
        if self.end_time == "24:00":
            return dt.datetime.combine(last + dt.timedelta(days=1), dt.time())
        return dt.datetime.combine(last, dt.time.fromisoformat(self.end_time))

    def minutes_of_day(self) -> set[int]:
        """The minutes of the day (0-1439) the event covers, for its usual-demand peak."""
        span = int((self.end - self.start).total_seconds() // 60)
        first = self.start.hour * 60 + self.start.minute
        return {(first + minute) % 1440 for minute in range(min(span, 1440))}


def _label(moment: dt.datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M}"
