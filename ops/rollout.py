"""``promote`` and ``rollback``: move traffic between the primary and the canary variant.

Only ``DesiredWeight`` changes (``UpdateEndpointWeightsAndCapacities`` without
``DesiredInstanceCount``), so no instance is replaced and Application Auto Scaling keeps owning
the instance counts. Weights are written as percentages: canary ``p``, primary ``100 - p``.
SageMaker accepts weights >= 0; a variant at weight 0 gets no traffic (still reachable with
``TargetVariant``, which is how ``smoke`` checks it).

Weights are runtime state, like instance counts: the endpoint retains ``DesiredWeight`` on
every update, so the next ``cdk deploy`` keeps what these commands set and nothing is committed
(a changed ``serving.*.initial_weight`` would make a new endpoint config, which UpdateEndpoint
deploys to a new fleet, and still not move the weights).
"""

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from botocore.exceptions import BotoCoreError, ClientError

from app_config.root import AppConfig
from cli_support.argtypes import non_negative_float, positive_float
from ops.canary_limit import CanaryLimit, peak_demand_rpm, require_canary_capacity
from ops.command import Deps, Subparsers, adapters_of, add_endpoint_flags, add_timing_flags, endpoint_ref
from ops.component_rollout import rollback_refusal, watch_rolling_update
from ops.endpoint import EndpointRef, EndpointState, describe, require_in_service, wait_in_service
from ops.exit_codes import ExitCode, OpsError
from ops.guardrails import Runtime, firing_alarms, require_rollback_alarms
from ops.invoke import DEFAULT_PROMPT
from ops.served_versions import expected_versions
from ops.smoke import MODES, SmokeOptions, smoke_with

WEIGHT_TOLERANCE = 1e-6  # DescribeEndpoint returns the floats that were sent


@dataclass(frozen=True)
class Timing:
    """Waits between steps, in seconds: the update timeout, the watch period, the poll interval."""

    update_timeout_s: float
    watch_s: float
    poll_s: float


WEIGHTS_KEPT = (
    "weights are runtime state: the next cdk deploy keeps them (the endpoint retains DesiredWeight); "
    "commit nothing, and leave serving.*.initial_weight alone (a change replaces every instance and moves no traffic)"
)


def set_weights(rt: Runtime, endpoint: str, weights: dict[str, float], timing: Timing) -> None:
    """UpdateEndpointWeightsAndCapacities (DesiredWeight only), then wait for InService with those weights."""
    desired = [{"VariantName": name, "DesiredWeight": float(weight)} for name, weight in weights.items()]
    try:
        rt.sagemaker.update_endpoint_weights_and_capacities(EndpointName=endpoint, DesiredWeightsAndCapacities=desired)
    except (ClientError, BotoCoreError) as error:
        raise OpsError(
            f"UpdateEndpointWeightsAndCapacities on {endpoint} failed: {error}", ExitCode.AWS_ERROR
        ) from error

    def applied(state: EndpointState) -> bool:
        return all(
            (variant := state.variant(name)) is not None and abs(variant.current_weight - weight) <= WEIGHT_TOLERANCE
            for name, weight in weights.items()
        )

    wait_in_service(
        rt.sagemaker,
        endpoint,
        timeout_s=timing.update_timeout_s,
        poll_s=timing.poll_s,
        clock=rt.clock,
        sleep=rt.sleep,
        settled=applied,
    )


def _variant_names(ref: EndpointRef) -> tuple[str, str]:
    if not ref.primary_variant or not ref.canary_variant:
        raise OpsError(
            "primary and canary variant names are needed (stack outputs PrimaryVariantName/CanaryVariantName, "
            "or --primary-variant/--canary-variant); is the canary enabled?",
            ExitCode.USAGE,
        )
    return ref.primary_variant, ref.canary_variant


def canary_share(state: EndpointState, canary: str) -> float:
    """The canary's share of traffic in percent (weight / sum of current weights x 100)."""
    total = sum(v.current_weight for v in state.variants)
    variant = state.variant(canary)
    return 100.0 * variant.current_weight / total if variant is not None and total > 0 else 0.0


def _weights(primary: str, canary: str, canary_percent: float) -> dict[str, float]:
    return {primary: 100.0 - canary_percent, canary: float(canary_percent)}


def rollback(rt: Runtime, ref: EndpointRef, *, timing: Timing) -> ExitCode:
    """Return all traffic to the primary (primary 100, canary 0); a deploy keeps that.

    Waits for an in-progress update to finish first (SageMaker refuses a weight change while
    the endpoint is Updating). Raises OpsError (NOT_READY / AWS_ERROR) when it cannot.
    """
    primary, canary = _variant_names(ref)
    state = wait_in_service(
        rt.sagemaker,
        ref.endpoint_name,
        timeout_s=timing.update_timeout_s,
        poll_s=timing.poll_s,
        clock=rt.clock,
        sleep=rt.sleep,
    )
    require_in_service(state, (primary, canary))
    weights = _weights(primary, canary, 0.0)
    rt.out(f"rollback {ref.endpoint_name}: {primary}=100 {canary}=0")
    set_weights(rt, ref.endpoint_name, weights, timing)
    rt.out(f"rolled back: all traffic on {primary}")
    rt.out(WEIGHTS_KEPT)
    return ExitCode.OK


def _watch(rt: Runtime, ref: EndpointRef, canary: str, watch_s: float, poll_s: float) -> list[str]:
    """Check alarms every ``poll_s`` for ``watch_s``; return the firing alarms at the first hit."""
    deadline = rt.clock() + watch_s
    while True:
        firing = firing_alarms(rt.cloudwatch, ref.endpoint_name, canary)
        if firing:
            return firing
        remaining = deadline - rt.clock()
        if remaining <= 0:
            return []
        rt.sleep(min(poll_s, remaining))


def promote(
    rt: Runtime,
    ref: EndpointRef,
    *,
    steps: Sequence[float],
    timing: Timing,
    allow_missing_alarms: bool,
    canary_limit: CanaryLimit,
) -> ExitCode:
    """Shift canary traffic through ``steps`` (percent, ascending), watching alarms after each.

    Steps at or below the canary's current share are skipped, so a stopped promotion can be
    resumed. Before any weight moves, the last remaining step is checked against
    ``canary_limit``: when the busiest minute of the last hour's Invocations (all variants) at
    that share needs more canary instances than its max_capacity, raises OpsError (USAGE) with
    the numbers in one line and changes nothing. At the first alarm in ALARM, rolls back and
    returns ROLLED_BACK. A step that does not return to InService within the timeout also rolls
    back (then re-raises NOT_READY).
    """
    primary, canary = _variant_names(ref)
    state = describe(rt.sagemaker, ref.endpoint_name)
    require_in_service(state, (primary, canary))
    require_rollback_alarms(rt, ref.endpoint_name, canary, allow_missing=allow_missing_alarms)
    current = canary_share(state, canary)
    remaining = [s for s in steps if s > current + 1e-9]
    if remaining:
        demand = peak_demand_rpm(rt.cloudwatch, ref.endpoint_name, [v.name for v in state.variants])
        require_canary_capacity(remaining, demand, canary_limit, canary=canary)
    planned = ", ".join(f"{s:g}" for s in steps)
    rt.out(f"promote {ref.endpoint_name}: {canary} at {current:g} % of traffic, steps {planned} %")

    firing = firing_alarms(rt.cloudwatch, ref.endpoint_name, canary)
    for step in remaining:
        if firing:
            break
        rt.out(f"step {step:g} %: {primary}={100 - step:g} {canary}={step:g}")
        try:
            set_weights(rt, ref.endpoint_name, _weights(primary, canary, step), timing)
        except OpsError as error:
            rt.out(f"step {step:g} % failed: {error}; rolling back")
            rollback(rt, ref, timing=timing)
            raise
        rt.out(f"step {step:g} %: InService; watching alarms for {timing.watch_s:g} s")
        firing = _watch(rt, ref, canary, timing.watch_s, timing.poll_s)
    if firing:
        rt.out(f"ALARM: {', '.join(firing)}; rolling back")
        rollback(rt, ref, timing=timing)
        rt.out("promotion stopped by alarm and rolled back")
        return ExitCode.ROLLED_BACK
    final = _weights(primary, canary, max([current, *steps]))
    rt.out(f"promoted: {canary} at {final[canary]:g} % of traffic")
    rt.out(WEIGHTS_KEPT)
    return ExitCode.OK


DEFAULT_PROMOTE_STEPS = (10.0, 25.0, 50.0, 100.0)  # seed 000 §5: canary at 10 %, then to 100 %
DEFAULT_WATCH_S = 600.0


def register(commands: Subparsers) -> None:
    """``promote`` and ``rollback``: their flags and their handlers."""
    _add_promote(commands)
    back = commands.add_parser(
        "rollback",
        help="Return all traffic to the primary, then smoke-test it (variants mode).",
        description="Set the primary's weight to 100 and the canary's to 0 (no instance changes), wait for "
        "InService, then send a request per adapter and mode to the primary unless --skip-smoke. In "
        "inference_components mode there is no weight to move: it exits 2 and says what to do instead.",
    )
    add_endpoint_flags(back, variants=True)
    add_timing_flags(back)
    back.add_argument("--skip-smoke", action="store_true", help="Do not send sample requests after the rollback.")
    back.add_argument("--adapter", action="append", help="Adapter for the smoke check (repeat; default: all).")
    back.set_defaults(handler=_rollback)


def _promote(args: argparse.Namespace, config: AppConfig, deps: Deps) -> ExitCode:
    clients = deps.clients(args.region, args.profile)
    ref = endpoint_ref(args, config, clients, adapters_of(config.model))
    rt = Runtime(clients.sagemaker, clients.cloudwatch, deps.clock, deps.sleep, deps.out)
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


def _rollback(args: argparse.Namespace, config: AppConfig, deps: Deps) -> ExitCode:
    adapters = adapters_of(config.model)
    clients = deps.clients(args.region, args.profile)
    ref = endpoint_ref(args, config, clients, adapters)
    if ref.hosts_components:
        raise rollback_refusal(ref)
    rt = Runtime(clients.sagemaker, clients.cloudwatch, deps.clock, deps.sleep, deps.out)
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
    return smoke_with(clients, ref, options, deps)


def _steps(text: str) -> tuple[float, ...]:
    try:
        steps = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated percentages, e.g. 10,25,50,100") from None
    if any(not 0 < s <= 100 for s in steps) or list(steps) != sorted(set(steps)):
        raise argparse.ArgumentTypeError(f"{text!r}: steps must be strictly increasing percentages in (0, 100]")
    return steps


def _add_promote(commands: Subparsers) -> None:
    prom = commands.add_parser(
        "promote",
        help="Shift canary traffic in steps, watching alarms (variants); watch the base component's rolling update.",
        description="variants mode: raise the canary's share through --steps with UpdateEndpointWeightsAndCapacities "
        "(DesiredWeight only). After each step: wait for InService, then watch alarms for --watch-s. Any alarm in "
        "ALARM returns all traffic to the primary (exit 4). inference_components mode: watch the rolling update of "
        "the base component that `cdk deploy` started until it ends, reporting alarms (SageMaker rolls back by "
        "itself); exit 4 when it was rolled back.",
    )
    add_endpoint_flags(prom, variants=True)
    prom.add_argument(
        "--steps",
        type=_steps,
        default=None,
        help="Canary share after each step, percent, increasing (default 10,25,50,100; variants mode).",
    )
    prom.add_argument(
        "--watch-s",
        type=non_negative_float,
        default=None,
        help=f"Alarm watch after each step, s (default {DEFAULT_WATCH_S:g}; variants mode).",
    )
    prom.add_argument(
        "--allow-missing-alarms",
        action="store_true",
        help="Go on even when the rollback alarms do not exist (unguarded; not for prod).",
    )
    prom.add_argument(
        "--rollout-timeout-s",
        type=positive_float,
        help="Max wait for the base component's rolling update to end (default: the stage's "
        "serving.inference_components.rollout.maximum_execution_timeout_s, when SageMaker itself gives up and rolls "
        "back; inference_components mode).",
    )
    prom.add_argument(
        "--expect-image",
        metavar="URI",
        help="The image the update deploys: OK only when the base component runs it at the end (its SpecifiedImage "
        "or ResolvedImage); inference_components mode.",
    )
    add_timing_flags(prom)
    prom.set_defaults(handler=_promote)
