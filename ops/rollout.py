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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ops.capacity import CanaryLimit, peak_demand_rpm, require_canary_capacity
from ops.endpoint import EndpointRef, EndpointState, describe, require_in_service, wait_in_service
from ops.exit_codes import ExitCode, OpsError
from serving_contract.alarms import alarm_name_prefix, rollback_alarm_names

ALARM = "ALARM"
ALARM_TYPES = ["MetricAlarm", "CompositeAlarm"]
WEIGHT_TOLERANCE = 1e-6  # DescribeEndpoint returns the floats that were sent


@dataclass(frozen=True)
class Timing:
    """Waits between steps, in seconds: the update timeout, the watch period, the poll interval."""

    update_timeout_s: float
    watch_s: float
    poll_s: float


@dataclass(frozen=True)
class Runtime:
    """Clients and the injectable clock/sleep/printer (tests pass fakes; nothing really sleeps)."""

    sagemaker: Any
    cloudwatch: Any
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    out: Callable[[str], None]


def _alarm_pages(cloudwatch: Any, **params: Any) -> list[dict[str, Any]]:
    alarms: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = cloudwatch.describe_alarms(**params, AlarmTypes=ALARM_TYPES, **({"NextToken": token} if token else {}))
        alarms.extend(page.get("MetricAlarms", []))
        alarms.extend(page.get("CompositeAlarms", []))
        token = page.get("NextToken")
        if not token:
            return alarms


def missing_rollback_alarms(cloudwatch: Any, endpoint: str, guarded: str) -> list[str]:
    """Names from ``rollback_alarm_names`` that do not exist (the promotion would be unguarded).

    ``guarded`` is what the alarms guard: the canary variant, or ``components.BASE_SUFFIX``.
    """
    names = list(rollback_alarm_names(endpoint, guarded))
    found = {a["AlarmName"] for a in _alarm_pages(cloudwatch, AlarmNames=names)}
    return [name for name in names if name not in found]


def require_rollback_alarms(rt: Runtime, endpoint: str, guarded: str, *, allow_missing: bool) -> None:
    """Raise OpsError (NOT_READY) when a rollback alarm of ``guarded`` is missing, unless
    ``allow_missing`` (``--allow-missing-alarms``), which prints a warning instead."""
    missing = missing_rollback_alarms(rt.cloudwatch, endpoint, guarded)
    if missing and not allow_missing:
        raise OpsError(
            f"rollback alarm(s) not found: {', '.join(missing)}; deploy the alarms or pass --allow-missing-alarms",
            ExitCode.NOT_READY,
        )
    if missing:
        rt.out(f"WARNING: rollback alarm(s) not found, promoting unguarded by them: {', '.join(missing)}")


def firing_alarms(cloudwatch: Any, endpoint: str, guarded: str) -> list[str]:
    """Alarms in ALARM: every alarm named ``<endpoint>-*`` and the rollback alarms of ``guarded``
    (the canary variant, or ``components.BASE_SUFFIX``)."""
    try:
        by_prefix = _alarm_pages(cloudwatch, AlarmNamePrefix=alarm_name_prefix(endpoint), StateValue=ALARM)
        named = _alarm_pages(cloudwatch, AlarmNames=list(rollback_alarm_names(endpoint, guarded)))
    except (ClientError, BotoCoreError) as error:
        raise OpsError(f"DescribeAlarms failed: {error}", ExitCode.AWS_ERROR) from error
    names = {a["AlarmName"] for a in by_prefix if a.get("StateValue", ALARM) == ALARM}
    names |= {a["AlarmName"] for a in named if a.get("StateValue") == ALARM}
    return sorted(names)


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
