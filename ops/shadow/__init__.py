"""``mangaassist-ops shadow report|promote``: the shadow phase's comparison and its way to the canary (issue 47).

``report`` (report.py) compares the shadow with the primary over the last ``--hours`` and says whether the
shadow passes; ``promote`` (promote.py) runs the same report and, when it passes and the shadow's alarms are
quiet, makes the shadow the canary in the stage's config. Both read the captured answers (capture.py) from a
local copy (``--capture-dir``) or from the model-artifacts bucket (``--bucket``, or the ModelArtifacts
stack's output in ``--stack-outputs``), and judge them with the release's catalog (``--catalog``) and judge
model (``release.judge_model_id``).
"""

import argparse
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app_config.root import AppConfig
from cdk_constructs.release.runtime.titles import CatalogError, load_catalog
from cli_support.argtypes import int_in
from ops.command import Deps, Subparsers
from ops.endpoint import output_of
from ops.exit_codes import ExitCode, OpsError
from ops.shadow import capture
from ops.shadow.promote import alarm_problem, promotion, write_promotion
from ops.shadow.report import ReportInputs, check_guardrails, print_report, read_metrics, sampling_line, verdicts
from serving_contract import outputs

MAX_HOURS = 14 * 24
"""A report covers at most seed 002's two-week shadow phase."""
MAX_ANSWERS = 5000
"""Answers judged per variant at most: each is one Bedrock call (the title listing)."""


@dataclass(frozen=True)
class ShadowClients:
    """The boto3 clients the shadow commands use (tests pass stubbed ones)."""

    sagemaker: Any
    cloudwatch: Any
    s3: Any
    bedrock: Any


def boto3_shadow_clients(region: str | None, profile: str | None) -> ShadowClients:
    """Real clients; the judge's retries as the evaluate step's (standard mode, 5 attempts)."""
    import boto3  # noqa: PLC0415 - --help needs no AWS SDK session
    from botocore.config import Config  # noqa: PLC0415

    session = boto3.Session(region_name=region, profile_name=profile)
    return ShadowClients(
        sagemaker=session.client("sagemaker"),
        cloudwatch=session.client("cloudwatch"),
        s3=session.client("s3"),
        bedrock=session.client("bedrock-runtime", config=Config(retries={"mode": "standard", "max_attempts": 5})),
    )


def register(commands: Subparsers) -> None:
    """``shadow report`` and ``shadow promote``: their flags and their handler."""
    shadow = commands.add_parser(
        "shadow",
        help="The shadow variant: compare it with the primary; make a passing one the canary.",
        description=__doc__,
    )
    actions = shadow.add_subparsers(dest="shadow_command", required=True, metavar="ACTION")
    report = actions.add_parser("report", help="Compare the shadow with the primary and judge it (exit 1: fails).")
    promote = actions.add_parser("promote", help="Report, check the shadow's alarms, make it the canary in config.")
    for parser in (report, promote):
        _add_inputs(parser)
    promote.add_argument(
        "--write", action="store_true", help="Set the keys in cdk.json's stages.<stage> overlay (else print them)."
    )
    shadow.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace, config: AppConfig, deps: Deps) -> ExitCode:
    clients = (deps.shadow_clients or boto3_shadow_clients)(args.region, args.profile)
    return run_shadow(args, config, clients, now=deps.now, out=deps.out)


def _add_inputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stage", default=None, help="Stage (default: cdk.json's `stage`).")
    parser.add_argument("--cdk-json", type=Path, default=Path("cdk.json"), help="cdk.json to read (and --write).")
    parser.add_argument("--endpoint-name", help="Endpoint (default: the config's).")
    parser.add_argument(
        "--hours", type=int_in(1, MAX_HOURS), default=24, help=f"Window, hours (1..{MAX_HOURS}, default 24)."
    )
    parser.add_argument("--catalog", type=Path, required=True, help="The release's title catalog JSONL (a local copy).")
    parser.add_argument("--capture-dir", type=Path, help="A local copy of s3://<bucket>/data-capture/<endpoint>/.")
    parser.add_argument("--bucket", help="The model-artifacts bucket (ModelArtifactsBucketName).")
    parser.add_argument("--stack-outputs", type=Path, help="`cdk deploy --outputs-file` JSON: the bucket from it.")
    parser.add_argument(
        "--max-answers",
        type=int_in(1, MAX_ANSWERS),
        help="Newest captured answers judged per variant (default serving.shadow.min_captured_answers).",
    )
    parser.add_argument("--judge-model-id", help="Bedrock model that lists titles (default release.judge_model_id).")
    parser.add_argument("--region", help="AWS region (default: the SDK's).")
    parser.add_argument("--profile", help="AWS profile (default: the SDK's).")


def _bucket(args: argparse.Namespace, config: AppConfig) -> str:
    if args.bucket:
        return str(args.bucket)
    if config.image.build.artifacts_bucket_name:
        return config.image.build.artifacts_bucket_name
    if args.stack_outputs:
        bucket = output_of(args.stack_outputs, config.stack_name("ModelArtifacts"), outputs.MODEL_ARTIFACTS_BUCKET_NAME)
        if bucket:
            return bucket
    raise OpsError(
        "--bucket: name the model-artifacts bucket (the ModelArtifacts stack's output "
        f"{outputs.MODEL_ARTIFACTS_BUCKET_NAME}), pass --stack-outputs, or read a local copy with --capture-dir",
        ExitCode.USAGE,
    )


def run_shadow(
    args: argparse.Namespace,
    config: AppConfig,
    clients: ShadowClients,
    *,
    now: Callable[[], dt.datetime],
    out: Callable[[str], None],
) -> ExitCode:
    """``shadow report`` / ``shadow promote``: exit 0 when the shadow passes (and, promote, was promoted), 1 when
    a check fails; OpsError for usage (2) and the alarms (3)."""
    shadow = config.serving.shadow
    if not shadow.enabled:
        raise OpsError(
            f"serving.shadow.enabled = false in stage {config.stage}: there is no shadow to compare", ExitCode.USAGE
        )
    try:
        catalog = load_catalog(args.catalog)
    except (CatalogError, OSError) as error:
        raise OpsError(f"--catalog: {error}", ExitCode.USAGE) from error
    endpoint = args.endpoint_name or config.endpoint_name
    end = now().astimezone(dt.UTC).replace(second=0, microsecond=0)
    inputs = ReportInputs(
        endpoint=endpoint,
        primary=config.serving.primary.variant_name,
        shadow=shadow.variant_name,
        window=(end - dt.timedelta(hours=args.hours), end),
        namespace=config.observability.metrics_namespace,
    )
    limit = args.max_answers or shadow.min_captured_answers
    figures = read_metrics(clients.cloudwatch, inputs)
    for figure, variant in zip(figures, (inputs.primary, inputs.shadow), strict=True):
        if args.capture_dir:
            figure.answers = capture.from_folder(args.capture_dir, variant, inputs.window, limit)
        else:
            where = capture.Where(clients.s3, _bucket(args, config), endpoint)
            figure.answers = capture.from_bucket(where, variant, inputs.window, limit)
        check_guardrails(figure, clients.bedrock, args.judge_model_id or config.release.judge_model_id, catalog)
    results = verdicts(config, *figures)
    passed = print_report(inputs, figures, results, sampling=sampling_line(clients.sagemaker, endpoint), out=out)
    if not passed:
        return ExitCode.CHECK_FAILED
    if args.shadow_command == "promote":
        problem = alarm_problem(clients.cloudwatch, endpoint, shadow.variant_name)
        if problem:
            raise OpsError(problem, ExitCode.NOT_READY)
        write_promotion(config, promotion(config), cdk_json=args.cdk_json if args.write else None, out=out)
    return ExitCode.OK
