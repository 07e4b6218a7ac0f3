"""Command-line flags of ``mangaassist-ops``: the argparse parser and its value types.

Flags that only make sense in one serving mode default to None, so the command can tell an
explicit flag from a default and reject it in the other mode with one line (see
``ops.cli.OTHER_MODE_FLAGS``).
"""

import argparse
from pathlib import Path

from cli_support.argtypes import int_in, int_list, non_negative_float, positive_float, positive_float_list
from ops.invoke import DEFAULT_PROMPT
from ops.load import (
    DEFAULT_LEVELS,
    MAX_CONCURRENCY,
    MAX_TOTAL_DURATION_S,
    MAX_TOTAL_REQUESTS,
    MAX_TURNS,
)
from ops.measure import add_capacity_parser
from ops.migrate import add_migrate_parser
from ops.preflight import add_preflight_parser
from ops.release import add_release_parser
from ops.shadow import add_shadow_parser
from ops.smoke import DEFAULT_WAKE_POLL_S, DEFAULT_WAKE_TIMEOUT_S, MODES
from serving_contract.env import SAGEMAKER_INVOCATION_TIMEOUT_S

MAX_SMOKE_REQUESTS_PER_CASE = 20
DEFAULT_PROMOTE_STEPS = (10.0, 25.0, 50.0, 100.0)  # seed 000 §5: canary at 10 %, then to 100 %
DEFAULT_WATCH_S = 600.0
SAGEMAKER_INVOKE_TIMEOUT_S = float(SAGEMAKER_INVOCATION_TIMEOUT_S)  # /invocations response limit


def _steps(text: str) -> tuple[float, ...]:
    try:
        steps = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated percentages, e.g. 10,25,50,100") from None
    if any(not 0 < s <= 100 for s in steps) or list(steps) != sorted(set(steps)):
        raise argparse.ArgumentTypeError(f"{text!r}: steps must be strictly increasing percentages in (0, 100]")
    return steps


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
    where.add_argument(
        "--endpoint-name",
        help="Endpoint name; skips the stack outputs (serving mode and component names then come from the config).",
    )
    if variants:
        where.add_argument("--primary-variant", help="Primary variant name (default: stack output; variants mode).")
        where.add_argument("--canary-variant", help="Canary variant name (default: stack output; variants mode).")
    where.add_argument("--cdk-json", type=Path, default=Path("cdk.json"), help="cdk.json to read stages from.")
    aws = parser.add_argument_group("AWS")
    aws.add_argument("--region", help="AWS region (default: the SDK's).")
    aws.add_argument("--profile", help="AWS profile (default: the SDK's).")


def _add_timing(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--update-timeout-s",
        type=positive_float,
        default=900.0,
        help="Max wait for the endpoint to return to InService after a weight change (default 900; variants mode).",
    )
    parser.add_argument(
        "--poll-s",
        type=positive_float,
        default=30.0,
        help="DescribeEndpoint/DescribeInferenceComponent/DescribeAlarms interval (default 30).",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (every command has --help)."""
    parser = argparse.ArgumentParser(
        prog="mangaassist-ops",
        description="Operations commands for the MangaAssist SageMaker endpoint. See docs/operations.md.",
        epilog="Exit codes: 0 ok, 1 check failed, 2 usage, 3 endpoint not ready, 4 rolled back, 5 AWS error; "
        "preflight: 6 config, 7 account, 8 artifacts, 9 conflict. shadow: 0 passes, 1 fails, 3 its alarms. "
        "capacity measure: 1 a job failed or was stopped.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    smoke = commands.add_parser(
        "smoke",
        help="Endpoint InService, then requests per adapter x variant (or component) x mode.",
        description="Check the endpoint and every variant (or inference component) are InService, then send "
        "requests through every adapter to every variant (TargetVariant) or to every component "
        "(InferenceComponentName), streaming and not, and check each answer.",
    )
    _add_common(smoke, variants=False)
    _add_smoke_flags(smoke)

    _add_promote(commands)

    back = commands.add_parser(
        "rollback",
        help="Return all traffic to the primary, then smoke-test it (variants mode).",
        description="Set the primary's weight to 100 and the canary's to 0 (no instance changes), wait for "
        "InService, then send a request per adapter and mode to the primary unless --skip-smoke. In "
        "inference_components mode there is no weight to move: it exits 2 and says what to do instead.",
    )
    _add_common(back, variants=True)
    _add_timing(back)
    back.add_argument("--skip-smoke", action="store_true", help="Do not send sample requests after the rollback.")
    back.add_argument("--adapter", action="append", help="Adapter for the smoke check (repeat; default: all).")

    _add_load(commands)
    add_preflight_parser(commands)
    add_release_parser(commands)
    add_shadow_parser(commands)
    add_migrate_parser(commands)
    add_capacity_parser(commands)
    return parser


def _add_promote(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    prom = commands.add_parser(
        "promote",
        help="Shift canary traffic in steps, watching alarms (variants); watch the base component's rolling update.",
        description="variants mode: raise the canary's share through --steps with UpdateEndpointWeightsAndCapacities "
        "(DesiredWeight only). After each step: wait for InService, then watch alarms for --watch-s. Any alarm in "
        "ALARM returns all traffic to the primary (exit 4). inference_components mode: watch the rolling update of "
        "the base component that `cdk deploy` started until it ends, reporting alarms (SageMaker rolls back by "
        "itself); exit 4 when it was rolled back.",
    )
    _add_common(prom, variants=True)
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
    _add_timing(prom)


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


def _add_load(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    load = commands.add_parser(
        "load",
        help="Bounded load test with a concurrency ramp; suggests a target-tracking value.",
        description=f"Hard limits: concurrency <= {MAX_CONCURRENCY}, {MAX_TOTAL_REQUESTS} requests and "
        f"{MAX_TOTAL_DURATION_S:g} s over all levels. Target = floor(req/s x 60 / instances / 1.3) in variants "
        "mode, floor(req/s x mean latency / copies / 1.3) concurrent requests per copy in inference_components mode.",
    )
    _add_common(load, variants=False)
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
