"""What every ``mangaassist-ops`` command shares: its dependencies, the endpoint it acts on, the common flags.

One convention (issue 55): each command's module registers its own subparser and its handler
(``register(commands)``, which sets ``handler`` with ``set_defaults``); ``ops/cli.py`` loads the config and calls
``args.handler(args, config, deps)``. A handler is a :data:`Handler`; this module imports no command, so any
command may import it.
"""

import argparse
import datetime as dt
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, TypeAlias

from app_config.llm import ModelConfig
from app_config.root import AppConfig
from cli_support.argtypes import positive_float
from ops.endpoint import (
    INFERENCE_COMPONENTS,
    VARIANTS,
    EndpointRef,
    ref_from_config,
    ref_from_outputs_file,
    ref_from_stack,
)
from ops.exit_codes import ExitCode, OpsError
from serving_contract.env import SAGEMAKER_INVOCATION_TIMEOUT_S

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What ``add_subparsers`` returns: each command's ``register`` adds its parser to it."""

SAGEMAKER_INVOKE_TIMEOUT_S: Final = float(SAGEMAKER_INVOCATION_TIMEOUT_S)
"""``/invocations`` response limit, s: the runtime client's read timeout covers it."""


@dataclass(frozen=True)
class Clients:
    """boto3 clients the endpoint commands use (tests pass stubbed ones)."""

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


ClientFactory = Callable[[str | None, str | None], Any]
"""``(region, profile) -> clients`` of one command."""


@dataclass(frozen=True)
class Deps:
    """Everything with side effects, injectable for tests.

    Attributes:
        clients: the endpoint commands' clients (smoke, promote, rollback, load).
        clock / sleep / out / now: monotonic seconds, waiting, printing one line, UTC now.
        preflight_clients / shadow_clients / measure_clients / migrate_clients: those commands' own clients
            (migrate's factory is also told what the clients are for, ``(region, profile, what)``); None: the
            command's boto3 factory (``boto3_preflight_clients``, ...), which this module cannot name without
            importing the commands.
    """

    clients: Callable[[str | None, str | None], Clients] = boto3_clients
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    out: Callable[[str], None] = print
    preflight_clients: ClientFactory | None = None
    shadow_clients: ClientFactory | None = None
    measure_clients: ClientFactory | None = None
    migrate_clients: Callable[[str | None, str | None, str], Any] | None = None
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)


Handler = Callable[[argparse.Namespace, AppConfig, Deps], ExitCode]
"""One command: its parsed flags, the stage's config and the dependencies; returns the exit code or raises
:class:`~ops.exit_codes.OpsError`."""


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


def refuse_other_mode_flags(args: argparse.Namespace, ref: EndpointRef) -> None:
    """Raise OpsError (USAGE) for a flag given explicitly that the endpoint's mode does not use."""
    for dest, (flag, why) in OTHER_MODE_FLAGS[ref.mode].items():
        if getattr(args, dest, None) is not None:
            raise OpsError(f"{flag}: not used in {ref.mode} mode ({ref.endpoint_name}): {why}", ExitCode.USAGE)


def endpoint_ref(
    args: argparse.Namespace, config: AppConfig, clients: Clients | None, adapters: Sequence[str]
) -> EndpointRef:
    """The endpoint the command acts on: ``--endpoint-name`` (its mode from config), the ``--stack-outputs`` file,
    else the serving stack's outputs (DescribeStacks); ``--primary-variant``/``--canary-variant`` win.

    Raises:
        OpsError: a flag of the other serving mode (USAGE), or the stack cannot say (its own codes).
    """
    stack = args.stack_name or config.stack_name("Serving")
    if args.endpoint_name:
        ref = ref_from_config(args.endpoint_name, config.serving.mode, adapters)
    elif args.stack_outputs:
        ref = ref_from_outputs_file(args.stack_outputs, stack, adapters)
    else:
        assert clients is not None
        ref = ref_from_stack(clients.cloudformation, stack, adapters)
    refuse_other_mode_flags(args, ref)
    return replace(
        ref,
        primary_variant=getattr(args, "primary_variant", None) or ref.primary_variant,
        canary_variant=getattr(args, "canary_variant", None) or ref.canary_variant,
    )


def adapters_of(model: ModelConfig) -> tuple[str, ...]:
    """The configured adapters' names, in order."""
    return tuple(a.name for a in model.adapters)


def add_endpoint_flags(parser: argparse.ArgumentParser, *, variants: bool) -> None:
    """Which endpoint (stage, stack outputs, stack or endpoint name, variant names) and the AWS session."""
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


def add_timing_flags(parser: argparse.ArgumentParser) -> None:
    """How long to wait for the endpoint after a change, and how often to look."""
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
