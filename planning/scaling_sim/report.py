"""Figures of one run, the plain-text report and the baseline-vs-override comparison.

Instance-hours count the desired capacity (InService plus launching instances) minute by
minute: an upper estimate of what SageMaker bills. Monthly figures scale the simulated
duration to ``scaling.hours_per_month``.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from planning.scaling_sim.demand import MINUTES_PER_DAY
from planning.scaling_sim.engine import MinuteRecord
from planning.weekly_cron import DAY_NAMES, format_minute_of_week

RELEASE_WINDOW_MIN = 4 * 60
"""Minutes after an event's start that count as its release window."""

HOURS_PER_BUCKET = 3
"""Hours per row of the instances-over-time grid."""

_FLEET_FIGURES = 12


@dataclass(frozen=True)
class ReleaseWindow:
    """Queue and SLO figures of one configured event's window [start, start + 4 h)."""

    name: str
    start: int
    queue_minutes: int
    slo_minutes: int
    peak_queue: float
    peak_in_service: int


@dataclass(frozen=True)
class Summary:
    """The headline figures of one run (``inputs`` are display lines)."""

    title: str
    inputs: tuple[str, ...]
    minutes: int
    slo_minutes: int
    queue_minutes: int
    peak_queue: float
    peak_queue_minute: int
    peak_in_service: int
    peak_desired: int
    instance_hours: float
    monthly_cost_usd: float
    scale_outs: int
    scale_ins: int
    scale_ins_at_full_load: int
    activities: int
    releases: tuple[ReleaseWindow, ...]
    grid: tuple[tuple[str, ...], ...]
    abandoned: float = 0.0
    demand_total: float = 0.0
    cliff_minutes: int = 0
    """Minutes whose demand per InService instance reached the engine's cliff (the engine curve's)."""

    @property
    def abandoned_share(self) -> float:
        """Abandoned requests over all requests of the run (0 with no demand)."""
        return self.abandoned / self.demand_total if self.demand_total else 0.0


def _release_window(name: str, start: int, records: Sequence[MinuteRecord]) -> ReleaseWindow:
    window = [r for r in records if start <= r.minute < start + RELEASE_WINDOW_MIN]
    return ReleaseWindow(
        name=name,
        start=start,
        queue_minutes=sum(1 for r in window if r.queued > 0),
        slo_minutes=sum(1 for r in window if r.above_slo),
        peak_queue=max((r.queued for r in window), default=0.0),
        peak_in_service=max((r.in_service for r in window), default=0),
    )


def _grid(records: Sequence[MinuteRecord]) -> tuple[tuple[str, ...], ...]:
    """Rows of 'min-max InService' per 3-hour bucket (rows) and day (columns)."""
    bucket = HOURS_PER_BUCKET * 60
    days = min(7, -(-len(records) // MINUTES_PER_DAY))
    rows = []
    for start in range(0, MINUTES_PER_DAY, bucket):
        cells = []
        for day in range(days):
            chunk = records[day * MINUTES_PER_DAY + start : day * MINUTES_PER_DAY + start + bucket]
            counts = [r.in_service for r in chunk]
            cells.append(f"{min(counts)}-{max(counts)}" if counts else "")
        rows.append((f"{start // 60:02d}-{(start + bucket) // 60:02d}", *cells))
    return tuple(rows)


def summarize(
    title: str,
    inputs: Sequence[str],
    records: Sequence[MinuteRecord],
    *,
    price_usd_per_hour: float,
    hours_per_month: float,
    events: Sequence[tuple[str, int]],
) -> Summary:
    """Figures of ``records``; ``events`` are (name, minute of the week) of the configured events."""
    peak = max(records, key=lambda r: r.queued)
    instance_hours = sum(r.desired for r in records) / 60
    duration_h = len(records) / 60
    return Summary(
        title=title,
        inputs=tuple(inputs),
        minutes=len(records),
        slo_minutes=sum(1 for r in records if r.above_slo),
        queue_minutes=sum(1 for r in records if r.queued > 0),
        peak_queue=peak.queued,
        peak_queue_minute=peak.minute,
        peak_in_service=max(r.in_service for r in records),
        peak_desired=max(r.desired for r in records),
        instance_hours=instance_hours,
        monthly_cost_usd=instance_hours * hours_per_month / duration_h * price_usd_per_hour,
        scale_outs=sum(1 for r in records if r.policy_change > 0 or r.scheduled_change > 0),
        scale_ins=sum(1 for r in records if r.policy_change < 0 or r.scheduled_change < 0),
        scale_ins_at_full_load=sum(
            1 for r in records if (r.policy_change < 0 or r.scheduled_change < 0) and r.at_full_load
        ),
        activities=sum((r.policy_change != 0) + (r.scheduled_change != 0) for r in records),
        releases=tuple(_release_window(name, start, records) for name, start in events if start < len(records)),
        grid=_grid(records),
        abandoned=sum(r.abandoned for r in records),
        demand_total=sum(r.demand for r in records),
        cliff_minutes=sum(1 for r in records if r.past_cliff),
    )


def headline(summary: Summary) -> list[tuple[str, float, str]]:
    """(label, value, format) of the figures that ``--compare`` puts side by side."""
    figures = [
        ("minutes past the cliff", summary.cliff_minutes, "{:,.0f}"),
        ("minutes above the TTFT SLO", summary.slo_minutes, "{:,.0f}"),
        ("minutes with a queue", summary.queue_minutes, "{:,.0f}"),
        ("peak queue (requests)", summary.peak_queue, "{:,.0f}"),
        ("abandoned requests", summary.abandoned, "{:,.0f}"),
        ("peak instances InService", summary.peak_in_service, "{:,.0f}"),
        ("peak desired capacity", summary.peak_desired, "{:,.0f}"),
        ("instance-hours", summary.instance_hours, "{:,.1f}"),
        ("monthly cost (USD)", summary.monthly_cost_usd, "{:,.2f}"),
        ("scaling activities", summary.activities, "{:,.0f}"),
        ("scale-outs", summary.scale_outs, "{:,.0f}"),
        ("scale-ins", summary.scale_ins, "{:,.0f}"),
        ("scale-ins at full load", summary.scale_ins_at_full_load, "{:,.0f}"),
    ]
    for window in summary.releases:
        figures.append((f"{window.name}: queue minutes", window.queue_minutes, "{:,.0f}"))
        figures.append((f"{window.name}: peak queue", window.peak_queue, "{:,.0f}"))
    return figures


def format_grid(grid: Sequence[Sequence[str]]) -> list[str]:
    """The InService grid's lines: a column per day, each at least one space wider than its widest
    cell (``100-100`` at 100 or more instances ran into its neighbour at a fixed width of 7)."""
    days = DAY_NAMES[: len(grid[0]) - 1]
    width = max(7, 1 + max((len(cell) for row in grid for cell in row[1:]), default=0))
    header = "  hours " + "".join(f"{day:>{width}}" for day in days)
    return [header, *("  " + f"{row[0]:<6}" + "".join(f"{cell:>{width}}" for cell in row[1:]) for row in grid)]


def format_summary(summary: Summary) -> str:
    """The one-screen plain-text report of one run."""
    lines = [summary.title, *(f"  {line}" for line in summary.inputs), ""]
    lines.append(f"Simulated {summary.minutes:,} minutes ({summary.minutes / 60:,.1f} h):")
    for label, value, fmt in headline(summary)[:_FLEET_FIGURES]:
        lines.append(f"  {label:<28} {fmt.format(value)}")
        if label.startswith("peak queue"):
            at = format_minute_of_week(summary.peak_queue_minute) if summary.peak_queue > 0 else "none"
            lines.append(f"  {'peak queue at':<28} {at}")
        if label == "abandoned requests":
            lines[-1] += f" ({summary.abandoned_share:.2%} of {summary.demand_total:,.0f})"
    lines += ["", f"InService instances, min-max per {HOURS_PER_BUCKET} h:"]
    lines += format_grid(summary.grid)
    if summary.releases:
        lines += ["", f"Release windows [event, event + {RELEASE_WINDOW_MIN // 60} h):"]
        for w in summary.releases:
            lines.append(
                f"  {w.name:<18} {format_minute_of_week(w.start)}  queue {w.queue_minutes:>4} min  "
                f"above SLO {w.slo_minutes:>4} min  peak queue {w.peak_queue:>7,.0f}  "
                f"peak InService {w.peak_in_service}"
            )
    return "\n".join(lines)


def format_comparison(baseline: Summary, changed: Summary) -> str:
    """Baseline and override side by side with the delta of every headline figure."""
    lines = ["Comparison: baseline (no -c but stage) -> override"]
    lines.append(f"  {'':<36} {'baseline':>12} {'override':>12} {'delta':>12}")
    new = {label: value for label, value, _ in headline(changed)}
    for label, value, fmt in headline(baseline):
        if label not in new:
            lines.append(f"  {label:<36} {fmt.format(value):>12} {'-':>12} {'-':>12}")
            continue
        delta = new[label] - value
        sign = "+" if delta > 0 else ""
        lines.append(
            f"  {label:<36} {fmt.format(value):>12} {fmt.format(new[label]):>12} {sign + fmt.format(delta):>12}"
        )
    return "\n".join(lines)
