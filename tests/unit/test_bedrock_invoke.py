"""ops/bedrock_invoke.py against Stubbers for bedrock-runtime and CloudFormation."""

import io
import json
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from ops import bedrock_invoke

MODEL_ARN = "arn:aws:bedrock:us-east-1:123456789012:imported-model/abcdefghijkl"
REPLY = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Try Chainsaw Man vol. 1."}}]}


def _client(service: str) -> Any:
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


def _body(data: dict[str, Any]) -> StreamingBody:
    raw = json.dumps(data).encode()
    return StreamingBody(io.BytesIO(raw), len(raw))


def test_invokes_the_stack_output_model_with_a_chat_completions_body(capsys: pytest.CaptureFixture[str]) -> None:
    runtime, cloudformation = _client("bedrock-runtime"), _client("cloudformation")
    expected_body = {
        "messages": [
            {"role": "system", "content": "You are a manga shopping assistant."},
            {"role": "user", "content": "Recommend action manga under $20."},
        ],
        "max_tokens": 200,
        "temperature": 0.2,
    }
    with Stubber(runtime) as rt, Stubber(cloudformation) as cfn:
        cfn.add_response(
            "describe_stacks",
            {
                "Stacks": [
                    {
                        "StackName": "S",
                        "CreationTime": "2026-11-20T00:00:00Z",
                        "StackStatus": "CREATE_COMPLETE",
                        "Outputs": [
                            {"OutputKey": "ImportedModelArnMangaassistLlama3DomainV1", "OutputValue": MODEL_ARN}
                        ],
                    }
                ]
            },
            {"StackName": "S"},
        )
        rt.add_response(
            "invoke_model",
            {"body": _body(REPLY), "contentType": "application/json"},
            {
                "modelId": MODEL_ARN,
                "body": json.dumps(expected_body),
                "contentType": "application/json",
                "accept": "application/json",
            },
        )
        code = bedrock_invoke.main(
            [
                "--stack",
                "S",
                "--model",
                "mangaassist-llama3-domain-v1",
                "--system",
                "You are a manga shopping assistant.",
                "--max-tokens",
                "200",
                "Recommend action manga under $20.",
            ],
            runtime=runtime,
            cloudformation=cloudformation,
        )
    assert code == 0
    assert capsys.readouterr().out == "Try Chainsaw Man vol. 1.\n"


def test_retries_a_cold_model_then_answers() -> None:
    runtime = _client("bedrock-runtime")
    with Stubber(runtime) as rt:
        rt.add_client_error("invoke_model", "ModelNotReadyException", http_status_code=429)
        rt.add_response("invoke_model", {"body": _body(REPLY), "contentType": "application/json"})
        response = bedrock_invoke.invoke(runtime, MODEL_ARN, {"messages": []}, attempts=2, wait_s=0)
    assert bedrock_invoke.reply_text(response) == "Try Chainsaw Man vol. 1."


def test_missing_output_names_the_known_ones() -> None:
    cloudformation = _client("cloudformation")
    with Stubber(cloudformation) as cfn:
        cfn.add_response(
            "describe_stacks",
            {
                "Stacks": [
                    {
                        "StackName": "S",
                        "CreationTime": "2026-11-20T00:00:00Z",
                        "StackStatus": "CREATE_COMPLETE",
                        "Outputs": [{"OutputKey": "ImportedModelArnOther", "OutputValue": MODEL_ARN}],
                    }
                ]
            },
        )
        with pytest.raises(
            SystemExit,
            match="stack S has no output ImportedModelArnDomain \\(imported model outputs: ImportedModelArnOther\\)",
        ):
            bedrock_invoke.model_arn_from_stack(cloudformation, "S", "domain")
