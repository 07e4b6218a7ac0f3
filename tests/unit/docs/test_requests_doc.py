"""The copy-paste requests of docs/requests.md and docs/sessions.md run (issue 40 item 10, issue 48).

docs/requests.md's Python blocks use the client library (client/mangaassist_client). Each runs as written,
in a folder holding a ``cdk-outputs.json``, with real botocore clients whose HTTP layer (botocore's
``before-send``) answers as the services do on the wire: SageMaker Runtime's JSON answer with its headers,
its ``application/vnd.amazon.eventstream`` body of ``PayloadPart`` events for a stream, Bedrock's Converse
JSON. botocore serializes each request and parses each answer with its own service models, and each chat
body must pass the gateway's own request model (container/serving_app/sagemaker/protocol.py).

docs/sessions.md's block calls boto3 directly: it runs with ``boto3.client`` replaced by a recorder that
checks every call's parameters against botocore's model of the SageMaker Runtime API.
"""

from __future__ import annotations

import io
import json
import random
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.validate import validate_parameters

from serving_app.sagemaker.protocol import ChatCompletionBody
from tests.botocore_helpers import payload_part

DOCS = Path(__file__).resolve().parents[3] / "docs"
ENDPOINT = "mangaassist-vllm-prod"
VERSIONS = "base_model=llama-3-8b-instruct-awq/v4/abc;adapter=manga_domain_v3/v3/def"
OUTPUTS = {
    "MangaAssist-prod-Serving": {"EndpointName": ENDPOINT},
    "MangaAssist-prod-Observability": {"MetricsNamespace": "MangaAssist/Inference"},
    "MangaAssist-prod-BedrockImport": {
        "ImportedModelArnMangaassistMangaDomainV3": "arn:aws:bedrock:us-east-1:123456789012:imported-model/abc",
        "ImportedModelAdapterMangaassistMangaDomainV3": "manga_domain_v3",
    },
}


def python_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), flags=re.DOTALL)


class _Raw(io.BytesIO):
    """An HTTP body as botocore reads one: ``read()`` for a blob, ``stream()`` for JSON and event streams
    (in 7-byte reads, which cut event-stream messages)."""

    def stream(self, **_: Any) -> Any:
        data = self.getvalue()
        for start in range(0, len(data), 7):
            yield data[start : start + 7]


class Services:
    """SageMaker Runtime and Bedrock Runtime on the wire, for botocore's ``before-send``."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def send(self, request: Any, **_: Any) -> AWSResponse:
        path = unquote(urlparse(request.url).path)
        body = json.loads(request.body) if request.body else {}
        if path.startswith("/endpoints/"):
            return self._sagemaker(request.url, path, body)
        self.calls.append("Converse")  # the only Bedrock call the page makes (the shadow copy)
        assert path.endswith("/converse"), path
        answer = {
            "output": {"message": {"role": "assistant", "content": [{"text": "Try Frieren."}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 9, "outputTokens": 4, "totalTokens": 13},
            "metrics": {"latencyMs": 300},
        }
        return AWSResponse(request.url, 200, {"Content-Type": "application/json"}, _Raw(json.dumps(answer).encode()))

    def _sagemaker(self, url: str, path: str, body: dict[str, Any]) -> AWSResponse:
        assert path.split("/")[2] == ENDPOINT
        headers = {"x-Amzn-Invoked-Production-Variant": "primary", "X-Amzn-SageMaker-Custom-Attributes": VERSIONS}
        kind = body.get("requestType")
        if kind is not None:
            self.calls.append(str(kind))
            session = {"NEW_SESSION": ("X-Amzn-SageMaker-New-Session-Id", "sess-1; Expires=2026-11-27T12:00:00Z")}
            name, value = session.get(kind, ("X-Amzn-SageMaker-Closed-Session-Id", "sess-1"))
            return AWSResponse(url, 200, {**headers, name: value}, _Raw(b""))
        ChatCompletionBody.model_validate(body)  # what the gateway accepts
        if len(body["messages"]) > 3:  # a longer conversation: the context budget reports a trim
            headers["X-Amzn-SageMaker-Custom-Attributes"] = (
                f"context_budget=context_length;turns=1;tokens=90;by=marker;{VERSIONS}"
            )
        if path.endswith("/invocations-response-stream"):
            self.calls.append("InvokeEndpointWithResponseStream")
            pieces = [{"choices": [{"delta": {"content": p}}]} for p in ("Try ", "Dungeon ", "Meshi.")]
            sse = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in pieces) + b"data: [DONE]\n\n"
            frames = b"".join(payload_part(sse[i : i + 9]) for i in range(0, len(sse), 9))
            return AWSResponse(
                url, 200, {**headers, "Content-Type": "application/vnd.amazon.eventstream"}, _Raw(frames)
            )
        self.calls.append("InvokeEndpoint")
        completion = {
            "choices": [
                {"message": {"role": "assistant", "content": "Try Delicious in Dungeon."}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 40, "completion_tokens": 6, "total_tokens": 46},
        }
        return AWSResponse(
            url, 200, {**headers, "Content-Type": "application/json"}, _Raw(json.dumps(completion).encode())
        )


@pytest.fixture
def services(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Services:
    """The page's cwd holds cdk-outputs.json; every boto3 client the library makes answers from Services."""
    (tmp_path / "cdk-outputs.json").write_text(json.dumps(OUTPUTS))
    monkeypatch.chdir(tmp_path)
    for name, value in {
        "AWS_DEFAULT_REGION": "ap-northeast-1",
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
    }.items():
        monkeypatch.setenv(name, value)
    wire = Services()
    make = boto3.session.Session.client

    def client(self: boto3.session.Session, *args: Any, **kwargs: Any) -> Any:
        made = make(self, *args, **kwargs)
        made.meta.events.register("before-send", wire.send)
        return made

    monkeypatch.setattr(boto3.session.Session, "client", client)
    return wire


EXPECTED = [
    (
        ["InvokeEndpoint"],
        [
            "BedrockImportedModels(model_arns={'manga_domain_v3': 'arn:aws:bedrock:us-east-1:123456789012:imported",
            "Try Delicious in Dungeon.",
            f"sagemaker:{ENDPOINT}",
            "adapter='manga_domain_v3/v3/def'",
        ],
    ),
    (["InvokeEndpointWithResponseStream"], [f"[sagemaker:{ENDPOINT}, adapter jp_style_v1]", "Try Dungeon Meshi."]),
    (["NEW_SESSION", "InvokeEndpoint", "InvokeEndpoint", "CLOSE"], ["trimmed 1 turns", "Try Delicious in Dungeon."]),
    (["InvokeEndpoint", "Converse"], [f"sagemaker:{ENDPOINT} bedrock:meta.llama3-1-8b-instruct-v1:0 None"]),
]
"""Per block of docs/requests.md: the calls it makes, in order, and what it prints (fragments)."""


@pytest.mark.parametrize(("index", "expected"), list(enumerate(EXPECTED)), ids=["chat", "stream", "session", "shadow"])
def test_each_requests_block_runs_through_the_client_library(
    index: int, expected: tuple[list[str], list[str]], services: Services, capsys: pytest.CaptureFixture[str]
) -> None:
    block = python_blocks("requests.md")[index]
    assert "mangaassist_client" in block
    share = re.search(r"share=([0-9.]+)", block)
    if share:  # seed the client's sampling (Python's random) so that this one call falls in the page's share
        random.seed(next(seed for seed in range(1000) if random.Random(seed).random() < float(share.group(1))))
    exec(compile(block, "docs/requests.md", "exec"), {"__name__": "docs_snippet"})  # the doc's own code
    calls, printed = expected
    if index == len(EXPECTED) - 1:  # the mirror calls Bedrock beside the endpoint: no order between them
        assert sorted(services.calls) == sorted(calls)
    else:
        assert services.calls == calls
    out = capsys.readouterr().out
    for fragment in printed:
        assert fragment in out, out


def test_requests_md_holds_the_blocks_checked_here() -> None:
    assert len(python_blocks("requests.md")) == len(EXPECTED)


class Runtime:
    """``sagemaker-runtime``'s two invoke calls, validated against botocore's service model."""

    def __init__(self) -> None:
        self.model = boto3.client("sagemaker-runtime", region_name="us-east-1").meta.service_model
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _check(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        validate_parameters(params, self.model.operation_model(operation).input_shape)
        self.calls.append((operation, params))
        body = params["Body"]
        return json.loads(body) if isinstance(body, str | bytes) else {}

    def invoke_endpoint(self, **params: Any) -> dict[str, Any]:
        body = self._check("InvokeEndpoint", params)
        if body.get("requestType") == "NEW_SESSION":
            return {"Body": io.BytesIO(b"{}"), "NewSessionId": "sess-1; Expires=2026-11-26T06:00:00Z"}
        if body.get("requestType") == "CLOSE":
            return {"Body": io.BytesIO(b"{}"), "ClosedSessionId": params["SessionId"]}
        assert body["model"] and body["messages"]
        completion = {"choices": [{"message": {"role": "assistant", "content": "Try Delicious in Dungeon."}}]}
        return {"Body": io.BytesIO(json.dumps(completion).encode())}


@pytest.mark.parametrize("block", python_blocks("sessions.md"), ids=lambda value: str(value)[:40])
def test_each_sessions_block_runs_against_the_real_api_shapes(block: str, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = Runtime()
    monkeypatch.setattr(boto3, "client", lambda service, **kwargs: runtime)
    exec(compile(block, "docs/sessions.md", "exec"), {"__name__": "docs_snippet"})  # the doc's own code
    assert runtime.calls[0][1]["Body"] == b'{"requestType": "NEW_SESSION"}'
    assert len(runtime.calls) == 3
