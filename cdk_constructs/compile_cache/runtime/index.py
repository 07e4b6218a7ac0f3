"""Custom resource ``Custom::CompileCache``: make a model's torch.compile cache on its instance type.

Why: every SageMaker instance would otherwise compile vLLM's graphs from nothing at start,
~100 s of a ~168 s start on an H100's compute (docs/performance.md, "Start-up"), and the cache
must be made on the GPU that serves (torch Inductor's key holds the GPU's name). This resource
runs the serving image once as a SageMaker processing job on the serving instance type with
the model's exact environment (``serving_app make-compile-cache``); the job uploads the cache
and its manifest to ``s3://<bucket>/compile-cache/<key>/``, which the model then reads as model
data (:mod:`serving_contract.compile_cache` has the layout and the key).

Driven by CDK's ``custom_resources.Provider`` with ``is_complete`` polling (a job takes minutes).

Resource properties (CloudFormation passes numbers as strings):
    ``ImageUri``, ``InstanceType``, ``Environment`` (the model's container environment, a map),
    ``Bucket``, ``RoleArn`` (the job's role), ``JobNamePrefix`` (<= 32 characters),
    ``VolumeSizeInGB``, ``MaxRuntimeInSeconds``, ``LoraTuningBudgetS`` (optional; > 0 adds the job's
    LoRA kernel tuning step, bounded by that many seconds, and is part of the key), ``WaitSeconds``
    (optional, default ``MaxRuntimeInSeconds`` + 900: how long the deploy waits for the job).

Returns ``PhysicalResourceId`` = ``s3://<bucket>/compile-cache/<key>/`` (a new key is a new
resource, so CloudFormation deletes the old one after an update) and ``Data``: ``CacheUri``
(the same), ``Key``, ``JobName`` (empty when the cache already existed), ``Status``
(``ready`` or ``failed``), ``Reason``, ``ManifestSha256`` (the sha256 of the manifest
the models will find: the stack pins it on each model, and the container loads no cache whose
manifest differs; serving_contract/compile_cache.py) and ``WaitUntil`` (epoch seconds).

What it guarantees:
* The prefix is never empty: a ``pending`` manifest is written before the job starts and a
  ``failed`` one if it fails, so the model's ModelDataSource always has something to download
  and the container starts cold, saying why (never a failed deploy for a missing cache).
* A cache already ``ready`` for the key is reused (a rollback, a re-created stack): no job.
* A job still running for the key (a retried deploy) is adopted, not started twice.
* The deploy never outwaits CloudFormation: past ``WaitSeconds`` (inside the provider's timeout, itself
  inside the resource's ``ServiceTimeout``) ``is_complete`` stops the job, writes a ``failed`` manifest saying
  why and answers with its digest, so the models pin a manifest that stays as it is and start cold, saying
  why (issue 49, finding 3). It used to answer ``pending`` and leave the job running: the models pinned the
  pending manifest, which the finished job then replaced, so its cache was refused until a deploy changed the
  key, and the job ran on for nothing (issue 53, finding 14).
* Nothing is left running: each create or update stops in-progress jobs of this resource's
  prefix made for another key (what a rolled-back update left), a job past the deploy's wait is stopped, and
  delete stops the key's job.
  Each job also stops itself after ``MaxRuntimeInSeconds``.
The cache objects stay on delete: a rollback's model reads them again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import ClientError

# The same import in the Lambda and in the repo: the asset bundles the contract at this path
# (CompileCacheMaker, ``handler_code``).
from serving_contract import compile_cache as contract

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

SAGEMAKER = boto3.client("sagemaker")
S3 = boto3.client("s3")

RUNNING = ("InProgress", "Stopping")
REASON_CHARS = 500
DEFAULT_PROVISIONING_S = 900
"""``WaitSeconds`` when a resource (made before the property) sets none: the job's limit + this
(``app_config.compile_cache.JOB_PROVISIONING_S``)."""


@dataclass(frozen=True)
class JobRequest:
    """The resource properties, parsed. Raises ``ValueError`` naming a bad property."""

    image_uri: str
    instance_type: str
    environment: dict[str, str]
    bucket: str
    role_arn: str
    job_name_prefix: str
    volume_size_gb: int
    max_runtime_s: int
    lora_tuning_budget_s: int = 0
    wait_s: int = 0

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> JobRequest:
        environment = props.get("Environment") or {}
        if not isinstance(environment, Mapping):
            raise ValueError(f"Environment must be a map of strings, got {type(environment).__name__}")
        prefix = str(props["JobNamePrefix"])
        if not 1 <= len(prefix) <= contract.JOB_NAME_PREFIX_MAX:
            raise ValueError(f"JobNamePrefix {prefix!r} must be 1-{contract.JOB_NAME_PREFIX_MAX} characters")
        return cls(
            image_uri=str(props["ImageUri"]),
            instance_type=str(props["InstanceType"]),
            environment={str(k): str(v) for k, v in environment.items()},
            bucket=str(props["Bucket"]),
            role_arn=str(props["RoleArn"]),
            job_name_prefix=prefix,
            volume_size_gb=int(props["VolumeSizeInGB"]),
            max_runtime_s=int(props["MaxRuntimeInSeconds"]),
            lora_tuning_budget_s=int(props.get("LoraTuningBudgetS") or 0),
            wait_s=int(props.get("WaitSeconds") or int(props["MaxRuntimeInSeconds"]) + DEFAULT_PROVISIONING_S),
        )

    @property
    def key(self) -> str:
        return contract.cache_key(
            image_uri=self.image_uri,
            instance_type=self.instance_type,
            environment=self.environment,
            lora_tuning_budget_s=self.lora_tuning_budget_s,
        )

    @property
    def cache_uri(self) -> str:
        return f"s3://{self.bucket}/{contract.s3_prefix(self.key)}"


def read_manifest(bucket: str, key: str) -> tuple[contract.Manifest, str] | None:
    """The manifest of ``key``'s cache and the sha256 of its bytes, or None when there is none (or it
    cannot be parsed).

    Listed before it is read: the role may list only by prefix (``s3:prefix`` condition), and S3
    answers a GetObject of a missing key with 403, not 404, to a caller it does not let list the
    bucket (S3 API reference, GetObject), which would look like a permissions error.
    """
    name = contract.s3_prefix(key) + contract.MANIFEST_NAME
    listed = S3.list_objects_v2(Bucket=bucket, Prefix=name, MaxKeys=1)
    if not any(item["Key"] == name for item in listed.get("Contents", [])):
        return None
    body = S3.get_object(Bucket=bucket, Key=name)["Body"].read()
    try:
        return contract.Manifest.from_json(body.decode()), contract.manifest_sha256(body)
    except (contract.ManifestError, UnicodeDecodeError) as exc:
        LOG.warning("manifest of %s unreadable, making the cache again: %s", key, exc)
        return None


def write_manifest(bucket: str, manifest: contract.Manifest) -> str:
    """Write ``manifest`` for its key; the sha256 of the bytes written."""
    body = manifest.to_json().encode()
    S3.put_object(
        Bucket=bucket,
        Key=contract.s3_prefix(manifest.key) + contract.MANIFEST_NAME,
        Body=body,
        ContentType="application/json",
    )
    return contract.manifest_sha256(body)


def running_jobs(prefix: str) -> list[str]:
    """Names of this resource's jobs that are in progress (``<prefix>-...``)."""
    names: list[str] = []
    for page in SAGEMAKER.get_paginator("list_processing_jobs").paginate(
        NameContains=prefix, StatusEquals="InProgress"
    ):
        names += [
            job["ProcessingJobName"]
            for job in page["ProcessingJobSummaries"]
            if job["ProcessingJobName"].startswith(prefix + "-")
        ]
    return names


def stop_jobs(names: list[str]) -> None:
    for name in names:
        LOG.info("stopping processing job %s", name)
        try:
            SAGEMAKER.stop_processing_job(ProcessingJobName=name)
        except ClientError as exc:
            # Already finished between the listing and the stop: nothing is left running.
            if exc.response["Error"]["Code"] != "ValidationException":
                raise


def start_job(request: JobRequest, now: float) -> str:
    key = request.key
    name = f"{request.job_name_prefix}-{key}-{int(now)}"
    environment_key = f"{contract.JOB_INPUT_ROOT}/{key}/{contract.JOB_ENVIRONMENT_FILE}"
    S3.put_object(
        Bucket=request.bucket,
        Key=environment_key,
        Body=json.dumps(request.environment, sort_keys=True).encode(),
        ContentType="application/json",
    )
    SAGEMAKER.create_processing_job(
        ProcessingJobName=name,
        RoleArn=request.role_arn,
        # ContainerArguments replace the image's CMD ("serve"); its ENTRYPOINT stays.
        AppSpecification={
            "ImageUri": request.image_uri,
            "ContainerArguments": contract.job_arguments(lora_tuning_budget_s=request.lora_tuning_budget_s),
        },
        ProcessingResources={
            "ClusterConfig": {
                "InstanceCount": 1,
                "InstanceType": request.instance_type,
                "VolumeSizeInGB": request.volume_size_gb,
            }
        },
        ProcessingInputs=[
            {
                "InputName": "environment",
                "S3Input": {
                    "S3Uri": f"s3://{request.bucket}/{environment_key}",
                    "LocalPath": contract.JOB_ENVIRONMENT_DIR,
                    "S3DataType": "S3Prefix",
                    "S3InputMode": "File",
                },
            }
        ],
        ProcessingOutputConfig={
            "Outputs": [
                {
                    "OutputName": "cache",
                    "S3Output": {
                        "S3Uri": request.cache_uri,
                        "LocalPath": contract.JOB_OUTPUT_DIR,
                        "S3UploadMode": "EndOfJob",
                    },
                }
            ]
        },
        StoppingCondition={"MaxRuntimeInSeconds": request.max_runtime_s},
        # The engine needs no network: the weights are in the image (HF_HUB_OFFLINE=1).
        NetworkConfig={"EnableNetworkIsolation": True},
    )
    LOG.info("started processing job %s for key %s on %s", name, key, request.instance_type)
    return name


def on_event(event: Mapping[str, Any], _context: Any = None, *, now: float | None = None) -> dict[str, Any]:
    """Create/Update: reuse, adopt or start the key's job. Delete: stop the key's running job."""
    props = event["ResourceProperties"]
    request = JobRequest.from_properties(props)
    key = request.key
    if event["RequestType"] == "Delete":
        stop_jobs([name for name in running_jobs(request.job_name_prefix) if f"-{key}-" in name])
        return {"PhysicalResourceId": event.get("PhysicalResourceId", request.cache_uri)}
    started = time.time() if now is None else now
    running = running_jobs(request.job_name_prefix)
    stop_jobs([name for name in running if f"-{key}-" not in name])
    data = {"CacheUri": request.cache_uri, "Key": key, "JobName": "", "Status": contract.STATUS_READY, "Reason": ""}
    found = read_manifest(request.bucket, key)
    if found is not None and found[0].status == contract.STATUS_READY and found[0].key == key:
        LOG.info("cache %s is ready: reused, no job", request.cache_uri)
        data |= {"Reason": "reused", "ManifestSha256": found[1]}
        return {"PhysicalResourceId": request.cache_uri, "Data": data}
    own = [name for name in running if f"-{key}-" in name]
    if own and found is not None:
        LOG.info("adopting running job %s", own[0])
        data |= {"JobName": own[0], "ManifestSha256": found[1]}
    else:
        pending = contract.Manifest(key=key, status=contract.STATUS_PENDING, detail="job starting")
        data["ManifestSha256"] = write_manifest(request.bucket, pending)
        data["JobName"] = own[0] if own else start_job(request, started)
    data["WaitUntil"] = str(int(started) + request.wait_s)
    return {"PhysicalResourceId": request.cache_uri, "Data": data}


def is_complete(event: Mapping[str, Any], _context: Any = None, *, now: float | None = None) -> dict[str, Any]:
    """Done when the job ended: ``ready`` if it made the cache, ``failed`` (with a manifest
    saying why, so models start cold) otherwise; once ``WaitUntil`` passes with the job still running, the
    job is stopped and the answer is ``failed`` too. Never fails the deploy for a failed or slow job."""
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    data = event.get("Data") or {}
    name = data.get("JobName", "")
    if not name:
        return {"IsComplete": True}
    job = SAGEMAKER.describe_processing_job(ProcessingJobName=name)
    status = job["ProcessingJobStatus"]
    request = JobRequest.from_properties(event["ResourceProperties"])
    key = request.key
    if status in RUNNING:
        current = time.time() if now is None else now
        if current < int(data.get("WaitUntil") or current + 1):
            return {"IsComplete": False}
        # The models pin the manifest this answer names: a job left running would replace it with its own.
        stop_jobs([name])
        reason = (
            f"job {name} still {status.lower()} after the deploy's {request.wait_s} s wait (its instance took long to "
            "provision): stopped, models start cold; a deploy that changes the cache key makes a new one"
        )
    elif status == "Completed":
        found = read_manifest(request.bucket, key)
        if found is not None and found[0].status == contract.STATUS_READY and found[0].key == key:
            manifest, sha256 = found
            LOG.info(
                "job %s made the cache: %d files, %d bytes, %d digests; lora tuning: %s",
                name,
                manifest.files,
                manifest.bytes,
                len(manifest.digests),
                manifest.lora_tuning or "not run",
            )
            return {
                "IsComplete": True,
                "Data": {"Status": contract.STATUS_READY, "Reason": "", "ManifestSha256": sha256},
            }
        reason = f"job {name} completed without a ready manifest for key {key}"
    else:
        reason = (
            f"job {name} {status.lower()}: {job.get('FailureReason') or job.get('ExitMessage') or 'no reason given'}"
        )
    reason = reason[:REASON_CHARS]
    LOG.warning("%s; models of key %s start cold", reason, key)
    sha256 = write_manifest(request.bucket, contract.Manifest(key=key, status=contract.STATUS_FAILED, detail=reason))
    return {"IsComplete": True, "Data": {"Status": contract.STATUS_FAILED, "Reason": reason, "ManifestSha256": sha256}}
