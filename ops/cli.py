"""``mangaassist-ops``: argparse front end of the operations commands.

Every command finds the endpoint through the serving stack's outputs (``--stack-outputs``
file, else ``DescribeStacks`` on ``<project>-<stage>-Serving``) unless ``--endpoint-name`` is
given, and the adapter names through the app config (``cdk.json`` + ``--stage``) unless
``--adapter`` is given. Exit codes: see :class:`ops.exit_codes.ExitCode`.

boto3 only: the sagemaker SDK's Predictor wraps the same two runtime calls and would add a
large dependency tree to an SRE's laptop and to CI for nothing this tool needs.
"""

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app_config import ConfigError, load_config
from app_config.model import AppConfig
from ops.endpoint import EndpointRef, describe, ref_from_outputs_file, ref_from_stack
from ops.exit_codes import ExitCode, OpsError
from ops.invoke import DEFAULT_PROMPT, HttpTarget, SageMakerTarget, Target
from ops.load import (
    DEFAULT_LEVELS,
    DEFAULT_MAX_ERROR_RATE,
    DEFAULT_TTFT_SLO_MS,
    MAX_CONCURRENCY,
    MAX_TOTAL_DURATION_S,
    MAX_TOTAL_REQUESTS,
    LoadPlan,
    run_load,
)
from ops.rollout import Runtime, Timing, promote, rollback
from ops.smoke import MODES, SmokeOptions, run_smoke

MAX_SMOKE_REQUESTS_PER_CASE = 20
DEFAULT_PROMOTE_STEPS = (10.0, 25.0, 50.0, 100.0)  # seed 000 §5: canary at 10 %, then to 100 %
SAGEMAKER_INVOKE_TIMEOUT_S = 60.0  # SageMaker's /invocations response limit (CONVENTIONS Part 1)


@dataclass(frozen=True)
class Clients:
    """boto3 clients the commands use (tests pass stubbed ones)."""

    sagemaker: Any
    runtime: Any
    cloudwatch: Any
    cloudformation: Any


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
    )


@dataclass(frozen=True)
class Deps:
    """Everything with side effects, injectable for tests."""

    clients: Callable[[str | None, str | None], Clients] = boto3_clients
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    out: Callable[[str], None] = print


def _positive_int(limit: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not 1 <= value <= limit:
            raise argparse.ArgumentTypeError(f"{value} is outside 1..{limit}")
        return value

    return parse


def _finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):  # nan compares False with everything, so check first
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _positive_float(text: str) -> float:
    value = _finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value:g} must be > 0")
    return value


def _non_negative_float(text: str) -> float:
    value = _finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value:g} must be >= 0")
    return value


def _steps(text: str) -> tuple[float, ...]:
    try:
        steps = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated percentages, e.g. 10,25,50,100") from None
    if any(not 0 < s <= 100 for s in steps) or list(steps) != sorted(set(steps)):
        raise argparse.ArgumentTypeError(f"{text!r}: steps must be strictly increasing percentages in (0, 100]")
    return steps


def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers, e.g. 1,4,16,32") from None
    if any(not 1 <= level <= MAX_CONCURRENCY for level in levels):
        raise argparse.ArgumentTypeError(f"{text!r}: each level must be within 1..{MAX_CONCURRENCY}")
    return levels


def _add_common(parser: argparse.ArgumentParser, *, variants: bool) -> None:
    where = parser.add_argument_group("which endpoint")
    where.add_argument("--stage", default=None, help="Stage whose stack to use (default: cdk.json's `stage`).")
    where.add_argument(
        "--stack-outputs",
        type=Path,
        metavar="FILE",
        help="Outputs JSON written by `cdk deploy --outputs-file FILE`; otherwise DescribeStacks is used.",
    )
    where.add_argument("--stack-name", help="Serving stack name (default: <project>-<stage>-Serving from config).")
    where.add_argument("--endpoint-name", help="Endpoint name; skips the stack outputs.")
    if variants:
        where.add_argument("--primary-variant", help="Primary variant name (default: stack output).")
        where.add_argument("--canary-variant", help="Canary variant name (default: stack output).")
    where.add_argument("--cdk-json", type=Path, default=Path("cdk.json"), help="cdk.json to read stages from.")
    aws = parser.add_argument_group("AWS")
    aws.add_argument("--region", help="AWS region (default: the SDK's).")
    aws.add_argument("--profile", help="AWS profile (default: the SDK's).")


def _add_timing(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--update-timeout-s",
        type=_positive_float,
        default=900.0,
        help="Max wait for the endpoint to return to InService after a weight change (default 900).",
    )
    parser.add_argument(
        "--poll-s", type=_positive_float, default=30.0, help="DescribeEndpoint/DescribeAlarms interval (default 30)."
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (every command has --help)."""
    parser = argparse.ArgumentParser(
        prog="mangaassist-ops",
        description="Operations commands for the MangaAssist SageMaker endpoint. See docs/operations.md.",
        epilog="Exit codes: 0 ok, 1 check failed, 2 usage, 3 endpoint not ready, 4 rolled back, 5 AWS error.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    smoke = commands.add_parser(
        "smoke",
        help="Endpoint InService, then requests per adapter x variant x mode.",
        description="Check the endpoint and every variant are InService, then send requests through every adapter "
        "to every variant (TargetVariant), streaming and not, and check each answer.",
    )
    _add_common(smoke, variants=False)
    _add_smoke_flags(smoke)

    prom = commands.add_parser(
        "promote",
        help="Shift canary traffic in steps, watching alarms; roll back on the first alarm.",
        description="Raise the canary's share through --steps with UpdateEndpointWeightsAndCapacities "
        "(DesiredWeight only). After each step: wait for InService, then watch alarms for --watch-s. "
        "Any alarm in ALARM returns all traffic to the primary (exit 4).",
    )
    _add_common(prom, variants=True)
    prom.add_argument(
        "--steps",
        type=_steps,
        default=DEFAULT_PROMOTE_STEPS,
        help="Canary share after each step, percent, increasing (default 10,25,50,100).",
    )
    prom.add_argument(
        "--watch-s", type=_non_negative_float, default=600.0, help="Alarm watch after each step, s (default 600)."
    )
    prom.add_argument(
        "--allow-missing-alarms",
        action="store_true",
        help="Promote even when the canary's rollback alarms do not exist (unguarded; not for prod).",
    )
    _add_timing(prom)

    back = commands.add_parser(
        "rollback",
        help="Return all traffic to the primary, then smoke-test it.",
        description="Set the primary's weight to 100 and the canary's to 0 (no instance changes), wait for "
        "InService, then send a request per adapter and mode to the primary unless --skip-smoke.",
    )
    _add_common(back, variants=True)
    _add_timing(back)
    back.add_argument("--skip-smoke", action="store_true", help="Do not send sample requests after the rollback.")
    back.add_argument("--adapter", action="append", help="Adapter for the smoke check (repeat; default: all).")

    load = commands.add_parser(
        "load",
        help="Bounded load test with a concurrency ramp; suggests a target-tracking value.",
        description=f"Hard limits: concurrency <= {MAX_CONCURRENCY}, {MAX_TOTAL_REQUESTS} requests and "
        f"{MAX_TOTAL_DURATION_S:g} s over all levels. Target = floor(req/s x 60 / instances / 1.3).",
    )
    _add_common(load, variants=False)
    load.add_argument("--url", help="Base URL of a server speaking POST /invocations (no AWS); else the endpoint.")
    load.add_argument(
        "--levels",
        type=_levels,
        default=DEFAULT_LEVELS,
        help="Concurrency levels (default 1,4,16,32).",
    )
    load.add_argument(
        "--requests-per-level",
        type=_positive_int(MAX_TOTAL_REQUESTS),
        default=64,
        help="Request budget per level (default 64).",
    )
    load.add_argument(
        "--level-duration-s", type=_positive_float, default=60.0, help="Time budget per level, s (default 60)."
    )
    load.add_argument("--mode", choices=MODES, default="stream", help="stream measures TTFT (default stream).")
    load.add_argument("--adapter", help="Adapter (`model`) to load (default: the first configured adapter).")
    load.add_argument("--variant", help="Send to this variant only (TargetVariant).")
    load.add_argument("--prompt", default=DEFAULT_PROMPT, help="User message.")
    load.add_argument("--max-tokens", type=_positive_int(4096), default=128, help="max_tokens (default 128).")
    load.add_argument(
        "--ttft-slo-ms", type=_positive_float, default=DEFAULT_TTFT_SLO_MS, help="TTFT p95 SLO (default 500)."
    )
    load.add_argument("--latency-slo-ms", type=_positive_float, help="Latency p95 SLO (default: none).")
    load.add_argument(
        "--max-error-rate",
        type=_non_negative_float,
        default=DEFAULT_MAX_ERROR_RATE,
        help="Largest error fraction a level may have and still count (default 0.005).",
    )
    load.add_argument(
        "--instances",
        type=_positive_int(100),
        help="Instances behind the target (default: the variant's CurrentInstanceCount; 1 with --url).",
    )
    load.add_argument(
        "--timeout-s", type=_positive_float, default=SAGEMAKER_INVOKE_TIMEOUT_S, help="Per-request timeout with --url."
    )
    return parser


def _add_smoke_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--adapter", action="append", help="Adapter (`model`) to test; repeat (default: all).")
    parser.add_argument("--variant", action="append", help="Variant to test; repeat (default: all).")
    parser.add_argument(
        "--requests",
        type=_positive_int(MAX_SMOKE_REQUESTS_PER_CASE),
        default=1,
        help=f"Requests per adapter x variant x mode (1..{MAX_SMOKE_REQUESTS_PER_CASE}, default 1).",
    )
    parser.add_argument("--mode", choices=(*MODES, "both"), default="both", help="sync, stream or both (default).")
    parser.add_argument("--prompt", default=DEFAULT_PROMPT, help="User message.")
    parser.add_argument("--max-tokens", type=_positive_int(4096), default=32, help="max_tokens (default 32).")


def _app_config(args: argparse.Namespace) -> tuple[str, AppConfig]:
    context: dict[str, Any] = {}
    path: Path = args.cdk_json
    if path.is_file():
        try:
            context = dict(json.loads(path.read_text()).get("context", {}))
        except (OSError, ValueError, AttributeError) as error:
            raise OpsError(f"--cdk-json {path}: cannot read context ({error})", ExitCode.USAGE) from error
    if args.stage:
        context["stage"] = args.stage
    stage = str(context.setdefault("stage", "prod"))
    context.setdefault("stages", {stage: {}})
    try:
        return stage, load_config(context)
    except ConfigError as error:
        raise OpsError(str(error), ExitCode.USAGE) from error


def _endpoint_ref(args: argparse.Namespace, config: AppConfig, clients: Clients | None) -> EndpointRef:
    stack = args.stack_name or config.stack_name("Serving")
    if args.endpoint_name:
        ref = EndpointRef(args.endpoint_name, None, None)
    elif args.stack_outputs:
        ref = ref_from_outputs_file(args.stack_outputs, stack)
    else:
        assert clients is not None
        ref = ref_from_stack(clients.cloudformation, stack)
    return EndpointRef(
        ref.endpoint_name,
        getattr(args, "primary_variant", None) or ref.primary_variant,
        getattr(args, "canary_variant", None) or ref.canary_variant,
    )


def _run(args: argparse.Namespace, deps: Deps) -> ExitCode:
    stage, config = _app_config(args)
    adapters = tuple(a.name for a in config.model.adapters)
    if args.command == "load" and args.url:
        plan = _load_plan(args, adapters, instances=args.instances or 1)
        target: Target = HttpTarget(args.url, clock=deps.clock, timeout_s=args.timeout_s)
        return run_load(target, plan, clock=deps.clock, out=deps.out)

    clients = deps.clients(args.region, args.profile)
    ref = _endpoint_ref(args, config, clients)
    timing = Timing(
        update_timeout_s=getattr(args, "update_timeout_s", 0.0),
        watch_s=getattr(args, "watch_s", 0.0),
        poll_s=getattr(args, "poll_s", 0.0),
    )
    rt = Runtime(clients.sagemaker, clients.cloudwatch, deps.clock, deps.sleep, deps.out)
    if args.command == "smoke":
        options = SmokeOptions(
            adapters=tuple(args.adapter or adapters),
            variants=tuple(args.variant or ()),
            requests_per_case=args.requests,
            modes=MODES if args.mode == "both" else (args.mode,),
            prompt=args.prompt,
            max_tokens=args.max_tokens,
        )
        return run_smoke(
            sagemaker=clients.sagemaker,
            runtime=clients.runtime,
            ref=ref,
            options=options,
            clock=deps.clock,
            out=deps.out,
        )
    if args.command == "promote":
        return promote(
            rt, ref, stage=stage, steps=args.steps, timing=timing, allow_missing_alarms=args.allow_missing_alarms
        )
    if args.command == "rollback":
        code = rollback(rt, ref, stage=stage, timing=timing)
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
        )
        return run_smoke(
            sagemaker=clients.sagemaker,
            runtime=clients.runtime,
            ref=ref,
            options=options,
            clock=deps.clock,
            out=deps.out,
        )
    # load against the endpoint
    state = describe(clients.sagemaker, ref.endpoint_name)
    if args.variant:
        variant = state.variant(args.variant)
        if variant is None:
            raise OpsError(f"--variant: endpoint {ref.endpoint_name} has no variant {args.variant!r}", ExitCode.USAGE)
        counted = variant.current_instances
    else:
        counted = sum(v.current_instances for v in state.variants if v.current_weight > 0)
    plan = _load_plan(args, adapters, instances=args.instances or max(1, counted))
    return run_load(
        SageMakerTarget(clients.runtime, ref.endpoint_name, clock=deps.clock), plan, clock=deps.clock, out=deps.out
    )


def _load_plan(args: argparse.Namespace, adapters: tuple[str, ...], *, instances: int) -> LoadPlan:
    adapter = args.adapter or (adapters[0] if adapters else "")
    if not adapter:
        raise OpsError("--adapter: no adapter configured; name one", ExitCode.USAGE)
    return LoadPlan(
        levels=args.levels,
        requests_per_level=args.requests_per_level,
        level_duration_s=args.level_duration_s,
        stream=args.mode == "stream",
        adapter=adapter,
        prompt=args.prompt,
        max_tokens=args.max_tokens,
        variant=args.variant,
        ttft_slo_ms=args.ttft_slo_ms,
        latency_slo_ms=args.latency_slo_ms,
        max_error_rate=args.max_error_rate,
        instances=instances,
    )


def main(argv: Sequence[str] | None = None, deps: Deps | None = None) -> int:
    """Parse ``argv`` and run one command; returns the exit code (argparse exits 2 on bad flags)."""
    args = build_parser().parse_args(argv)
    try:
        return int(_run(args, deps or Deps()))
    except OpsError as error:
        print(f"error: {error}", file=sys.stderr)
        return int(error.code)
