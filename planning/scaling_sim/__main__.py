"""Command line of the scaling simulation.

Usage::

    python -m planning.scaling_sim
    python -m planning.scaling_sim --variant canary
    python -m planning.scaling_sim --demand-csv week.csv --plot week.png
    python -m planning.scaling_sim --compare -c scaling.primary.target_tracking.metric=invocations_per_instance
    python -m planning.scaling_sim --scenario surge --surge-at "TUE 02:00"    # unforeseen x3 (surge.py)
    python -m planning.scaling_sim --dated-event spring-anime -c ...        # one dated event's week (dated.py)

Config comes from ``cdk.json`` plus ``-c key=value`` through the same loader as
``planning.cost_plan`` (and ``app.py``). Config and CSV errors print one line and exit 2.
"""

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from app_config import AppConfig, ConfigError
from app_config.compile_cache import instance_start_s
from app_config.scaling_policies import KvCacheTrackingConfig, StepScalingConfig, TargetTrackingConfig
from app_config.serving import ServingConfig
from app_config.variants import VariantKey
from cli_support.argtypes import int_in, positive_float
from planning import cost_plan
from planning.make_plan import load_plan
from planning.plan import Plan
from planning.scaling_sim import dated, engine, report, surge
from planning.scaling_sim import demand as demand_module
from planning.scaling_sim.curve import engine_curve
from planning.scaling_sim.fleet import ServiceModel
from planning.weekly_cron import MINUTES_PER_WEEK, format_minute_of_week
from planning.weekly_plan import Bounds, effective_bounds

DEFAULT_PROVISION_MIN = 8
"""Minutes to provision a new instance. Source: seed 001 user story 7 ("SageMaker scale-up:
5-8 minutes"), the slow end. AWS publishes no figure (research notes for issue 16, section 7:
roughly 4-9 minutes for a new GPU instance, a planning estimate)."""


def startup_minutes(config: AppConfig, *, cached: bool | None = None) -> int:
    """Minutes from a provisioned instance to a passing /ping, rounded up to the simulation's step:
    ``scaling.instance_start_cached_s`` with the compile cache (``serving.compile_cache.enabled``, or
    ``cached``), else ``scaling.instance_start_cold_s``. Both are measured floors (their
    descriptions); serving.container_startup_health_check_timeout_s is only the limit."""
    return math.ceil(instance_start_s(config.serving.compile_cache, config.scaling, cached=cached) / 60)


@dataclass(frozen=True)
class Scenario:
    """What one run of the CLI simulates: the config plus the model and demand options."""

    config: AppConfig
    plan: Plan
    variant_key: VariantKey
    demand: list[float]
    demand_source: str
    instance_rpm: float | None
    base_ttft_ms: float | None
    provision_min: int
    startup_min: int
    patience_s: float | None = None
    """Seconds a client waits on a queued request; None: ``container.request_timeout_s``."""
    dated_event: dated.EventWeek | None = None
    """``--dated-event``: the week of that event (its bounds; the demand already carries it)."""


def build_inputs(scenario: Scenario) -> tuple[engine.SimInputs, list[str], list[tuple[str, int]]]:
    """Simulation inputs, the input lines of the report and the configured events of the variant.

    Raises:
        ConfigError: inference-components mode, a disabled canary or no price for the instance type.
    """
    config = scenario.config
    if not any(unit.is_variant for unit in scenario.plan.units):
        raise ConfigError(
            ["serving.mode = inference_components: the simulation models production-variant scaling (mode variants)"]
        )
    chosen = scenario.plan.variant(scenario.variant_key)
    variant, scaling = chosen.serving, chosen.scaling
    if chosen not in scenario.plan.variants():
        raise ConfigError([f"--variant {scenario.variant_key}: serving.canary.enabled is false"])
    # One instance serves its capacity at the TTFT SLO (planning/throughput_at_slo.py: measured with
    # ops load, else projected from the GPU measurement at the workload's request shape).
    capacity = scenario.plan.planner.throughput(variant.instance_type)
    # A queued request's client gives up when the container answers 504 (container.request_timeout_s,
    # under SageMaker's 60 s InvokeEndpoint limit): nobody is still waiting after it (fleet.py).
    patience_s = scenario.patience_s or float(config.container.request_timeout_s)
    # The open-loop engine model's curve (TTFT p95, KV usage and the cliff by rate per instance),
    # unless the capacity is given by hand or measured (the measurement has no curve).
    curve = (
        None
        if scenario.instance_rpm or scenario.base_ttft_ms
        else engine_curve(config, scenario.plan, variant.instance_type)
    )
    service = ServiceModel(
        capacity.concurrency,
        scenario.instance_rpm or capacity.requests_per_minute,
        scenario.base_ttft_ms or capacity.base_ttft_ms,
        patience_s,
        curve,
    )
    if scaling.enabled and scenario.dated_event is not None:
        timeline = scenario.dated_event.timeline
        policies: tuple[TargetTrackingConfig | None, StepScalingConfig | None, KvCacheTrackingConfig | None] = (
            scaling.target_tracking,
            scaling.step_scaling,
            scaling.kv_cache_tracking,
        )
    elif scaling.enabled:
        timeline = tuple(effective_bounds(scaling.resolved_schedule, variant.min_capacity, variant.max_capacity))
        policies = (scaling.target_tracking, scaling.step_scaling, scaling.kv_cache_tracking)
    else:
        count = variant.initial_instance_count
        timeline = (Bounds(0, count, count, "no autoscaling (initial_instance_count)"),)
        policies = (None, None, None)
    inputs = engine.SimInputs(
        service=service,
        provision_min=scenario.provision_min,
        startup_min=scenario.startup_min,
        timeline=timeline,
        target_tracking=policies[0],
        step_scaling=policies[1],
        ttft_slo_ms=min(config.slo.ttft_p95_ms().values()),
        # The leading signal reads the engine curve's KV usage: without a curve it has nothing to read.
        kv_cache_tracking=policies[2] if curve is not None else None,
    )
    tt, step = scaling.target_tracking, scaling.step_scaling
    lines = [
        f"variant {variant.variant_name}: {variant.instance_type}, hard bounds {variant.min_capacity}-"
        f"{variant.max_capacity}, {len(scaling.resolved_schedule)} scheduled action(s)",
        f"per instance: C = {service.concurrency} concurrent, R = {service.requests_per_minute:,.0f} req/min at the "
        f"TTFT SLO, D = 60 x C / R = {service.request_duration_s:.2f} s"
        + ("" if scenario.instance_rpm else f" ({capacity.source})")
        + ("" if capacity.holds_slo else f"; {variant.instance_type} cannot hold the SLO: figures at 1 concurrent"),
        _routing_line(config, scenario.plan),
        f"launch: provisioning {scenario.provision_min} min + start-up {scenario.startup_min} min; "
        "scale-in immediate (no draining)",
        f"demand: {scenario.demand_source}",
        (
            f"TTFT: the engine model's p95 at each minute's rate per instance (planning/scaling_sim/curve.py), cliff "
            f"at {curve.cliff_per_minute:,.0f} req/min per instance; SLO {inputs.ttft_slo_ms:g} ms "
            "(the stricter of slo.cold / slo.warm .ttft_p95_ms)"
            if curve is not None
            else f"TTFT: base {service.base_ttft_ms:g} ms + queue wait; SLO {inputs.ttft_slo_ms:g} ms "
            "(the stricter of slo.cold / slo.warm .ttft_p95_ms)"
        ),
        f"clients give up on a request queued longer than {patience_s:g} s ("
        + ("--patience-s" if scenario.patience_s else "container.request_timeout_s: the container answers 504")
        + "); those count as abandoned",
        f"target tracking: {'on' if scaling.enabled and tt.enabled else 'off'}, {tt.metric} target "
        f"{tt.target_value:g}, cooldowns out {tt.scale_out_cooldown_s} s / in {tt.scale_in_cooldown_s} s",
        f"step scaling: {'on' if scaling.enabled and step.enabled else 'off'}, QueueDepth {step.statistic} >= "
        f"{step.scale_out_threshold:g} steps "
        + "/".join(f"+{s.adjustment}" for s in step.scale_out_steps)
        + f" cooldown {step.scale_out_cooldown_s} s; RunningRequests < {step.scale_in_running_requests:g} "
        f"for {step.scale_in_evaluation_periods} x {step.scale_in_period_s} s: {step.scale_in_adjustment} "
        f"cooldown {step.scale_in_cooldown_s} s",
        "KV-cache tracking (leading signal, scale-out only): "
        + (
            f"on, KvCacheUsagePercent target {scaling.kv_cache_tracking.target_value:g}, cooldown "
            f"{scaling.kv_cache_tracking.scale_out_cooldown_s} s"
            if inputs.kv_cache_tracking is not None and inputs.kv_cache_tracking.enabled and scaling.enabled
            else "off"
        ),
    ]
    events = [(event.name, event.minute_of_week) for event in scaling.events]
    if scenario.dated_event is not None:
        week = scenario.dated_event
        lines.append(
            f"dated event {week.event.name}: {week.event.start:%Y-%m-%d %H:%M} - {week.event.end:%Y-%m-%d %H:%M}, "
            f"demand x{week.event.demand_multiplier:g}, floor {week.event.min_capacity}; the week from "
            f"{week.monday:%Y-%m-%d} (MON) with its one-off actions"
        )
        events.append((week.event.name, week.first_minute))
    return inputs, lines, events


def _routing_line(config: AppConfig, plan: Plan) -> str:
    """How follow-up turns reach engines, and what the endpoint config sets for it."""
    routing = config.throughput.routing
    prefix = plan.prefix_routing
    detail = (
        f": RoutingStrategy PREFIX_AWARE, PrefixLength {prefix.prefix_length_bytes} bytes, ConcurrencyThreshold "
        f"{prefix.concurrency_threshold} (a conversation's turns meet its prefix cache until the instance is full)"
        if prefix is not None
        else ""
    )
    return f"routing: {routing} (throughput.routing; the engine model's residency: planning/engine_model.py){detail}"


def simulate(scenario: Scenario, title: str) -> tuple[report.Summary, list[engine.MinuteRecord], list[tuple[str, int]]]:
    """Run ``scenario``; a weekly demand starts from the state its previous week left."""
    config = scenario.config
    inputs, lines, events = build_inputs(scenario)
    price = cost_plan.price_usd_per_hour(config.scaling, getattr(config.serving, scenario.variant_key))
    weekly = len(scenario.demand) == MINUTES_PER_WEEK
    records = engine.run(inputs, scenario.demand, warmup=weekly)
    summary = report.summarize(
        title,
        lines,
        records,
        price_usd_per_hour=price,
        hours_per_month=config.scaling.hours_per_month,
        events=events,
    )
    return summary, records, events


def _share(args: argparse.Namespace, serving: ServingConfig) -> float:
    """The variant's share of the endpoint's traffic (its initial weight over all)."""
    variant = getattr(serving, args.variant)
    weights = sum(v.initial_weight for v in serving.variants)
    return variant.initial_weight / weights if variant in serving.variants and weights else 1.0


def _scale(args: argparse.Namespace, config: AppConfig) -> float:
    return float(args.demand_scale) * _share(args, config.serving)


def _demand(args: argparse.Namespace, config: AppConfig) -> tuple[list[float], str]:
    variant = getattr(config.serving, args.variant)
    share = _share(args, config.serving)
    scale = args.demand_scale * share
    if args.demand_csv:
        values = demand_module.load_csv(args.demand_csv, scale)
        source = f"{args.demand_csv} ({len(values):,} minutes)"
    else:
        traffic = config.traffic
        values = demand_module.week(traffic, scale)
        volume = (
            f"peak {traffic.peak_requests_per_minute:,.0f} req/min"
            if traffic.peak_requests_per_minute is not None
            else f"{traffic.requests_per_day:,.0f} requests/day"
        )
        releases = ", ".join(f"{r.day_of_week} x{r.multiplier:g}" for r in traffic.releases) or "no releases"
        source = f"traffic section: {volume}, peak {max(values) / scale:,.0f} req/min, releases {releases}"
    return values, f"{source} x {args.demand_scale:g} x weight share {share:.0%} for {variant.variant_name}"


def build_scenario(args: argparse.Namespace, config: AppConfig, plan: Plan) -> Scenario:
    """The run the parsed command line asks for: demand, capacity overrides, launch and patience.

    Raises:
        ConfigError: ``--dated-event`` names no configured event.
    """
    values, source = _demand(args, config)
    week = None
    if args.dated_event:
        week = dated.event_week(plan, args.variant, args.dated_event)
        values = dated.overlay(values, week, config.traffic, _scale(args, config))
        source += f", with dated event {week.event.name} (x{week.event.demand_multiplier:g})"
    return Scenario(
        config=config,
        plan=plan,
        variant_key=args.variant,
        demand=values,
        demand_source=source,
        instance_rpm=args.instance_rpm,
        base_ttft_ms=args.base_ttft_ms,
        provision_min=args.provision_min,
        startup_min=startup_minutes(config) if args.startup_min is None else args.startup_min,
        patience_s=args.patience_s,
        dated_event=week,
    )


def _surge_at(text: str) -> int:
    try:
        return surge.parse_at(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("--surge-at ")) from None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scaling-sim", description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE", help="context override")
    parser.add_argument("--compare", action="store_true", help="print baseline (no -c) vs the overrides")
    parser.add_argument("--cdk-json", type=Path, default=cost_plan.REPO / "cdk.json", help="cdk.json to read")
    parser.add_argument("--variant", choices=("primary", "canary"), default="primary", help="variant to simulate")
    parser.add_argument("--demand-csv", type=Path, help="CSV with requests_per_minute (and optionally minute)")
    parser.add_argument("--demand-scale", type=positive_float, default=1.0, help="multiply the demand (default 1)")
    parser.add_argument(
        "--instance-rpm",
        type=positive_float,
        help=("requests/min per instance at the SLO (default: the config's capacity, planning/throughput_at_slo.py)"),
    )
    parser.add_argument(
        "--base-ttft-ms", type=positive_float, help="TTFT with no queue (default: the capacity's TTFT p50 at 1 request)"
    )
    parser.add_argument("--provision-min", type=int_in(0), default=DEFAULT_PROVISION_MIN, help="provisioning, min")
    parser.add_argument(
        "--startup-min",
        type=int_in(0),
        help="container start-up, min (default: scaling.instance_start_cached_s with serving.compile_cache.enabled, "
        "else scaling.instance_start_cold_s, rounded up)",
    )
    parser.add_argument(
        "--patience-s",
        type=positive_float,
        help="seconds a client waits on a queued request before giving up (default: container.request_timeout_s)",
    )
    parser.add_argument(
        "--dated-event",
        metavar="NAME",
        help="simulate the week (MON-MON) of scaling.<variant>.dated_events NAME with its one-off actions and demand",
    )
    parser.add_argument("--plot", type=Path, help="write a PNG of the run (the override's with --compare)")
    parser.add_argument(
        "--scenario",
        choices=("week", "surge"),
        default="week",
        help="week: the demand as given; surge: plus an unforeseen x3 spike at --surge-at (seed 001 user story 7)",
    )
    parser.add_argument(
        "--surge-at", type=_surge_at, default=surge.DEFAULT_SURGE_AT, help="DAY HH:MM (default TUE 02:00)"
    )
    return parser.parse_args(argv)


def with_surge(scenario: Scenario, args: argparse.Namespace) -> Scenario:
    """``--scenario surge``: the scenario's demand with the unforeseen spike (planning.scaling_sim.surge)."""
    if args.scenario != "surge":
        return scenario
    at = format_minute_of_week(args.surge_at)
    return replace(
        scenario,
        demand=surge.overlay(scenario.demand, args.surge_at, traffic=scenario.config.traffic),
        demand_source=f"{scenario.demand_source}, unforeseen x{surge.SURGE_MULTIPLIER:g} surge at {at}",
    )


def _surge_by_start(args: argparse.Namespace, config: AppConfig, plan: Plan) -> str:
    """The surge's queue and SLO minutes with a cold and with a cached instance start (issue 25)."""
    lines = ["Unforeseen surge by instance start (provisioning + start-up before an instance serves):"]
    for label, cached in (("cold start  ", False), ("cached start", True)):
        minutes = startup_minutes(config, cached=cached)
        scenario = replace(with_surge(build_scenario(args, config, plan), args), startup_min=minutes)
        _, records, _ = simulate(scenario, label)
        found = surge.window(records, args.surge_at)
        lines.append(
            f"  {label} {minutes} min: {found.queue_minutes:>4} minutes with a queue, {found.slo_minutes:>4} above "
            f"the TTFT SLO, peak queue {found.peak_queue:,.0f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config, plan = load_plan(args.context, cdk_json=args.cdk_json)
        title = f"Scaling simulation of {config.endpoint_name} (stage {config.stage}), {config.scaling.timezone}"
        summary, records, events = simulate(with_surge(build_scenario(args, config, plan), args), title)
        print(report.format_summary(summary))
        if args.scenario == "surge":
            print()
            print(surge.format_window(surge.window(records, args.surge_at)))
            print()
            print(_surge_by_start(args, config, plan))
        if args.compare:
            # The baseline keeps the stage: compare one override, not two stages (as weekly_plan).
            baseline_config, baseline_plan = load_plan(
                [o for o in args.context if o.startswith("stage=")], cdk_json=args.cdk_json
            )
            baseline, _, _ = simulate(
                with_surge(build_scenario(args, baseline_config, baseline_plan), args), "baseline"
            )
            print()
            print(report.format_comparison(baseline, summary))
    except (ConfigError, demand_module.DemandError) as error:
        print(error, file=sys.stderr)
        return 2
    if args.plot:
        from planning.scaling_sim import plot  # noqa: PLC0415 - matplotlib loads only for --plot

        plot.write_png(records, events, args.plot, title)
        print(f"\nWrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
