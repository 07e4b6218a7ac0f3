"""Weekly cron expressions of Application Auto Scaling scheduled actions, as minutes of the week.

Application Auto Scaling user guide, "Schedule recurring scaling actions using cron expressions":
six fields ``[Minutes] [Hours] [Day_of_Month] [Month] [Day_of_Week] [Year]``, days of the week
numbered 1-7 from Sunday. Minute 0 of the week is Monday 00:00.

Why not a library (checked on PyPI, issue 16): ``croniter`` reads a sixth field as seconds,
numbers days from Monday and rejects a year; ``pyawscron`` (last release 2024) enumerates AWS
expressions in UTC only, accepts invalid ones and raises on ``0 0 29 2 ? *``;
``aws-cron-expression-validator`` validates but cannot enumerate fire times. This project needs
only the weekly subset, in a time zone, as minutes of the week: the ~60 lines below.
"""

import re
from dataclasses import dataclass

MINUTES_PER_WEEK = 7 * 24 * 60
DAY_NAMES = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
# Application Auto Scaling (EventBridge) cron numbers days 1-7 starting with Sunday.
_CRON_DAY_NUMBER = {"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}


def _expand(field: str, low: int, high: int, names: tuple[str, ...] = (), name_base: int = 0) -> set[int]:
    """Expand one cron field (``*``, ``5``, ``1-5``, ``0/15``, ``MON,WED``) to its values."""

    def number(token: str) -> int:
        upper = token.upper()
        if names and upper in names:
            return names.index(upper) + name_base
        if not token.isdigit():
            raise ValueError(f"{token!r} is not a number{' or name' if names else ''}")
        value = int(token)
        if not low <= value <= high:
            raise ValueError(f"{value} is outside {low}-{high}")
        return value

    values: set[int] = set()
    for part in field.split(","):
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise ValueError(f"step {step_text!r} must be a positive number")
            step = int(step_text)
        if base == "*":
            start, end = low, high
        elif "-" in base:
            first, _, last = base.partition("-")
            start, end = number(first), number(last)
            if start > end:
                raise ValueError(f"range {base!r} runs backwards")
        else:
            start = number(base)
            end = high if step_text else start
        values.update(range(start, end + 1, step))
    return values


@dataclass(frozen=True)
class WeeklyCron:
    """A parsed weekly cron expression: the minutes of the week (Monday 00:00 = 0) it fires at."""

    expression: str
    minutes_of_week: tuple[int, ...]


def parse_weekly_cron(expression: str) -> WeeklyCron:
    """Parse and validate an Application Auto Scaling ``cron(...)`` expression.

    The format has six fields ``cron(min hour day-of-month month day-of-week year)``;
    exactly one of day-of-month and day-of-week is ``?`` (Application Auto Scaling user
    guide, "Schedule recurring scaling actions using cron expressions"; EventBridge cron
    reference). Day-of-week is 1-7 (1 = SUN) or SUN-SAT.

    This project's schedules must repeat weekly so the warm-floor checks and the capacity
    plan can evaluate them: day-of-month ``*``/``?``, month ``*`` and year ``*``.

    Raises:
        ValueError: a one-line message naming the expression and what is wrong.
    """
    match = re.fullmatch(r"cron\((.*)\)", expression.strip())
    if not match:
        raise ValueError(f"{expression!r} must look like cron(min hour day-of-month month day-of-week year)")
    fields = match.group(1).split()
    if len(fields) != 6:
        raise ValueError(
            f"{expression!r} has {len(fields)} fields; Application Auto Scaling cron has 6: "
            "min hour day-of-month month day-of-week year"
        )
    minute, hour, dom, month, dow, year = fields
    if (dom == "?") == (dow == "?"):
        raise ValueError(f"{expression!r}: exactly one of day-of-month ({dom!r}) and day-of-week ({dow!r}) must be '?'")
    try:
        minutes = _expand(minute, 0, 59)
        hours = _expand(hour, 0, 23)
        days = _weekly_days(dom, month, year, dow)
    except ValueError as exc:
        raise ValueError(f"{expression!r}: {exc}") from None
    # cron day 2 = MON -> 0
    fire = [((day - 2) % 7) * 1440 + h * 60 + m for day in days for h in hours for m in minutes]
    return WeeklyCron(expression=expression, minutes_of_week=tuple(sorted(fire)))


def _weekly_days(dom: str, month: str, year: str, dow: str) -> set[int]:
    """The cron days of the week (1 = SUN) the fields name; ValueError when they do not repeat weekly."""
    if dom not in ("*", "?"):
        raise ValueError(f"day-of-month {dom!r} is not weekly; use '*' or '?' with a day-of-week")
    if month != "*":
        raise ValueError(f"month {month!r} is not weekly; use '*'")
    if year != "*":
        raise ValueError(f"year {year!r} is not weekly; use '*'")
    if dow in {"?", "*"}:
        return set(range(1, 8))
    if "#" in dow or "L" in dow.upper():
        raise ValueError(f"day-of-week {dow!r}: 'L' and '#' are not weekly")
    return _expand(dow, 1, 7, ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"), 1)


def weekly_cron(minute_of_week: int) -> str:
    """The ``cron(...)`` that fires once a week at ``minute_of_week`` (Monday 00:00 = 0)."""
    minute_of_week %= MINUTES_PER_WEEK
    day, rest = divmod(minute_of_week, 1440)
    hour, minute = divmod(rest, 60)
    return f"cron({minute} {hour} ? * {DAY_NAMES[day]} *)"


def format_minute_of_week(minute_of_week: int) -> str:
    """``MON 16:00`` style label of a minute of the week."""
    day, rest = divmod(minute_of_week % MINUTES_PER_WEEK, 1440)
    return f"{DAY_NAMES[day]} {rest // 60:02d}:{rest % 60:02d}"
