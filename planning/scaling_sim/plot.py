"""PNG of one simulated run (matplotlib, Agg backend: no display needed).

Three stacked panels sharing the time axis: demand and served requests per minute; desired
and InService instances with the scheduled min/max; the queue and the requests abandoned per
minute. Release events are marked with vertical lines on every panel. Each legend sits to the
right of its panel, outside the axes: inside, it hid the desired/InService lines (issue 40 item 13).
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from planning.scaling_sim.demand import MINUTES_PER_DAY
from planning.scaling_sim.engine import MinuteRecord
from planning.weekly_cron import DAY_NAMES


def write_png(
    records: Sequence[MinuteRecord],
    events: Sequence[tuple[str, int]],
    path: Path,
    title: str,
    metadata: dict[str, str] | None = None,
) -> None:
    """Write the run's figure to ``path`` (PNG); ``metadata`` goes into its text chunks."""
    fig = figure(records, events, title)
    import matplotlib.pyplot as plt  # noqa: PLC0415 - after figure() chose the Agg backend

    fig.savefig(path, format="png", dpi=100, bbox_inches="tight", metadata=metadata or {})
    plt.close(fig)


def figure(records: Sequence[MinuteRecord], events: Sequence[tuple[str, int]], title: str) -> Any:
    """The run's matplotlib ``Figure`` (three axes, each with its legend outside, on the right)."""
    import matplotlib  # noqa: PLC0415 - imported only when a plot is asked for (slow import)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    hours = [r.minute / 60 for r in records]
    fig, (load, fleet, queue) = plt.subplots(3, 1, figsize=(14, 9), sharex=True)
    load.plot(hours, [r.demand for r in records], label="demand", linewidth=0.8)
    load.plot(hours, [r.served for r in records], label="served", linewidth=0.8)
    load.set_ylabel("requests / min")
    # The fleet over its bounds: where desired sits on the scheduled min, the min must not hide it.
    fleet.step(hours, [r.min_capacity for r in records], where="post", label="scheduled min", linestyle="--", zorder=1)
    fleet.step(hours, [r.max_capacity for r in records], where="post", label="scheduled max", linestyle=":", zorder=1)
    fleet.step(hours, [r.desired for r in records], where="post", label="desired", linewidth=1.2, zorder=3)
    fleet.step(hours, [r.in_service for r in records], where="post", label="InService", linewidth=0.8, zorder=4)
    fleet.set_ylabel("instances")
    queue.fill_between(hours, [r.queued for r in records], step="post", label="queued", alpha=0.6)
    queue.step(hours, [r.abandoned for r in records], where="post", label="abandoned / min", linewidth=0.8)
    queue.set_ylabel("queued requests")
    duration_h = len(records) / 60
    for axis in (load, fleet, queue):
        for _name, start in events:
            if start < len(records):
                axis.axvline(start / 60, color="red", linewidth=0.6, alpha=0.6)
        axis.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0.0, fontsize="small")
        axis.grid(alpha=0.3)
    for name, start in events:
        if start < len(records):
            load.annotate(name, (start / 60, 1.0), xycoords=("data", "axes fraction"), fontsize="x-small", va="top")
    days = int(duration_h // 24) + 1
    queue.set_xticks([day * 24 for day in range(days)], [DAY_NAMES[day % 7] for day in range(days)])
    queue.set_xlim(0, duration_h)
    queue.set_xlabel(f"hours from Monday 00:00 ({MINUTES_PER_DAY} min per day)")
    fig.suptitle(title)
    fig.tight_layout()  # makes room on the right for the legends outside the axes
    return fig
