"""Custom resource ``Custom::BedrockModelImport``: one Bedrock Custom Model Import per resource.

Driven by CDK's ``custom_resources.Provider``: ``on_event`` runs once per CloudFormation
request, ``is_complete`` is polled by the provider's waiter until it returns
``IsComplete: true`` (or the provider's total timeout ends the deploy).

Lifecycle:
    Create: pre-flight the S3 prefix (files, architecture, size), then CreateModelImportJob.
        The physical id is the imported model's name, ``<name>-<10 hex>``, derived from the
        stack, the logical id and the source (bucket, prefix, revision).
    Update: a changed source gives a new name, so a new import and a new physical id;
        CloudFormation then deletes the old physical id. An unchanged source keeps the model.
    Delete: DeleteImportedModel, unless the resource says ``RetainOnDelete``; a job still
        running is waited for (``is_complete``) and what it produces deleted (Bedrock cannot
        stop an import job).

Retries are idempotent: the job's name equals the model's name and ``clientRequestToken`` is
derived from the request, so a retried create finds its job (GetModelImportJob) and never
starts a second one.

Resource properties (strings, as CloudFormation passes them): ``ModelName``, ``Bucket``,
``Prefix``, ``Revision``, ``RetainOnDelete`` ("true"/"false").
Environment: ``IMPORT_ROLE_ARN``, ``MODEL_KMS_KEY_ARN``, ``MAX_MODEL_SIZE_BYTES``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import ClientError

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

# Architectures Custom Model Import accepts, as config.json "architectures[0]" names them.
# Sources: seed 003 §12 "Bedrock Import Constraints" and the Bedrock user guide, "Import a
# customized model into Amazon Bedrock" (supported architectures: Llama 2/3/3.1/3.2/3.3 and
# Mllama, Mistral, Mixtral, Flan-T5, GPTBigCode, Qwen2/2.5/2-VL/2.5-VL/3, GPT-OSS).
TEXT_ARCHITECTURES = frozenset(
    {
        "LlamaForCausalLM",
        "MistralForCausalLM",
        "MixtralForCausalLM",
        "T5ForConditionalGeneration",
        "GPTBigCodeForCausalLM",
        "Qwen2ForCausalLM",
        "Qwen3ForCausalLM",
        "GptOssForCausalLM",
    }
)
MULTIMODAL_ARCHITECTURES = frozenset(
    {"MllamaForConditionalGeneration", "Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration"}
)
SUPPORTED_ARCHITECTURES = TEXT_ARCHITECTURES | MULTIMODAL_ARCHITECTURES

# Bedrock's size limit for multimodal models (seed 003 §12: < 100 GB; text models < 200 GB,
# which arrives through MAX_MODEL_SIZE_BYTES from config).
MULTIMODAL_SIZE_LIMIT_BYTES = 100 * 10**9

REQUIRED_FILES = ("config.json", "tokenizer_config.json", "tokenizer.json")

# Tokenizer classes whose vocabulary is a SentencePiece model: Bedrock needs that file too
# (tokenizer.model; T5's is named spiece.model). BPE tokenizers (Llama 3's
# PreTrainedTokenizerFast, Qwen2Tokenizer, GPT-OSS) carry everything in tokenizer.json.
SENTENCEPIECE_FILES: Mapping[str, tuple[str, ...]] = {
    "LlamaTokenizer": ("tokenizer.model",),
    "LlamaTokenizerFast": ("tokenizer.model",),
    "CodeLlamaTokenizer": ("tokenizer.model",),
    "CodeLlamaTokenizerFast": ("tokenizer.model",),
    "GemmaTokenizer": ("tokenizer.model",),
    "GemmaTokenizerFast": ("tokenizer.model",),
    "T5Tokenizer": ("tokenizer.model", "spiece.model"),
    "T5TokenizerFast": ("tokenizer.model", "spiece.model"),
}

_MODEL_NAME = re.compile(r"^[0-9a-z]([_-]?[0-9a-z])*-[0-9a-f]{10}$")


class PreflightError(RuntimeError):
    """The S3 prefix is not importable; raised before any Bedrock call."""


class ImportFailedError(RuntimeError):
    """Bedrock reported the import job as Failed."""


@dataclass(frozen=True)
class Settings:
    """The function's environment, parsed once at import."""

    import_role_arn: str
    model_kms_key_arn: str
    max_model_size_bytes: int

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        missing = [k for k in ("IMPORT_ROLE_ARN", "MODEL_KMS_KEY_ARN", "MAX_MODEL_SIZE_BYTES") if not env.get(k)]
        if missing:
            raise RuntimeError(f"environment variable(s) {', '.join(missing)} not set")
        return cls(
            import_role_arn=env["IMPORT_ROLE_ARN"],
            model_kms_key_arn=env["MODEL_KMS_KEY_ARN"],
            max_model_size_bytes=int(env["MAX_MODEL_SIZE_BYTES"]),
        )


@dataclass(frozen=True)
class ImportRequest:
    """One import, from a CloudFormation request's resource properties."""

    stack_id: str
    logical_id: str
    model_name: str
    bucket: str
    prefix: str
    revision: str
    retain_on_delete: bool

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> ImportRequest:
        props = event["ResourceProperties"]
        return cls(
            stack_id=event["StackId"],
            logical_id=event["LogicalResourceId"],
            model_name=props["ModelName"],
            bucket=props["Bucket"],
            prefix=props["Prefix"],
            revision=str(props.get("Revision", "1")),
            retain_on_delete=str(props.get("RetainOnDelete", "false")).lower() == "true",
        )

    def _digest(self, *parts: str) -> str:
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()

    @property
    def imported_model_name(self) -> str:
        """``<name>-<10 hex>``: new for every source, stable for retries of the same request."""
        source = self._digest(self.stack_id, self.logical_id, self.bucket, self.prefix, self.revision)
        return f"{self.model_name}-{source[:10]}"

    @property
    def job_name(self) -> str:
        """The model name with ``_`` -> ``-``: CreateModelImportJob's jobName pattern is
        ``[a-zA-Z0-9](-*[a-zA-Z0-9\\+\\-\\.])*`` (no underscore; botocore bedrock 2023-04-20
        service model), while importedModelName allows ``_``. Same length (<= 63), still
        unique per source (the 10-hex suffix), unchanged for names without ``_``."""
        return self.imported_model_name.replace("_", "-")

    @property
    def client_request_token(self) -> str:
        """Deterministic per request: a retried CreateModelImportJob is deduplicated by Bedrock."""
        return self._digest(self.stack_id, self.logical_id, self.imported_model_name, "create")[:64]

    @property
    def s3_uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


SETTINGS = Settings.from_env(os.environ)
BEDROCK = boto3.client("bedrock")
S3 = boto3.client("s3")


def _error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _list_files(bucket: str, prefix: str) -> dict[str, int]:
    """Every object under ``prefix``: key relative to the prefix -> size in bytes."""
    files: dict[str, int] = {}
    for page in S3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            files[obj["Key"][len(prefix) :]] = int(obj["Size"])
    return files


def _read_json(bucket: str, key: str) -> dict[str, Any]:
    body = S3.get_object(Bucket=bucket, Key=key)["Body"].read()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise PreflightError(f"s3://{bucket}/{key} is not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise PreflightError(f"s3://{bucket}/{key} must hold a JSON object")
    return data


def preflight(request: ImportRequest, max_size_bytes: int) -> str:
    """Check that ``request``'s prefix is importable; return the model's architecture.

    Raises:
        PreflightError: a required file is missing, the architecture is not one Bedrock
            imports, the checkpoint is quantized, or the files exceed the size limit.
    """
    where = request.s3_uri
    files = _list_files(request.bucket, request.prefix)
    top_level = {name for name in files if "/" not in name}
    missing = [name for name in REQUIRED_FILES if name not in top_level]
    if not any(name.endswith(".safetensors") for name in top_level):
        missing.append("*.safetensors")
    if missing:
        raise PreflightError(
            f"{where}: missing required file(s) {', '.join(missing)}; Custom Model Import needs config.json, "
            "tokenizer_config.json, tokenizer.json and *.safetensors (plus tokenizer.model for SentencePiece "
            "tokenizers); see docs/bedrock.md"
        )

    config = _read_json(request.bucket, request.prefix + "config.json")
    architectures = config.get("architectures")
    if not isinstance(architectures, list) or not architectures:
        raise PreflightError(f"{where}config.json has no 'architectures' list; cannot tell the model family")
    architecture = str(architectures[0])
    if architecture not in SUPPORTED_ARCHITECTURES:
        raise PreflightError(
            f"{where}config.json: architecture {architecture} is not one Bedrock Custom Model Import supports; "
            f"supported: {', '.join(sorted(SUPPORTED_ARCHITECTURES))}"
        )
    quantization = config.get("quantization_config")
    if isinstance(quantization, dict):
        method = quantization.get("quant_method", "unknown")
        raise PreflightError(
            f"{where}config.json has quantization_config (quant_method {method}); Bedrock imports full-precision "
            "weights: merge the adapter into the bf16 base and save that (docs/bedrock.md)"
        )

    tokenizer_class = str(_read_json(request.bucket, request.prefix + "tokenizer_config.json").get("tokenizer_class"))
    accepted = SENTENCEPIECE_FILES.get(tokenizer_class)
    if accepted and not top_level.intersection(accepted):
        raise PreflightError(
            f"{where}: tokenizer_class {tokenizer_class} is SentencePiece-based and needs {' or '.join(accepted)}, "
            "which is missing"
        )

    limit = max_size_bytes
    if architecture in MULTIMODAL_ARCHITECTURES:
        limit = min(limit, MULTIMODAL_SIZE_LIMIT_BYTES)
    total = sum(files.values())
    if total >= limit:
        raise PreflightError(
            f"{where}: {total / 10**9:.1f} GB of files under the prefix; the import limit for {architecture} "
            f"is below {limit / 10**9:.0f} GB"
        )
    return architecture


def _existing_job(job_name: str) -> dict[str, Any] | None:
    try:
        return dict(BEDROCK.get_model_import_job(jobIdentifier=job_name))
    except ClientError as error:
        if _error_code(error) == "ResourceNotFoundException":
            return None
        raise


def _start_import(request: ImportRequest) -> dict[str, Any]:
    architecture = preflight(request, SETTINGS.max_model_size_bytes)
    name = request.imported_model_name
    existing = _existing_job(request.job_name)
    if existing is not None and existing.get("status") == "Failed":
        # Job names are per source; a failed one cannot be reused for the same source.
        raise ImportFailedError(
            f"Bedrock import job {request.job_name} for {request.s3_uri} already failed: "
            f"{existing.get('failureMessage', 'no failureMessage')}; fix the files and change the model's "
            "revision (bedrock.models[].revision) to import again"
        )
    if existing is not None:
        # A retry of a create that already started its job: adopt it, start nothing.
        LOG.info("import job %s already exists (%s); not starting another", request.job_name, existing["status"])
        return {"PhysicalResourceId": name, "Data": {"JobArn": existing["jobArn"]}}
    response = BEDROCK.create_model_import_job(
        jobName=request.job_name,
        importedModelName=name,
        roleArn=SETTINGS.import_role_arn,
        modelDataSource={"s3DataSource": {"s3Uri": request.s3_uri}},
        importedModelKmsKeyId=SETTINGS.model_kms_key_arn,
        clientRequestToken=request.client_request_token,
    )
    LOG.info("started import job %s for %s (%s from %s)", response["jobArn"], name, architecture, request.s3_uri)
    return {"PhysicalResourceId": name, "Data": {"JobArn": response["jobArn"]}}


CREATE_FAILED_ID = "AWSCDK::CustomResourceProviderFramework::CREATE_FAILED"
"""The physical id CDK's provider framework reports when ``on_event`` of a Create raised."""


def _delete(event: Mapping[str, Any]) -> dict[str, Any]:
    """Delete the imported model, or wait for its still-running job first.

    Bedrock has no call that stops a model import job (CreateModelImportJob, GetModelImportJob,
    ListModelImportJobs, DeleteImportedModel and no Stop*: botocore bedrock 2023-04-20). A job
    still InProgress when its resource is deleted (a create that timed out, a sibling that failed
    and rolled the stack back) would later produce a model nothing tracks, costing storage and
    import quota. So Delete hands the job to ``is_complete``, which waits for it and deletes
    what it produced.
    """
    physical_id = str(event["PhysicalResourceId"])
    request = ImportRequest.from_event(event)
    if request.retain_on_delete:
        LOG.info("RetainOnDelete: keeping imported model %s", physical_id)
        return {"PhysicalResourceId": physical_id}
    name = physical_id if _MODEL_NAME.match(physical_id) else None
    if name is None and physical_id == CREATE_FAILED_ID:
        # The create may have failed after Bedrock accepted its job (e.g. a lost response); the
        # names are derived from the request, so look for that job too.
        name = request.imported_model_name
    if name is None:
        LOG.info("physical id %s names no imported model; nothing to delete", physical_id)
        return {"PhysicalResourceId": physical_id}
    job = _existing_job(name.replace("_", "-"))
    if job is not None and job.get("status") == "InProgress":
        LOG.info("import job %s still running: waiting for it, then deleting %s", job["jobArn"], name)
        return {"PhysicalResourceId": physical_id, "Data": {"PendingJobArn": job["jobArn"]}}
    _delete_model(name)
    return {"PhysicalResourceId": physical_id}


def _delete_model(name: str) -> None:
    try:
        BEDROCK.delete_imported_model(modelIdentifier=name)
        LOG.info("deleted imported model %s", name)
    except ClientError as error:
        if _error_code(error) != "ResourceNotFoundException":
            raise
        LOG.info("imported model %s does not exist (already deleted or never imported)", name)


def _delete_complete(event: Mapping[str, Any]) -> dict[str, Any]:
    """Poll a job that was still running at Delete; once it ends, delete what it produced."""
    job_arn = event.get("Data", {}).get("PendingJobArn")
    if not job_arn:
        return {"IsComplete": True}
    job = BEDROCK.get_model_import_job(jobIdentifier=job_arn)
    status = job["status"]
    if status == "InProgress":
        LOG.info("waiting for import job %s to end before deleting its model", job_arn)
        return {"IsComplete": False}
    if status == "Completed":
        _delete_model(job["importedModelName"])
    else:
        LOG.info("import job %s ended %s: it produced no model", job_arn, status)
    return {"IsComplete": True}


def on_event(event: Mapping[str, Any], _context: object = None) -> dict[str, Any]:
    """Handle one CloudFormation request; returns the physical id and the job's ARN."""
    request_type = event["RequestType"]
    LOG.info("%s %s", request_type, event.get("LogicalResourceId"))
    if request_type == "Delete":
        return _delete(event)
    request = ImportRequest.from_event(event)
    if request_type == "Update" and event.get("PhysicalResourceId") == request.imported_model_name:
        # Same source (e.g. only RetainOnDelete changed): keep the imported model.
        existing = _existing_job(request.job_name)
        if existing is not None:
            return {"PhysicalResourceId": request.imported_model_name, "Data": {"JobArn": existing["jobArn"]}}
        # No job record (e.g. Bedrock no longer lists it): the model is still the current
        # resource; never start a second import under the same name. is_complete sees no
        # JobArn and completes at once; the Provider framework merges this Data.
        return _keep_imported_model(request.imported_model_name)
    return _start_import(request)


def _keep_imported_model(name: str) -> dict[str, Any]:
    """Physical id unchanged, with the model's ARN and name as the resource's attributes."""
    try:
        model = BEDROCK.get_imported_model(modelIdentifier=name)
    except ClientError as error:
        if _error_code(error) != "ResourceNotFoundException":
            raise
        raise ImportFailedError(
            f"imported model {name} no longer exists and its import job is gone; change the model's "
            "revision (bedrock.models[].revision) to import it again"
        ) from error
    return {
        "PhysicalResourceId": name,
        "Data": {"ImportedModelArn": model["modelArn"], "ImportedModelName": model["modelName"]},
    }


def is_complete(event: Mapping[str, Any], _context: object = None) -> dict[str, Any]:
    """Poll the import job. Completed -> the model's ARN; Failed -> raise with Bedrock's message."""
    if event["RequestType"] == "Delete":
        return _delete_complete(event)
    if "JobArn" not in event.get("Data", {}):
        # on_event kept an existing model and already returned its attributes.
        return {"IsComplete": True}
    job_arn = event["Data"]["JobArn"]
    job = BEDROCK.get_model_import_job(jobIdentifier=job_arn)
    status = job["status"]
    if status == "Completed":
        return {
            "IsComplete": True,
            "Data": {"ImportedModelArn": job["importedModelArn"], "ImportedModelName": job["importedModelName"]},
        }
    if status == "Failed":
        raise ImportFailedError(
            f"Bedrock import job {job.get('jobName', job_arn)} failed: {job.get('failureMessage', 'no failureMessage')}"
        )
    LOG.info("import job %s is %s", job_arn, status)
    return {"IsComplete": False}
