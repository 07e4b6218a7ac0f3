"""``release``: start a version's release pipeline, follow it step by step, then print the pin to set.

The pipelines are the ModelRelease stack's (cdk_constructs/release/; docs/model-release.md): ``base_model``
(quantize, validate, load test, evaluate, gates, register) and ``adapter`` (the same without quantize).
On success the Register step's model package holds the pin (``<version>/<sha256>`` of what was validated);
this prints the stage overlay block to set: the pin and the package's ARN (``release.registered_packages``, the
one package the deploy's approval check looks up for that version), with the package's approval status: a pin
deploys only once its package is Approved (``ops preflight``, the Serving stack's ``Custom::ApprovedPins``).

A version is released once (issue 53, finding 14): it refuses, before starting anything, a version that a model
package of its group already registers, and a base-model version whose folder already holds files (the pipeline
writes the quantized checkpoint there only after the gates pass; a rerun would mix its files with another run's).

Calls: ListModelPackages, S3 ListObjectsV2 (base releases that quantize), StartPipelineExecution,
DescribePipelineExecution, ListPipelineExecutionSteps, DescribeModelPackage.
"""

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from app_config.release import ReleaseConfig, model_package_group_name, release_pipeline_name
from app_config.root import AppConfig
from cli_support.argtypes import positive_float
from ops.command import Deps, Subparsers
from ops.exit_codes import ExitCode, OpsError
from serving_contract.model_artifacts import version_prefix
from serving_contract.model_packages import registered_key, released_versions

DONE: Final = ("Succeeded", "Failed", "Stopped")
REGISTER_STEP: Final = "Register"


@dataclass(frozen=True)
class ReleaseRequest:
    """One release: what kind, which version, and the run's inputs (S3 URIs)."""

    kind: str
    version: str
    base_model_version: str
    eval_set: str
    catalog: str
    adapter: str | None = None
    source_model: str | None = None
    calibration: str | None = None
    baseline_model: str | None = None

    def parameters(self, release: ReleaseConfig) -> list[dict[str, str]]:
        """The pipeline's parameters (cdk_constructs/release/pipeline_definition.py) for this release.

        Raises:
            OpsError: (USAGE) an input the kind needs is missing.
        """
        values = {"EvalSetS3Uri": self.eval_set, "TitleCatalogS3Uri": self.catalog}
        if self.kind == "adapter":
            if not self.adapter:
                raise OpsError("--adapter: an adapter release names the adapter", ExitCode.USAGE)
            values |= {
                "AdapterName": self.adapter,
                "AdapterVersion": self.version,
                "BaseModelVersion": self.base_model_version,
            }
        else:
            if not self.source_model:
                raise OpsError("--source-model: a base-model release names the checkpoint to release", ExitCode.USAGE)
            values |= {"SourceModelS3Uri": self.source_model, "BaseModelVersion": self.version}
            if release.quantize.enabled:
                if not self.calibration:
                    raise OpsError("--calibration: release.quantize.enabled needs the calibration set", ExitCode.USAGE)
                values["CalibrationS3Uri"] = self.calibration
            elif release.baseline_drop_gates:
                if not self.baseline_model:
                    raise OpsError(
                        "--baseline-model: with release.quantize.enabled = false the drop gates "
                        f"({', '.join(release.baseline_drop_gates)}) compare with the unquantized (BF16) "
                        "checkpoint; name its s3:// folder",
                        ExitCode.USAGE,
                    )
                values["BaselineModelS3Uri"] = self.baseline_model
        return [{"Name": name, "Value": value} for name, value in values.items()]

    def artifact(self, config: AppConfig) -> str:
        """The released artifact's name: the adapter, or ``model.name``."""
        return self.adapter if self.kind == "adapter" and self.adapter else config.model.name

    def overlay(self, config: AppConfig, pin: str, package_arn: str) -> dict[str, Any]:
        """The stage overlay block to merge: the pin under the canary's set (the primary's without a canary: a new
        version is a candidate) and the package under ``release.registered_packages``."""
        variant = "canary" if config.serving.canary.enabled else "primary"
        pins: dict[str, Any] = {"adapters": {self.adapter: pin}} if self.kind == "adapter" else {"base_model": pin}
        return {
            "image": {"build": {variant: pins}},
            "release": {"registered_packages": {registered_key(self.artifact(config), self.version): package_arn}},
        }


def refuse_a_released_version(sagemaker: Any, s3: Any, config: AppConfig, request: ReleaseRequest) -> None:
    """Raise when ``request``'s version was released before or its folder holds files (module docstring).

    Raises:
        OpsError: (USAGE) one line naming the package or the folder.
    """
    artifact = request.artifact(config)
    group = model_package_group_name(config.project_name, config.stage, request.kind)
    released = released_versions(sagemaker, group, artifact, request.version)
    if released:
        raise OpsError(
            f"{artifact} {request.version} is released already: model package {released[0].arn} "
            f"({released[0].approval_status}); a version is released once, so release the new output as a new version",
            ExitCode.USAGE,
        )
    if request.kind == "base_model" and config.release.quantize.enabled:
        bucket = request.eval_set.removeprefix("s3://").split("/", 1)[0]  # release inputs: the artifacts bucket
        prefix = version_prefix(config.image.build.base_models_prefix, artifact, request.version)
        if s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1).get("KeyCount", 0):
            raise OpsError(
                f"s3://{bucket}/{prefix} holds files already (a version released before, or a run that failed while "
                "it published): the Publish step writes a new version's folder once; pick a new version",
                ExitCode.USAGE,
            )


def _steps(sagemaker: Any, execution: str) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for page in sagemaker.get_paginator("list_pipeline_execution_steps").paginate(
        PipelineExecutionArn=execution, SortOrder="Ascending"
    ):
        steps += page["PipelineExecutionSteps"]
    return steps


def run_release(
    sagemaker: Any,
    config: AppConfig,
    request: ReleaseRequest,
    *,
    timeout_s: float,
    poll_s: float,
    s3: Any = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    out: Callable[[str], None] = print,
) -> ExitCode:
    """Refuse a released version, then start, follow (one line per step status change) and report; OK once
    registered, CHECK_FAILED otherwise. ``s3`` lists a base version's folder (base releases that quantize).

    Raises:
        OpsError: USAGE for a version released before (:func:`refuse_a_released_version`); NOT_READY when
            ``timeout_s`` passes before the execution ends (it keeps running).
    """
    refuse_a_released_version(sagemaker, s3, config, request)
    pipeline = release_pipeline_name(config.project_name, config.stage, request.kind)
    started = sagemaker.start_pipeline_execution(
        PipelineName=pipeline,
        PipelineExecutionDisplayName=f"{request.adapter or config.model.name}-{request.version}".replace("_", "-"),
        PipelineParameters=request.parameters(config.release),
    )
    execution = started["PipelineExecutionArn"]
    out(f"release {pipeline}: started {execution}")
    seen: dict[str, str] = {}
    deadline = clock() + timeout_s
    while True:
        for step in _steps(sagemaker, execution):
            name, status = step["StepName"], step["StepStatus"]
            if seen.get(name) != status:
                seen[name] = status
                reason = f": {step['FailureReason']}" if step.get("FailureReason") else ""
                out(f"  {name}: {status}{reason}")
        status = sagemaker.describe_pipeline_execution(PipelineExecutionArn=execution)
        if status["PipelineExecutionStatus"] in DONE:
            break
        if clock() >= deadline:
            raise OpsError(
                f"release {execution}: still {status['PipelineExecutionStatus']} after {timeout_s:g} s; it goes on "
                "running (aws sagemaker describe-pipeline-execution)",
                ExitCode.NOT_READY,
            )
        sleep(poll_s)
    if status["PipelineExecutionStatus"] != "Succeeded":
        reason = status.get("FailureReason", "see the steps above")
        out(f"release FAILED ({status['PipelineExecutionStatus']}): {reason}")
        return ExitCode.CHECK_FAILED
    register = next((s for s in _steps(sagemaker, execution) if s["StepName"] == REGISTER_STEP), None)
    arn = (register or {}).get("Metadata", {}).get("RegisterModel", {}).get("Arn")
    if arn is None:
        out("release FAILED: the execution succeeded without registering a model package")
        return ExitCode.CHECK_FAILED
    package = sagemaker.describe_model_package(ModelPackageName=arn)
    pin = package.get("CustomerMetadataProperties", {}).get("pin")
    approval = package.get("ModelApprovalStatus", "PendingManualApproval")
    out(f"registered {arn} ({approval})")
    out(f"merge into cdk.json (stages.{config.stage}): {json.dumps(request.overlay(config, str(pin), arn))}")
    if approval != "Approved":
        out(
            "then approve it: aws sagemaker update-model-package --model-approval-status Approved --model-package-arn "
            + arn
        )
    return ExitCode.OK


def register(commands: Subparsers) -> None:
    """``release``: its flags and its handler."""
    parser = commands.add_parser(
        "release",
        help="Run a version through the quality-gated release pipeline, then print the pin to set.",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--kind", choices=("base_model", "adapter"), required=True)
    parser.add_argument("--version", required=True, help="The version released, e.g. v4 (its S3 version folder).")
    parser.add_argument("--base-model-version", default="", help="adapter: the base version it runs on, e.g. v2.")
    parser.add_argument("--adapter", help="adapter: its name, e.g. manga_domain_v3.")
    parser.add_argument("--eval-set", required=True, help="s3://.../release-inputs/<eval set>.jsonl")
    parser.add_argument(
        "--catalog",
        required=True,
        help="s3://.../release-inputs/<title catalog>.jsonl: the titles that exist (the invented-titles check).",
    )
    parser.add_argument("--source-model", help="base_model: s3:// prefix of the checkpoint to quantize (or release).")
    parser.add_argument("--calibration", help="base_model with quantize: s3://.../release-inputs/<set>.jsonl")
    parser.add_argument(
        "--baseline-model",
        help="base_model without quantize: s3:// prefix of the unquantized (BF16) checkpoint, the drop gates baseline.",
    )
    parser.add_argument("--timeout-s", type=positive_float, default=4 * 3600.0, help="Max wait (default 14400).")
    parser.add_argument("--poll-s", type=positive_float, default=60.0, help="Status interval (default 60).")
    parser.add_argument("--stage", default=None, help="Stage (default: cdk.json's `stage`).")
    parser.add_argument("--cdk-json", type=Path, default=Path("cdk.json"), help="cdk.json to read stages from.")
    parser.add_argument("--region", help="AWS region (default: the SDK's).")
    parser.add_argument("--profile", help="AWS profile (default: the SDK's).")
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace, config: AppConfig, deps: Deps) -> ExitCode:
    request = ReleaseRequest(
        args.kind,
        args.version,
        args.base_model_version,
        args.eval_set,
        args.catalog,
        adapter=args.adapter,
        source_model=args.source_model,
        calibration=args.calibration,
        baseline_model=args.baseline_model,
    )
    clients = deps.clients(args.region, args.profile)
    return run_release(
        clients.sagemaker,
        config,
        request,
        timeout_s=args.timeout_s,
        poll_s=args.poll_s,
        s3=clients.s3,
        clock=deps.clock,
        sleep=deps.sleep,
        out=deps.out,
    )
