"""``mangaassist-ops``: front end of the operations commands (flags in :mod:`ops.parser`).

Every command finds the endpoint through the serving stack's outputs (``--stack-outputs``
file, else ``DescribeStacks`` on ``<project>-<stage>-Serving``) unless ``--endpoint-name`` is
given, and the adapter names through the app config (``cdk.json`` + ``--stage``) unless
``--adapter`` is given. The outputs also say the serving mode (``ServingMode``: variants or
inference_components) and, in inference_components mode, the component names; with
``--endpoint-name`` both come from the app config. Exit codes: see :class:`ops.exit_codes.ExitCode`.

boto3 only: the sagemaker SDK's Predictor wraps the same two runtime calls and would add a
large dependency tree to an SRE's laptop and to CI for nothing this tool needs.
"""

import argparse
import datetime as dt
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from app_config import ConfigError
from app_config.loader import load_cli_config
from app_config.root import AppConfig
from app_config.slo import SloConfig
from ops.capacity import CanaryLimit
from ops.component_rollout import rollback_refusal, watch_rolling_update
from ops.components import describe_component
from ops.endpoint import (
    INFERENCE_COMPONENTS,
    VARIANTS,
    EndpointRef,
    describe,
    ref_from_config,
    ref_from_outputs_file,
    ref_from_stack,
)
from ops.exit_codes import ExitCode, OpsError
from ops.invoke import DEFAULT_PROMPT, HttpTarget, SageMakerTarget, Target
from ops.load import LoadPlan, Route, run_load
from ops.measure import MeasureClients, boto3_measure_clients, run_capacity
from ops.migrate import ClientsFactory, boto3_migrate_clients, run_migrate
from ops.open_load import OpenLoadPlan, run_open_load
from ops.parser import DEFAULT_PROMOTE_STEPS, DEFAULT_WATCH_S, SAGEMAKER_INVOKE_TIMEOUT_S, build_parser
from ops.preflight import PreflightClients, PreflightOptions, boto3_preflight_clients, run_preflight
from ops.release import ReleaseRequest, run_release
from ops.rollout import Runtime, Timing, promote, rollback
from ops.served_versions import expected_versions
from ops.shadow import ShadowClients, boto3_shadow_clients, run_shadow
from ops.smoke import MODES, SmokeOptions, WakeOptions, run_smoke

__all__ = ["Clients", "Deps", "build_parser", "main"]

OTHER_MODE_FLAGS: Final[dict[str, dict[str, tuple[str, str]]]] = {
    INFERENCE_COMPONENTS: {
        "primary_variant": ("--primary-variant", "its one variant hosts inference components"),
        "canary_variant": ("--canary-variant", "there is no canary variant; the base component rolls its updates"),
        "variant": ("--variant", "requests go to inference components; pick them with --adapter"),
        "steps": ("--steps", "the base component's rolling update has no traffic steps; see --rollout-timeout-s"),
        "watch_s": ("--watch-s", "SageMaker bakes each batch of the rolling update; see --rollout-timeout-s"),
        "instances": ("--instances", "the suggestion is per copy of the base component; see --copies"),
    },
    VARIANTS: {
        "copies": ("--copies", "the suggestion is per instance; see --instances"),
        "expect_image": ("--expect-image", "promote shifts traffic to the canary variant, which runs its own image"),
    },
}
"""Flags of one serving mode, refused in the other: {mode: {argparse dest: (flag, why)}}.
They default to None, so only a flag the caller gave is refused; --wake is harmless anywhere
(nothing scales to zero in variants mode), so a CI job may pass it in both modes."""


@dataclass(frozen=True)
class Clients:
    """boto3 clients the commands use (tests pass stubbed ones)."""

    sagemaker: Any
    runtime: Any
    cloudwatch: Any
    cloudformation: Any
    s3: Any = None
    """``ops release`` only: whether a version folder already holds files."""


def boto3_clients(region: str | None, profile: str | None) -> Clients:
    """Real clients; the runtime client's read timeout covers SageMaker's 60 s invocation limit."""
    import boto3  # noqa: PLC0415 - `load --url` and --help need no AWS SDK session
    from botocore.config import Config  # noqa: PLC0415

    session = boto3.Session(region_name=region, profile_name=profile)
    runtime_config = Config(read_timeout=SAGEMAKER_INVOKE_TIMEOUT_S + 10, retries={"max_attempts": 1})
    return Clients(
        sagemaker=session.client("sagemaker"),
        runtime=session.client("sagemaker-runtime", config=runtime_config),
        cloudwatch=session.client("cloudwatch"),
        cloudformation=session.client("cloudformation"),
        s3=session.client("s3"),
    )


@dataclass(frozen=True)
class Deps:
    """Everything with side effects, injectable for tests."""

    clients: Callable[[str | None, str | None], Clients] = boto3_clients
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    out: Callable[[str], None] = print
    preflight_clients: Callable[[str | None, str | None], PreflightClients] = boto3_preflight_clients
    shadow_clients: Callable[[str | None, str | None], ShadowClients] = boto3_shadow_clients
    measure_clients: Callable[[str | None, str | None], MeasureClients] = boto3_measure_clients
    migrate_clients: ClientsFactory = boto3_migrate_clients
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)


def _app_config(args: argparse.Namespace) -> tuple[str, AppConfig]:
    """The stage and config of ``--cdk-json``, ``--stage`` and ``-c key=value`` (preflight), through
    the one loader of every command-line tool (``app_config.loader.load_cli_config``)."""
    overrides = dict(getattr(args, "context", None) or ())
    try:
        config = load_cli_config(overrides, cdk_json=args.cdk_json, stage=args.stage or None)
    except ConfigError as error:
        raise OpsError(str(error), ExitCode.USAGE) from error
    except (OSError, ValueError, AttributeError) as error:
        raise OpsError(f"--cdk-json {args.cdk_json}: cannot read context ({error})", ExitCode.USAGE) from error
    return config.stage, config


def _refuse_other_mode_flags(args: argparse.Namespace, ref: EndpointRef) -> None:
    """Raise OpsError (USAGE) for a flag given explicitly that the endpoint's mode does not use."""
    for dest, (flag, why) in OTHER_MODE_FLAGS[ref.mode].items():
        if getattr(args, dest, None) is not None:
            raise OpsError(f"{flag}: not used in {ref.mode} mode ({ref.endpoint_name}): {why}", ExitCode.USAGE)


def _endpoint_ref(
    args: argparse.Namespace, config: AppConfig, clients: Clients | None, adapters: Sequence[str]
) -> EndpointRef:
    stack = args.stack_name or config.stack_name("Serving")
    if args.endpoint_name:
        ref = ref_from_config(args.endpoint_name, config.serving.mode, adapters)
    elif args.stack_outputs:
        ref = ref_from_outputs_file(args.stack_outputs, stack, adapters)
    else:
        assert clients is not None
        ref = ref_from_stack(clients.cloudformation, stack, adapters)
    _refuse_other_mode_flags(args, ref)
    return replace(
        ref,
        primary_variant=getattr(args, "primary_variant", None) or ref.primary_variant,
        canary_variant=getattr(args, "canary_variant", None) or ref.canary_variant,
    )


def _run_own_clients(args: argparse.Namespace, config: AppConfig, deps: Deps) -> ExitCode | None:
    """The commands that make their own clients (and may run without AWS), or None for the others."""
    if args.command == "preflight":
        checks = PreflightOptions(args.region, args.profile, args.cdk_out, args.download_digests, args.foundation)
        return run_preflight(config, deps.preflight_clients, checks, deps.out)
    if args.command == "capacity":
        return run_capacity(
            args, config, deps.measure_clients, now=deps.now, clock=deps.clock, sleep=deps.sleep, out=deps.out
        )
    if args.command == "migrate":
        return run_migrate(args, config, deps.migrate_clients, now=deps.now, out=deps.out)
    if args.command == "shadow":
        return run_shadow(args, config, deps.shadow_clients, now=deps.now, out=deps.out)
    return None


def _run(args: argparse.Namespace, deps: Deps) -> ExitCode:
    _, config = _app_config(args)
    handled = _run_own_clients(args, config, deps)
    if handled is not None:
        return handled
    if args.command == "release":
        request = ReleaseRequest(
            args.kind,
            args.version,
            args.base_model_version,
            args.eval_set,
            args.catalog,
            adapter=args.adapter,
            source_model=args.source_model,
            calibration=args.calibration,
            baseline_model=args.baseline_model,
        )
        clients = deps.clients(args.region, args.profile)
        return run_release(
            clients.sagemaker,
            config,
            request,
            timeout_s=args.timeout_s,
            poll_s=args.poll_s,
            s3=clients.s3,
            clock=deps.clock,
            sleep=deps.sleep,
            out=deps.out,
        )
    adapters = tuple(a.name for a in config.model.adapters)
    if args.command == "load" and (args.open_loop or args.url):
        return _load_without_ref(args, config, deps, adapters)

    clients = deps.clients(args.region, args.profile)
    ref = _endpoint_ref(args, config, clients, adapters)
    rt = Runtime(clients.sagemaker, clients.cloudwatch, deps.clock, deps.sleep, deps.out)
    if args.command == "smoke":
        options = SmokeOptions(
            adapters=tuple(args.adapter or adapters),
            variants=tuple(args.variant or ()),
            requests_per_case=args.requests,
            modes=MODES if args.mode == "both" else (args.mode,),
            prompt=args.prompt,
            max_tokens=args.max_tokens,
            base_model=config.model.name,
            wake=WakeOptions(args.wake, args.wake_timeout_s, args.poll_s),
            session=args.session,
            expected_versions=expected_versions(config),
        )
        return _smoke(clients, ref, options, deps)
    if args.command == "promote":
        if ref.hosts_components:
            return watch_rolling_update(
                rt,
                ref,
                timeout_s=args.rollout_timeout_s
                or float(config.serving.inference_components.rollout.maximum_execution_timeout_s),
                poll_s=args.poll_s,
                allow_missing_alarms=args.allow_missing_alarms,
                expect_image=args.expect_image,
            )
        timing = Timing(args.update_timeout_s, DEFAULT_WATCH_S if args.watch_s is None else args.watch_s, args.poll_s)
        return promote(
            rt,
            ref,
            steps=args.steps or DEFAULT_PROMOTE_STEPS,
            timing=timing,
            allow_missing_alarms=args.allow_missing_alarms,
            canary_limit=CanaryLimit.of(config),
        )
    if args.command == "rollback":
        if ref.hosts_components:
            raise rollback_refusal(ref)
        code = rollback(rt, ref, timing=Timing(args.update_timeout_s, 0.0, args.poll_s))
        if args.skip_smoke:
            return code
        assert ref.primary_variant is not None
        options = SmokeOptions(
            adapters=tuple(args.adapter or adapters),
            variants=(ref.primary_variant,),
            requests_per_case=1,
            modes=MODES,
            prompt=DEFAULT_PROMPT,
            max_tokens=32,
            base_model=config.model.name,
            expected_versions=expected_versions(config),
        )
        return _smoke(clients, ref, options, deps)
    return _load_endpoint(args, clients, ref, adapters, deps, config.slo)


def _smoke(clients: Clients, ref: EndpointRef, options: SmokeOptions, deps: Deps) -> ExitCode:
    return run_smoke(
        sagemaker=clients.sagemaker,
        runtime=clients.runtime,
        ref=ref,
        options=options,
        clock=deps.clock,
        out=deps.out,
        sleep=deps.sleep,
    )


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
        ref = _endpoint_ref(args, config, clients, adapters)
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


def main(argv: Sequence[str] | None = None, deps: Deps | None = None) -> int:
    """Parse ``argv`` and run one command; returns the exit code (argparse exits 2 on bad flags)."""
    args = build_parser().parse_args(argv)
    try:
        return int(_run(args, deps or Deps()))
    except OpsError as error:
        print(f"error: {error}", file=sys.stderr)
        return int(error.code)
