"""The client's configuration from the stacks' outputs (cdk-outputs.json or DescribeStacks), and every
one-line error of a bad config or a bad call (issue 48)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber

from mangaassist_client import (
    BedrockFoundationModel,
    BedrockImportedModels,
    ClientConfig,
    MangaAssistClient,
    MirrorConfig,
    NullSink,
    RetryPolicy,
    SageMakerEndpoint,
    config_from_outputs_file,
    config_from_stacks,
)
from tests.client.stubs import CALL, DOMAIN_ARN, client, rig

OUTPUTS = {
    "MangaAssist-prod-Serving": {"EndpointName": "mangaassist-vllm-prod", "PrimaryVariantName": "primary"},
    "MangaAssist-prod-Observability": {"MetricsNamespace": "MangaAssist/Inference", "AlarmTopicArn": "arn:..."},
    "MangaAssist-prod-BedrockImport": {
        "ImportedModelArnMangaassistMangaDomainV3": DOMAIN_ARN,
        "ImportedModelAdapterMangaassistMangaDomainV3": "manga_domain_v3",
        "ImportedModelArnMangaassistLlama3DomainV1": "arn:aws:bedrock:us-east-1:123456789012:imported-model/unnamed",
        "BedrockModelKeyArn": "arn:aws:kms:us-east-1:123456789012:key/k",
    },
}


def _file(tmp_path: Path, outputs: Any) -> Path:
    path = tmp_path / "cdk-outputs.json"
    path.write_text(json.dumps(outputs))
    return path


def test_the_config_comes_from_the_outputs_file(tmp_path: Path) -> None:
    config = config_from_outputs_file(
        _file(tmp_path, OUTPUTS),
        imported_models={"manga_domain_v3": "mangaassist-manga-domain-v3"},
        foundation_model="meta.llama3-1-8b-instruct-v1:0",
        region="ap-northeast-1",
        prefix_aware_id="storefront-jp",
        deadline_s=20,
    )
    assert config.primary == SageMakerEndpoint("mangaassist-vllm-prod", "ap-northeast-1", "storefront-jp")
    assert config.fallbacks == (
        BedrockImportedModels({"manga_domain_v3": DOMAIN_ARN}),
        BedrockFoundationModel("meta.llama3-1-8b-instruct-v1:0", "ap-northeast-1"),
    )
    assert config.fallbacks[0].region == "us-east-1"  # the imported model's own region, from its ARN
    assert (config.metrics_namespace, config.endpoint_dimension, config.deadline_s) == (
        "MangaAssist/Inference",
        "mangaassist-vllm-prod",
        20,
    )


@pytest.mark.parametrize(
    ("outputs", "kwargs", "message"),
    [
        (
            {k: v for k, v in OUTPUTS.items() if k != "MangaAssist-prod-Serving"},
            {},
            "no stack MangaAssist-prod-Serving "
            "(stacks: MangaAssist-prod-BedrockImport, MangaAssist-prod-Observability)",
        ),
        (
            {**OUTPUTS, "MangaAssist-prod-Observability": {"AlarmTopicArn": "arn:..."}},
            {},
            "stack MangaAssist-prod-Observability has no output MetricsNamespace (its outputs: AlarmTopicArn)",
        ),
        (
            OUTPUTS,
            {"imported_models": {"jp_style_v1": "mangaassist-jp-style-v1"}},
            "stack MangaAssist-prod-BedrockImport has no output ImportedModelArnMangaassistJpStyleV1 "
            "(its outputs: BedrockModelKeyArn, ImportedModelAdapterMangaassistMangaDomainV3, "
            "ImportedModelArnMangaassistLlama3DomainV1, ImportedModelArnMangaassistMangaDomainV3)",
        ),
        (OUTPUTS, {"stage": "dev"}, "no stack MangaAssist-dev-Serving (stacks: MangaAssist-prod-BedrockImport, "),
    ],
    ids=["no-serving-stack", "no-namespace", "no-imported-model", "other-stage"],
)
def test_a_missing_stack_or_output_is_one_line_naming_it(
    tmp_path: Path, outputs: Any, kwargs: dict[str, Any], message: str
) -> None:
    path = _file(tmp_path, outputs)
    with pytest.raises(ValueError) as raised:
        config_from_outputs_file(path, **kwargs)
    assert str(raised.value).startswith(f"{path}: {message}")
    assert "\n" not in str(raised.value)


# Issue 53, finding 3: config_from_outputs_file("cdk-outputs.json"), as the docs' examples call it, gave no
# fallback. The BedrockImport stack names the adapter each imported model answers for (bedrock.models[].adapter,
# output ImportedModelAdapter<Name>), and the documented path reads it.


def test_the_documented_path_gets_the_bedrock_fallback_the_outputs_name(tmp_path: Path) -> None:
    config = config_from_outputs_file(_file(tmp_path, OUTPUTS))
    assert config.fallbacks == (BedrockImportedModels({"manga_domain_v3": DOMAIN_ARN}),)  # not the unnamed one


def test_no_bedrock_stack_no_fallback_and_the_client_says_so_loudly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outputs = {k: v for k, v in OUTPUTS.items() if k != "MangaAssist-prod-BedrockImport"}
    config = config_from_outputs_file(_file(tmp_path, outputs))
    assert config.fallbacks == ()
    with caplog.at_level(logging.WARNING, logger="mangaassist_client"):
        MangaAssistClient(config, metrics=NullSink(), client_factory=lambda service, region: client(service))
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith(
        "mangaassist_client: no fallback: when sagemaker:mangaassist-vllm-prod cannot answer, calls raise "
        "BackendUnavailableError"
    )


def test_imported_models_given_or_empty_override_what_the_outputs_name(tmp_path: Path) -> None:
    path = _file(tmp_path, OUTPUTS)
    assert config_from_outputs_file(path, imported_models={}).fallbacks == ()
    named = config_from_outputs_file(path, imported_models={"general_support_v2": "mangaassist-llama3-domain-v1"})
    assert named.fallbacks == (
        BedrockImportedModels({"general_support_v2": "arn:aws:bedrock:us-east-1:123456789012:imported-model/unnamed"}),
    )


def test_an_adapter_output_without_its_arn_is_one_line(tmp_path: Path) -> None:
    bedrock = {"ImportedModelAdapterMangaassistX": "manga_domain_v3"}
    path = _file(tmp_path, {**OUTPUTS, "MangaAssist-prod-BedrockImport": bedrock})
    with pytest.raises(ValueError) as raised:
        config_from_outputs_file(path)
    assert str(raised.value) == (
        f"{path}: stack MangaAssist-prod-BedrockImport names adapter 'manga_domain_v3' in "
        "ImportedModelAdapterMangaassistX but has no output ImportedModelArnMangaassistX"
    )


def _describe(stub: Stubber, outputs: dict[str, dict[str, str]], missing: str | None = None) -> None:
    for name, values in outputs.items():
        stack = {
            "StackName": name,
            "CreationTime": "2026-11-20T00:00:00Z",
            "StackStatus": "UPDATE_COMPLETE",
            "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in values.items()],
        }
        stub.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": name})
    if missing:  # what CloudFormation answers for a stack that does not exist
        message = f"Stack with id {missing} does not exist"
        expected = {"StackName": missing}
        stub.add_client_error("describe_stacks", "ValidationError", message, 400, expected_params=expected)


def test_describe_stacks_reads_the_fallback_the_bedrock_stack_names_and_goes_on_without_that_stack() -> None:
    cloudformation = client("cloudformation")
    with Stubber(cloudformation) as stub:
        _describe(stub, OUTPUTS)
        assert config_from_stacks(cloudformation).fallbacks == (BedrockImportedModels({"manga_domain_v3": DOMAIN_ARN}),)
        _describe(stub, {k: v for k, v in OUTPUTS.items() if "Bedrock" not in k}, "MangaAssist-prod-BedrockImport")
        assert config_from_stacks(cloudformation).fallbacks == ()
        stub.assert_no_pending_responses()


def test_an_unreadable_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"cdk-outputs.json: cannot read \(No such file or directory\)"):
        config_from_outputs_file(tmp_path / "cdk-outputs.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match=r"bad.json: not JSON \(Expecting"):
        config_from_outputs_file(tmp_path / "bad.json")


def test_the_config_comes_from_describe_stacks() -> None:
    cloudformation = client("cloudformation")
    with Stubber(cloudformation) as stub:
        for name, values in OUTPUTS.items():
            stack = {
                "StackName": name,
                "CreationTime": "2026-11-20T00:00:00Z",
                "StackStatus": "UPDATE_COMPLETE",
                "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in values.items()],
            }
            stub.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": name})
        config = config_from_stacks(cloudformation, imported_models={"manga_domain_v3": "mangaassist-manga-domain-v3"})
        stub.assert_no_pending_responses()
    assert config.primary == SageMakerEndpoint("mangaassist-vllm-prod")
    assert config.fallbacks == (BedrockImportedModels({"manga_domain_v3": DOMAIN_ARN}),)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SageMakerEndpoint("bad_name"), "endpoint_name = 'bad_name': not a SageMaker endpoint name"),
        (
            lambda: SageMakerEndpoint("e", prefix_aware_id=" lead"),
            "prefix_aware_id = ' lead': must be 1 to 64 printable ASCII characters, the first not a space "
            "(SageMaker PrefixAwareId)",
        ),
        (
            lambda: BedrockImportedModels({"x": "arn:aws:bedrock:us-east-1:1:foundation-model/m"}),
            "model_arns['x'] = 'arn:aws:bedrock:us-east-1:1:foundation-model/m': not a Bedrock imported-model ARN",
        ),
        (
            lambda: BedrockImportedModels(
                {"a": DOMAIN_ARN, "b": "arn:aws:bedrock:us-west-2:123456789012:imported-model/x"}
            ),
            "model_arns: ARNs in us-east-1, us-west-2; one client region holds them all",
        ),
        (
            lambda: ClientConfig(SageMakerEndpoint("e"), deadline_s=0),
            "deadline_s = 0: must be above 0 and at most 3600",
        ),
        (
            lambda: ClientConfig(SageMakerEndpoint("e"), deadline_s=10, attempt_timeout_s=30),
            "attempt_timeout_s = 30: must be above 0 and at most deadline_s = 10",
        ),
        (
            lambda: ClientConfig(SageMakerEndpoint("e"), metrics_namespace="AWS/SageMaker"),
            "metrics_namespace = 'AWS/SageMaker': 1-255 characters, not AWS/...",
        ),
        (lambda: MirrorConfig(SageMakerEndpoint("e"), share=1.5), "mirror.share = 1.5: must be from 0 to 1"),
        (
            lambda: ClientConfig(
                SageMakerEndpoint("e"), mirror=MirrorConfig(BedrockFoundationModel("m"), share=0.1, mode="canary")
            ),
            "mirror.backend = 'm': a canary without the adapters answers only with allow_substitute = True; set it, "
            "or canary an imported model or an endpoint",
        ),
        (lambda: RetryPolicy(max_attempts=0), "retry.max_attempts = 0: must be from 1 to 10"),
    ],
)
def test_each_bad_config_is_one_line(make: Any, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        make()
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ({**CALL, "adapter": ""}, "adapter = '': must be a model or adapter name of 1 to 256 characters"),
        ({**CALL, "messages": []}, "messages: 0 given; allowed 1 to 512"),
        (
            {**CALL, "messages": [{"role": "tool", "content": "x"}]},
            "messages[0].role = 'tool': allowed system, user, assistant",
        ),
        ({**CALL, "messages": [{"role": "user", "content": ""}]}, "messages[0].content: must be a non-empty string"),
        (
            {**CALL, "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]},
            "messages[1].role = 'assistant': the last message must be user",
        ),
        ({**CALL, "max_tokens": 0}, "max_tokens = 0: must be an integer from 1 to 8192"),
        ({**CALL, "max_tokens": True}, "max_tokens = True: must be an integer from 1 to 8192"),
        ({**CALL, "temperature": 3}, "temperature = 3: must be from 0 to 2"),
        ({**CALL, "top_p": 0}, "top_p = 0: must be above 0 and at most 1"),
        ({**CALL, "prefix_aware_id": "x" * 65}, f"prefix_aware_id = {'x' * 65!r}: must be 1 to 64 printable"),
        (
            {**CALL, "messages": [{"role": "user", "content": "x" * 7_000_000}]},
            "messages: the request body is 7,000,",
        ),
        ({**CALL, "stream": True}, "stream: unknown field; allowed adapter, messages, max_tokens, temperature, "),
        ({"adapter": "base", "messages": CALL["messages"]}, "max_tokens: required"),
    ],
    ids=lambda value: str(value)[:30] if isinstance(value, str) else None,
)
def test_each_bad_call_is_one_line_and_sends_nothing(call: dict[str, Any], message: str) -> None:
    with rig() as r:
        with pytest.raises(ValueError) as raised:
            r.client.chat(**call)
        with pytest.raises(ValueError):
            r.client.chat_stream(**call)
        r.pending()
    assert str(raised.value).startswith(message)
    assert r.lines.records == []  # nothing was sent, so nothing is counted
