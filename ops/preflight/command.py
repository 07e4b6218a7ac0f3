"""``mangaassist-ops preflight``: its flags, its AWS clients and the run of every check.

Read-only: Describe/List/Head/Get calls only (CloudFormation, SageMaker, Service Quotas, S3, ECR,
CloudWatch Logs). The offline checks (placeholder pins) run without credentials; every check runs
and prints even when an earlier one failed.
"""

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import boto3
from botocore.exceptions import BotoCoreError

from app_config.root import AppConfig
from ops.command import Deps, Subparsers
from ops.exit_codes import ExitCode
from ops.preflight.account import check_bootstrap, check_quotas, check_region, sagemaker_offered
from ops.preflight.approvals import check_approvals
from ops.preflight.artifacts import check_artifacts, check_image
from ops.preflight.conflicts import check_endpoint, check_log_groups
from ops.preflight.pins import pins_in_effect, placeholder_pin_lines
from ops.preflight.report import Finding, error, exit_code, fail, ok, skip, summary

AWS_CHECKS: Final = "bootstrap, quotas, artifacts, approvals, image, endpoint, log-groups"
FOUNDATION_AWS_CHECKS: Final = "bootstrap"

DESCRIPTION: Final = """\
Read-only checks of what synth cannot know before a first `cdk deploy`, for the stage config
(cdk.json + --stage + -c overrides). One line per check: ok, FAIL (a problem, with what to do),
skip, or error (an AWS call failed). Every check runs; the exit code is the first failing class.

  pins        config: no artifact pin in effect holds the placeholder sha256 (image.build.<variant>.*
              with image.source = build; serving.inference_components.adapter_artifacts.*). Offline.
  region      account: a region is set, SageMaker is offered there (botocore's endpoint data), and it
              is env.region when that is set.
  bootstrap   account: stack CDKToolkit is usable and its BootstrapVersion >= what cdk.out/manifest.json
              requires (6 without a synthesized assembly).
  quotas      account: "<instance type> for endpoint usage" >= what the config reaches: variants mode 2 x
              the sum of max_capacity (a blue/green update's second fleet); inference_components mode
              max_instance_count.
  artifacts   artifacts: each non-placeholder pin's version folder exists in the artifacts bucket
              (image.build.artifacts_bucket_name, else the ModelArtifacts stack's output); its sha256 is
              rebuilt from S3's full-object SHA-256 checksums, or with --download-digests.
  approvals   artifacts: each non-placeholder pin is a model package that the release pipeline registered
              and that is Approved (release.enabled; docs/model-release.md).
  image       artifacts: image.source = prebuilt: each variant's image is in ECR.
  endpoint    conflict: serving.endpoint_name is free or the Serving stack's, in the configured mode.
  log-groups  reported: a /aws/sagemaker/Endpoints/<endpoint> log group left by an earlier deploy (adopted).

With --foundation (`make deploy-foundation`, before any artifact is uploaded): region, credentials and
bootstrap only; the foundation stacks (ImageRepository, ModelArtifacts) read no pin.
"""

EPILOG: Final = (
    "Exit codes: 0 ok, 5 a check could not run (and nothing failed), 6 config (placeholder pins), "
    "7 account (region, bootstrap, quotas), 8 artifacts (pinned files, unapproved pins, prebuilt image), 9 conflict "
    "(endpoint name, serving mode); 2 usage."
)


@dataclass(frozen=True)
class PreflightClients:
    """The session's region, whether it found credentials, and the read-only clients (None without a region).

    ``ecr_in(region)`` is an ECR client in ``region`` (a prebuilt image's URI may name another region).
    """

    region: str | None
    credentials: bool
    cloudformation: Any = None
    sagemaker: Any = None
    service_quotas: Any = None
    s3: Any = None
    logs: Any = None
    ecr_in: Callable[[str], Any] | None = None


def boto3_preflight_clients(region: str | None, profile: str | None) -> PreflightClients:
    """Real clients of one boto3 session; raises BotoCoreError (e.g. an unknown profile)."""
    session = boto3.Session(region_name=region, profile_name=profile)
    credentials = session.get_credentials() is not None
    if session.region_name is None:
        return PreflightClients(None, credentials)
    ecr = session.client("ecr")
    return PreflightClients(
        region=session.region_name,
        credentials=credentials,
        cloudformation=session.client("cloudformation"),
        sagemaker=session.client("sagemaker"),
        service_quotas=session.client("service-quotas"),
        s3=session.client("s3"),
        logs=session.client("logs"),
        ecr_in=lambda where: ecr if where == session.region_name else session.client("ecr", region_name=where),
    )


@dataclass(frozen=True)
class PreflightOptions:
    """The flags of one run; ``foundation`` narrows it to what the foundation stacks need."""

    region: str | None
    profile: str | None
    cdk_out: Path
    download_digests: bool
    foundation: bool = False


def check_pins(config: AppConfig) -> list[Finding]:
    """Offline: the placeholder pins, one FAIL line each."""
    problems = placeholder_pin_lines(config)
    if problems:
        return [fail("pins", line, ExitCode.PREFLIGHT_CONFIG) for line in problems]
    count = len(pins_in_effect(config))
    if not count:
        return [skip("pins", "no artifact pins in effect (image.source = prebuilt, serving.mode = variants)")]
    return [ok("pins", f"{count} pin(s) in effect, none a placeholder")]


def _aws_findings(config: AppConfig, clients: PreflightClients, options: PreflightOptions) -> list[Finding]:
    assert clients.region is not None and clients.ecr_in is not None
    region = clients.region
    findings = [check_bootstrap(clients.cloudformation, region, options.cdk_out)]
    findings += check_quotas(config, clients.service_quotas, region)
    findings += check_artifacts(config, clients.cloudformation, clients.s3, download=options.download_digests)
    findings += check_approvals(config, clients.sagemaker)
    findings += check_image(config, clients.cloudformation, clients.ecr_in, region)
    endpoint_findings, endpoint = check_endpoint(config, clients.sagemaker)
    return findings + endpoint_findings + check_log_groups(config, clients.logs, endpoint)


def collect(
    config: AppConfig, factory: Callable[[str | None, str | None], PreflightClients], options: PreflightOptions
) -> tuple[str | None, list[Finding]]:
    """Run every check: ``(the region checked, the findings in report order)``."""
    if options.foundation:
        findings = [skip("pins", "not read by the foundation stacks (ImageRepository, ModelArtifacts)")]
        aws_checks = FOUNDATION_AWS_CHECKS
    else:
        findings, aws_checks = check_pins(config), AWS_CHECKS
    try:
        clients = factory(options.region or config.env.region, options.profile)
    except BotoCoreError as exc:
        return None, [*findings, error("aws", "session", exc), skip("aws", f"not checked: {aws_checks}")]
    findings.append(check_region(config.env, clients.region))
    if clients.region is None or not sagemaker_offered(clients.region):
        return clients.region, [*findings, skip("aws", f"not checked without a usable region: {aws_checks}")]
    if not clients.credentials:
        line = f"no AWS credentials found (environment, --profile, SSO, instance role); not checked: {aws_checks}"
        return clients.region, [*findings, Finding("error", "aws", line, ExitCode.AWS_ERROR)]
    if options.foundation:
        return clients.region, [*findings, check_bootstrap(clients.cloudformation, clients.region, options.cdk_out)]
    return clients.region, findings + _aws_findings(config, clients, options)


def run_preflight(
    config: AppConfig,
    factory: Callable[[str | None, str | None], PreflightClients],
    options: PreflightOptions,
    out: Callable[[str], None],
) -> ExitCode:
    """Print a header, one line per finding and a summary; return the exit code (ops.preflight.report)."""
    region, findings = collect(config, factory, options)
    out(
        f"preflight {config.stack_name('*')} in {region or '(no region)'}: serving.mode {config.serving.mode}, "
        f"image.source {config.image.source}, endpoint {config.endpoint_name}"
    )
    for finding in findings:
        out(finding.line)
    out(summary(findings))
    return exit_code(findings)


def context_pair(text: str) -> tuple[str, str]:
    """``key=value`` of ``-c``, split at the first '=' as the CDK CLI does."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected key=value, e.g. serving.primary.max_capacity=8")
    return key, value


def register(commands: Subparsers) -> None:
    """``preflight``: its flags and its handler."""
    parser = commands.add_parser(
        "preflight",
        help="Read-only checks before a first cdk deploy: pins, bootstrap, region, quotas, artifacts, names.",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    config = parser.add_argument_group("config")
    config.add_argument("--stage", default=None, help="Stage to check (default: cdk.json's `stage`).")
    config.add_argument("--cdk-json", type=Path, default=Path("cdk.json"), help="cdk.json to read stages from.")
    config.add_argument(
        "-c",
        "--context",
        action="append",
        type=context_pair,
        default=None,
        metavar="KEY=VALUE",
        help="Context override, as `cdk deploy -c` takes it (repeat), e.g. -c serving.primary.max_capacity=8.",
    )
    config.add_argument(
        "--cdk-out",
        type=Path,
        default=Path("cdk.out"),
        help="Synthesized assembly whose manifest.json names the bootstrap version (default cdk.out).",
    )
    parser.add_argument(
        "--foundation",
        action="store_true",
        help="Only what the foundation stacks need (region, credentials, bootstrap): `make deploy-foundation`.",
    )
    parser.add_argument(
        "--download-digests",
        action="store_true",
        help="Stream every pinned file (or adapter archive) through sha256 when S3 has no full-object checksums.",
    )
    aws = parser.add_argument_group("AWS")
    aws.add_argument("--region", help="AWS region (default: env.region, else the SDK's).")
    aws.add_argument("--profile", help="AWS profile (default: the SDK's).")
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace, config: AppConfig, deps: Deps) -> ExitCode:
    checks = PreflightOptions(args.region, args.profile, args.cdk_out, args.download_digests, args.foundation)
    return run_preflight(config, deps.preflight_clients or boto3_preflight_clients, checks, deps.out)
