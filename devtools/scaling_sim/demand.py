"""Demand: requests per minute over the simulated time, the configured week or a CSV.

Minute 0 is Monday 00:00 in ``scaling.timezone`` (JST by default), as in
:mod:`app_config.weekly_cron`. The week is the ``traffic`` section (app_config/traffic.py: the
volume, the daily shape, the release evenings, and the seeds' conflict about the volume); this
module only draws it minute by minute:

* the daily shape's key points, linear in between;
* each release ramps to its multiplier over ``release_ramp_min`` from its start, holds
  ``release_hold_min`` and decays over ``release_decay_min`` (the largest factor wins where
  windows overlap);
* one factor scales the whole week so that its mean day is ``traffic.requests_per_day``, or its
  busiest minute ``traffic.peak_requests_per_minute`` when that is set.
"""

import csv
import functools
import itertools
import math
from pathlib import Path

from app_config.traffic import TrafficConfig
from app_config.weekly_cron import MINUTES_PER_WEEK

MINUTES_PER_DAY = 1440
DEFAULT_TRAFFIC = TrafficConfig()


class DemandError(ValueError):
    """A demand CSV that cannot be read; the message is one line naming file, row, column and value."""


def shape_weight(minute_of_day: float, traffic: TrafficConfig = DEFAULT_TRAFFIC) -> float:
    """The daily shape's relative weight at ``minute_of_day`` (0-1440), before the week's scale."""
    for (x0, y0), (x1, y1) in itertools.pairwise(traffic.key_points()):
        if x0 <= minute_of_day <= x1:
            return y0 + (y1 - y0) * (minute_of_day - x0) / (x1 - x0)
    raise ValueError(f"minute of day {minute_of_day} is outside 0-{MINUTES_PER_DAY}")


def release_factor(minute_of_week: int, traffic: TrafficConfig = DEFAULT_TRAFFIC) -> float:
    """Demand multiplier at ``minute_of_week``: 1 outside every release window, the largest inside."""
    ramp, hold, decay = traffic.release_ramp_min, traffic.release_hold_min, traffic.release_decay_min
    factor = 1.0
    for release in traffic.releases:
        since = (minute_of_week - release.minute_of_week) % MINUTES_PER_WEEK
        extra = release.multiplier - 1
        if since < ramp:
            value = 1 + extra * since / ramp
        elif since < ramp + hold:
            value = release.multiplier
        elif since < ramp + hold + decay:
            value = release.multiplier - extra * (since - ramp - hold) / decay
        else:
            value = 1.0
        factor = max(factor, value)
    return factor


def week_scale(traffic: TrafficConfig = DEFAULT_TRAFFIC) -> float:
    """Requests per minute per unit of shape weight: the factor that gives the configured volume."""
    raw = [
        shape_weight(minute % MINUTES_PER_DAY, traffic) * release_factor(minute, traffic)
        for minute in range(MINUTES_PER_WEEK)
    ]
    if traffic.peak_requests_per_minute is not None:
        return traffic.peak_requests_per_minute / max(raw)
    return traffic.requests_per_day * 7 / sum(raw)


def base_rate(minute_of_day: float, traffic: TrafficConfig = DEFAULT_TRAFFIC) -> float:
    """The usual (non-release) demand at ``minute_of_day``, requests per minute."""
    return shape_weight(minute_of_day, traffic) * week_scale(traffic)


def week(traffic: TrafficConfig = DEFAULT_TRAFFIC, scale: float = 1.0) -> list[float]:
    """The configured week, 10,080 values of requests per minute, times ``scale``."""
    return [rate * scale for rate in _week(traffic)]


@functools.lru_cache(maxsize=8)
def _week(traffic: TrafficConfig) -> tuple[float, ...]:
    # The section is frozen (hashable); plan and simulation ask for the same week many times.
    factor = week_scale(traffic)
    return tuple(
        shape_weight(minute % MINUTES_PER_DAY, traffic) * release_factor(minute, traffic) * factor
        for minute in range(MINUTES_PER_WEEK)
    )


def default_week(scale: float = 1.0) -> list[float]:
    """The default ``traffic`` section's week (:func:`week`), times ``scale``."""
    return week(DEFAULT_TRAFFIC, scale)


def load_csv(path: Path, scale: float = 1.0) -> list[float]:
    """Requests per minute from a CSV with a ``requests_per_minute`` column (and optionally ``minute``).

    Any number of rows >= 1; the row count is the simulated duration (10,080 = one week). With a
    ``minute`` column, row ``i`` must have minute ``i`` (0, 1, 2, ...).

    Raises:
        DemandError: one line naming the file, the row (1 = the header) and column, the value and
            what is allowed.
    """
    try:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            columns = [name.strip() for name in reader.fieldnames or ()]
            if "requests_per_minute" not in columns:
                raise DemandError(
                    f"{path}: row 1: no 'requests_per_minute' column (found: {', '.join(columns) or 'nothing'}); "
                    "allowed columns: requests_per_minute and optionally minute"
                )
            unknown = sorted(set(columns) - {"requests_per_minute", "minute"})
            if unknown:
                raise DemandError(
                    f"{path}: row 1: unknown column(s) {', '.join(unknown)}; "
                    "allowed columns: requests_per_minute and optionally minute"
                )
            values: list[float] = []
            for index, raw_row in enumerate(reader):
                row = {(key or "").strip(): (value or "").strip() for key, value in raw_row.items()}
                line = index + 2  # the header is row 1
                values.append(_rate(path, line, row.get("requests_per_minute", "")) * scale)
                if "minute" in row and row["minute"] != str(index):
                    raise DemandError(
                        f"{path}: row {line}, column minute: {row['minute']!r}; expected {index} "
                        "(minutes count 0, 1, 2, ... one row each)"
                    )
    except OSError as exc:
        raise DemandError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not values:
        raise DemandError(f"{path}: no data rows; need at least 1 row of requests_per_minute")
    return values


def _rate(path: Path, line: int, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise DemandError(
            f"{path}: row {line}, column requests_per_minute: {text!r} is not allowed; "
            "expected a finite number >= 0 (requests per minute)"
        )
    return value
