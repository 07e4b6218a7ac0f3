"""``smoke``: is the endpoint InService and does every adapter answer?

``variants`` mode: checks DescribeEndpoint (endpoint InService, each variant present and
Active), then sends ``requests_per_case`` requests per (adapter, variant, mode) with
``TargetVariant`` so a variant at weight 0 is exercised too.

``inference_components`` mode: checks the endpoint and every component (base and the chosen
adapters' components) are InService and the base component has a copy, waking it first when
``wake`` is set; then sends the requests per (component, mode) with ``InferenceComponentName``:
the base component with the base model's name, each adapter component with its adapter's.

Every answer's shape is checked (OpenAI chat completion, non-empty content; streams end with
``[DONE]``). With ``session`` each case also runs a two-turn conversation in a SageMaker stateful
session (``ops.conversation``): NEW_SESSION, two turns with the session id, CLOSE.
"""

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from app_config.root import AppConfig
from cli_support.argtypes import int_in, positive_float
from ops.command import Clients, Deps, Subparsers, adapters_of, add_endpoint_flags, endpoint_ref
from ops.components import (
    ComponentState,
    describe_component,
    has_a_copy,
    is_no_capacity,
    require_component_in_service,
    wait_component,
)
from ops.conversation import ConversationPlan, run_conversation
from ops.endpoint import EndpointRef, describe, require_in_service
from ops.exit_codes import ExitCode, OpsError
from ops.invoke import DEFAULT_PROMPT, Answer, SageMakerTarget, chat_body
from ops.served_versions import expected_versions, version_problem
from ops.table import format_table, ms

MODES = ("sync", "stream")
BASE_LABEL = "(base)"  # the adapter column of the base component's rows: no adapter
DEFAULT_WAKE_TIMEOUT_S = 900.0  # AWS measured ~5 min to wake an 8B model from zero; vLLM load adds to it
DEFAULT_WAKE_POLL_S = 30.0  # seconds between DescribeInferenceComponent calls: ~10 over a ~5 min wake
MAX_SMOKE_REQUESTS_PER_CASE = 20


@dataclass(frozen=True)
class WakeOptions:
    """Whether to wake a base component scaled to zero, and how long to wait for its copy (seconds)."""

    enabled: bool = False
    timeout_s: float = DEFAULT_WAKE_TIMEOUT_S
    poll_s: float = DEFAULT_WAKE_POLL_S


@dataclass(frozen=True)
class SmokeOptions:
    """What to send: adapters (``model`` values), variants (empty = all), requests per case, modes.

    ``base_model`` is the base model's served name (``model.name``), sent to the base component
    in inference_components mode.
    """

    adapters: tuple[str, ...]
    variants: tuple[str, ...]
    requests_per_case: int
    modes: tuple[str, ...]
    prompt: str
    max_tokens: int
    base_model: str = ""
    wake: WakeOptions = WakeOptions()
    session: bool = False
    expected_versions: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """``{variant name: {model: pin}}`` each answer's named versions must match (ops.served_versions)."""


@dataclass(frozen=True)
class _Case:
    """One row group of the table: what is in the adapter and variant/component columns, and how to send it."""

    label: str
    model: str
    where: str
    variant: str | None = None
    component: str | None = None


def run_smoke(
    *,
    sagemaker: Any,
    runtime: Any,
    ref: EndpointRef,
    options: SmokeOptions,
    clock: Callable[[], float],
    out: Callable[[str], None],
    sleep: Callable[[float], None],
) -> ExitCode:
    """Run the smoke test and print a table; OK only when every request passed.

    Raises OpsError (NOT_READY) when the endpoint, a requested variant or a component is not in
    service, or the base component is scaled to zero and ``options.wake`` is off or it did not
    wake in time; (USAGE) for an adapter without a component; (AWS_ERROR) when the wake-up
    request fails with anything but SageMaker's no-capacity error.
    """
    state = describe(sagemaker, ref.endpoint_name)
    if ref.hosts_components:
        require_in_service(state)
        instances = ", ".join(f"{v.name} x{v.current_instances}" for v in state.variants)
        out(f"endpoint {state.name}: {state.status} (inference components on {instances})")
        cases = _component_cases(sagemaker, runtime, ref=ref, options=options, clock=clock, sleep=sleep, out=out)
        scope = f"{len(cases)} component(s)"
        headers = ["adapter", "component", "mode", "status", "ttft", "latency"]
    else:
        variants = options.variants or tuple(v.name for v in state.variants)
        require_in_service(state, variants)
        weights = ", ".join(f"{v.name}={v.current_weight:g} x{v.current_instances}" for v in state.variants)
        out(f"endpoint {state.name}: {state.status} ({weights})")
        cases = [_Case(a, a, v, variant=v) for a in options.adapters for v in variants]
        scope = f"{len(options.adapters)} adapter(s) x {len(variants)} variant(s)"
        headers = ["adapter", "variant", "mode", "status", "ttft", "latency"]

    target = SageMakerTarget(runtime, ref.endpoint_name, clock=clock)
    rows, failures = _send(target, cases, options)
    out(format_table(headers, rows))
    for case, mode, answer in failures:
        out(f"FAIL {case.label} on {case.where} ({mode}): {answer.status}: {answer.detail}")
    total = len(rows)
    if failures:
        out(f"smoke FAILED: {len(failures)} of {total} request(s) failed")
        return ExitCode.CHECK_FAILED
    out(f"smoke passed: {total} request(s), {scope}")
    return ExitCode.OK


def _send(
    target: SageMakerTarget, cases: list[_Case], options: SmokeOptions
) -> tuple[list[list[str]], list[tuple[_Case, str, Answer]]]:
    """Every case in every mode (and a two-turn session when asked): the table's rows, and the failures."""
    rows: list[list[str]] = []
    failures: list[tuple[_Case, str, Answer]] = []
    for case in cases:
        for mode in options.modes:
            stream = mode == "stream"
            body = chat_body(model=case.model, prompt=options.prompt, max_tokens=options.max_tokens, stream=stream)
            for _ in range(options.requests_per_case):
                answer = target.invoke(body, stream=stream, variant=case.variant, component=case.component)
                expected = options.expected_versions.get(case.variant or "")
                if answer.ok and expected:
                    problem = version_problem(answer.versions, expected, base=options.base_model, model=case.model)
                    if problem is not None:
                        answer = replace(answer, ok=False, status="wrong version", detail=problem)
                rows.append([case.label, case.where, mode, answer.status, ms(answer.ttft_s), ms(answer.latency_s)])
                if not answer.ok:
                    failures.append((case, mode, answer))
        if options.session:  # two turns in one stateful session; streamed when the stream mode is tested
            stream = "stream" in options.modes
            plan = ConversationPlan(
                case.model, 2, options.prompt, options.max_tokens, stream, case.variant, case.component
            )
            for turn, answer in enumerate(run_conversation(target, plan), start=1):
                mode = f"session turn {turn}" if answer.status.split()[0] not in ("NEW_SESSION", "CLOSE") else "session"
                rows.append([case.label, case.where, mode, answer.status, ms(answer.ttft_s), ms(answer.latency_s)])
                if not answer.ok:
                    failures.append((case, mode, answer))
    return rows, failures


def _component_cases(
    sagemaker: Any,
    runtime: Any,
    *,
    ref: EndpointRef,
    options: SmokeOptions,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    out: Callable[[str], None],
) -> list[_Case]:
    """Check every component is InService (waking the base when asked); the cases to send."""
    assert ref.base_component is not None
    adapters = [(adapter, ref.adapter_component(adapter)) for adapter in options.adapters]
    base = describe_component(sagemaker, ref.base_component)
    states = [base, *(describe_component(sagemaker, component) for _, component in adapters)]
    for component in states:
        require_component_in_service(component)
    if base.scaled_to_zero:
        if not options.wake.enabled:
            raise OpsError(
                f"inference component {base.name} is scaled to zero (0 copies); pass --wake to send a request that "
                "wakes it and wait for a copy (minutes; requests fail meanwhile)",
                ExitCode.NOT_READY,
            )
        states[0] = _wake(sagemaker, runtime, ref=ref, base=base, options=options, clock=clock, sleep=sleep, out=out)
    for component in states:
        out(f"component {component.name}: {component.summary()}")
    base_case = _Case(BASE_LABEL, options.base_model, base.name, component=base.name)
    return [base_case, *(_Case(adapter, adapter, component, component=component) for adapter, component in adapters)]


def _wake(
    sagemaker: Any,
    runtime: Any,
    *,
    ref: EndpointRef,
    base: ComponentState,
    options: SmokeOptions,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    out: Callable[[str], None],
) -> ComponentState:
    """Send one request to the sleeping base component, then wait until it has a copy.

    The request is expected to fail with SageMaker's no-capacity error: that failure is the
    ``NoCapacityInvocationFailures`` datapoint whose alarm makes Application Auto Scaling add a
    copy. Raises OpsError (AWS_ERROR) when it fails otherwise; (NOT_READY) when no copy came
    within ``options.wake.timeout_s``.
    """
    wake = options.wake
    out(f"component {base.name} is scaled to zero: waking it (one request, then up to {wake.timeout_s:g} s for a copy)")
    body = chat_body(model=options.base_model, prompt=options.prompt, max_tokens=1, stream=False)
    answer = SageMakerTarget(runtime, ref.endpoint_name, clock=clock).invoke(body, stream=False, component=base.name)
    if answer.ok:
        out("wake request answered: the component already has a copy")
    elif is_no_capacity(answer):
        out(f"wake request failed as expected: {answer.status}: {answer.detail}")
    else:
        raise OpsError(
            f"wake request to {base.name} failed with {answer.status} ({answer.detail}); expected SageMaker's "
            "no-capacity error",
            ExitCode.AWS_ERROR,
        )
    started = clock()
    woken = wait_component(
        sagemaker,
        base.name,
        timeout_s=wake.timeout_s,
        poll_s=wake.poll_s,
        clock=clock,
        sleep=sleep,
        timeout_flag="--wake-timeout-s",
        settled=has_a_copy,
    )
    out(f"component {base.name} woke after {clock() - started:.0f} s")
    return woken


def register(commands: Subparsers) -> None:
    """``smoke``: its flags and its handler."""
    smoke = commands.add_parser(
        "smoke",
        help="Endpoint InService, then requests per adapter x variant (or component) x mode.",
        description="Check the endpoint and every variant (or inference component) are InService, then send "
        "requests through every adapter to every variant (TargetVariant) or to every component "
        "(InferenceComponentName), streaming and not, and check each answer.",
    )
    add_endpoint_flags(smoke, variants=False)
    _add_smoke_flags(smoke)
    smoke.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace, config: AppConfig, deps: Deps) -> ExitCode:
    adapters = adapters_of(config.model)
    clients = deps.clients(args.region, args.profile)
    ref = endpoint_ref(args, config, clients, adapters)
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
    return smoke_with(clients, ref, options, deps)


def smoke_with(clients: Clients, ref: EndpointRef, options: SmokeOptions, deps: Deps) -> ExitCode:
    """:func:`run_smoke` with the command's clients and dependencies (``rollback`` smokes the primary too)."""
    return run_smoke(
        sagemaker=clients.sagemaker,
        runtime=clients.runtime,
        ref=ref,
        options=options,
        clock=deps.clock,
        out=deps.out,
        sleep=deps.sleep,
    )


def _add_smoke_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--adapter", action="append", help="Adapter (`model`) to test; repeat (default: all).")
    parser.add_argument("--variant", action="append", help="Variant to test; repeat (default: all; variants mode).")
    parser.add_argument(
        "--requests",
        type=int_in(1, MAX_SMOKE_REQUESTS_PER_CASE),
        default=1,
        help=f"Requests per adapter x variant x mode (1..{MAX_SMOKE_REQUESTS_PER_CASE}, default 1).",
    )
    parser.add_argument("--mode", choices=(*MODES, "both"), default="both", help="sync, stream or both (default).")
    parser.add_argument("--prompt", default=DEFAULT_PROMPT, help="User message.")
    parser.add_argument("--max-tokens", type=int_in(1, 4096), default=32, help="max_tokens (default 32).")
    parser.add_argument(
        "--session",
        action="store_true",
        help="Also run one two-turn conversation per adapter x variant in a SageMaker stateful session "
        "(NEW_SESSION, two turns with SessionId, CLOSE; docs/sessions.md).",
    )
    parser.add_argument(
        "--wake",
        action="store_true",
        help="inference_components mode: when the base component is scaled to zero, send one request to wake it "
        "and wait for a copy instead of failing (exit 3).",
    )
    parser.add_argument(
        "--wake-timeout-s",
        type=positive_float,
        default=DEFAULT_WAKE_TIMEOUT_S,
        help=f"Max wait for a copy after the wake-up request, s (default {DEFAULT_WAKE_TIMEOUT_S:g}).",
    )
    parser.add_argument(
        "--poll-s",
        type=positive_float,
        default=DEFAULT_WAKE_POLL_S,
        help=f"DescribeInferenceComponent interval while waking, s (default {DEFAULT_WAKE_POLL_S:g}).",
    )
