"""``mangaassist-ops throughput measure``: measure an instance type before buying a fleet of it (issue 46).

    python -m ops throughput measure --instance-type ml.g6e.xlarge [--instance-type ml.g6.xlarge] \\
        --stack-outputs cdk-outputs.json --yes --write prod

For each ``--instance-type`` it starts one SageMaker processing job (ops/measure/job.py) that runs the
serving image on that type, with the primary variant's container environment, and sweeps the engine
inside it open loop (cdk_constructs/capacity_job/runtime/measure.py). Before starting anything it prints
each job's cost bound (the instance's price x ``throughput.job.max_runtime_s``) and starts nothing without
``--yes``. It waits, printing each job's state as it changes, then prints the curve: TTFT p95 per class
at each offered rate, and what the planner makes of it at the config's SLOs. ``--write <stage>`` puts
the curve into ``cdk.json``'s ``stages.<stage>.throughput.measured.<type>``: from then on ``make plan``,
synth's verdicts and the scaling targets read it (labelled ``measured <date> (<job>)``).

A job that fails, or that the command stops (Ctrl-C, ``--timeout-s``), leaves nothing running: the
command stops what it started, deletes the job's input files and says so. Exit codes: 0 every job
measured; 1 a job failed or was stopped; 2 usage (no ``--yes``, an unknown type, missing stack
outputs); 5 an AWS call failed (no credentials: one line).
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from app_config.loader import set_in_stage_overlay
from app_config.root import AppConfig
from app_config.throughput_config import MeasuredCurve
from app_config.variants import capacity_job_instance_types
from cli_support.argtypes import positive_float
from ops.command import Deps, Subparsers
from ops.endpoint import output_values, outputs_in_file
from ops.exit_codes import ExitCode, OpsError, aws_error
from ops.measure.job import (
    CostBound,
    JobResources,
    cost_bound,
    create_request,
    new_job_name,
    read_result,
    upload_inputs,
)
from planning.gpu_instances import instance_gpus
from planning.make_plan import make_plan
from planning.planner import Planner
from planning.slo_holds import standing
from serving_contract import capacity_job as contract
from serving_contract import outputs

PROVISIONING_S = 15 * 60
"""Time SageMaker may take to provision a GPU processing instance before the job's own runtime starts
(the compile cache's construct allows the same: JOB_PROVISIONING_S)."""
DONE = ("Completed", "Failed", "Stopped")
NO_CREDENTIALS = "no AWS credentials found (environment, --profile, SSO, instance role): nothing measured"
"""As ``ops preflight`` says it (ops/preflight/command.py)."""


@dataclass(frozen=True)
class MeasureClients:
    """The boto3 clients the command uses (tests pass stubbed ones)."""

    sagemaker: Any
    s3: Any
    cloudformation: Any


def boto3_measure_clients(region: str | None, profile: str | None) -> MeasureClients:
    """Real clients of one session."""
    import boto3  # noqa: PLC0415 - --help and the cost bound need no AWS SDK session

    session = boto3.Session(region_name=region, profile_name=profile)
    return MeasureClients(session.client("sagemaker"), session.client("s3"), session.client("cloudformation"))


def register(commands: Subparsers) -> None:
    """``throughput measure`` (``capacity measure`` until issue 55, an alias for one release): its flags and its
    handler."""
    throughput = commands.add_parser(
        COMMAND,
        aliases=[OLD_COMMAND],
        help="Measure instance types' throughput at the SLOs with a SageMaker job.",
        description=__doc__,
    )
    actions = throughput.add_subparsers(dest="throughput_command", required=True, metavar="ACTION")
    measure = actions.add_parser("measure", help="Run the capacity job on each --instance-type and print its curve.")
    measure.add_argument(
        "--instance-type", action="append", required=True, help="Instance type to measure (repeat for several)."
    )
    measure.add_argument("--yes", action="store_true", help="Start the jobs (without it: print their cost bound).")
    measure.add_argument("--write", metavar="STAGE", help="Put each curve into cdk.json's stages.STAGE overlay.")
    measure.add_argument("--stage", default=None, help="Stage whose config and stacks to use (default: cdk.json's).")
    measure.add_argument("--cdk-json", type=Path, default=Path("cdk.json"), help="cdk.json to read (and --write).")
    measure.add_argument("--stack-outputs", type=Path, help="`cdk deploy --outputs-file` JSON (else DescribeStacks).")
    measure.add_argument("--poll-s", type=positive_float, default=30.0, help="DescribeProcessingJob interval, s.")
    measure.add_argument(
        "--timeout-s",
        type=positive_float,
        help="Stop waiting (and stop the jobs) after this many seconds (default: max runtime + 15 min provisioning).",
    )
    measure.add_argument("--region", help="AWS region (default: the SDK's).")
    measure.add_argument("--profile", help="AWS profile (default: the SDK's).")
    throughput.set_defaults(handler=_handle)


COMMAND = "throughput"
OLD_COMMAND = "capacity"
"""The command's name before issue 55 gave each "capacity" a name of its own; it goes in the next release."""


def _handle(args: argparse.Namespace, config: AppConfig, deps: Deps) -> ExitCode:
    if args.command == OLD_COMMAND:
        deps.out(f"NOTE: `{OLD_COMMAND} measure` is now `{COMMAND} measure`; the old name goes in the next release")
    clients = deps.measure_clients or boto3_measure_clients
    return run_capacity(args, config, clients, now=deps.now, clock=deps.clock, sleep=deps.sleep, out=deps.out)


@dataclass
class _Job:
    instance_type: str
    name: str
    inputs: list[str] = field(default_factory=list)
    status: str = "NotStarted"


def run_capacity(
    args: argparse.Namespace,
    config: AppConfig,
    clients: Callable[[str | None, str | None], MeasureClients],
    *,
    now: Callable[[], dt.datetime],
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    out: Callable[[str], None],
) -> ExitCode:
    """``throughput measure`` (module docstring)."""
    types = list(dict.fromkeys(args.instance_type))
    bounds = [_bound(config, instance_type) for instance_type in types]
    out("Capacity job cost bound (on-demand price x throughput.job.max_runtime_s; SageMaker bills the time it runs):")
    for bound in bounds:
        out(f"  {bound.line}")
    out(f"  total at most ${sum(b.usd for b in bounds):,.2f} for {len(bounds)} job(s)")
    if not args.yes:
        raise OpsError(f"nothing started: pass --yes to start {len(bounds)} capacity job(s)", ExitCode.USAGE)
    session = clients(args.region, args.profile)
    resources = _resources(args, config, session.cloudformation)
    jobs = [_Job(instance_type, new_job_name(config, instance_type, now())) for instance_type in types]
    try:
        for job in jobs:
            job.inputs = upload_inputs(session.s3, config, resources, job.name)
            session.sagemaker.create_processing_job(
                **create_request(config.throughput, resources, job.instance_type, job.name)
            )
            job.status = "InProgress"
            out(f"started {job.name} on {job.instance_type}")
        timeout_s = args.timeout_s or config.throughput.job.max_runtime_s + PROVISIONING_S
        _wait(session.sagemaker, jobs, timeout_s=timeout_s, poll_s=args.poll_s, clock=clock, sleep=sleep, out=out)
    except NoCredentialsError as error:
        _clean_up(session, resources, jobs, out)
        raise OpsError(NO_CREDENTIALS, ExitCode.AWS_ERROR) from error
    except (ClientError, BotoCoreError) as error:
        _clean_up(session, resources, jobs, out)
        raise aws_error("capacity measure", error) from error
    except (KeyboardInterrupt, TimeoutError) as error:
        out(f"stopping: {error or 'interrupted'}")
        _clean_up(session, resources, jobs, out)
        return ExitCode.CHECK_FAILED
    failed = [job for job in jobs if job.status != "Completed"]
    if failed:
        _clean_up(session, resources, failed, out)
    curves = [(job, read_result(session.s3, resources, job.name)) for job in jobs if job.status == "Completed"]
    for job, curve in curves:
        _print_curve(config, curve, out)
        if args.write:
            _write(args, job.instance_type, curve, out)
    return ExitCode.CHECK_FAILED if failed else ExitCode.OK


def _bound(config: AppConfig, instance_type: str) -> CostBound:
    allowed = capacity_job_instance_types(config.throughput.job, config.serving)
    if instance_type not in allowed:
        # The operator policy would refuse the job (sagemaker:InstanceTypes): say so before anything starts.
        raise OpsError(
            f"--instance-type {instance_type}: not a capacity job candidate ({', '.join(allowed)}: "
            "throughput.job.instance_types and the variants' own); add it to throughput.job.instance_types and deploy "
            "the Serving stack, whose operator policy allows those types only",
            ExitCode.USAGE,
        )
    try:
        instance_gpus(instance_type)
        plan = Planner.of(config).memory_plan(instance_type)
        if not plan.fits_one_sequence:
            raise ValueError(
                f"the model does not fit {instance_type}'s GPU (memory plan: {plan.kv_tokens:,} KV-cache tokens)"
            )
        return cost_bound(config, instance_type)
    except ValueError as error:
        raise OpsError(f"--instance-type {instance_type}: {error}", ExitCode.USAGE) from error


class _StackOutputs:
    """The outputs of this app's stacks: from ``--stack-outputs``, else DescribeStacks, each stack read once."""

    def __init__(self, args: argparse.Namespace, cloudformation: Any) -> None:
        self._file: Path | None = args.stack_outputs
        self._cloudformation = cloudformation
        self._read: dict[str, dict[str, str]] = {}

    def of(self, stack: str, *, required: bool) -> dict[str, str]:
        """``{OutputKey: value}`` of ``stack`` (empty for an absent stack that is not ``required``).

        Raises:
            OpsError: no credentials (AWS_ERROR, one line), or a required stack cannot be described.
        """
        if stack in self._read:
            return self._read[stack]
        if self._file is not None:
            values = outputs_in_file(self._file, stack)
        else:
            try:
                (described,) = self._cloudformation.describe_stacks(StackName=stack)["Stacks"]
                values = output_values(described)
            except NoCredentialsError as error:
                raise OpsError(NO_CREDENTIALS, ExitCode.AWS_ERROR) from error
            except ClientError as error:
                if required:
                    raise aws_error(f"stack {stack}", error) from error
                values = {}
            except BotoCoreError as error:
                raise aws_error(f"stack {stack}", error) from error
        self._read[stack] = values
        return values


def _resources(args: argparse.Namespace, config: AppConfig, cloudformation: Any) -> JobResources:
    """The capacity job's resources: the Serving stack's outputs; the bucket and the image from the
    stacks that own them where the Serving stack could not re-export them
    (serving_contract/capacity_job.py ``OUTPUTS_KNOWN_AT_SYNTH_ONLY``).

    Raises:
        OpsError: an output is missing (USAGE: deploy this version first), or a call failed (AWS_ERROR;
            no credentials: one line).
    """
    stacks = _StackOutputs(args, cloudformation)
    serving = config.stack_name("Serving")
    values = stacks.of(serving, required=True)
    bucket = (
        values.get(contract.OUTPUT_BUCKET)
        or config.image.build.artifacts_bucket_name
        or stacks.of(config.stack_name("ModelArtifacts"), required=False).get(outputs.MODEL_ARTIFACTS_BUCKET_NAME, "")
    )
    image = values.get(contract.OUTPUT_IMAGE_URI) or _image_uri(config, stacks)
    required = (contract.OUTPUT_ROLE_ARN, contract.OUTPUT_CODE_URI, contract.OUTPUT_KMS_KEY_ARN)
    missing = [key for key in required if not values.get(key)]
    missing += ([] if image else [contract.OUTPUT_IMAGE_URI]) + ([] if bucket else [contract.OUTPUT_BUCKET])
    if missing:
        raise OpsError(
            f"stack {serving} (and the stacks it reads) has no output(s) {', '.join(missing)}: deploy the stacks of "
            "this version (the Serving stack makes the capacity job's role, key and code) first",
            ExitCode.USAGE,
        )
    return JobResources(
        role_arn=values[contract.OUTPUT_ROLE_ARN],
        code_uri=values[contract.OUTPUT_CODE_URI],
        kms_key_arn=values[contract.OUTPUT_KMS_KEY_ARN],
        image_uri=image,
        bucket=bucket,
    )


def _image_uri(config: AppConfig, stacks: _StackOutputs) -> str:
    """The primary variant's image: ``<ImageRepositoryUri>:<PrimaryImageTag>`` (the ImageRepository and
    ImageBuild stacks' outputs); prebuilt, ``image.primary``'s uri, or its digest or tag on the app's
    repository; empty when it is not known."""
    prebuilt = config.image.primary
    if config.image.source != "build" and prebuilt.uri:
        return prebuilt.uri
    repository = stacks.of(config.stack_name("ImageRepository"), required=False).get(outputs.IMAGE_REPOSITORY_URI)
    if config.image.source != "build":  # a tag or digest of the app's repository (a digest wins, as the stack's)
        reference = f"@{prebuilt.digest}" if prebuilt.digest else f":{prebuilt.tag}"
        return f"{repository}{reference}" if repository else ""
    tag = stacks.of(config.stack_name("ImageBuild"), required=False).get(outputs.PRIMARY_IMAGE_TAG)
    return f"{repository}:{tag}" if repository and tag else ""


def _wait(
    sagemaker: Any,
    jobs: Sequence[_Job],
    *,
    timeout_s: float,
    poll_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    out: Callable[[str], None],
) -> None:
    """Poll every job until each is Completed, Failed or Stopped, printing each change of state.

    Raises:
        TimeoutError: ``timeout_s`` passed with a job still running.
    """
    started = clock()
    while True:
        for job in jobs:
            if job.status in DONE:
                continue
            described = sagemaker.describe_processing_job(ProcessingJobName=job.name)
            status = described["ProcessingJobStatus"]
            if status != job.status:
                minutes = (clock() - started) / 60
                reason = f": {described['FailureReason']}" if described.get("FailureReason") else ""
                out(f"{job.name}: {status} after {minutes:.0f} min{reason}")
                job.status = status
        if all(job.status in DONE for job in jobs):
            return
        if clock() - started >= timeout_s:
            raise TimeoutError(f"still running after {timeout_s:.0f} s (--timeout-s)")
        sleep(poll_s)


def _clean_up(
    session: MeasureClients, resources: JobResources, jobs: Sequence[_Job], out: Callable[[str], None]
) -> None:
    """Stop every job still running, delete every job's input files; say what was done. Never raises:
    what it could not clean up, it names."""
    for job in jobs:
        if job.status == "InProgress":
            try:
                session.sagemaker.stop_processing_job(ProcessingJobName=job.name)
                out(f"cleaned up: stopped {job.name} (SageMaker releases its instance)")
                job.status = "Stopping"
            except (ClientError, BotoCoreError) as error:
                out(f"NOT cleaned up: {job.name} may still run; stop it: aws sagemaker stop-processing-job "
                    f"--processing-job-name {job.name} ({error})")  # fmt: skip
        elif job.status in ("Failed", "Stopped"):
            out(f"cleaned up: {job.name} is {job.status}; nothing of it runs")
        if job.inputs:
            try:
                session.s3.delete_objects(
                    Bucket=resources.bucket, Delete={"Objects": [{"Key": key} for key in job.inputs], "Quiet": True}
                )
                out(f"cleaned up: deleted {len(job.inputs)} input file(s) under s3://{resources.bucket}/"
                    f"{contract.job_prefix(job.name)}/input/")  # fmt: skip
            except (ClientError, BotoCoreError) as error:
                out(f"NOT cleaned up: s3://{resources.bucket}/{contract.job_prefix(job.name)}/input/ ({error})")


def _print_curve(config: AppConfig, curve: MeasuredCurve, out: Callable[[str], None]) -> None:
    """The curve, step by step, and what the planner makes of it at the config's SLOs."""

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:,.0f}"

    out(f"{curve.instance_type} ({curve.gpu or 'GPU unnamed'}), {curve.job}, think {curve.think_s:g} s:")
    out("  offered/min  completed/min  cold p95 ms  warm p95 ms  running  KV cache")
    for step in curve.steps:
        kv = "-" if step.kv_cache_usage_mean is None else f"{step.kv_cache_usage_mean:.0%}"
        running = "-" if step.running_mean is None else f"{step.running_mean:.1f}"
        cold, warm = ms(step.cold.ttft_p95_ms), ms(step.warm.ttft_p95_ms)
        out(
            f"  {step.requests_per_minute:>11,.0f}  {step.completed_per_minute:>13,.0f}  {cold:>11}  {warm:>11}"
            f"  {running:>7}  {kv:>8}"
        )
    cliff = f"{curve.cliff_per_minute:,.0f} req/min" if curve.cliff_per_minute else "not reached"
    measured = config.model_copy(
        update={"throughput": config.throughput.model_copy(update={"measured": {curve.instance_type: curve}})}
    )
    throughput = make_plan(measured).planner.throughput(curve.instance_type)
    held = (
        f"holds cold {config.slo.cold.ttft_p95_ms:g} / warm {config.slo.warm.ttft_p95_ms:g} ms up to "
        f"{throughput.requests_per_minute:,.0f} req/min per instance"
        if throughput.holds_slo
        else "holds neither SLO at the lightest step"
    )
    out(f"  {held}; cliff {cliff}; {standing(throughput)}")


def _write(args: argparse.Namespace, instance_type: str, curve: MeasuredCurve, out: Callable[[str], None]) -> None:
    try:
        diff = set_in_stage_overlay(
            args.cdk_json, args.write, ["throughput", "measured", instance_type], curve.model_dump(mode="json")
        )
    except ValueError as error:
        raise OpsError(f"--write: {error}", ExitCode.USAGE) from error
    out(f"wrote stages.{args.write}.throughput.measured.{instance_type} in {args.cdk_json}" if diff else "unchanged")
    for line in diff:
        out(line)


__all__ = ["MeasureClients", "boto3_measure_clients", "register", "run_capacity"]
