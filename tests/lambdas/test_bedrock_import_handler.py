"""The Bedrock import handler against botocore's Stubber (requests validated against the real service models).

A Stubber with nothing queued raises on any call, so "no Bedrock call" is asserted by
leaving the Bedrock stubber empty.
"""

import json
import re
from types import ModuleType
from typing import Any

import pytest
from botocore.stub import ANY, Stubber

from tests.botocore_helpers import streaming_body

ROLE_ARN = "arn:aws:iam::123456789012:role/import-role"
KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"
JOB_ARN = "arn:aws:bedrock:us-east-1:123456789012:model-import-job/abcdefghijkl"
MODEL_ARN = "arn:aws:bedrock:us-east-1:123456789012:imported-model/mnopqrstuvwx"
STACK_ID = "arn:aws:cloudformation:us-east-1:123456789012:stack/MangaAssist-prod-BedrockImport/guid"
BUCKET = "artifact-bucket"
PREFIX = "llama3-domain-v1/"
GB = 10**9

LLAMA3_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16"}
LLAMA3_TOKENIZER_CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast"}
LLAMA3_FILES = {
    "config.json": 700,
    "generation_config.json": 180,
    "tokenizer.json": 9_000_000,
    "tokenizer_config.json": 50_000,
    "model-00001-of-00004.safetensors": 4_976_698_672,
    "model-00002-of-00004.safetensors": 4_999_802_720,
    "model-00003-of-00004.safetensors": 4_915_916_176,
    "model-00004-of-00004.safetensors": 1_168_138_808,
    "model.safetensors.index.json": 23_950,
}


HANDLER_MODULE = "cdk_constructs.bedrock.runtime.index"
STUBBED_CLIENTS = ("BEDROCK", "S3")
HANDLER_ENVIRONMENT = {
    "IMPORT_ROLE_ARN": ROLE_ARN,
    "MODEL_KMS_KEY_ARN": KEY_ARN,
    "MAX_MODEL_SIZE_BYTES": str(200 * GB),
    "AWS_DEFAULT_REGION": "us-east-1",
}


def _event(request_type: str, physical_id: str | None = None, **props: str) -> dict[str, Any]:
    properties = {"ModelName": "mangaassist-llama3-domain-v1", "Bucket": BUCKET, "Prefix": PREFIX, "Revision": "1"}
    properties.update(props)
    event: dict[str, Any] = {
        "RequestType": request_type,
        "StackId": STACK_ID,
        "LogicalResourceId": "ImportMangaassistLlama3DomainV1D9FBEC09",
        "RequestId": "req-1",
        "ResourceType": "Custom::BedrockModelImport",
        "ResourceProperties": {"ServiceToken": "arn:aws:lambda:...", **properties},
    }
    if physical_id is not None:
        event["PhysicalResourceId"] = physical_id
    return event


def _stub_prefix(
    s3: Stubber,
    files: dict[str, int],
    config: dict[str, Any] | None = LLAMA3_CONFIG,
    tokenizer_config: dict[str, Any] | None = LLAMA3_TOKENIZER_CONFIG,
) -> None:
    contents = [{"Key": PREFIX + name, "Size": size} for name, size in files.items()]
    s3.add_response(
        "list_objects_v2", {"Contents": contents, "IsTruncated": False}, {"Bucket": BUCKET, "Prefix": PREFIX}
    )
    if config is not None:
        s3.add_response(
            "get_object",
            {"Body": streaming_body(json.dumps(config))},
            {"Bucket": BUCKET, "Key": PREFIX + "config.json"},
        )
    if tokenizer_config is not None:
        s3.add_response(
            "get_object",
            {"Body": streaming_body(json.dumps(tokenizer_config))},
            {"Bucket": BUCKET, "Key": PREFIX + "tokenizer_config.json"},
        )


def _job(status: str, **extra: str) -> dict[str, Any]:
    return {"jobArn": JOB_ARN, "jobName": "job", "importedModelName": "model", "status": status, **extra}


def _request(handler: ModuleType, event: dict[str, Any]) -> Any:
    return handler.ImportRequest.from_event(event)


# --- create / poll ---------------------------------------------------------------------------


def test_create_preflights_then_starts_one_job_with_deterministic_names(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    bedrock, s3 = stubs
    event = _event("Create")
    request = _request(handler, event)
    _stub_prefix(s3, LLAMA3_FILES)
    bedrock.add_client_error(
        "get_model_import_job", "ResourceNotFoundException", expected_params={"jobIdentifier": request.job_name}
    )
    bedrock.add_response(
        "create_model_import_job",
        {"jobArn": JOB_ARN},
        {
            "jobName": request.job_name,
            "importedModelName": request.imported_model_name,
            "roleArn": ROLE_ARN,
            "modelDataSource": {"s3DataSource": {"s3Uri": f"s3://{BUCKET}/{PREFIX}"}},
            "importedModelKmsKeyId": KEY_ARN,
            "clientRequestToken": request.client_request_token,
        },
    )

    result = handler.on_event(event)

    assert result == {"PhysicalResourceId": request.imported_model_name, "Data": {"JobArn": JOB_ARN}}
    assert request.imported_model_name.startswith("mangaassist-llama3-domain-v1-")
    # Same request, same names and token: what makes a retry safe.
    again = _request(handler, _event("Create"))
    assert (again.imported_model_name, again.client_request_token) == (
        request.imported_model_name,
        request.client_request_token,
    )


def test_underscore_model_name_gives_a_job_name_bedrock_accepts(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    bedrock, s3 = stubs
    event = _event("Create", ModelName="mangaassist_llama3_domain")
    request = _request(handler, event)
    # botocore's param validation checks lengths, not patterns: check the service model's pattern here.
    shape = handler.BEDROCK.meta.service_model.operation_model("CreateModelImportJob").input_shape
    job_pattern = shape.members["jobName"].metadata["pattern"]
    model_pattern = shape.members["importedModelName"].metadata["pattern"]
    assert re.fullmatch(job_pattern, request.job_name), request.job_name
    assert re.fullmatch(model_pattern, request.imported_model_name)
    assert request.imported_model_name.startswith("mangaassist_llama3_domain-")  # the model keeps its name
    _stub_prefix(s3, LLAMA3_FILES)
    bedrock.add_client_error(
        "get_model_import_job", "ResourceNotFoundException", expected_params={"jobIdentifier": request.job_name}
    )
    bedrock.add_response(
        "create_model_import_job",
        {"jobArn": JOB_ARN},
        {**_any_create(), "jobName": request.job_name, "importedModelName": request.imported_model_name},
    )

    assert handler.on_event(event)["PhysicalResourceId"] == request.imported_model_name


def test_retried_create_adopts_the_existing_job_and_starts_no_second_one(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    bedrock, s3 = stubs
    event = _event("Create")
    request = _request(handler, event)
    _stub_prefix(s3, LLAMA3_FILES)
    bedrock.add_response("get_model_import_job", _job("InProgress"), {"jobIdentifier": request.job_name})
    # No create_model_import_job queued: calling it would raise.

    result = handler.on_event(event)

    assert result == {"PhysicalResourceId": request.imported_model_name, "Data": {"JobArn": JOB_ARN}}


def test_create_over_a_failed_job_asks_for_a_new_revision(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    bedrock, s3 = stubs
    request = _request(handler, _event("Create"))
    _stub_prefix(s3, LLAMA3_FILES)
    bedrock.add_response(
        "get_model_import_job", _job("Failed", failureMessage="bad shard"), {"jobIdentifier": request.job_name}
    )

    with pytest.raises(handler.ImportFailedError) as info:
        handler.on_event(_event("Create"))
    assert str(info.value) == (
        f"Bedrock import job {request.job_name} for s3://{BUCKET}/{PREFIX} already failed: bad shard; fix the files "
        "and change the model's revision (bedrock.models[].revision) to import again"
    )


def test_is_complete_polls_until_completed_and_returns_the_model_arn(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    bedrock, _ = stubs
    event = {**_event("Create", physical_id="m-0123456789"), "Data": {"JobArn": JOB_ARN}}
    bedrock.add_response("get_model_import_job", _job("InProgress"), {"jobIdentifier": JOB_ARN})
    bedrock.add_response(
        "get_model_import_job",
        _job("Completed", importedModelArn=MODEL_ARN, importedModelName="m-0123456789"),
        {"jobIdentifier": JOB_ARN},
    )

    assert handler.is_complete(event) == {"IsComplete": False}
    assert handler.is_complete(event) == {
        "IsComplete": True,
        "Data": {"ImportedModelArn": MODEL_ARN, "ImportedModelName": "m-0123456789"},
    }


def test_failed_job_fails_the_deploy_with_bedrocks_message(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    bedrock, _ = stubs
    event = {**_event("Create", physical_id="m-0123456789"), "Data": {"JobArn": JOB_ARN}}
    bedrock.add_response(
        "get_model_import_job",
        _job("Failed", failureMessage="The model architecture is not supported"),
        {"jobIdentifier": JOB_ARN},
    )

    with pytest.raises(handler.ImportFailedError, match=r"failed: The model architecture is not supported$"):
        handler.is_complete(event)


# --- pre-flight ------------------------------------------------------------------------------


def test_missing_files_are_caught_before_any_bedrock_call(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    _, s3 = stubs
    _stub_prefix(s3, {"config.json": 700, "tokenizer_config.json": 10}, config=None, tokenizer_config=None)

    with pytest.raises(handler.PreflightError) as info:
        handler.on_event(_event("Create"))
    assert str(info.value).startswith(
        f"s3://{BUCKET}/{PREFIX}: missing required file(s) tokenizer.json, *.safetensors; Custom Model Import needs"
    )


def test_unsupported_architecture_is_rejected_with_the_supported_list(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    _, s3 = stubs
    _stub_prefix(s3, LLAMA3_FILES, config={"architectures": ["GPT2LMHeadModel"]}, tokenizer_config=None)

    with pytest.raises(handler.PreflightError) as info:
        handler.on_event(_event("Create"))
    message = str(info.value)
    assert "architecture GPT2LMHeadModel is not one Bedrock Custom Model Import supports; supported: " in message
    assert "LlamaForCausalLM" in message
    assert "Qwen3ForCausalLM" in message


def test_awq_checkpoint_is_rejected(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    _, s3 = stubs
    config = {**LLAMA3_CONFIG, "quantization_config": {"quant_method": "awq", "bits": 4}}
    _stub_prefix(s3, LLAMA3_FILES, config=config, tokenizer_config=None)

    with pytest.raises(handler.PreflightError, match="quantization_config \\(quant_method awq\\)"):
        handler.on_event(_event("Create"))


def test_sentencepiece_tokenizer_needs_tokenizer_model(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    _, s3 = stubs
    config = {"architectures": ["MistralForCausalLM"]}
    _stub_prefix(s3, LLAMA3_FILES, config=config, tokenizer_config={"tokenizer_class": "LlamaTokenizerFast"})

    with pytest.raises(handler.PreflightError) as info:
        handler.on_event(_event("Create"))
    assert str(info.value) == (
        f"s3://{BUCKET}/{PREFIX}: tokenizer_class LlamaTokenizerFast is SentencePiece-based and needs "
        "tokenizer.model, which is missing"
    )


def test_total_size_at_the_limit_is_rejected(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    _, s3 = stubs
    files = {**LLAMA3_FILES, "model-00001-of-00004.safetensors": 200 * GB}
    _stub_prefix(s3, files)

    with pytest.raises(handler.PreflightError, match=r"GB of files under the prefix; the import limit .* below 200 GB"):
        handler.on_event(_event("Create"))


def test_multimodal_models_get_the_100_gb_limit(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    _, s3 = stubs
    files = {**LLAMA3_FILES, "model-00001-of-00004.safetensors": 100 * GB}
    _stub_prefix(s3, files, config={"architectures": ["MllamaForConditionalGeneration"]})

    with pytest.raises(handler.PreflightError, match=r"limit for MllamaForConditionalGeneration is below 100 GB"):
        handler.on_event(_event("Create"))


# --- update / delete -------------------------------------------------------------------------


def test_update_with_a_new_prefix_imports_a_new_version(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    bedrock, s3 = stubs
    old = _request(handler, _event("Create"))
    event = _event("Update", physical_id=old.imported_model_name, Prefix=PREFIX)
    event["ResourceProperties"]["Revision"] = "2"
    new = _request(handler, event)
    assert new.imported_model_name != old.imported_model_name
    _stub_prefix(s3, LLAMA3_FILES)
    bedrock.add_client_error("get_model_import_job", "ResourceNotFoundException")
    bedrock.add_response("create_model_import_job", {"jobArn": JOB_ARN}, {**_any_create(), "jobName": new.job_name})

    result = handler.on_event(event)

    assert result["PhysicalResourceId"] == new.imported_model_name


def _any_create() -> dict[str, Any]:
    return {
        "jobName": ANY,
        "importedModelName": ANY,
        "roleArn": ANY,
        "modelDataSource": ANY,
        "importedModelKmsKeyId": ANY,
        "clientRequestToken": ANY,
    }


def test_update_with_the_same_source_keeps_the_model(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    bedrock, _ = stubs
    current = _request(handler, _event("Create"))
    event = _event("Update", physical_id=current.imported_model_name, RetainOnDelete="true")
    bedrock.add_response("get_model_import_job", _job("Completed"), {"jobIdentifier": current.job_name})

    assert handler.on_event(event) == {"PhysicalResourceId": current.imported_model_name, "Data": {"JobArn": JOB_ARN}}


def test_update_with_the_same_source_and_no_job_keeps_the_model_and_starts_no_import(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    bedrock, _ = stubs  # S3 stubber empty: no pre-flight; no create_model_import_job queued either.
    current = _request(handler, _event("Create"))
    event = _event("Update", physical_id=current.imported_model_name, RetainOnDelete="true")
    bedrock.add_client_error(
        "get_model_import_job", "ResourceNotFoundException", expected_params={"jobIdentifier": current.job_name}
    )
    bedrock.add_response(
        "get_imported_model",
        {"modelArn": MODEL_ARN, "modelName": current.imported_model_name},
        {"modelIdentifier": current.imported_model_name},
    )

    result = handler.on_event(event)

    assert result == {
        "PhysicalResourceId": current.imported_model_name,
        "Data": {"ImportedModelArn": MODEL_ARN, "ImportedModelName": current.imported_model_name},
    }
    assert handler.is_complete({**event, **result}) == {"IsComplete": True}


def test_update_with_the_same_source_whose_model_is_gone_asks_for_a_new_revision(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    bedrock, _ = stubs
    current = _request(handler, _event("Create"))
    event = _event("Update", physical_id=current.imported_model_name)
    bedrock.add_client_error("get_model_import_job", "ResourceNotFoundException")
    bedrock.add_client_error("get_imported_model", "ResourceNotFoundException")

    with pytest.raises(handler.ImportFailedError) as info:
        handler.on_event(event)
    assert str(info.value) == (
        f"imported model {current.imported_model_name} no longer exists and its import job is gone; change the "
        "model's revision (bedrock.models[].revision) to import it again"
    )


def test_delete_removes_the_imported_model(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    bedrock, _ = stubs
    request = _request(handler, _event("Create"))
    name = request.imported_model_name
    bedrock.add_response("get_model_import_job", _job("Completed"), {"jobIdentifier": request.job_name})
    bedrock.add_response("delete_imported_model", {}, {"modelIdentifier": name})

    assert handler.on_event(_event("Delete", physical_id=name)) == {"PhysicalResourceId": name}
    assert handler.is_complete(_event("Delete", physical_id=name)) == {"IsComplete": True}


def test_delete_of_a_model_that_is_already_gone_succeeds(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    bedrock, _ = stubs
    request = _request(handler, _event("Create"))
    name = request.imported_model_name
    bedrock.add_client_error("get_model_import_job", "ResourceNotFoundException")
    bedrock.add_client_error("delete_imported_model", "ResourceNotFoundException")

    assert handler.on_event(_event("Delete", physical_id=name)) == {"PhysicalResourceId": name}


def test_delete_while_the_job_runs_waits_for_it_then_deletes_the_model_it_produced(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    # A create that timed out (or a sibling's failure) rolls back while Bedrock still imports:
    # on e706d98 Delete completed at once and the job later produced an untracked model.
    bedrock, _ = stubs
    request = _request(handler, _event("Create"))
    name = request.imported_model_name
    bedrock.add_response("get_model_import_job", _job("InProgress"), {"jobIdentifier": request.job_name})
    bedrock.add_response("get_model_import_job", _job("InProgress"), {"jobIdentifier": JOB_ARN})
    bedrock.add_response("get_model_import_job", _job("Completed", importedModelName=name), {"jobIdentifier": JOB_ARN})
    bedrock.add_response("delete_imported_model", {}, {"modelIdentifier": name})

    started = handler.on_event(_event("Delete", physical_id=name))
    assert started == {"PhysicalResourceId": name, "Data": {"PendingJobArn": JOB_ARN}}
    polled = {**_event("Delete", physical_id=name), **started}
    assert handler.is_complete(polled) == {"IsComplete": False}
    assert handler.is_complete(polled) == {"IsComplete": True}


def test_delete_while_the_job_runs_ends_when_the_job_fails(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    bedrock, _ = stubs
    request = _request(handler, _event("Create"))
    name = request.imported_model_name
    bedrock.add_response("get_model_import_job", _job("InProgress"), {"jobIdentifier": request.job_name})
    bedrock.add_response("get_model_import_job", _job("Failed", failureMessage="bad"), {"jobIdentifier": JOB_ARN})

    started = handler.on_event(_event("Delete", physical_id=name))
    assert handler.is_complete({**_event("Delete", physical_id=name), **started}) == {"IsComplete": True}


def test_delete_of_a_failed_create_looks_for_the_job_it_may_have_started(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    bedrock, _ = stubs
    physical_id = handler.CREATE_FAILED_ID
    request = _request(handler, _event("Create"))
    bedrock.add_response("get_model_import_job", _job("InProgress"), {"jobIdentifier": request.job_name})

    started = handler.on_event(_event("Delete", physical_id=physical_id))
    assert started == {"PhysicalResourceId": physical_id, "Data": {"PendingJobArn": JOB_ARN}}


def test_delete_with_retain_calls_nothing(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    name = _request(handler, _event("Create")).imported_model_name

    result = handler.on_event(_event("Delete", physical_id=name, RetainOnDelete="true"))

    assert result == {"PhysicalResourceId": name}


def test_delete_of_a_failed_create_without_a_job_deletes_nothing(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    bedrock, _ = stubs
    physical_id = handler.CREATE_FAILED_ID
    bedrock.add_client_error("get_model_import_job", "ResourceNotFoundException")
    bedrock.add_client_error("delete_imported_model", "ResourceNotFoundException")

    assert handler.on_event(_event("Delete", physical_id=physical_id)) == {"PhysicalResourceId": physical_id}


def test_missing_environment_is_named(handler: ModuleType) -> None:
    with pytest.raises(
        RuntimeError, match="environment variable\\(s\\) MODEL_KMS_KEY_ARN, MAX_MODEL_SIZE_BYTES not set"
    ):
        handler.Settings.from_env({"IMPORT_ROLE_ARN": ROLE_ARN})
