"""The cheapest fleet that holds both TTFT classes at the configured week's demand.

The one recommender of "which instance type": synth's "would hold" suggestions, ``make plan``
and the default fleet all read :func:`recommend`.

For every instance type the config accepts (planning/gpu_instances.py) and each routing it
could use, the highest arrival rate one instance holds where first turns and missed follow-ups
(cold) hold ``cold_p95_ms`` and follow-ups (warm) hold ``warm_p95_ms`` (planning/throughput_at_slo.py:
measured, else the open-loop engine model, a projection with its margin), its price
(planning/instance_prices.py) and the ``traffic`` week (planning/scaling_sim/demand.py) give:

* **count at peak**: the fewest instances whose share of the busiest minute's arrival rate each
  holds: ``ceil(rate / requests_per_minute)``. The model's rate already is an arrival rate of
  conversations arriving at random (its TTFT p95 carries the queueing that randomness causes),
  so no in-flight quantile goes on top. Behind least-outstanding routing the per-instance figure
  depends on the fleet (a follow-up finds its history on one instance in n), so the count is the
  fewest ``n`` whose own figure holds ``rate / n``;
* **warm floor**: the instances kept InService at the quietest minute, at least
  ``MIN_WARM_INSTANCES`` (seed 001 user story 3: never fewer than 2 warm in production);
* **$/month**: the instance-hours of a fleet that follows the demand minute by minute between
  the warm floor and what each minute needs (a lower bound on what autoscaling with lead times
  costs; ``make simulate`` runs the policies), times the price, scaled to ``scaling.hours_per_month``;
* **$/1M requests**: that month's cost over its requests.

The SLOs are parameters (``cold_p95_ms``, ``warm_p95_ms``), not config reads, so the call site
picks their source: ``slo.cold.ttft_p95_ms`` and ``slo.warm.ttft_p95_ms`` (``make plan``), or a looser cold
objective for the table of what loosening it buys.
"""

import functools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from app_config.root import AppConfig
from app_config.scaling import PROD_WARM_FLOOR
from planning.gpu_instances import INSTANCE_GPUS, engines_per_instance
from planning.instance_prices import hourly_price, price_table
from planning.plan import Plan
from planning.planner import Planner
from planning.scaling_sim import demand as demand_module
from planning.throughput_at_slo import MAX_FLEET, instances_needed
from planning.throughput_figure import ThroughputAtSlo
from planning.weekly_cron import MINUTES_PER_WEEK, format_minute_of_week
from planning.weekly_plan import effective_bounds

MIN_WARM_INSTANCES = PROD_WARM_FLOOR
"""The config's prod warm floor (seed 001 user story 3: one may fail or roll while the other serves)."""

ROUTINGS = ("prefix_aware", "least_outstanding")
"""Routings a fleet can use with no client change (session_affinity needs stateful-session clients);
prefix-aware first, so it wins a tie: it keeps follow-ups warm at any fleet size."""

LOOSER_COLD_P95_MS = (800.0, 1200.0)
"""Looser cold TTFT p95 SLOs the plan prices beside the configured one (issue 34): the user chooses."""


def cold_p95_options(cold_p95_ms: float) -> tuple[float, ...]:
    """The configured cold TTFT p95 (``slo.cold.ttft_p95_ms``), then each looser one of :data:`LOOSER_COLD_P95_MS`."""
    return (cold_p95_ms, *(looser for looser in LOOSER_COLD_P95_MS if looser > cold_p95_ms))


@functools.lru_cache(maxsize=8)
def _minutes_at_rate(week: tuple[float, ...]) -> dict[float, int]:
    """Minutes of ``week`` at each rate rounded to 0.1 requests per minute."""
    return dict(Counter(round(rate, 1) for rate in week))


@dataclass(frozen=True)
class Fleet:
    """One instance type and routing, sized for the week.

    ``requests_per_minute`` and ``concurrency`` are one instance's at the SLOs (in the fleet at
    peak); ``label`` says whether they were measured or projected, ``margin`` the projection's.
    """

    instance_type: str
    gpu_name: str
    engines: int
    routing: str
    holds: bool
    concurrency: int
    requests_per_minute: float
    base_ttft_ms: float
    price_usd_per_hour: float
    count_at_peak: int
    warm_floor: int
    instance_hours_per_week: float
    usd_per_month: float
    usd_per_million_requests: float
    label: str
    margin: float
    source: str


def fleet_planner(planner: Planner, routing: str, cold_p95_ms: float, warm_p95_ms: float) -> Planner:
    """``planner`` with these SLOs and this routing (the rest of its sections unchanged)."""
    slo = planner.slo.model_copy(
        update={
            "cold": planner.slo.cold.model_copy(update={"ttft_p95_ms": cold_p95_ms}),
            "warm": planner.slo.warm.model_copy(update={"ttft_p95_ms": warm_p95_ms}),
        }
    )
    return replace(
        planner, slo=slo, throughput_config=planner.throughput_config.model_copy(update={"routing": routing})
    )


def size_fleet(
    config: AppConfig,
    planner: Planner,
    instance_type: str,
    routing: str,
    week: Sequence[float],
    *,
    cold_p95_ms: float,
    warm_p95_ms: float,
) -> Fleet:
    """``instance_type`` behind ``routing`` at ``week`` (requests per minute, minute 0 = MON 00:00).

    Raises:
        ValueError: the type has no price, is unknown, or the model does not fit its GPU (one line).
    """
    engines = engines_per_instance(instance_type, config.engine.tensor_parallel_size)
    sized = fleet_planner(planner, routing, cold_p95_ms, warm_p95_ms)

    @functools.cache
    def capacity_at(instances: int) -> ThroughputAtSlo:
        return sized.throughput(instance_type, instances=instances)

    price = hourly_price(instance_type, config.scaling.hourly_price_usd).usd_per_hour
    minutes_at = _minutes_at_rate(tuple(week))
    needed = {rate: instances_needed(rate, capacity_at) for rate in minutes_at}
    at_peak = needed[round(max(week), 1)]
    capacity = capacity_at(min(at_peak, MAX_FLEET))
    holds = capacity.holds_slo and at_peak <= MAX_FLEET
    floor = max(MIN_WARM_INSTANCES, needed[round(min(week), 1)])
    instance_minutes = sum(count * max(floor, needed[rate]) for rate, count in minutes_at.items())
    hours_per_week = instance_minutes / 60 * MINUTES_PER_WEEK / len(week)
    per_month = config.scaling.hours_per_month / (MINUTES_PER_WEEK / 60)
    usd_per_month = hours_per_week * per_month * price
    requests_per_month = sum(week) * MINUTES_PER_WEEK / len(week) * per_month
    return Fleet(
        instance_type=instance_type,
        gpu_name=INSTANCE_GPUS[instance_type].gpu.name,
        engines=engines,
        routing=routing,
        holds=holds,
        concurrency=capacity.concurrency,
        requests_per_minute=capacity.requests_per_minute,
        base_ttft_ms=capacity.base_ttft_ms,
        price_usd_per_hour=price,
        count_at_peak=at_peak,
        warm_floor=floor,
        instance_hours_per_week=hours_per_week,
        usd_per_month=usd_per_month,
        usd_per_million_requests=usd_per_month / (requests_per_month / 1e6) if requests_per_month else math.inf,
        label=capacity.label,
        margin=capacity.margin,
        source=capacity.source,
    )


def plan_fleets(
    config: AppConfig,
    planner: Planner,
    cold_p95_ms: float,
    warm_p95_ms: float,
    routings: Sequence[str] = ROUTINGS,
) -> list[Fleet]:
    """Every instance type with enough GPUs for one engine (``engine.tensor_parallel_size``) under each
    of ``routings``: the fleets that hold both classes, cheapest per month first, then those that
    cannot (lowest lone-request TTFT first)."""
    week = demand_module.week(config.traffic)
    fleets = [
        size_fleet(config, planner, instance_type, routing, week, cold_p95_ms=cold_p95_ms, warm_p95_ms=warm_p95_ms)
        for instance_type, spec in INSTANCE_GPUS.items()
        if spec.count >= config.engine.tensor_parallel_size
        for routing in routings
    ]
    return sorted(fleets, key=lambda f: (not f.holds, f.usd_per_month if f.holds else f.base_ttft_ms))


def cheapest(fleets: Sequence[Fleet]) -> Fleet | None:
    """The cheapest fleet that holds both classes, or None."""
    holding = [fleet for fleet in fleets if fleet.holds]
    return min(holding, key=lambda f: f.usd_per_month) if holding else None


def recommend(config: AppConfig, planner: Planner) -> Fleet | None:
    """The one recommendation: the cheapest fleet a month that holds both classes at the config's
    SLOs (``slo.<class>.ttft_p95_ms``), any instance type, either routing; None if none does."""
    return _recommend(config, planner, config.slo.cold.ttft_p95_ms, config.slo.warm.ttft_p95_ms)


def _recommend(config: AppConfig, planner: Planner, cold_p95_ms: float, warm_p95_ms: float) -> Fleet | None:
    return cheapest(plan_fleets(config, planner, cold_p95_ms, warm_p95_ms))


def loses_because(fleet: Fleet, best: Fleet | None, cold_p95_ms: float, warm_p95_ms: float) -> str:
    """Why ``fleet`` is not the recommendation, in a few words."""
    if not fleet.holds:
        return (
            f"cannot hold cold p95 {cold_p95_ms:g} / warm p95 {warm_p95_ms:g} ms even at one request per engine "
            f"(TTFT p50 {fleet.base_ttft_ms:,.0f} ms there)"
        )
    if best is None or fleet == best:
        return "recommended"
    return f"${fleet.usd_per_month - best.usd_per_month:,.0f}/month more than {best.instance_type}"


def scheduled_floors(config: AppConfig, plan: Plan, fleet: Fleet) -> list[tuple[str, int, int]]:
    """``(when and which action, configured floor, floor the week needs)`` for each segment of the
    primary's scheduled week: the instances the segment's busiest minute needs on ``fleet``'s
    instance type, at least its warm floor."""
    variant = plan.variant("primary")
    sized = fleet_planner(plan.planner, fleet.routing, config.slo.cold.ttft_p95_ms, config.slo.warm.ttft_p95_ms)

    @functools.cache
    def capacity_at(instances: int) -> ThroughputAtSlo:
        return sized.throughput(fleet.instance_type, instances=instances)

    week = demand_module.week(config.traffic)
    timeline = effective_bounds(
        variant.scaling.resolved_schedule, variant.serving.min_capacity, variant.serving.max_capacity
    )
    rows = []
    for index, bounds in enumerate(timeline):
        end = timeline[index + 1].start if index + 1 < len(timeline) else MINUTES_PER_WEEK
        if end <= bounds.start:
            continue
        busiest = max(week[bounds.start : end])
        needed = max(fleet.warm_floor, instances_needed(busiest, capacity_at))
        rows.append((f"{format_minute_of_week(bounds.start)} {bounds.set_by}", bounds.min_capacity, needed))
    return rows


def _row(fleet: Fleet, note: str = "") -> str:
    """One fleet's columns, then ``note`` (the verdict or why it loses) and where its figure comes
    from: ``measured <date> (<job or ops load>)`` or ``projected from <GPU> to <GPU> (model error X %)``."""
    standing = {"projected": f"proj {fleet.margin:.0%}", "modelled": f"model {fleet.margin:.0%}"}.get(
        fleet.label, fleet.label
    )
    columns = (
        f"  {fleet.instance_type:<18} {fleet.gpu_name:<15} {fleet.engines:>3} {fleet.routing:<17} "
        f"{fleet.concurrency:>5} {fleet.requests_per_minute:>8,.0f} {standing:>9} {fleet.price_usd_per_hour:>8.3f} "
        + (
            f"{fleet.count_at_peak:>5} {fleet.warm_floor:>5} {fleet.usd_per_month:>10,.0f} "
            f"{fleet.usd_per_million_requests:>9,.0f}"
            if fleet.holds
            else f"{'-':>5} {'-':>5} {'-':>10} {'-':>9}"
        )
    )
    return f"{columns}  {note + '; ' if note else ''}{fleet.source}"


HEADER = (
    f"  {'instance type':<18} {'GPU':<15} {'eng':>3} {'routing':<17} {'conc':>5} {'req/min':>8} {'figure':>9} "
    f"{'$/h':>8} "
    f"{'peak':>5} {'floor':>5} {'$/month':>10} {'$/1M req':>9}"
)


def format_planner(
    config: AppConfig,
    plan: Plan,
    cold_p95_ms: float,
    warm_p95_ms: float,
    *,
    runners_up: int = 6,
    slo_source: str = "",
) -> str:
    """The recommendation, its runners-up with why each loses, the verdict of every instance type
    under the configured routing, the scheduled floors the week needs, and what a looser cold SLO buys."""
    week = demand_module.week(config.traffic)
    fleets = plan_fleets(config, plan.planner, cold_p95_ms, warm_p95_ms)
    best = cheapest(fleets)
    volume = sum(week) / 7
    lines = [
        f"Fleet plan (planning/fleet_planner.py): traffic {volume:,.0f} requests/day, peak {max(week):,.0f} req/min, "
        f"quietest {min(week):,.0f} req/min (app_config/traffic.py); TTFT p95 cold {cold_p95_ms:g} ms, warm "
        f"{warm_p95_ms:g} ms{f' ({slo_source})' if slo_source else ''}; prices as of {price_table()['as_of']}; "
        f"{config.engine.tensor_parallel_size} GPU(s) per engine",
    ]
    if best is None:
        lines.append("Recommendation: none: no instance type holds both classes at this SLO (see the verdicts below)")
    else:
        lines += [
            f"Recommendation: {best.instance_type} ({best.engines} x {best.gpu_name} engine(s)), routing "
            f"{best.routing}: {best.count_at_peak} at peak, warm floor {best.warm_floor}, "
            f"${best.usd_per_month:,.0f}/month, ${best.usd_per_million_requests:,.0f} per 1M requests",
            HEADER,
            _row(best),
        ]
        if best.label != "measured":
            lines.append(
                f"  Measure it before you buy: python -m ops throughput measure --instance-type {best.instance_type} "
                "(docs/planning.md, 'Measure before you buy')"
            )
        ceiling = config.serving.primary.max_capacity
        if best.count_at_peak > ceiling:
            lines.append(
                f"  NOTE: {best.count_at_peak} at peak is above serving.primary.max_capacity = {ceiling}: raise it "
                "(and the account's endpoint-usage quota for the type) with this fleet"
            )
    lines += ["Runners-up and why each loses:", HEADER]
    for fleet in [f for f in fleets if f != best][:runners_up]:
        lines.append(_row(fleet, f"<- {loses_because(fleet, best, cold_p95_ms, warm_p95_ms)}"))
    configured = config.throughput.routing
    lines += [f"Every instance type, routing {configured} (throughput.routing):", HEADER]
    for fleet in plan_fleets(config, plan.planner, cold_p95_ms, warm_p95_ms, routings=(configured,)):
        verdict = "holds" if fleet.holds else "cannot hold"
        lines.append(_row(fleet, verdict))
    if best is not None:
        lines += [f"Scheduled floors of scaling.primary for {best.instance_type} (configured -> the week needs):"]
        for when, configured_floor, needed in scheduled_floors(config, plan, best):
            lines.append(f"  {when:<48} {configured_floor:>3} -> {needed}")
    lines.append(f"Loosening the cold p95 (warm stays {warm_p95_ms:g} ms):")
    for cold in cold_p95_options(cold_p95_ms):
        choice = _recommend(config, plan.planner, cold, warm_p95_ms)
        lines.append(
            f"  cold p95 {cold:>6,.0f} ms: "
            + (
                f"{choice.instance_type} x {choice.count_at_peak} at peak (floor {choice.warm_floor}), "
                f"{choice.routing}, ${choice.usd_per_month:,.0f}/month"
                if choice
                else "no instance type holds"
            )
        )
    lines.append(
        f"  ($/month: a fleet that follows the week minute by minute above its warm floor (>= {MIN_WARM_INSTANCES}, "
        "seed 001); make simulate runs the scaling policies with their lead times)"
    )
    return "\n".join(lines)
