"""The configured week drawn minute by minute: requests per minute from the ``traffic`` section.

Minute 0 is Monday 00:00 in ``scaling.timezone``, as in :mod:`planning.weekly_cron`. Here in
``app_config`` because synth needs it too: a dated event's derived floor is its demand at the
event (the usual demand then times its multiplier) over one instance's capacity
(:mod:`app_config.dated_events`). ``planning/scaling_sim/demand.py`` describes the drawing and
re-exports these.
"""

import functools
import itertools

from app_config.traffic import TrafficConfig
from planning.weekly_cron import MINUTES_PER_WEEK

MINUTES_PER_DAY = 1440
DEFAULT_TRAFFIC = TrafficConfig()


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


@functools.lru_cache(maxsize=8)
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
