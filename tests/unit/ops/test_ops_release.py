"""``ops release``: starts the kind's pipeline, follows its steps, prints the pin (Stubber, real API shapes)."""

import datetime as dt
import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from app_config import load_config
from ops.cli import Clients, Deps, main
from ops.exit_codes import ExitCode, OpsError
from ops.release import ReleaseRequest, run_release
from tests.unit.ops.model_package_stubs import NOW, add_no_package, describe_package, package_arn

SHA = "b" * 64
CONFIG = load_config({"stage": "prod", "stages": {"prod": {}}})
EXECUTION = "arn:aws:sagemaker:us-east-1:123456789012:pipeline/mangaassist-prod-release-adapter/execution/abc123"
T0 = dt.datetime(2026, 11, 26, 5, 0, tzinfo=dt.UTC)
EVAL, CATALOG = "s3://artifacts/release-inputs/eval.jsonl", "s3://artifacts/release-inputs/catalog.jsonl"
REQUEST = ReleaseRequest("adapter", "v4", "v1", EVAL, CATALOG, adapter="manga_domain_v3")
PARAMETERS = [
    {"Name": "EvalSetS3Uri", "Value": EVAL},
    {"Name": "TitleCatalogS3Uri", "Value": CATALOG},
    {"Name": "AdapterName", "Value": "manga_domain_v3"},
    {"Name": "AdapterVersion", "Value": "v4"},
    {"Name": "BaseModelVersion", "Value": "v1"},
]


def _sagemaker() -> Any:
    return boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


def _steps(stub: Stubber, *steps: dict[str, Any]) -> None:
    stub.add_response(
        "list_pipeline_execution_steps",
        {"PipelineExecutionSteps": list(steps)},
        {"PipelineExecutionArn": EXECUTION, "SortOrder": "Ascending"},
    )


def _status(stub: Stubber, status: str, reason: str | None = None) -> None:
    answer: dict[str, Any] = {"PipelineExecutionArn": EXECUTION, "PipelineExecutionStatus": status}
    if reason:
        answer["FailureReason"] = reason
    stub.add_response("describe_pipeline_execution", answer, {"PipelineExecutionArn": EXECUTION})


def _start(stub: Stubber) -> None:
    add_no_package(stub, "mangaassist-prod-adapters")  # v4 not released before
    stub.add_response(
        "start_pipeline_execution",
        {"PipelineExecutionArn": EXECUTION},
        {
            "PipelineName": "mangaassist-prod-release-adapter",
            "PipelineExecutionDisplayName": "manga-domain-v3-v4",
            "PipelineParameters": PARAMETERS,
        },
    )


def _step(name: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"StepName": name, "StepStatus": status, "StartTime": T0, **extra}


def test_a_passing_release_follows_each_step_then_prints_the_pin_to_set() -> None:
    sagemaker, lines = _sagemaker(), list[str]()
    arn = package_arn("mangaassist-prod-adapters", 5)
    register = _step("Register", "Succeeded", Metadata={"RegisterModel": {"Arn": arn}})
    with Stubber(sagemaker) as stub:
        _start(stub)
        _steps(stub, _step("Validate", "Executing"))
        _status(stub, "Executing")
        _steps(stub, _step("Validate", "Succeeded"), _step("LoadTest", "Succeeded"), _step("Evaluate", "Executing"))
        _status(stub, "Executing")
        steps = [_step(n, "Succeeded") for n in ("Validate", "LoadTest", "Evaluate", "Gates")]
        _steps(stub, *steps, register)
        _status(stub, "Succeeded")
        _steps(stub, *steps, register)
        stub.add_response(
            "describe_model_package",
            describe_package("mangaassist-prod-adapters", "manga_domain_v3", f"v4/{SHA}", "PendingManualApproval", 5),
            {"ModelPackageName": arn},
        )
        code = run_release(
            sagemaker, CONFIG, REQUEST, timeout_s=3600, poll_s=60, clock=lambda: 0.0,
            sleep=lambda s: None, out=lines.append,
        )  # fmt: skip
    assert code == ExitCode.OK
    assert lines == [
        f"release mangaassist-prod-release-adapter: started {EXECUTION}",
        "  Validate: Executing",
        "  Validate: Succeeded",
        "  LoadTest: Succeeded",
        "  Evaluate: Executing",
        "  Evaluate: Succeeded",
        "  Gates: Succeeded",
        "  Register: Succeeded",
        f"registered {arn} (PendingManualApproval)",
        "merge into cdk.json (stages.prod): "
        + json.dumps(
            {
                "image": {"build": {"canary": {"adapters": {"manga_domain_v3": f"v4/{SHA}"}}}},
                "release": {"registered_packages": {"manga_domain_v3/v4": arn}},
            }
        ),
        "then approve it: aws sagemaker update-model-package --model-approval-status Approved --model-package-arn "
        + arn,
    ]


def test_a_failed_gate_ends_the_release_with_the_failing_metric() -> None:
    sagemaker, lines = _sagemaker(), list[str]()
    summary = "FAIL factual_accuracy = 0.840 (at least 0.9)"
    with Stubber(sagemaker) as stub:
        _start(stub)
        _steps(stub, _step("Evaluate", "Succeeded"), _step("GateFailed", "Failed", FailureReason=summary))
        _status(stub, "Failed", f"Step failure: One or multiple steps failed. {summary}")
        code = run_release(
            sagemaker, CONFIG, REQUEST, timeout_s=3600, poll_s=60, clock=lambda: 0.0,
            sleep=lambda s: None, out=lines.append,
        )  # fmt: skip
    assert code == ExitCode.CHECK_FAILED
    assert f"  GateFailed: Failed: {summary}" in lines
    assert lines[-1] == f"release FAILED (Failed): Step failure: One or multiple steps failed. {summary}"


def test_a_release_still_running_at_the_timeout_says_so() -> None:
    sagemaker, now = _sagemaker(), iter([0.0, 10.0])
    with Stubber(sagemaker) as stub:
        _start(stub)
        _steps(stub, _step("Validate", "Executing"))
        _status(stub, "Executing")
        with pytest.raises(OpsError, match=r"still Executing after 5 s; it goes on running") as info:
            run_release(
                sagemaker, CONFIG, REQUEST, timeout_s=5, poll_s=60, clock=lambda: next(now),
                sleep=lambda s: None, out=lambda line: None,
            )  # fmt: skip
    assert info.value.code == ExitCode.NOT_READY


def test_a_base_model_release_with_quantize_needs_the_calibration_set() -> None:
    request = ReleaseRequest("base_model", "v2", "", EVAL, CATALOG, source_model="s3://a/fp16/")
    with pytest.raises(OpsError, match=r"^--calibration: release.quantize.enabled needs the calibration set$"):
        request.parameters(CONFIG.release)


def test_a_base_model_release_quantized_elsewhere_names_its_bf16_baseline() -> None:
    config = load_config({"stage": "prod", "stages": {"prod": {}}, "release.quantize.enabled": "false"})
    request = ReleaseRequest("base_model", "v2", "", EVAL, CATALOG, source_model="s3://a/base-models/awq/v2/")
    with pytest.raises(
        OpsError,
        match=r"^--baseline-model: with release.quantize.enabled = false the drop gates "
        r"\(quality_score\) compare with the unquantized \(BF16\) checkpoint; name its s3:// folder$",
    ):
        request.parameters(config.release)
    bf16 = "s3://a/base-models/fp16/v2/"
    parameters = ReleaseRequest("base_model", "v2", "", EVAL, CATALOG, source_model="s3://a/x/", baseline_model=bf16)
    assert {"Name": "BaselineModelS3Uri", "Value": bf16} in parameters.parameters(config.release)


def test_the_cli_starts_the_release_with_the_stage_config(capsys: pytest.CaptureFixture[str]) -> None:
    sagemaker, lines = _sagemaker(), list[str]()
    with Stubber(sagemaker) as stub:
        _start(stub)
        _steps(stub)
        _status(stub, "Stopped")
        clients = Clients(sagemaker=sagemaker, runtime=None, cloudwatch=None, cloudformation=None)
        argv = ["release", "--kind", "adapter", "--adapter", "manga_domain_v3", "--version", "v4",
                "--base-model-version", "v1", "--eval-set", EVAL, "--catalog", CATALOG]  # fmt: skip
        code = main(argv, Deps(clients=lambda r, p: clients, out=lines.append, sleep=lambda s: None))
    assert code == ExitCode.CHECK_FAILED
    assert lines[-1] == "release FAILED (Stopped): see the steps above"


def test_a_version_released_before_is_refused_before_anything_starts() -> None:
    """Issue 53, finding 14: a rerun of a released version started the pipeline again."""
    sagemaker = _sagemaker()
    arn = package_arn("mangaassist-prod-adapters", 5)
    summary = {
        "ModelPackageArn": arn, "ModelPackageDescription": f"manga_domain_v3 v4/{SHA}", "CreationTime": NOW,
        "ModelPackageStatus": "Completed", "ModelApprovalStatus": "Rejected",
    }  # fmt: skip
    with Stubber(sagemaker) as stub:
        stub.add_response(
            "list_model_packages",
            {"ModelPackageSummaryList": [summary]},
            {"ModelPackageGroupName": "mangaassist-prod-adapters", "SortBy": "CreationTime", "SortOrder": "Descending"},
        )  # and no StartPipelineExecution: the Stubber fails any call not queued
        with pytest.raises(OpsError) as raised:
            run_release(sagemaker, CONFIG, REQUEST, timeout_s=3600, poll_s=60, out=lambda line: None)
    assert raised.value.code == ExitCode.USAGE
    assert str(raised.value) == (
        f"manga_domain_v3 v4 is released already: model package {arn} (Rejected); a version is released once, so "
        "release the new output as a new version"
    )


def test_a_base_version_whose_folder_holds_files_is_refused() -> None:
    """A run that failed while it published the quantized checkpoint left files in the version folder."""
    sagemaker = _sagemaker()
    s3 = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    request = ReleaseRequest(
        "base_model", "v2", "", EVAL, CATALOG, source_model="s3://artifacts/base-models/fp16/v2/", calibration=EVAL
    )
    prefix = "base-models/llama-3-8b-instruct-awq/v2/"
    with Stubber(sagemaker) as stub, Stubber(s3) as s3_stub:
        add_no_package(stub, "mangaassist-prod-base-model")
        s3_stub.add_response(
            "list_objects_v2",
            {"KeyCount": 1, "Contents": [{"Key": prefix + "config.json", "Size": 9}]},
            {"Bucket": "artifacts", "Prefix": prefix, "MaxKeys": 1},
        )
        with pytest.raises(OpsError) as raised:
            run_release(sagemaker, CONFIG, request, timeout_s=3600, poll_s=60, s3=s3, out=lambda line: None)
    assert str(raised.value).startswith(f"s3://artifacts/{prefix} holds files already")
