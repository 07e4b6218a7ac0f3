"""Demand: requests per minute over the simulated time, the default week or a CSV.

Minute 0 is Monday 00:00 in ``scaling.timezone`` (JST by default), as in
:mod:`app_config.weekly_cron`.

The default week is an ASSUMPTION drawn to match the seeds, not a measurement:

* seed 001 user story 4: "At 3 AM JST, traffic dropped to ~500 requests/minute" and
  "One instance capacity: ~1,200 requests/minute";
* seed 003 §9: the JP evening peak 18:00-22:00 JST;
* seed 001 user story 7: release multipliers Shonen Jump MON 18:00 x2.0 and Shonen Magazine
  WED 18:00 x1.8, and the One Piece incident shape ("traffic spiked 3x in 15 minutes"), so a
  release ramps to its multiplier over 15 minutes from 18:00, holds ~2 h and decays over ~2 h;
* the Friday release at 18:00 (seed 001 user story 4 pre-scales Fridays to min 8): its
  multiplier x2.0 is ASSUMED (the seeds give none).

The base curve's key points are chosen so that, at ~1,200 requests/minute per instance, the
seeds' scheduled floors (2 off-peak, 4 business hours, 6 evening peak, 8 on release evenings)
carry the load with headroom.
"""

import csv
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

from app_config.weekly_cron import DAY_NAMES, MINUTES_PER_WEEK

MINUTES_PER_DAY = 1440

# (minute of the day, requests per minute); linear in between, 24:00 closes the day.
# Assumptions fitted to the seeds (module docstring): 03:00 = seed 001's "~500 requests/minute";
# 18:00-22:00 = seed 003 §9's JP evening peak; the rest interpolates a usual daytime shape.
DAILY_KEY_POINTS: tuple[tuple[int, float], ...] = (
    (0 * 60, 1_200.0),
    (3 * 60, 500.0),  # seed 001 user story 4: "At 3 AM JST, traffic dropped to ~500 requests/minute"
    (6 * 60, 600.0),
    (9 * 60, 2_000.0),  # business hours: 2,000-2,400 < floor 4 x 1,200
    (12 * 60, 2_400.0),
    (15 * 60, 2_200.0),
    (18 * 60, 3_600.0),  # seed 003 §9 evening peak starts: 3,600-4,000 < floor 6 x 1,200
    (20 * 60, 4_000.0),
    (22 * 60, 3_000.0),  # seed 003 §9 evening peak ends
    (24 * 60, 1_200.0),
)


@dataclass(frozen=True)
class Release:
    """A weekly release: demand x ``multiplier`` around ``day`` ``minute_of_day``."""

    name: str
    day: str
    minute_of_day: int
    multiplier: float

    @property
    def minute_of_week(self) -> int:
        return DAY_NAMES.index(self.day) * MINUTES_PER_DAY + self.minute_of_day


RELEASES: tuple[Release, ...] = (
    Release("shonen-jump", "MON", 18 * 60, 2.0),  # seed 001 user story 7: MON 18:00, multiplier 2.0
    Release("shonen-magazine", "WED", 18 * 60, 1.8),  # seed 001 user story 7: WED 18:00, multiplier 1.8
    Release("friday-release", "FRI", 18 * 60, 2.0),  # seed 001 user story 4 (Fridays 18:00); x2.0 ASSUMED
)
RELEASE_RAMP_MIN = 15  # seed 001 user story 7, One Piece: "traffic spiked 3x in 15 minutes"
RELEASE_HOLD_MIN = 120  # assumption: ~2 h at the multiplier
RELEASE_DECAY_MIN = 120  # assumption: ~2 h back to the base curve


class DemandError(ValueError):
    """A demand CSV that cannot be read; the message is one line naming file, row, column and value."""


def base_rate(minute_of_day: float) -> float:
    """The daily base curve at ``minute_of_day`` (0-1440), requests per minute."""
    for (x0, y0), (x1, y1) in itertools.pairwise(DAILY_KEY_POINTS):
        if x0 <= minute_of_day <= x1:
            return y0 + (y1 - y0) * (minute_of_day - x0) / (x1 - x0)
    raise ValueError(f"minute of day {minute_of_day} is outside 0-{MINUTES_PER_DAY}")


def release_factor(minute_of_week: int, releases: tuple[Release, ...] = RELEASES) -> float:
    """Demand multiplier at ``minute_of_week``: 1 outside every release window, the largest inside."""
    factor = 1.0
    for release in releases:
        since = (minute_of_week - release.minute_of_week) % MINUTES_PER_WEEK
        extra = release.multiplier - 1
        if since < RELEASE_RAMP_MIN:
            value = 1 + extra * since / RELEASE_RAMP_MIN
        elif since < RELEASE_RAMP_MIN + RELEASE_HOLD_MIN:
            value = release.multiplier
        elif since < RELEASE_RAMP_MIN + RELEASE_HOLD_MIN + RELEASE_DECAY_MIN:
            value = release.multiplier - extra * (since - RELEASE_RAMP_MIN - RELEASE_HOLD_MIN) / RELEASE_DECAY_MIN
        else:
            value = 1.0
        factor = max(factor, value)
    return factor


def default_week(scale: float = 1.0) -> list[float]:
    """The default week, 10,080 values of requests per minute (module docstring for the sources)."""
    return [base_rate(minute % MINUTES_PER_DAY) * release_factor(minute) * scale for minute in range(MINUTES_PER_WEEK)]


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
