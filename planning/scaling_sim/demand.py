"""Demand: requests per minute over the simulated time, the configured week or a CSV.

Minute 0 is Monday 00:00 in ``scaling.timezone`` (JST by default), as in
:mod:`planning.weekly_cron`. The week is the ``traffic`` section (app_config/traffic.py: the
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
import math
from pathlib import Path

from planning.demand_week import (  # in app_config: synth derives dated-event floors from it
    DEFAULT_TRAFFIC,
    MINUTES_PER_DAY,
    base_rate,
    release_factor,
    shape_weight,
    week,
    week_scale,
)

__all__ = [
    "DEFAULT_TRAFFIC",
    "MINUTES_PER_DAY",
    "DemandError",
    "base_rate",
    "default_week",
    "load_csv",
    "release_factor",
    "shape_weight",
    "week",
    "week_scale",
]


class DemandError(ValueError):
    """A demand CSV that cannot be read; the message is one line naming file, row, column and value."""


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
