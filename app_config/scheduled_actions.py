"""Scheduled capacity of a production variant: recurring scheduled actions and weekly release events.

Times are weekly ``cron(...)`` in ``scaling.timezone`` (Application Auto Scaling user guide,
"Schedule recurring scaling actions using cron expressions"); ``planning.weekly_cron`` says
why the parser is this project's own.
"""

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator, model_validator

from app_config.base import ConfigModel
from planning.weekly_cron import DAY_NAMES, parse_weekly_cron

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")

DayOfWeek = Literal["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"]


_MAX_DESCRIPTION = (
    "Ceiling from this time on, in instances; unset (default) = the variant's serving.<variant>.max_capacity, so "
    "raising or lowering that bound moves every scheduled ceiling with it and no time of day caps an unforeseen "
    "surge (the seeds' One Piece release: 3x in 15 minutes) below the hard max. Set it only to cap cost on purpose."
)


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
    min_capacity: int | None = Field(
        default=None,
        ge=0,
        le=100,
        description=(
            "Floor from this time on, in instances. Unset (default): the plan derives it (planning/resolved_plan.py): "
            "the instances the busiest minute until the next scheduled action needs on the variant's instance type, "
            "at least the variant's min_capacity and the prod warm floor; make plan prints it."
        ),
    )
    max_capacity: int | None = Field(default=None, ge=1, le=100, description=_MAX_DESCRIPTION)
    description: str = Field(default="", max_length=200, description="Why (shown by the capacity plan).")

    _name = field_validator("name")(_check_name)

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str) -> str:
        parse_weekly_cron(value)
        return value

    @model_validator(mode="after")
    def _bounds(self) -> "ScheduledActionConfig":
        if self.max_capacity is not None and self.min_capacity is not None and self.min_capacity > self.max_capacity:
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
    min_capacity: int | None = Field(
        default=None,
        ge=0,
        le=100,
        description=(
            "Floor from the lift on, in instances. Unset (default): the plan derives it (planning/resolved_plan.py): "
            "the instances the busiest minute until the next scheduled action needs on the variant's instance type, "
            "at least the variant's min_capacity and the prod warm floor; make plan prints it."
        ),
    )
    max_capacity: int | None = Field(default=None, ge=1, le=100, description=_MAX_DESCRIPTION)
    description: str = Field(default="", max_length=200, description="Why (shown by the capacity plan).")

    _name = field_validator("name")(_check_name)

    @model_validator(mode="after")
    def _bounds(self) -> "ReleaseEventConfig":
        if self.max_capacity is not None and self.min_capacity is not None and self.min_capacity > self.max_capacity:
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
    """A scheduled action as configured, events already turned into their pre-scale action.

    ``max_capacity`` None means the variant's hard max: :meth:`ceiling` resolves it.
    """

    name: str
    schedule: str
    min_capacity: int
    max_capacity: int | None
    description: str
    minutes_of_week: tuple[int, ...]

    def ceiling(self, hard_max: int) -> int:
        """The max capacity this action sets on a variant whose hard max is ``hard_max``."""
        return hard_max if self.max_capacity is None else self.max_capacity
