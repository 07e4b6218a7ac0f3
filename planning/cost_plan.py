"""Capacity and cost plan of the week, from the same config a synth uses.

Reads ``cdk.json``'s context plus ``-c key=value`` overrides through the same loader as
``app.py`` (no AWS access), replays every scheduled action of each production variant
over one week in ``scaling.timezone`` and prints:

* the transitions (when each action fires and the bounds it sets);
* the effective min/max per hour and day, as in force at the end of the hour;
* weekly and monthly instance-hours of the floor (min) and the ceiling (max), and the
  on-demand cost band floor-hours x price .. ceiling-hours x price;
* each dated event (``scaling.<variant>.dated_events``): its window, how its floor is derived
  and the one-off ``at(...)`` actions it becomes. They fall outside the weekly figures above.

Actual cost lies inside the band: autoscaling moves between the floor and the ceiling.
A variant without scaling runs its ``initial_instance_count`` all week.

Usage::

    python -m planning.cost_plan
    python -m planning.cost_plan -c stage=dev
    python -m planning.cost_plan --compare -c scaling.primary.release_lead_time_min=180
    python -m planning.cost_plan --plot week.png      # needs matplotlib (optional)
"""

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app_config import AppConfig, ConfigError
from app_config.compile_cache import instance_start_s
from app_config.loader import CDK_JSON
from app_config.scaling import ScalingConfig
from app_config.serving import ServingConfig, VariantConfig
from app_config.variants import Variant
from planning import fleet_planner, memory_report
from planning.dated_schedule import (
    EVENT_HEADROOM,
    derived_floor,
    one_off_actions,
    usual_peak_rpm,
    weekly_segments,
)
from planning.instance_prices import hourly_price
from planning.make_plan import load_plan
from planning.plan import Plan
from planning.weekly_cron import DAY_NAMES, MINUTES_PER_WEEK, format_minute_of_week
from planning.weekly_plan import Bounds, bounds_at, effective_bounds
from serving_contract.env import start_up_ranges

REPO = Path(__file__).resolve().parent.parent
HOURS_PER_WEEK = MINUTES_PER_WEEK / 60


@dataclass(frozen=True)
class VariantPlan:
    """One variant's week: bounds timeline, hourly grid and costs.

    ``hourly[day][hour]`` is the (min, max) in force at ``hour``:59 of ``day`` (MON = 0).
    Instance-hours are exact to the minute; monthly figures scale the week by
    ``hours_per_month / 168``.
    """

    variant_name: str
    instance_type: str
    price_usd_per_hour: float
    timeline: list[Bounds]
    hourly: list[list[tuple[int, int]]]
    floor_hours_per_week: float
    ceiling_hours_per_week: float
    hours_per_month: float
    pool_prices: tuple[tuple[str, float], ...] = ()
    """With ``instance_pools``: each type and its price, priority order. ``price_usd_per_hour`` is then the
    dearest (the worst case: SageMaker may fill the variant with any of its types) and ``instance_type`` the
    types joined by `` > ``."""

    @property
    def floor_hours_per_month(self) -> float:
        return self.floor_hours_per_week * self.hours_per_month / HOURS_PER_WEEK

    @property
    def ceiling_hours_per_month(self) -> float:
        return self.ceiling_hours_per_week * self.hours_per_month / HOURS_PER_WEEK

    @property
    def monthly_cost_band_usd(self) -> tuple[float, float]:
        return (
            self.floor_hours_per_month * self.price_usd_per_hour,
            self.ceiling_hours_per_month * self.price_usd_per_hour,
        )


def _instance_hours(timeline: list[Bounds], attribute: str) -> float:
    total = 0
    for index, bounds in enumerate(timeline):
        end = timeline[index + 1].start if index + 1 < len(timeline) else MINUTES_PER_WEEK
        total += getattr(bounds, attribute) * (end - bounds.start)
    return total / 60


def price_usd_per_hour(scaling: ScalingConfig, variant: VariantConfig) -> float:
    """The on-demand price of ``variant``'s instance type: ``scaling.hourly_price_usd``, else the price table;
    with ``instance_pools``, the dearest of its types (the worst case).

    Raises:
        ConfigError: an instance type has no price (planning/instance_prices.py).
    """
    return max(_price(scaling, instance_type, variant.variant_name) for instance_type in variant.instance_types)


def _price(scaling: ScalingConfig, instance_type: str, where: str) -> float:
    try:
        return hourly_price(instance_type, scaling.hourly_price_usd).usd_per_hour
    except ValueError as error:
        raise ConfigError([f"{where}: {error}"]) from None


def plan(config: AppConfig, planned: Plan) -> list[VariantPlan]:
    """The week of every production variant of ``config`` (``planned``: its plan), primary first.

    Raises:
        ConfigError: a variant's instance type has no price (planning/instance_prices.py).
    """
    plans = []
    for deployed in planned.deployed_variants():
        variant, scaling = deployed.serving, deployed.scaling
        price = price_usd_per_hour(config.scaling, variant)
        if planned.instance_unit(variant.variant_name).is_component:
            pool = config.serving.inference_components
            # SageMaker sizes the pool between these bounds as copies come and go; no schedules.
            timeline = [
                Bounds(
                    0, pool.min_instance_count, pool.max_instance_count, "inference components: managed instance pool"
                )
            ]
        elif scaling.enabled:
            timeline = effective_bounds(scaling.resolved_schedule, variant.min_capacity, variant.max_capacity)
        else:
            count = variant.initial_instance_count
            timeline = [Bounds(0, count, count, "no autoscaling (initial_instance_count)")]
        hourly = [
            [
                (b.min_capacity, b.max_capacity)
                for b in (bounds_at(timeline, day * 1440 + hour * 60 + 59) for hour in range(24))
            ]
            for day in range(7)
        ]
        plans.append(
            VariantPlan(
                variant_name=variant.variant_name,
                instance_type=" > ".join(variant.instance_types),
                price_usd_per_hour=price,
                timeline=timeline,
                hourly=hourly,
                floor_hours_per_week=_instance_hours(timeline, "min_capacity"),
                ceiling_hours_per_week=_instance_hours(timeline, "max_capacity"),
                hours_per_month=config.scaling.hours_per_month,
                pool_prices=tuple(
                    (instance_type, _price(config.scaling, instance_type, variant.variant_name))
                    for instance_type in variant.instance_pools
                ),
            )
        )
    return plans


def dated_event_lines(config: AppConfig, planned: Plan, variant: Variant) -> list[str]:
    """The variant's dated events: window, demand, floor (derived or set) and one-off actions."""
    scaling, serving = variant.scaling, variant.serving
    if not scaling.dated_events or planned.instance_unit(variant.name).is_component:
        return []
    instance_rpm = planned.hardware[variant.key].requests_per_minute  # the weakest type's, with instance_pools
    lines = [f"Dated events (one-off at(...) actions, {config.scaling.timezone}; not in the weekly figures above):"]
    for event in scaling.dated_events:
        peak = usual_peak_rpm(event, config.traffic)
        derived = derived_floor(peak, event.demand_multiplier, instance_rpm, serving.min_capacity)
        formula = (
            f"ceil({peak:,.1f} req/min usual peak x {event.demand_multiplier:g} / {instance_rpm:,.1f} req/min per "
            f"instance x {EVENT_HEADROOM:g}) = {derived} (seed 001 user story 7)"
        )
        floor = (
            f"floor {formula}"
            if event.min_capacity == derived
            else f"floor {event.min_capacity} (min_capacity; derived: {formula})"
        )
        lines.append(
            f"  {event.name}: {event.start:%Y-%m-%d %H:%M} - {event.end:%Y-%m-%d %H:%M}, demand "
            f"x{event.demand_multiplier:g}, {floor}"
        )
    for action in one_off_actions(scaling, serving.min_capacity, serving.max_capacity):
        lines.append(
            f"    {action.schedule}  min {action.min_capacity:>3}  max {action.max_capacity:>3}  {action.name}: "
            f"{action.description}"
        )
    for segment in weekly_segments(scaling, serving.min_capacity):
        if segment.start is not None or segment.end is not None:
            since = f" from {segment.start:%Y-%m-%d %H:%M}" if segment.start else ""
            until = f" until {segment.end:%Y-%m-%d %H:%M}" if segment.end else " on"
            lines.append(f"    weekly {segment.name} ({segment.action.schedule}){since}{until} (split around it)")
    return lines


def pool_lines(plan: VariantPlan) -> list[str]:
    """With ``instance_pools``: each type's price, and that the week is priced at the worst case."""
    if not plan.pool_prices:
        return []
    prices = ", ".join(f"{instance_type} ${price:.3f}/h" for instance_type, price in plan.pool_prices)
    return [
        f"Instance pools ({prices}): priced at the worst case, every instance the dearest type; floors and "
        "targets are the weakest type's (docs/scaling.md, 'Instance pools')"
    ]


def reservation_lines(serving: ServingConfig, variant: Variant) -> list[str]:
    """The variant's reserved capacity (``serving.<variant>.capacity_reservation``): its window, what it costs
    (paid whether used or not, beside the on-demand band above) and when the variant stops serving."""
    reservation = serving.reservations().get(variant.key)
    if reservation is None:
        return []
    per_instance_hour = reservation.upfront_fee_usd / (reservation.instance_count * reservation.hours)
    return [
        f"Reserved capacity {reservation.ml_reservation_arn}: {reservation.instance_count} x "
        f"{reservation.instance_type} {reservation.starts_at:%Y-%m-%d %H:%M} - {reservation.ends_at:%Y-%m-%d %H:%M} "
        f"({reservation.hours:,.0f} h), ${reservation.upfront_fee_usd:,.2f} upfront, paid whether used or not "
        f"(${per_instance_hour:.3f} per instance-hour); instances launch only into it, and the variant stops "
        f"serving at its end (warning to the alarm topic {reservation.warn_before_end_h} h before)",
    ]


def format_plan(config: AppConfig, planned: Plan, plans: Sequence[VariantPlan]) -> str:
    """Human-readable week: transitions, the hourly grid and the cost band per variant."""
    lines = [
        f"Capacity plan for {config.endpoint_name} (stage {config.stage}), times in {config.scaling.timezone}",
        f"Instance start after provisioning: {instance_start_s(config.serving.compile_cache, config.scaling):g} s "
        + (
            f"from the compile cache (serving.compile_cache.enabled; {config.scaling.instance_start_cold_s:g} s cold)"
            if config.serving.compile_cache.enabled
            else f"cold (serving.compile_cache.enabled = false; {config.scaling.instance_start_cached_s:g} s cached)"
        ),
        "Measured start-up: {} cold, {} from the compile cache (H100 on 4 CPUs; serving_contract/env.py)".format(
            *start_up_ranges()
        ),
    ]
    variants = {v.serving.variant_name: v for v in planned.deployed_variants()}
    for p in plans:
        lines += ["", f"== {p.variant_name}: {p.instance_type} at ${p.price_usd_per_hour:.3f}/h =="]
        lines += pool_lines(p)
        lines.append("Transitions (bounds from this time on):")
        for bounds in p.timeline:
            lines.append(
                f"  {format_minute_of_week(bounds.start)}  min {bounds.min_capacity:>3}  max {bounds.max_capacity:>3}"
                f"  {bounds.set_by}"
            )
        lines.append("Effective min-max at the end of each hour:")
        lines.append("  hour " + "".join(f"{day:>8}" for day in DAY_NAMES))
        for hour in range(24):
            cells = "".join(f"{f'{p.hourly[day][hour][0]}-{p.hourly[day][hour][1]}':>8}" for day in range(7))
            lines.append(f"  {hour:02d}:00{cells}")
        low, high = p.monthly_cost_band_usd
        lines += [
            f"Instance-hours per week: floor {p.floor_hours_per_week:.2f}, ceiling {p.ceiling_hours_per_week:.2f}",
            f"Instance-hours per month ({p.hours_per_month:g} h): floor {p.floor_hours_per_month:.2f}, "
            f"ceiling {p.ceiling_hours_per_month:.2f}",
            f"On-demand cost band per month: ${low:,.2f} .. ${high:,.2f}",
            *reservation_lines(config.serving, variants[p.variant_name]),
            *dated_event_lines(config, planned, variants[p.variant_name]),
        ]
    if len(plans) > 1:
        low = sum(p.monthly_cost_band_usd[0] for p in plans)
        high = sum(p.monthly_cost_band_usd[1] for p in plans)
        lines += ["", f"Endpoint total per month: ${low:,.2f} .. ${high:,.2f}"]
    lines += ["", *memory_report.render(memory_report.build(config, planned))]
    slo = config.slo
    lines += [
        "",
        fleet_planner.format_planner(
            config,
            planned,
            slo.cold.ttft_p95_ms,
            slo.warm.ttft_p95_ms,
            slo_source="slo.cold / slo.warm .ttft_p95_ms",
        ),
    ]
    return "\n".join(lines)


def format_comparison(baseline: Sequence[VariantPlan], changed: Sequence[VariantPlan]) -> str:
    """Baseline vs override: instance-hours, cost band and the hour cells that differ."""
    lines = ["Comparison: baseline -> override"]
    by_name = {p.variant_name: p for p in changed}
    for base in baseline:
        new = by_name.get(base.variant_name)
        if new is None:
            lines.append(f"== {base.variant_name}: removed by the override ==")
            continue
        b_low, b_high = base.monthly_cost_band_usd
        n_low, n_high = new.monthly_cost_band_usd
        lines += [
            f"== {base.variant_name} ==",
            f"  floor hours/week:   {base.floor_hours_per_week:.2f} -> {new.floor_hours_per_week:.2f} "
            f"({new.floor_hours_per_week - base.floor_hours_per_week:+.2f})",
            f"  ceiling hours/week: {base.ceiling_hours_per_week:.2f} -> {new.ceiling_hours_per_week:.2f} "
            f"({new.ceiling_hours_per_week - base.ceiling_hours_per_week:+.2f})",
            f"  cost band/month:    ${b_low:,.2f} .. ${b_high:,.2f} -> ${n_low:,.2f} .. ${n_high:,.2f} "
            f"({n_low - b_low:+,.2f} .. {n_high - b_high:+,.2f})",
        ]
        diffs = [
            f"    {DAY_NAMES[day]} {hour:02d}:00  {base.hourly[day][hour][0]}-{base.hourly[day][hour][1]} -> "
            f"{new.hourly[day][hour][0]}-{new.hourly[day][hour][1]}"
            for day in range(7)
            for hour in range(24)
            if base.hourly[day][hour] != new.hourly[day][hour]
        ]
        lines.append(f"  hours whose min-max changed: {len(diffs)}")
        lines += diffs
    return "\n".join(lines)


def plot(plans: Sequence[VariantPlan], path: Path) -> None:  # pragma: no cover - optional dependency
    """Step plot of each variant's floor and ceiling over the week (needs matplotlib)."""
    try:
        # Optional dependency, imported only when a plot is asked for.
        import matplotlib  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415
    except ImportError as exc:
        raise SystemExit("--plot needs matplotlib: pip install matplotlib") from exc
    fig, axes = plt.subplots(len(plans), 1, figsize=(12, 3 * len(plans)), squeeze=False)
    for axis, p in zip(axes[:, 0], plans, strict=True):
        xs = [b.start / 60 for b in p.timeline] + [HOURS_PER_WEEK]
        axis.step(xs, [b.min_capacity for b in p.timeline] + [p.timeline[-1].min_capacity], where="post", label="min")
        axis.step(xs, [b.max_capacity for b in p.timeline] + [p.timeline[-1].max_capacity], where="post", label="max")
        axis.set_xticks([day * 24 for day in range(7)], DAY_NAMES)
        axis.set_title(p.variant_name)
        axis.set_ylabel("instances")
        axis.legend()
    fig.tight_layout()
    fig.savefig(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="capacity-plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE", help="context override")
    parser.add_argument("--compare", action="store_true", help="print baseline (no -c) vs the overrides")
    parser.add_argument("--cdk-json", type=Path, default=CDK_JSON, help="cdk.json to read context from")
    parser.add_argument("--plot", type=Path, help="write a PNG of the week (needs matplotlib)")
    args = parser.parse_args(argv)
    try:
        config, planned = load_plan(args.context, cdk_json=args.cdk_json)
        plans = plan(config, planned)
        if args.compare:
            # The baseline keeps the stage: compare one override, not two stages.
            baseline = load_plan([o for o in args.context if o.startswith("stage=")], cdk_json=args.cdk_json)
            print(format_plan(config, planned, plans))
            print()
            print(format_comparison(plan(*baseline), plans))
        else:
            print(format_plan(config, planned, plans))
    except ConfigError as error:
        print(error, file=sys.stderr)
        return 2
    if args.plot:
        plot(plans, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
