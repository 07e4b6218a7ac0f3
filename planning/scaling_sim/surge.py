"""The unforeseen-surge scenario (``--scenario surge``): demand x3 at an hour no schedule lifts.

Seed 001 user story 7, the One Piece chapter 1,100 release: "traffic spiked 3x in 15 minutes"
and reactive scaling could not keep up. That release was known; this scenario asks what the
fleet does when such a spike comes at an hour the schedule does not expect (default TUE 02:00
JST, inside the off-peak window, no release event), so only the reactive policies and the
ceiling in force can answer it. The shape reuses the weekly releases' ramp, hold and decay
(:mod:`.demand`); the multiplier applies to the demand the curve has at each minute.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from app_config.traffic import ReleaseDemandConfig, TrafficConfig
from planning.scaling_sim.demand import DEFAULT_TRAFFIC, release_factor
from planning.scaling_sim.engine import MinuteRecord
from planning.weekly_cron import DAY_NAMES, MINUTES_PER_WEEK, format_minute_of_week

SURGE_MULTIPLIER = 3.0
"""Seed 001 user story 7: "traffic spiked 3x in 15 minutes" (One Piece chapter 1,100)."""

DEFAULT_SURGE_AT = "TUE 02:00"
"""An hour in the off-peak window (01:00-08:00 JST) with no release event and no scheduled lift."""

SURGE_WINDOW_MIN = (
    DEFAULT_TRAFFIC.release_ramp_min + DEFAULT_TRAFFIC.release_hold_min + DEFAULT_TRAFFIC.release_decay_min
)
"""Minutes from the surge's start to demand back on the curve (15 + 120 + 120 with the default traffic)."""

TIMELINE_STEP_MIN = 15


def parse_at(text: str) -> int:
    """``"TUE 02:00"`` -> minute of the week (MON 00:00 = 0).

    Raises:
        ValueError: one line naming the value and the allowed form.
    """
    parts = text.split()
    try:
        day, clock = parts
        hour, minute = (int(part) for part in clock.split(":"))
        if day.upper() not in DAY_NAMES or not (0 <= hour < 24 and 0 <= minute < 60):
            raise ValueError
    except ValueError:
        raise ValueError(f"--surge-at {text!r}: expected DAY HH:MM with DAY one of {', '.join(DAY_NAMES)}") from None
    return DAY_NAMES.index(day.upper()) * 1440 + hour * 60 + minute


def overlay(
    demand: Sequence[float], start: int, multiplier: float = SURGE_MULTIPLIER, traffic: TrafficConfig = DEFAULT_TRAFFIC
) -> list[float]:
    """``demand`` (requests per minute, minute 0 = MON 00:00) with the surge from ``start``.

    The surge ramps to ``multiplier`` x the curve, holds and decays like ``traffic``'s releases
    (15 minutes, 2 h, 2 h by default). A release already above it keeps its own factor.
    """
    day, minute_of_day = divmod(start % MINUTES_PER_WEEK, 1440)
    release = ReleaseDemandConfig(
        name="surge",
        day_of_week=DAY_NAMES[day],
        time=f"{minute_of_day // 60:02d}:{minute_of_day % 60:02d}",
        multiplier=multiplier,
    )
    surge = traffic.model_copy(update={"releases": (release,)})
    return [rate * release_factor(minute % MINUTES_PER_WEEK, surge) for minute, rate in enumerate(demand)]


@dataclass(frozen=True)
class SurgeWindow:
    """What the fleet did from the surge's start until demand is back on the curve."""

    start: int
    queue_minutes: int
    slo_minutes: int
    cliff_minutes: int
    peak_queue: float
    peak_in_service: int
    max_capacity_at_start: int
    minutes_at_max: int
    timeline: tuple[MinuteRecord, ...]


def window(records: Sequence[MinuteRecord], start: int) -> SurgeWindow:
    """Figures of the surge window of ``records`` (one per minute, index = minute)."""
    span = [records[(start + offset) % len(records)] for offset in range(min(SURGE_WINDOW_MIN, len(records)))]
    return SurgeWindow(
        start=start,
        queue_minutes=sum(1 for r in span if r.queued > 0),
        slo_minutes=sum(1 for r in span if r.above_slo),
        cliff_minutes=sum(1 for r in span if r.past_cliff),
        peak_queue=max((r.queued for r in span), default=0.0),
        peak_in_service=max((r.in_service for r in span), default=0),
        max_capacity_at_start=span[0].max_capacity if span else 0,
        minutes_at_max=sum(1 for r in span if r.desired >= r.max_capacity),
        timeline=tuple(span[::TIMELINE_STEP_MIN]),
    )


def format_window(surge: SurgeWindow) -> str:
    """The surge's figures and a 15-minute timeline: demand, instances, ceiling, queue, TTFT."""
    lines = [
        f"Unforeseen surge: x{SURGE_MULTIPLIER:g} from {format_minute_of_week(surge.start)} "
        f"(seed 001 user story 7 shape), {SURGE_WINDOW_MIN} min window",
        f"  minutes past the cliff     {surge.cliff_minutes:>6,}",
        f"  minutes with a queue       {surge.queue_minutes:>6,}",
        f"  minutes above TTFT SLO     {surge.slo_minutes:>6,}",
        f"  peak queue (requests)      {surge.peak_queue:>6,.0f}",
        f"  peak instances InService   {surge.peak_in_service:>6}",
        f"  max_capacity at the start  {surge.max_capacity_at_start:>6}",
        f"  minutes desired at max     {surge.minutes_at_max:>6,}",
        "",
        "  time        demand/min  in service  desired  max  queued  TTFT ms  KV %",
    ]
    for r in surge.timeline:
        lines.append(
            f"  {format_minute_of_week(r.minute):<10} {r.demand:>11,.0f} {r.in_service:>11} {r.desired:>8} "
            f"{r.max_capacity:>4} {r.queued:>7,.0f} {r.ttft_ms:>8,.0f} {100 * r.kv_cache_usage:>5.0f}"
        )
    return "\n".join(lines)
