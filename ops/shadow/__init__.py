"""``mangaassist-ops shadow report|promote``: the shadow phase's comparison and its way to the canary (issue 47).

``report`` (report.py) compares the shadow with the primary over the last ``--hours`` and says whether the
shadow passes; ``promote`` (promote.py) runs the same report and, when it passes and the shadow's alarms are
quiet, makes the shadow the canary in the stage's config. Both read the captured answers (capture.py) from a
local copy (``--capture-dir``) or from the model-artifacts bucket (``--bucket``, or the ModelArtifacts
stack's output in ``--stack-outputs``), pair the two variants' answers by ``inferenceId``, and judge them with
the release's catalog (``--catalog``) and judge model (``release.judge_model_id``).

``report --capture-dir`` runs offline when no AWS region is known: the captured answers are paired and
counted, and the checks that need AWS (CloudWatch's TTFT and 5xx, DescribeEndpoint's sampling, the judge's
title listing) are NOT COMPUTED (exit 11 unless a check fails). Without ``--capture-dir`` and without a
region, one line says what needs AWS and how to run offline (exit 10); exit codes: docs/operations.md.
"""

import argparse
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app_config.root import AppConfig
from cdk_constructs.release.runtime.titles import Catalog, CatalogError, load_catalog
from cli_support.argtypes import int_in
from ops.command import Deps, Subparsers
from ops.endpoint import output_of
from ops.exit_codes import ExitCode, OpsError, aws_error
from ops.shadow import capture
from ops.shadow.promote import alarm_problem, promotion, write_promotion
from ops.shadow.report import (
    ReportInputs,
    VariantFigures,
    check_guardrails,
    pairing_lines,
    print_report,
    read_metrics,
    sampling_line,
    verdicts,
)
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


NEEDS_AWS = (
    "--region: `shadow {action}` reads CloudWatch, DescribeEndpoint and Bedrock's judge and needs AWS: a region "
    "(--region, AWS_REGION or the profile's) and credentials; offline, `shadow report --capture-dir DIR` reads a "
    "local copy of the capture (aws s3 sync s3://<bucket>/data-capture/<endpoint>/ DIR) and leaves those checks "
    "not computed"
)


def boto3_shadow_clients(region: str | None, profile: str | None) -> ShadowClients:
    """Real clients; the judge's retries as the evaluate step's (standard mode, 5 attempts).

    Raises:
        OpsError: (NO_AWS) no region is known: botocore would raise ``NoRegionError`` at the first call.
    """
    import boto3  # noqa: PLC0415 - --help needs no AWS SDK session
    from botocore.config import Config  # noqa: PLC0415
    from botocore.exceptions import ProfileNotFound  # noqa: PLC0415

    try:
        session = boto3.Session(region_name=region, profile_name=profile)
    except ProfileNotFound as error:
        raise OpsError(f"--profile: {error}", ExitCode.USAGE) from None
    if session.region_name is None:
        raise OpsError(NEEDS_AWS.format(action="report"), ExitCode.NO_AWS)
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
    # The factory, not its clients: run_shadow runs `report --capture-dir` offline when it finds no region.
    return run_shadow(args, config, deps.shadow_clients or boto3_shadow_clients, now=deps.now, out=deps.out)


def _add_inputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stage", default=None, help="Stage (default: cdk.json's `stage`).")
    parser.add_argument("--cdk-json", type=Path, default=Path("cdk.json"), help="cdk.json to read (and --write).")
    parser.add_argument("--endpoint-name", help="Endpoint (default: the config's).")
    parser.add_argument(
        "--hours", type=int_in(1, MAX_HOURS), default=24, help=f"Window, hours (1..{MAX_HOURS}, default 24)."
    )
    parser.add_argument(
        "--catalog", type=Path, help="The release's title catalog JSONL (a local copy); without it: no guardrail check."
    )
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


ShadowClientsFactory = Callable[[str | None, str | None], ShadowClients]


def run_shadow(
    args: argparse.Namespace,
    config: AppConfig,
    clients: ShadowClientsFactory,
    *,
    now: Callable[[], dt.datetime],
    out: Callable[[str], None],
) -> ExitCode:
    """``shadow report`` / ``shadow promote``: exit 0 when the shadow passes (and, promote, was promoted), 1 when
    a check fails, 11 when none failed but some were not computed (offline); OpsError for usage (2), the alarms
    (3), AWS (5, 10) and no captured answer (12)."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError  # noqa: PLC0415

    shadow = config.serving.shadow
    if not shadow.enabled:
        raise OpsError(
            f"serving.shadow.enabled = false in stage {config.stage}: there is no shadow to compare", ExitCode.USAGE
        )
    catalog = None
    if args.catalog:
        try:
            catalog = load_catalog(args.catalog)
        except (CatalogError, OSError) as error:
            raise OpsError(f"--catalog: {error}", ExitCode.USAGE) from error
    if args.capture_dir and not args.capture_dir.is_dir():
        raise OpsError(f"--capture-dir {args.capture_dir}: no such folder", ExitCode.USAGE)
    made: ShadowClients | None
    try:
        made = clients(args.region, args.profile)
    except OpsError as error:
        if error.code != ExitCode.NO_AWS or not args.capture_dir or args.shadow_command == "promote":
            raise OpsError(NEEDS_AWS.format(action=args.shadow_command), error.code) from None
        made = None
        out(
            "offline: no AWS region: the captured answers are paired and compared; CloudWatch, DescribeEndpoint "
            "and the judge's checks are not computed"
        )
    try:
        return _report(args, config, made, catalog, now=now, out=out)
    except NoCredentialsError:
        raise OpsError(NEEDS_AWS.format(action=args.shadow_command), ExitCode.NO_AWS) from None
    except (ClientError, BotoCoreError) as error:
        raise aws_error(f"shadow {args.shadow_command}", error) from error


def _report(
    args: argparse.Namespace,
    config: AppConfig,
    clients: ShadowClients | None,
    catalog: Catalog | None,
    *,
    now: Callable[[], dt.datetime],
    out: Callable[[str], None],
) -> ExitCode:
    shadow = config.serving.shadow
    endpoint = args.endpoint_name or config.endpoint_name
    end = now().astimezone(dt.UTC).replace(second=0, microsecond=0)
    inputs = ReportInputs(
        endpoint=endpoint,
        primary=config.serving.primary.variant_name,
        shadow=shadow.variant_name,
        window=(end - dt.timedelta(hours=args.hours), end),
        namespace=config.observability.metrics_namespace,
    )
    figures = read_metrics(clients.cloudwatch, inputs) if clients else (VariantFigures(), VariantFigures())
    if args.capture_dir:
        primary, copied = (
            capture.folder_lines(args.capture_dir, v, inputs.window) for v in (inputs.primary, inputs.shadow)
        )
    else:
        assert clients is not None  # offline needs --capture-dir (run_shadow)
        where = capture.Where(clients.s3, _bucket(args, config), endpoint)
        primary, copied = (capture.bucket_lines(where, v, inputs.window) for v in (inputs.primary, inputs.shadow))
    paired = capture.pair_by_inference_id(primary, copied, args.max_answers or shadow.min_captured_answers)
    if not paired.shadow_read:
        raise OpsError(
            f"no captured answer of the shadow variant {inputs.shadow} in the last {args.hours} h "
            f"({args.capture_dir or 'the bucket'}): is it deployed and capturing (serving.shadow.capture_percent)?",
            ExitCode.NO_DATA,
        )
    for index, figure in enumerate(figures):
        figure.answers = [pair[index] for pair in paired.pairs]
        if clients is None:
            figure.guardrail_skipped = "offline: the invented-titles check asks Bedrock's judge model"
        elif catalog is None:
            figure.guardrail_skipped = "no --catalog (the release's title catalog)"
        else:
            check_guardrails(figure, clients.bedrock, args.judge_model_id or config.release.judge_model_id, catalog)
    results = verdicts(config, *figures, offline=clients is None)
    sampling = (
        sampling_line(clients.sagemaker, endpoint) if clients else "sampling: not read (offline: DescribeEndpoint)"
    )
    code = print_report(inputs, figures, results, sampling=sampling, pairing=pairing_lines(paired), out=out)
    if code != ExitCode.OK or args.shadow_command != "promote":
        return code
    assert clients is not None  # promote never runs offline (run_shadow)
    problem = alarm_problem(clients.cloudwatch, endpoint, shadow.variant_name)
    if problem:
        raise OpsError(problem, ExitCode.NOT_READY)
    write_promotion(config, promotion(config), cdk_json=args.cdk_json if args.write else None, out=out)
    return ExitCode.OK
