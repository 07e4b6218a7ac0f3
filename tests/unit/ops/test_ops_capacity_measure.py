"""``mangaassist-ops throughput measure`` (issue 46) against botocore's Stubber: the cost bound and --yes, the
job's create request, the wait with progress, a completed job's curve (printed, judged, --write), and a
failed, a timed-out and an unauthenticated run, each leaving nothing running and saying what it cleaned up.

Responses have the real shapes (the Stubber checks them against botocore's SageMaker, S3 and
CloudFormation models); the curve is one a capacity job writes (the CPU smoke writes a real one:
tests/engine/test_capacity_job_smoke.py).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from app_config.loader import load_cli_config
from ops.cli import Deps, main
from ops.measure import MeasureClients
from ops.measure.job import cost_bound
from planning.planner import Planner
from serving_contract import capacity_job as contract
from tests.botocore_helpers import streaming_body

REPO = Path(__file__).resolve().parents[3]
NOW = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)
JOB = "capacity-mangaassist-vllm-prod-g6e-xlarge-20261127-120000"
ACCOUNT = "123456789012"
OUTPUTS = {
    contract.OUTPUT_ROLE_ARN: f"arn:aws:iam::{ACCOUNT}:role/capacity-job",
    contract.OUTPUT_CODE_URI: "s3://cdk-assets-bucket/abc123.zip",
    contract.OUTPUT_KMS_KEY_ARN: f"arn:aws:kms:us-east-1:{ACCOUNT}:key/11111111-2222-3333-4444-555555555555",
    contract.OUTPUT_IMAGE_URI: f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/mangaassist-vllm:primary-abc",
    contract.OUTPUT_BUCKET: "mangaassist-artifacts",
}


def _curve(rates: list[float], cold_p95: list[float], *, cliff: float | None = None) -> dict[str, Any]:
    """A curve as the job writes it: one engine that holds until cold p95 passes 500 ms."""
    return {
        "format": contract.RESULT_FORMAT,
        "instance_type": "ml.g6e.xlarge",
        "date": "2026-11-27",
        "job": JOB,
        "gpu": "NVIDIA L40S",
        "think_s": 30,
        "engines": 1,
        "steps": [
            {
                "requests_per_minute": rate,
                "served_per_minute": rate,
                "completed_per_minute": rate,
                "requests": int(rate),
                "errors": 0,
                "cold": {"requests": int(rate) // 3, "ttft_p50_ms": p95 / 2, "ttft_p95_ms": p95},
                "warm": {"requests": int(rate) - int(rate) // 3, "ttft_p50_ms": 60, "ttft_p95_ms": 110},
                "running_mean": rate / 20,
                "kv_cache_usage_mean": rate / 1000,
            }
            for rate, p95 in zip(rates, cold_p95, strict=True)
        ],
        "cliff_per_minute": cliff,
    }


CURVE = _curve([120, 240, 360, 480], [210, 290, 470, 2600], cliff=480)


def _client(service: str) -> Any:
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


def _described(status: str, **extra: Any) -> dict[str, Any]:
    """DescribeProcessingJob's answer (its required members, as botocore's model has them)."""
    return {
        "ProcessingJobName": JOB,
        "ProcessingResources": {
            "ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.g6e.xlarge", "VolumeSizeInGB": 100}
        },
        "AppSpecification": {"ImageUri": OUTPUTS[contract.OUTPUT_IMAGE_URI]},
        "ProcessingJobArn": f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:processing-job/{JOB}",
        "ProcessingJobStatus": status,
        "CreationTime": NOW,
        **extra,
    }


class _Run:
    """The stubbed clients of one command, checked to be used up."""

    def __init__(self) -> None:
        self.clients = MeasureClients(_client("sagemaker"), _client("s3"), _client("cloudformation"))
        self.stubs = {name: Stubber(getattr(self.clients, name)) for name in ("sagemaker", "s3", "cloudformation")}
        self.time = 0.0
        self.requests: list[dict[str, Any]] = []
        # CreateProcessingJob's request as the command sent it (botocore validated it against the model).
        self.clients.sagemaker.meta.events.register(
            "provide-client-params.sagemaker.CreateProcessingJob", lambda params, **_: self.requests.append(params)
        )

    def __enter__(self) -> _Run:
        for stub in self.stubs.values():
            stub.activate()
        return self

    def __exit__(self, *exc: object) -> None:
        for stub in self.stubs.values():
            stub.deactivate()

    def sleep(self, seconds: float) -> None:
        self.time += seconds

    def main(self, argv: list[str], lines: list[str]) -> int:
        deps = Deps(
            measure_clients=lambda r, p: self.clients,
            now=lambda: NOW,
            clock=lambda: self.time,
            sleep=self.sleep,
            out=lines.append,
        )
        code = main(argv, deps)
        for stub in self.stubs.values():
            stub.assert_no_pending_responses()
        return code

    def stack_outputs(self) -> None:
        self.stubs["cloudformation"].add_response(
            "describe_stacks",
            {
                "Stacks": [
                    {
                        "StackName": "MangaAssist-prod-Serving",
                        "CreationTime": NOW,
                        "StackStatus": "UPDATE_COMPLETE",
                        "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in OUTPUTS.items()],
                    }
                ]
            },
            {"StackName": "MangaAssist-prod-Serving"},
        )

    def started(self) -> None:
        """The two input files, then CreateProcessingJob with the request the command builds."""
        s3 = self.stubs["s3"]
        for file in (contract.ENVIRONMENT_FILE, contract.SWEEP_FILE):
            s3.add_response(
                "put_object",
                {"ETag": '"e"'},
                {
                    "Bucket": "mangaassist-artifacts",
                    "Key": f"capacity-measurements/{JOB}/input/{file}",
                    "Body": ANY,
                    "ServerSideEncryption": "aws:kms",
                    "SSEKMSKeyId": OUTPUTS[contract.OUTPUT_KMS_KEY_ARN],
                },
            )
        self.stubs["sagemaker"].add_response(
            "create_processing_job", {"ProcessingJobArn": f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:processing-job/{JOB}"}
        )

    def cleaned_inputs(self) -> None:
        self.stubs["s3"].add_response(
            "delete_objects",
            {
                "Deleted": [
                    {"Key": f"capacity-measurements/{JOB}/input/{f}"} for f in ("environment.json", "sweep.json")
                ]
            },
            {
                "Bucket": "mangaassist-artifacts",
                "Delete": {
                    "Objects": [
                        {"Key": f"capacity-measurements/{JOB}/input/{contract.ENVIRONMENT_FILE}"},
                        {"Key": f"capacity-measurements/{JOB}/input/{contract.SWEEP_FILE}"},
                    ],
                    "Quiet": True,
                },
            },
        )


def _cdk_json(tmp_path: Path) -> Path:
    path = tmp_path / "cdk.json"
    path.write_text((REPO / "cdk.json").read_text())
    return path


def _argv(tmp_path: Path, *extra: str) -> list[str]:
    return ["throughput", "measure", "--instance-type", "ml.g6e.xlarge", "--cdk-json", str(_cdk_json(tmp_path)), *extra]


def test_without_yes_it_prints_the_cost_bound_and_starts_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines: list[str] = []

    def no_clients(*_: object) -> MeasureClients:
        raise AssertionError("no AWS client may be made before --yes")

    assert main(_argv(tmp_path), Deps(measure_clients=no_clients, out=lines.append)) == 2
    bound = cost_bound(load_cli_config([]), "ml.g6e.xlarge")
    assert f"  {bound.line}" in lines
    assert bound.usd == pytest.approx(bound.usd_per_hour * 3600 / 3600)  # throughput.job.max_runtime_s 3600
    assert capsys.readouterr().err.strip() == "error: nothing started: pass --yes to start 1 capacity job(s)"


def test_an_instance_type_the_planner_does_not_know_is_refused_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["throughput", "measure", "--instance-type", "ml.c5.xlarge", "--cdk-json", str(_cdk_json(tmp_path)), "--yes"]
    assert main(argv, Deps(out=lambda _: None)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --instance-type ml.c5.xlarge: ") and "\n" not in err


def test_an_instance_type_that_is_no_candidate_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 53, finding 11: the operator policy allows the candidates only (sagemaker:InstanceTypes)."""
    argv = [
        "throughput",
        "measure",
        "--instance-type",
        "ml.p5.48xlarge",
        "--cdk-json",
        str(_cdk_json(tmp_path)),
        "--yes",
    ]
    assert main(argv, Deps(out=lambda _: None)) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --instance-type ml.p5.48xlarge: not a capacity job candidate (ml.g5.xlarge, ml.g6.xlarge, "
        "ml.g6e.xlarge: throughput.job.instance_types and the variants' own); add it to throughput.job.instance_types "
        "and deploy the Serving stack, whose operator policy allows those types only"
    )


def test_a_completed_job_prints_its_curve_and_write_puts_it_in_the_stage(tmp_path: Path) -> None:
    lines: list[str] = []
    with _Run() as run:
        run.stack_outputs()
        run.started()
        sagemaker = run.stubs["sagemaker"]
        sagemaker.add_response("describe_processing_job", _described("InProgress"), {"ProcessingJobName": JOB})
        sagemaker.add_response("describe_processing_job", _described("InProgress"), {"ProcessingJobName": JOB})
        sagemaker.add_response("describe_processing_job", _described("Completed"), {"ProcessingJobName": JOB})
        run.stubs["s3"].add_response(
            "get_object",
            {"Body": streaming_body(json.dumps(CURVE))},
            {"Bucket": "mangaassist-artifacts", "Key": f"capacity-measurements/{JOB}/output/capacity.json"},
        )
        assert run.main([*_argv(tmp_path), "--yes", "--write", "prod", "--poll-s", "60"], lines) == 0
    (request,) = run.requests
    # The serving image on the type, no network, volume and output under the job's key, bounded in time.
    assert request["ProcessingResources"]["ClusterConfig"] == {
        "InstanceCount": 1,
        "InstanceType": "ml.g6e.xlarge",
        "VolumeSizeInGB": 100,
        "VolumeKmsKeyId": OUTPUTS[contract.OUTPUT_KMS_KEY_ARN],
    }
    assert request["NetworkConfig"] == {"EnableNetworkIsolation": True}
    assert request["ProcessingOutputConfig"]["KmsKeyId"] == OUTPUTS[contract.OUTPUT_KMS_KEY_ARN]
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600}
    assert request["AppSpecification"]["ImageUri"] == OUTPUTS[contract.OUTPUT_IMAGE_URI]
    assert request["AppSpecification"]["ContainerEntrypoint"] == ["/opt/venv/bin/python", "-m", "runtime.measure"]
    assert request["Environment"]["PYTHONPATH"] == "/opt/ml/processing/input/code/abc123.zip:/opt/app"
    assert lines[lines.index(f"started {JOB} on ml.g6e.xlarge") + 1 :][:1] == [f"{JOB}: Completed after 2 min"]
    assert "  holds cold 500 / warm 500 ms up to 360 req/min per instance; cliff 480 req/min; measured 2026-11-27 " \
        f"({JOB})" in lines  # fmt: skip
    assert any(line.startswith("wrote stages.prod.throughput.measured.ml.g6e.xlarge in ") for line in lines)
    # From then on the planner reads it: measured, with its job.
    config = load_cli_config([], cdk_json=tmp_path / "cdk.json")
    throughput = Planner.of(config).throughput("ml.g6e.xlarge")
    assert (throughput.label, throughput.requests_per_minute, throughput.source) == (
        "measured",
        360,
        f"measured 2026-11-27 ({JOB})",
    )


def test_a_failed_job_says_why_and_cleans_up_its_inputs(tmp_path: Path) -> None:
    lines: list[str] = []
    reason = "ClientError: Failed to download data. Access Denied"
    with _Run() as run:
        run.stack_outputs()
        run.started()
        run.stubs["sagemaker"].add_response(
            "describe_processing_job", _described("Failed", FailureReason=reason), {"ProcessingJobName": JOB}
        )
        run.cleaned_inputs()
        assert run.main([*_argv(tmp_path), "--yes"], lines) == 1
    assert f"{JOB}: Failed after 0 min: {reason}" in lines
    assert f"cleaned up: {JOB} is Failed; nothing of it runs" in lines
    assert (
        f"cleaned up: deleted 2 input file(s) under s3://mangaassist-artifacts/capacity-measurements/{JOB}/input/"
        in lines
    )


def test_a_job_past_the_timeout_is_stopped_and_its_inputs_deleted(tmp_path: Path) -> None:
    lines: list[str] = []
    with _Run() as run:
        run.stack_outputs()
        run.started()
        sagemaker = run.stubs["sagemaker"]
        for _ in range(3):
            sagemaker.add_response("describe_processing_job", _described("InProgress"), {"ProcessingJobName": JOB})
        sagemaker.add_response("stop_processing_job", {}, {"ProcessingJobName": JOB})
        run.cleaned_inputs()
        argv = [*_argv(tmp_path), "--yes", "--poll-s", "60", "--timeout-s", "120"]
        assert run.main(argv, lines) == 1
    assert "stopping: still running after 120 s (--timeout-s)" in lines
    assert f"cleaned up: stopped {JOB} (SageMaker releases its instance)" in lines


def test_without_credentials_it_fails_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real client with nowhere to find credentials: botocore raises NoCredentialsError before any request.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    assert main([*_argv(tmp_path), "--yes"], Deps(out=lambda _: None)) == 5
    assert capsys.readouterr().err.strip() == (
        "error: no AWS credentials found (environment, --profile, SSO, instance role): nothing measured"
    )


def test_the_image_and_the_bucket_come_from_the_stacks_that_own_them(tmp_path: Path) -> None:
    """The Serving stack cannot re-export another stack's export (cfn-lint W6001): the image is
    ImageRepositoryUri:PrimaryImageTag, the bucket ModelArtifactsBucketName, from ``cdk deploy --outputs-file``."""
    own = {k: v for k, v in OUTPUTS.items() if k not in contract.OUTPUTS_KNOWN_AT_SYNTH_ONLY}
    repository = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/mangaassist-vllm"
    outputs_file = tmp_path / "cdk-outputs.json"
    outputs_file.write_text(
        json.dumps(
            {
                "MangaAssist-prod-Serving": own,
                "MangaAssist-prod-ImageRepository": {"ImageRepositoryUri": repository},
                "MangaAssist-prod-ImageBuild": {"PrimaryImageTag": "primary-abc"},
                "MangaAssist-prod-ModelArtifacts": {"ModelArtifactsBucketName": "mangaassist-artifacts"},
            }
        )
    )
    lines: list[str] = []
    with _Run() as run:
        run.started()
        run.stubs["sagemaker"].add_response(
            "describe_processing_job", _described("Stopped"), {"ProcessingJobName": JOB}
        )
        run.cleaned_inputs()
        assert run.main([*_argv(tmp_path), "--yes", "--stack-outputs", str(outputs_file)], lines) == 1
    (request,) = run.requests
    assert request["AppSpecification"]["ImageUri"] == f"{repository}:primary-abc"
    assert request["ProcessingInputs"][1]["S3Input"]["S3Uri"].startswith("s3://mangaassist-artifacts/")
    assert f"cleaned up: {JOB} is Stopped; nothing of it runs" in lines


def test_a_serving_stack_without_the_job_is_refused_naming_its_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs_file = tmp_path / "cdk-outputs.json"
    outputs_file.write_text(json.dumps({"MangaAssist-prod-Serving": {"EndpointName": "mangaassist-vllm-prod"}}))
    argv = [*_argv(tmp_path), "--yes", "--stack-outputs", str(outputs_file)]
    assert main(argv, Deps(measure_clients=lambda r, p: _Run().clients, out=lambda _: None)) == 2
    assert capsys.readouterr().err.strip() == (
        "error: stack MangaAssist-prod-Serving (and the stacks it reads) has no output(s) CapacityJobRoleArn, "
        "CapacityJobCodeUri, CapacityJobKmsKeyArn, CapacityJobImageUri, CapacityJobBucketName: deploy the stacks of "
        "this version (the Serving stack makes the capacity job's role, key and code) first"
    )
