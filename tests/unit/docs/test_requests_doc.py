"""The copy-paste requests of docs/requests.md and docs/sessions.md run (issue 40 item 10).

Each Python block is executed with ``boto3.client`` replaced by a recorder that checks every call's
parameters against botocore's own model of the SageMaker Runtime API (the shapes the real client
sends) and answers as the endpoint does: a chat completion, an event stream of SSE chunks, a new
session id. An undefined name, a renamed parameter or a wrong body shape fails here.
"""

import io
import json
import re
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.validate import validate_parameters

DOCS = Path(__file__).resolve().parents[3] / "docs"


def python_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), flags=re.DOTALL)


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

    def invoke_endpoint_with_response_stream(self, **params: Any) -> dict[str, Any]:
        body = self._check("InvokeEndpointWithResponseStream", params)
        assert body["stream"] is True
        chunks = [{"choices": [{"delta": {"content": word}}]} for word in ("Try ", "Dungeon ", "Meshi.")]
        sse = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        # The service splits the payload where it likes: parts of 7 bytes cut lines and events.
        return {"Body": [{"PayloadPart": {"Bytes": sse[i : i + 7]}} for i in range(0, len(sse), 7)]}


@pytest.mark.parametrize(
    ("page", "block"),
    [(page, block) for page in ("requests.md", "sessions.md") for block in python_blocks(page)],
    ids=lambda value: str(value)[:40],
)
def test_each_python_block_runs_against_the_real_api_shapes(
    page: str, block: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = Runtime()
    monkeypatch.setattr(boto3, "client", lambda service, **kwargs: runtime)
    exec(compile(block, f"docs/{page}", "exec"), {"__name__": "docs_snippet"})  # the doc's own code
    assert runtime.calls, "the block made no request"
    if any(op == "InvokeEndpointWithResponseStream" for op, _ in runtime.calls):
        assert capsys.readouterr().out == "Try Dungeon Meshi."


def test_the_pages_hold_python_blocks() -> None:
    assert len(python_blocks("requests.md")) == 3 and python_blocks("sessions.md")
