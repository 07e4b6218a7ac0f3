"""The compile-cache custom resource's handler against botocore's Stubber (every request checked
against the real SageMaker and S3 models): a job started once per key, reused, adopted, stopped,
and a manifest that always lets the model start."""

import hashlib
import json
from types import ModuleType
from typing import Any

import pytest
from botocore.stub import ANY, Stubber

from serving_contract import compile_cache as contract
from tests.botocore_helpers import streaming_body

BUCKET = "mangaassist-prod-artifacts"
PREFIX = "mangaassist-prod-cc-primary"
IMAGE = "123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/mangaassist:abc123"
HANDLER_MODULE = "cdk_constructs.compile_cache.runtime.index"
STUBBED_CLIENTS = ("SAGEMAKER", "S3")
ENVIRONMENT = {"ENGINE_MAX_MODEL_LEN": "4096", "LORA_ADAPTERS": "a,b,c", "VARIANT_NAME": "primary"}


def _props(**overrides: Any) -> dict[str, Any]:
    return {
        "ServiceToken": "arn:aws:lambda:...",
        "ImageUri": IMAGE,
        "InstanceType": "ml.g5.xlarge",
        "Environment": ENVIRONMENT,
        "Bucket": BUCKET,
        "RoleArn": "arn:aws:iam::123456789012:role/cache-job",
        "JobNamePrefix": PREFIX,
        "VolumeSizeInGB": "30",
        "MaxRuntimeInSeconds": "1800",
        **overrides,
    }


KEY = contract.cache_key(image_uri=IMAGE, instance_type="ml.g5.xlarge", environment=ENVIRONMENT)
CACHE_URI = f"s3://{BUCKET}/compile-cache/{KEY}/"
MANIFEST_KEY = f"compile-cache/{KEY}/manifest.json"
GRAPH = "vllm-cache/torch_compile_cache/graph-a/graph"


def _event(request_type: str = "Create", **overrides: Any) -> dict[str, Any]:
    return {"RequestType": request_type, "PhysicalResourceId": CACHE_URI, "ResourceProperties": _props(**overrides)}


def _running(sagemaker: Stubber, *names: str) -> None:
    sagemaker.add_response(
        "list_processing_jobs",
        {
            "ProcessingJobSummaries": [
                {
                    "ProcessingJobName": name,
                    "ProcessingJobArn": f"arn:aws:sagemaker:ap-northeast-1:123456789012:processing-job/{name}",
                    "CreationTime": 0,
                    "ProcessingJobStatus": "InProgress",
                }
                for name in names
            ]
        },
        {"NameContains": PREFIX, "StatusEquals": "InProgress"},
    )


def _manifest(s3: Stubber, manifest: contract.Manifest | None) -> None:
    listed: dict[str, Any] = {"KeyCount": 0}
    if manifest is not None:
        listed = {"KeyCount": 1, "Contents": [{"Key": MANIFEST_KEY, "Size": 100}]}
    s3.add_response("list_objects_v2", listed, {"Bucket": BUCKET, "Prefix": MANIFEST_KEY, "MaxKeys": 1})
    if manifest is None:
        return
    body = manifest.to_json().encode()
    s3.add_response(
        "get_object",
        {"Body": streaming_body(body)},
        {"Bucket": BUCKET, "Key": MANIFEST_KEY},
    )


def _written_manifest(s3: Stubber) -> dict[str, Any]:
    """The next manifest the handler writes, parsed; its raw bytes under ``"_bytes"``."""
    seen: dict[str, Any] = {}

    class Body:
        def __eq__(self, other: object) -> bool:
            assert isinstance(other, bytes)
            seen.update(json.loads(other))
            seen["_bytes"] = other
            return True

        __hash__ = None  # type: ignore[assignment]  # compared, never hashed

    s3.add_response(
        "put_object", {}, {"Bucket": BUCKET, "Key": MANIFEST_KEY, "Body": Body(), "ContentType": "application/json"}
    )
    return seen


def test_create_writes_a_pending_manifest_and_starts_one_job_on_the_serving_instance_type(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    sagemaker, s3 = stubs
    _running(sagemaker)
    _manifest(s3, None)
    pending = _written_manifest(s3)
    s3.add_response(
        "put_object",
        {},
        {
            "Bucket": BUCKET,
            "Key": f"compile-cache-jobs/{KEY}/environment.json",
            "Body": json.dumps(ENVIRONMENT, sort_keys=True).encode(),
            "ContentType": "application/json",
        },
    )
    name = f"{PREFIX}-{KEY}-1700000000"
    sagemaker.add_response(
        "create_processing_job",
        {"ProcessingJobArn": f"arn:aws:sagemaker:ap-northeast-1:123456789012:processing-job/{name}"},
        {
            "ProcessingJobName": name,
            "RoleArn": "arn:aws:iam::123456789012:role/cache-job",
            "AppSpecification": {
                "ImageUri": IMAGE,
                "ContainerArguments": [
                    "make-compile-cache",
                    "--environment-file",
                    "/opt/ml/processing/input/environment/environment.json",
                    "--output-dir",
                    "/opt/ml/processing/output/cache",
                ],
            },
            "ProcessingResources": {
                "ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.g5.xlarge", "VolumeSizeInGB": 30}
            },
            "ProcessingInputs": ANY,
            "ProcessingOutputConfig": {
                "Outputs": [
                    {
                        "OutputName": "cache",
                        "S3Output": {
                            "S3Uri": CACHE_URI,
                            "LocalPath": "/opt/ml/processing/output/cache",
                            "S3UploadMode": "EndOfJob",
                        },
                    }
                ]
            },
            "StoppingCondition": {"MaxRuntimeInSeconds": 1800},
            "NetworkConfig": {"EnableNetworkIsolation": True},
        },
    )
    result = handler.on_event(_event(), now=1_700_000_000)
    assert result["PhysicalResourceId"] == CACHE_URI
    assert result["Data"]["JobName"] == name
    assert result["Data"]["Key"] == KEY
    assert pending["status"] == "pending" and pending["key"] == KEY
    # What the models pin until the job ends (the pending manifest), and when the deploy stops waiting.
    assert result["Data"]["ManifestSha256"] == hashlib.sha256(pending["_bytes"]).hexdigest()
    assert result["Data"]["WaitUntil"] == str(1_700_000_000 + 1800 + 900)  # MaxRuntimeInSeconds + provisioning


def test_a_ready_cache_for_the_key_is_reused_without_a_job(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    sagemaker, s3 = stubs
    _running(sagemaker)
    ready = contract.Manifest(key=KEY, status="ready", files=40, bytes=56_000_000, digests={GRAPH: "a" * 64})
    _manifest(s3, ready)
    result = handler.on_event(_event("Update"))
    assert result["Data"] == {
        "CacheUri": CACHE_URI,
        "Key": KEY,
        "JobName": "",
        "Status": "ready",
        "Reason": "reused",
        "ManifestSha256": hashlib.sha256(ready.to_json().encode()).hexdigest(),  # pinned on the models
    }


def test_a_retried_deploy_adopts_its_running_job_and_stops_one_left_for_another_key(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    sagemaker, s3 = stubs
    own, stale = f"{PREFIX}-{KEY}-1700000000", f"{PREFIX}-0123456789abcdef-1690000000"
    _running(sagemaker, own, stale)
    sagemaker.add_response("stop_processing_job", {}, {"ProcessingJobName": stale})
    pending = contract.Manifest(key=KEY, status="pending")
    _manifest(s3, pending)
    result = handler.on_event(_event(), now=1_700_000_100)
    assert result["Data"]["JobName"] == own
    assert result["Data"]["ManifestSha256"] == hashlib.sha256(pending.to_json().encode()).hexdigest()
    assert result["Data"]["WaitUntil"] == str(1_700_000_100 + 2700)  # a new wait: this deploy's


def test_delete_stops_only_the_keys_running_job(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    sagemaker, _ = stubs
    own, other = f"{PREFIX}-{KEY}-1700000000", f"{PREFIX}-0123456789abcdef-1690000000"
    _running(sagemaker, own, other)
    sagemaker.add_response("stop_processing_job", {}, {"ProcessingJobName": own})
    assert handler.on_event(_event("Delete")) == {"PhysicalResourceId": CACHE_URI}


def _describe(sagemaker: Stubber, name: str, status: str, reason: str | None = None) -> None:
    response: dict[str, Any] = {
        "ProcessingJobName": name,
        "ProcessingJobArn": f"arn:aws:sagemaker:ap-northeast-1:123456789012:processing-job/{name}",
        "ProcessingJobStatus": status,
        "ProcessingResources": {
            "ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.g5.xlarge", "VolumeSizeInGB": 30}
        },
        "AppSpecification": {"ImageUri": IMAGE},
        "CreationTime": 0,
    }
    if reason:
        response["FailureReason"] = reason
    sagemaker.add_response("describe_processing_job", response, {"ProcessingJobName": name})


def _poll(name: str, wait_until: int = 1_700_002_700) -> dict[str, Any]:
    return {**_event(), "Data": {"JobName": name, "CacheUri": CACHE_URI, "Key": KEY, "WaitUntil": str(wait_until)}}


def test_is_complete_waits_while_the_job_runs(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    sagemaker, _ = stubs
    _describe(sagemaker, "job-1", "InProgress")
    assert handler.is_complete(_poll("job-1"), now=1_700_002_699) == {"IsComplete": False}


def test_a_job_still_running_at_the_deploys_wait_is_stopped_and_the_models_pin_a_failed_manifest(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    """Issue 49, finding 3: the provider waited past CloudFormation's 3,600 s and a slow job failed the stack.
    Issue 53, finding 14: past WaitUntil the resource then completed as pending and left the job running, so the
    models pinned the pending manifest's digest, the finished job replaced that manifest, and its cache was refused
    until a deploy changed the key. Now the job is stopped and a failed manifest, the one the models pin, says why."""
    sagemaker, s3 = stubs
    _describe(sagemaker, "job-1", "InProgress")
    sagemaker.add_response("stop_processing_job", {}, {"ProcessingJobName": "job-1"})
    failed = _written_manifest(s3)
    result = handler.is_complete(_poll("job-1"), now=1_700_002_700)
    reason = (
        "job job-1 still inprogress after the deploy's 2700 s wait (its instance took long to provision): stopped, "
        "models start cold; a deploy that changes the cache key makes a new one"
    )
    sha256 = hashlib.sha256(failed["_bytes"]).hexdigest()
    assert result == {"IsComplete": True, "Data": {"Status": "failed", "Reason": reason, "ManifestSha256": sha256}}
    assert (failed["status"], failed["key"], failed["detail"]) == ("failed", KEY, reason)


def test_a_completed_job_with_its_manifest_is_ready(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    sagemaker, s3 = stubs
    _describe(sagemaker, "job-1", "Completed")
    ready = contract.Manifest(key=KEY, status="ready", files=40, bytes=56_000_000, digests={GRAPH: "b" * 64})
    _manifest(s3, ready)
    sha256 = hashlib.sha256(ready.to_json().encode()).hexdigest()
    assert handler.is_complete(_poll("job-1")) == {
        "IsComplete": True,
        "Data": {"Status": "ready", "Reason": "", "ManifestSha256": sha256},
    }


def test_a_failed_job_completes_the_deploy_with_a_failed_manifest_so_models_start_cold(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    sagemaker, s3 = stubs
    _describe(sagemaker, "job-1", "Failed", reason="ResourceLimitExceeded: ml.g5.xlarge for processing job usage")
    failed = _written_manifest(s3)
    result = handler.is_complete(_poll("job-1"))
    reason = "job job-1 failed: ResourceLimitExceeded: ml.g5.xlarge for processing job usage"
    sha256 = hashlib.sha256(failed["_bytes"]).hexdigest()
    assert result == {"IsComplete": True, "Data": {"Status": "failed", "Reason": reason, "ManifestSha256": sha256}}
    assert failed["status"] == "failed" and failed["detail"] == reason and failed["key"] == KEY


def test_a_completed_job_without_a_ready_manifest_counts_as_failed(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    sagemaker, s3 = stubs
    _describe(sagemaker, "job-1", "Completed")
    _manifest(s3, contract.Manifest(key=KEY, status="pending"))
    _written_manifest(s3)
    result = handler.is_complete(_poll("job-1"))
    assert {k: v for k, v in result["Data"].items() if k != "ManifestSha256"} == {
        "Status": "failed",
        "Reason": f"job job-1 completed without a ready manifest for key {KEY}",
    }


def test_a_job_name_prefix_too_long_for_processing_job_names_is_refused(handler: ModuleType) -> None:
    with pytest.raises(ValueError, match=r"^JobNamePrefix '.{33}' must be 1-32 characters$"):
        handler.on_event(_event(JobNamePrefix="x" * 33))


def test_the_key_follows_image_instance_type_and_environment_but_not_its_own_variables() -> None:
    def key(image: str = IMAGE, instance: str = "ml.g5.xlarge", environment: dict[str, str] = ENVIRONMENT) -> str:
        return contract.cache_key(image_uri=image, instance_type=instance, environment=environment)

    assert len(key()) == 16
    assert key(image=IMAGE + "x") != key()
    assert key(instance="ml.g6.xlarge") != key()
    assert key(environment={**ENVIRONMENT, "ENGINE_MAX_MODEL_LEN": "8192"}) != key()
    own = {
        contract.COMPILE_CACHE_KEY: key(),
        contract.COMPILE_CACHE_DIR: "/opt/ml/model",
        contract.COMPILE_CACHE_MANIFEST_SHA256: "c" * 64,
    }
    assert key(environment={**ENVIRONMENT, **own}) == key()


def test_a_tuning_budget_adds_the_jobs_tuning_step_and_makes_a_cache_of_its_own(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    """serving.compile_cache.lora_tuning_budget_s reaches the job as an argument; a cache made
    without tuning (no lora-configs/) is not reused for a model that wants it."""
    tuned_key = contract.cache_key(
        image_uri=IMAGE, instance_type="ml.g5.xlarge", environment=ENVIRONMENT, lora_tuning_budget_s=600
    )
    assert tuned_key != KEY
    # Tuning off keeps the key caches had before the step existed: those caches stay in use.
    before = json.dumps({"image": IMAGE, "instance": "ml.g5.xlarge", "env": ENVIRONMENT}, sort_keys=True)
    assert hashlib.sha256(before.encode()).hexdigest()[:16] == KEY
    sagemaker, s3 = stubs
    _running(sagemaker)
    manifest_key = f"compile-cache/{tuned_key}/manifest.json"
    s3.add_response("list_objects_v2", {"KeyCount": 0}, {"Bucket": BUCKET, "Prefix": manifest_key, "MaxKeys": 1})
    s3.add_response("put_object", {}, {"Bucket": BUCKET, "Key": manifest_key, "Body": ANY, "ContentType": ANY})
    s3.add_response("put_object", {}, {"Bucket": BUCKET, "Key": ANY, "Body": ANY, "ContentType": ANY})
    name = f"{PREFIX}-{tuned_key}-1700000000"
    sagemaker.add_response(
        "create_processing_job",
        {"ProcessingJobArn": f"arn:aws:sagemaker:ap-northeast-1:123456789012:processing-job/{name}"},
        {
            "ProcessingJobName": name,
            "RoleArn": ANY,
            "AppSpecification": {
                "ImageUri": IMAGE,
                "ContainerArguments": [
                    "make-compile-cache",
                    "--environment-file",
                    "/opt/ml/processing/input/environment/environment.json",
                    "--output-dir",
                    "/opt/ml/processing/output/cache",
                    "--lora-tuning-budget-s",
                    "600",
                ],
            },
            "ProcessingResources": ANY,
            "ProcessingInputs": ANY,
            "ProcessingOutputConfig": ANY,
            "StoppingCondition": ANY,
            "NetworkConfig": ANY,
        },
    )
    result = handler.on_event(_event(LoraTuningBudgetS="600"), now=1_700_000_000)
    assert result["Data"]["Key"] == tuned_key
    assert result["PhysicalResourceId"] == f"s3://{BUCKET}/compile-cache/{tuned_key}/"
