"""``load``: the bounded concurrency ramp (ops/load.py) or the open loop (ops/open_load.py), against the endpoint or
a local server (``--url``): its flags and its handler."""

import argparse
from dataclasses import replace

from app_config.root import AppConfig
from app_config.slo import SloConfig
from cli_support.argtypes import int_in, int_list, non_negative_float, positive_float, positive_float_list
from ops.command import (
    SAGEMAKER_INVOKE_TIMEOUT_S,
    Clients,
    Deps,
    Subparsers,
    adapters_of,
    add_endpoint_flags,
    endpoint_ref,
)
from ops.components import describe_component
from ops.endpoint import EndpointRef, describe
from ops.exit_codes import ExitCode, OpsError
from ops.invoke import DEFAULT_PROMPT, HttpTarget, SageMakerTarget, Target
from ops.load import (
    DEFAULT_LEVELS,
    MAX_CONCURRENCY,
    MAX_TOTAL_DURATION_S,
    MAX_TOTAL_REQUESTS,
    MAX_TURNS,
    LoadPlan,
    Route,
    run_load,
)
from ops.open_load import OpenLoadPlan, run_open_load
from ops.smoke import MODES


def register(commands: Subparsers) -> None:
    """``load``: its flags and its handler."""
    load = commands.add_parser(
        "load",
        help="Bounded load test with a concurrency ramp; suggests a target-tracking value.",
        description=f"Hard limits: concurrency <= {MAX_CONCURRENCY}, {MAX_TOTAL_REQUESTS} requests and "
        f"{MAX_TOTAL_DURATION_S:g} s over all levels. Target = floor(req/s x 60 / instances / 1.3) in variants "
        "mode, floor(req/s x mean latency / copies / 1.3) concurrent requests per copy in inference_components mode.",
    )
    add_endpoint_flags(load, variants=False)
    load.add_argument("--url", help="Base URL of a server speaking POST /invocations (no AWS); else the endpoint.")
    load.add_argument(
        "--levels",
        type=int_list(1, MAX_CONCURRENCY),
        default=DEFAULT_LEVELS,
        help="Concurrency levels (default 1,4,16,32).",
    )
    load.add_argument(
        "--requests-per-level",
        type=int_in(1, MAX_TOTAL_REQUESTS),
        default=64,
        help="Request budget per level (default 64).",
    )
    load.add_argument(
        "--level-duration-s", type=positive_float, default=60.0, help="Time budget per level, s (default 60)."
    )
    load.add_argument("--mode", choices=MODES, default="stream", help="stream measures TTFT (default stream).")
    load.add_argument(
        "--adapter",
        action="append",
        help="Adapter (`model`) to load; repeat to spread requests round-robin (default: the first configured "
        "adapter; in inference_components mode every adapter's component).",
    )
    load.add_argument("--variant", help="Send to this variant only (TargetVariant; variants mode).")
    load.add_argument("--prompt", default=DEFAULT_PROMPT, help="User message.")
    load.add_argument("--max-tokens", type=int_in(1, 4096), default=128, help="max_tokens (default 128).")
    for klass in ("cold", "warm"):
        load.add_argument(
            f"--{klass}-ttft-slo-ms",
            type=positive_float,
            help=f"TTFT p95 objective of {klass} requests, ms (default: the config's slo.{klass}.ttft_p95_ms).",
        )
    load.add_argument("--latency-slo-ms", type=positive_float, help="Latency p95 SLO (default: none).")
    load.add_argument(
        "--max-error-rate",
        type=non_negative_float,
        help="Largest error fraction a level may have and still count (default: the config's slo.max_error_rate).",
    )
    load.add_argument(
        "--instances",
        type=int_in(1, 100),
        help="Instances behind the target (default: the variant's CurrentInstanceCount; 1 with --url; variants mode).",
    )
    load.add_argument(
        "--copies",
        type=int_in(1, 100),
        help="Copies of the base component behind the target (default: its CurrentCopyCount; "
        "inference_components mode).",
    )
    load.add_argument(
        "--timeout-s", type=positive_float, default=SAGEMAKER_INVOKE_TIMEOUT_S, help="Per-request timeout with --url."
    )
    load.add_argument(
        "--turns",
        type=int_in(1, MAX_TURNS),
        default=1,
        help="Turns per conversation: above 1, each worker runs conversations in SageMaker stateful sessions "
        "(open, N turns resending the conversation so far, close; docs/sessions.md). Default 1: single requests.",
    )
    open_loop = load.add_argument_group("open loop (--open-loop)")
    open_loop.add_argument(
        "--open-loop",
        action="store_true",
        help="Conversations arriving at random at each --rates, users pausing --think-s between turns, instead of "
        "the concurrency ramp (ops/open_load.py).",
    )
    open_loop.add_argument(
        "--rates",
        type=positive_float_list(increasing=True),
        default=[30.0, 60.0, 120.0],
        help="Offered requests per minute, per step, increasing (default 30,60,120; at most 4000).",
    )
    open_loop.add_argument(
        "--step-s", type=positive_float, default=120.0, help="Seconds per step: a quarter settles (default 120)."
    )
    open_loop.add_argument(
        "--think-s",
        type=non_negative_float,
        help="Mean pause between turns, s (default: the config's traffic.think_s).",
    )
    open_loop.add_argument(
        "--no-sessions",
        action="store_true",
        help="Route every turn as a single request (no stateful session): least-outstanding routing's figure.",
    )
    load.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace, config: AppConfig, deps: Deps) -> ExitCode:
    adapters = adapters_of(config.model)
    if args.open_loop or args.url:
        return _load_without_ref(args, config, deps, adapters)
    clients = deps.clients(args.region, args.profile)
    ref = endpoint_ref(args, config, clients, adapters)
    return _load_endpoint(args, clients, ref, adapters, deps, config.slo)


def _load_endpoint(  # noqa: PLR0917 - the command's context, passed through
    args: argparse.Namespace, clients: Clients, ref: EndpointRef, adapters: tuple[str, ...], deps: Deps, slo: SloConfig
) -> ExitCode:
    target = SageMakerTarget(clients.runtime, ref.endpoint_name, clock=deps.clock)
    if ref.hosts_components:
        assert ref.base_component is not None
        routes = tuple(Route(adapter, ref.adapter_component(adapter)) for adapter in (args.adapter or adapters))
        base = describe_component(clients.sagemaker, ref.base_component)
        if base.scaled_to_zero:
            raise OpsError(
                f"inference component {base.name} is scaled to zero (0 copies); wake it first with "
                "`mangaassist-ops smoke --wake`",
                ExitCode.NOT_READY,
            )
        copies = args.copies or base.current_copies or 1
        plan = replace(_load_plan(args, routes, instances=1, slo=slo), copies=copies)
        return run_load(target, plan, clock=deps.clock, out=deps.out)
    state = describe(clients.sagemaker, ref.endpoint_name)
    if args.variant:
        variant = state.variant(args.variant)
        if variant is None:
            raise OpsError(f"--variant: endpoint {ref.endpoint_name} has no variant {args.variant!r}", ExitCode.USAGE)
        counted = variant.current_instances
    else:
        counted = sum(v.current_instances for v in state.variants if v.current_weight > 0)
    instances = args.instances or max(1, counted)
    plan = _load_plan(args, _adapter_routes(args, adapters), instances=instances, slo=slo)
    return run_load(target, plan, clock=deps.clock, out=deps.out)


def _load_without_ref(args: argparse.Namespace, config: AppConfig, deps: Deps, adapters: tuple[str, ...]) -> ExitCode:
    """``load --open-loop`` (anywhere) and ``load --url`` (the concurrency ramp against a local server)."""
    if args.open_loop:
        return _open_load(args, config, deps, adapters)
    plan = _load_plan(args, _adapter_routes(args, adapters), instances=args.instances or 1, slo=config.slo)
    plan = replace(plan, copies=args.copies)  # a local container is one copy: --copies 1 suggests per copy
    target: Target = HttpTarget(args.url, clock=deps.clock, timeout_s=args.timeout_s)
    return run_load(target, plan, clock=deps.clock, out=deps.out)


def _open_load(args: argparse.Namespace, config: AppConfig, deps: Deps, adapters: tuple[str, ...]) -> ExitCode:
    """``load --open-loop`` against ``--url`` or the endpoint (variants mode)."""
    instances = args.instances or 1
    if args.url:
        target: Target = HttpTarget(args.url, clock=deps.clock, timeout_s=args.timeout_s)
    else:
        clients = deps.clients(args.region, args.profile)
        ref = endpoint_ref(args, config, clients, adapters)
        if ref.hosts_components:
            raise OpsError("--open-loop: variants mode only (sessions reach instances, not components)", ExitCode.USAGE)
        target = SageMakerTarget(clients.runtime, ref.endpoint_name, clock=deps.clock)
        if not args.instances:
            state = describe(clients.sagemaker, ref.endpoint_name)
            counted = [v.current_instances for v in state.variants if v.current_weight > 0 and not args.variant]
            counted += [v.current_instances for v in state.variants if v.name == args.variant]
            instances = max(1, sum(counted))
    plan = OpenLoadPlan(
        rates_per_min=args.rates,
        step_s=args.step_s,
        think_s=config.traffic.think_s if args.think_s is None else args.think_s,
        models=tuple(args.adapter or adapters),
        prompt=args.prompt,
        max_tokens=args.max_tokens,
        slo_ms={
            "cold": args.cold_ttft_slo_ms or config.slo.cold.ttft_p95_ms,
            "warm": args.warm_ttft_slo_ms or config.slo.warm.ttft_p95_ms,
        },
        warm_min_cached_fraction=config.slo.warm_min_cached_fraction,
        sessions=not args.no_sessions,
        variant=args.variant,
        instances=instances,
    )
    return run_open_load(target, plan, out=deps.out)


def _adapter_routes(args: argparse.Namespace, adapters: tuple[str, ...]) -> tuple[Route, ...]:
    """variants mode and --url: the ``--adapter`` values, else the first configured adapter."""
    chosen = args.adapter or list(adapters[:1])
    return tuple(Route(adapter) for adapter in chosen)


def _load_plan(args: argparse.Namespace, routes: tuple[Route, ...], *, instances: int, slo: SloConfig) -> LoadPlan:
    if not routes:
        raise OpsError("--adapter: no adapter configured; name one", ExitCode.USAGE)
    return LoadPlan(
        levels=args.levels,
        requests_per_level=args.requests_per_level,
        level_duration_s=args.level_duration_s,
        stream=args.mode == "stream",
        routes=routes,
        prompt=args.prompt,
        max_tokens=args.max_tokens,
        variant=args.variant,
        cold_ttft_slo_ms=args.cold_ttft_slo_ms or slo.cold.ttft_p95_ms,
        warm_ttft_slo_ms=args.warm_ttft_slo_ms or slo.warm.ttft_p95_ms,
        latency_slo_ms=args.latency_slo_ms,
        max_error_rate=slo.max_error_rate if args.max_error_rate is None else args.max_error_rate,
        warm_min_cached_fraction=slo.warm_min_cached_fraction,
        instances=instances,
        turns=args.turns,
    )
