"""Command line of the scaling simulation.

Usage::

    python -m devtools.scaling_sim
    python -m devtools.scaling_sim --variant canary
    python -m devtools.scaling_sim --demand-csv week.csv --plot week.png
    python -m devtools.scaling_sim --compare -c scaling.primary.target_tracking.metric=invocations_per_instance
    python -m devtools.scaling_sim --scenario surge --surge-at "TUE 02:00"    # unforeseen x3 (surge.py)
    python -m devtools.scaling_sim --dated-event spring-anime -c ...        # one dated event's week (dated.py)

Config comes from ``cdk.json`` plus ``-c key=value`` through the same loader as
``devtools.weekly_plan`` (and ``app.py``). Config and CSV errors print one line and exit 2.
"""

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from app_config import AppConfig, ConfigError
from app_config.compile_cache import instance_start_s
from app_config.planning.weekly_cron import MINUTES_PER_WEEK, format_minute_of_week
from app_config.planning.weekly_plan import Bounds, effective_bounds
from app_config.scaling_policies import StepScalingConfig, TargetTrackingConfig
from app_config.variants import VariantKey
from cli_support.argtypes import int_in, positive_float
from devtools import weekly_plan
from devtools.scaling_sim import dated, engine, report, surge
from devtools.scaling_sim import demand as demand_module
from devtools.scaling_sim.fleet import ServiceModel

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
    if config.serving.hosts_inference_components:
        raise ConfigError(
            ["serving.mode = inference_components: the simulation models production-variant scaling (mode variants)"]
        )
    chosen = config.variant(scenario.variant_key)
    variant, scaling = chosen.serving, chosen.scaling
    if chosen not in config.variants():
        raise ConfigError([f"--variant {scenario.variant_key}: serving.canary.enabled is false"])
    # One instance serves its capacity at the TTFT SLO (app_config/planning/throughput_at_slo.py: measured with
    # ops load, else projected from the GPU measurement at the workload's request shape).
    capacity = config.throughput_of(variant.instance_type)
    # A queued request's client gives up when the container answers 504 (container.request_timeout_s,
    # under SageMaker's 60 s InvokeEndpoint limit): nobody is still waiting after it (fleet.py).
    patience_s = scenario.patience_s or float(config.container.request_timeout_s)
    service = ServiceModel(
        capacity.concurrency,
        scenario.instance_rpm or capacity.requests_per_minute,
        scenario.base_ttft_ms or capacity.base_ttft_ms,
        patience_s,
    )
    if scaling.enabled and scenario.dated_event is not None:
        timeline = scenario.dated_event.timeline
        policies: tuple[TargetTrackingConfig | None, StepScalingConfig | None] = (
            scaling.target_tracking,
            scaling.step_scaling,
        )
    elif scaling.enabled:
        timeline = tuple(effective_bounds(scaling.resolved_schedule, variant.min_capacity, variant.max_capacity))
        policies = (scaling.target_tracking, scaling.step_scaling)
    else:
        count = variant.initial_instance_count
        timeline = (Bounds(0, count, count, "no autoscaling (initial_instance_count)"),)
        policies = (None, None)
    inputs = engine.SimInputs(
        service=service,
        provision_min=scenario.provision_min,
        startup_min=scenario.startup_min,
        timeline=timeline,
        target_tracking=policies[0],
        step_scaling=policies[1],
        ttft_slo_ms=config.ttft_slo_ms,
    )
    tt, step = scaling.target_tracking, scaling.step_scaling
    lines = [
        f"variant {variant.variant_name}: {variant.instance_type}, hard bounds {variant.min_capacity}-"
        f"{variant.max_capacity}, {len(scaling.resolved_schedule)} scheduled action(s)",
        f"per instance: C = {service.concurrency} concurrent, R = {service.requests_per_minute:,.0f} req/min at the "
        f"TTFT SLO, D = 60 x C / R = {service.request_duration_s:.2f} s"
        + ("" if scenario.instance_rpm else f" ({capacity.source})")
        + ("" if capacity.holds_slo else f"; {variant.instance_type} cannot hold the SLO: figures at 1 concurrent"),
        _routing_line(config),
        f"launch: provisioning {scenario.provision_min} min + start-up {scenario.startup_min} min; "
        "scale-in immediate (no draining)",
        f"demand: {scenario.demand_source}",
        f"TTFT: base {service.base_ttft_ms:g} ms + queue wait; SLO {inputs.ttft_slo_ms:g} ms "
        f"(slo.{config.routed_class.value}.ttft_p95_ms)",
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


def _routing_line(config: AppConfig) -> str:
    """How follow-up turns reach engines, and what the endpoint config sets for it."""
    routing = config.capacity.routing
    prefix = config.prefix_routing()
    detail = (
        f": RoutingStrategy PREFIX_AWARE, PrefixLength {prefix.prefix_length_bytes} bytes, ConcurrencyThreshold "
        f"{prefix.concurrency_threshold} (a conversation's turns meet its prefix cache until the instance is full)"
        if prefix is not None
        else ""
    )
    return (
        f"routing: {routing} (capacity.routing; app_config/planning/throughput_at_slo.py picks the measured curve)"
        f"{detail}"
    )


def simulate(scenario: Scenario, title: str) -> tuple[report.Summary, list[engine.MinuteRecord], list[tuple[str, int]]]:
    """Run ``scenario``; a weekly demand starts from the state its previous week left."""
    config = scenario.config
    inputs, lines, events = build_inputs(scenario)
    price = weekly_plan.price_usd_per_hour(config, config.variant(scenario.variant_key).serving)
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


def _share(args: argparse.Namespace, config: AppConfig) -> float:
    """The variant's share of the endpoint's traffic (its initial weight over all)."""
    variant = config.variant(args.variant).serving
    weights = sum(v.initial_weight for v in config.serving.variants)
    return variant.initial_weight / weights if variant in config.serving.variants and weights else 1.0


def _scale(args: argparse.Namespace, config: AppConfig) -> float:
    return float(args.demand_scale) * _share(args, config)


def _demand(args: argparse.Namespace, config: AppConfig) -> tuple[list[float], str]:
    variant = config.variant(args.variant).serving
    share = _share(args, config)
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


def build_scenario(args: argparse.Namespace, config: AppConfig) -> Scenario:
    """The run the parsed command line asks for: demand, capacity overrides, launch and patience.

    Raises:
        ConfigError: ``--dated-event`` names no configured event.
    """
    values, source = _demand(args, config)
    week = None
    if args.dated_event:
        week = dated.event_week(config, args.variant, args.dated_event)
        values = dated.overlay(values, week, config, _scale(args, config))
        source += f", with dated event {week.event.name} (x{week.event.demand_multiplier:g})"
    return Scenario(
        config=config,
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
    parser.add_argument("--cdk-json", type=Path, default=weekly_plan.REPO / "cdk.json", help="cdk.json to read")
    parser.add_argument("--variant", choices=("primary", "canary"), default="primary", help="variant to simulate")
    parser.add_argument("--demand-csv", type=Path, help="CSV with requests_per_minute (and optionally minute)")
    parser.add_argument("--demand-scale", type=positive_float, default=1.0, help="multiply the demand (default 1)")
    parser.add_argument(
        "--instance-rpm",
        type=positive_float,
        help=(
            "requests/min per instance at the SLO (default: the config's capacity, "
            "app_config/planning/throughput_at_slo.py)"
        ),
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
    """``--scenario surge``: the scenario's demand with the unforeseen spike (devtools.scaling_sim.surge)."""
    if args.scenario != "surge":
        return scenario
    at = format_minute_of_week(args.surge_at)
    return replace(
        scenario,
        demand=surge.overlay(scenario.demand, args.surge_at, traffic=scenario.config.traffic),
        demand_source=f"{scenario.demand_source}, unforeseen x{surge.SURGE_MULTIPLIER:g} surge at {at}",
    )


def _surge_by_start(args: argparse.Namespace, config: AppConfig) -> str:
    """The surge's queue and SLO minutes with a cold and with a cached instance start (issue 25)."""
    lines = ["Unforeseen surge by instance start (provisioning + start-up before an instance serves):"]
    for label, cached in (("cold start  ", False), ("cached start", True)):
        minutes = startup_minutes(config, cached=cached)
        scenario = replace(with_surge(build_scenario(args, config), args), startup_min=minutes)
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
        config = weekly_plan.load(args.context, args.cdk_json)
        title = f"Scaling simulation of {config.endpoint_name} (stage {config.stage}), {config.scaling.timezone}"
        summary, records, events = simulate(with_surge(build_scenario(args, config), args), title)
        print(report.format_summary(summary))
        if args.scenario == "surge":
            print()
            print(surge.format_window(surge.window(records, args.surge_at)))
            print()
            print(_surge_by_start(args, config))
        if args.compare:
            # The baseline keeps the stage: compare one override, not two stages (as weekly_plan).
            baseline_config = weekly_plan.load([o for o in args.context if o.startswith("stage=")], args.cdk_json)
            baseline, _, _ = simulate(with_surge(build_scenario(args, baseline_config), args), "baseline")
            print()
            print(report.format_comparison(baseline, summary))
    except (ConfigError, demand_module.DemandError) as error:
        print(error, file=sys.stderr)
        return 2
    if args.plot:
        from devtools.scaling_sim import plot  # noqa: PLC0415 - matplotlib loads only for --plot

        plot.write_png(records, events, args.plot, title)
        print(f"\nWrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
