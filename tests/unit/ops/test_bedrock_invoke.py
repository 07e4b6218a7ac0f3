"""ops/bedrock_invoke.py against Stubbers for bedrock-runtime and CloudFormation."""

import io
import json
import time
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber

from ops import bedrock_invoke
from tests.botocore_helpers import streaming_body

MODEL_ARN = "arn:aws:bedrock:us-east-1:123456789012:imported-model/abcdefghijkl"
REPLY = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Try Chainsaw Man vol. 1."}}]}


def _client(service: str) -> Any:
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


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
            {"body": streaming_body(json.dumps(REPLY)), "contentType": "application/json"},
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


class _Raw(io.BytesIO):
    """An HTTP body as botocore reads one: ``stream()`` for errors, ``read()`` for a streamed reply."""

    def stream(self, **_: Any) -> Any:
        yield self.getvalue()


def _cold_then_ready(not_ready: int) -> tuple[Any, list[str]]:
    """A bedrock-runtime client with this script's retry config whose HTTP layer (botocore's
    ``before-send``) answers ModelNotReadyException ``not_ready`` times, then the reply: botocore's
    own retry handler decides what is retried."""
    runtime = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=bedrock_invoke.retry_config(3),
    )
    sent: list[str] = []

    def send(request: Any, **_: Any) -> AWSResponse:
        sent.append(request.url)
        if len(sent) <= not_ready:
            error = json.dumps({"message": "Model is not ready for inference. Wait and try your request again."})
            headers = {"x-amzn-ErrorType": "ModelNotReadyException", "Content-Type": "application/json"}
            return AWSResponse(request.url, 429, headers, _Raw(error.encode()))
        return AWSResponse(request.url, 200, {"Content-Type": "application/json"}, _Raw(json.dumps(REPLY).encode()))

    runtime.meta.events.register("before-send.bedrock-runtime.InvokeModel", send)
    return runtime, sent


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """botocore's backoff sleeps (endpoint.py: ``time.sleep``), recorded instead of slept."""
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)
    return waits


def test_botocore_retries_a_cold_model_then_answers(
    no_backoff: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    runtime, sent = _cold_then_ready(not_ready=2)
    assert bedrock_invoke.main(["--model-arn", MODEL_ARN, "Hello"], runtime=runtime) == 0
    assert capsys.readouterr().out == "Try Chainsaw Man vol. 1.\n"
    assert len(sent) == 3
    assert len(no_backoff) == 2 and all(0 <= wait <= 0.1 for wait in no_backoff)  # 0.05 s x 2^i, jittered


def test_a_model_still_cold_after_every_attempt_is_one_line(
    no_backoff: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    """The client's 3 attempts, and no loop of ours on top (one InvokeModel call, 3 sends)."""
    runtime, sent = _cold_then_ready(not_ready=10)
    assert bedrock_invoke.main(["--model-arn", MODEL_ARN, "Hello"], runtime=runtime) == 1
    assert len(sent) == 3
    assert capsys.readouterr().err == (
        f"error: InvokeModel on {MODEL_ARN} failed: An error occurred (ModelNotReadyException) when calling the "
        "InvokeModel operation (reached max retries: 2): Model is not ready for inference. Wait and try your "
        "request again.\n"
    )


def test_the_client_is_built_with_standard_retries_and_attempts_in_all(monkeypatch: pytest.MonkeyPatch) -> None:
    made: dict[str, Any] = {}
    runtime = _client("bedrock-runtime")

    def client(service: str, **kwargs: Any) -> Any:
        made.update(kwargs, service=service)
        return runtime

    monkeypatch.setattr(boto3, "client", client)
    with Stubber(runtime) as rt:
        rt.add_response("invoke_model", {"body": streaming_body(json.dumps(REPLY)), "contentType": "application/json"})
        assert bedrock_invoke.main(["--model-arn", MODEL_ARN, "--attempts", "7", "Hello"]) == 0
    assert made["service"] == "bedrock-runtime"
    assert made["config"].retries == {"mode": "standard", "total_max_attempts": 7}


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [("--attempts", "0", "0 must be >= 1"), ("--temperature", "nan", "'nan' is not a finite number")],
)
def test_bad_numbers_are_one_line(flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bedrock_invoke.main(["--model-arn", MODEL_ARN, flag, value, "Hello"], runtime=_client("bedrock-runtime"))
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"error: argument {flag}: {message}")


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
