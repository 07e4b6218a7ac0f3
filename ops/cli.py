"""``mangaassist-ops``: front end of the operations commands.

Every command registers its own flags and handler (``register(commands)`` in its module:
:mod:`ops.smoke`, :mod:`ops.rollout` (promote, rollback), :mod:`ops.load_command`, :mod:`ops.preflight`,
:mod:`ops.release`, :mod:`ops.shadow`, :mod:`ops.migrate`, :mod:`ops.measure`); this module builds the parser
from them, loads the stage's config and runs the chosen handler (:data:`ops.command.Handler`).

Every endpoint command finds the endpoint through the serving stack's outputs (``--stack-outputs``
file, else ``DescribeStacks`` on ``<project>-<stage>-Serving``) unless ``--endpoint-name`` is
given, and the adapter names through the app config (``cdk.json`` + ``--stage``) unless
``--adapter`` is given. The outputs also say the serving mode (``ServingMode``: variants or
inference_components) and, in inference_components mode, the component names; with
``--endpoint-name`` both come from the app config. Exit codes: see :class:`ops.exit_codes.ExitCode`.

boto3 only: the sagemaker SDK's Predictor wraps the same two runtime calls and would add a
large dependency tree to an SRE's laptop and to CI for nothing this tool needs.
"""

import argparse
import sys
from collections.abc import Callable, Sequence

from app_config import ConfigError
from app_config.loader import load_cli_config
from app_config.root import AppConfig
from ops import load_command, measure, migrate, preflight, release, rollout, shadow, smoke
from ops.command import Clients, Deps, Handler, Subparsers
from ops.exit_codes import ExitCode, OpsError

__all__ = ["Clients", "Deps", "build_parser", "main"]

COMMANDS: tuple[Callable[[Subparsers], None], ...] = (
    smoke.register,
    rollout.register,
    load_command.register,
    preflight.register,
    release.register,
    shadow.register,
    migrate.register,
    measure.register,
)
"""Each command's ``register``, in ``--help``'s order."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (every command has --help)."""
    parser = argparse.ArgumentParser(
        prog="mangaassist-ops",
        description="Operations commands for the MangaAssist SageMaker endpoint. See docs/operations.md.",
        epilog="Exit codes: 0 ok, 1 check failed, 2 usage, 3 endpoint not ready, 4 rolled back, 5 AWS error; "
        "preflight: 6 config, 7 account, 8 artifacts, 9 conflict. shadow: 0 passes, 1 fails, 3 its alarms. "
        "throughput measure: 1 a job failed or was stopped.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in COMMANDS:
        register(commands)
    return parser


def _app_config(args: argparse.Namespace) -> AppConfig:
    """The config of ``--cdk-json``, ``--stage`` and ``-c key=value`` (preflight), through the one loader of every
    command-line tool (``app_config.loader.load_cli_config``)."""
    overrides = dict(getattr(args, "context", None) or ())
    try:
        return load_cli_config(overrides, cdk_json=args.cdk_json, stage=args.stage or None)
    except ConfigError as error:
        raise OpsError(str(error), ExitCode.USAGE) from error
    except (OSError, ValueError, AttributeError) as error:
        raise OpsError(f"--cdk-json {args.cdk_json}: cannot read context ({error})", ExitCode.USAGE) from error


def main(argv: Sequence[str] | None = None, deps: Deps | None = None) -> int:
    """Parse ``argv`` and run one command; returns the exit code (argparse exits 2 on bad flags)."""
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return int(handler(args, _app_config(args), deps or Deps()))
    except OpsError as error:
        print(f"error: {error}", file=sys.stderr)
        return int(error.code)
