"""The client library end to end (issue 48): botocore's ``sagemaker-runtime`` client, on SageMaker's wire
protocol (a local stand-in for the service, tests/engine/sagemaker_shim.py), through the real gateway to vLLM
0.26.0's CPU engine; then the engine is killed and the same client answers from the (Stubber'd) Bedrock
imported model, and its metrics line counts the fallback.

Uses a gateway of its own (``client_gateway``, tests/engine/conftest.py): the last test kills its engine.
The tests run in file order: the answers first, the kill last.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest
from botocore.stub import ANY, Stubber

from mangaassist_client import (
    BedrockImportedModels,
    CallerError,
    ClientConfig,
    EmfSink,
    MangaAssistClient,
    SageMakerEndpoint,
    ServedVersions,
    botocore_config,
)
from tests.botocore_helpers import add_event_stream_response, bedrock_chunk, streaming_body
from tests.client.stubs import completion
from tests.container.conversations import conversation
from tests.engine.real_engine import ADAPTERS, ENGINE_ENV, RealGateway
from tests.engine.sagemaker_shim import SageMakerShim

pytestmark = pytest.mark.real_engine

ENDPOINT = ENGINE_ENV["ENDPOINT_NAME"]
MAX_MODEL_LEN = int(ENGINE_ENV["ENGINE_MAX_MODEL_LEN"])
ADAPTER = ADAPTERS[0]
ARN = "arn:aws:bedrock:us-east-1:123456789012:imported-model/e2edomainv3"
MESSAGES = [{"role": "user", "content": "Recommend one manga for a reader who liked Frieren."}]
CALL: dict[str, Any] = {"adapter": ADAPTER, "messages": MESSAGES, "max_tokens": 8, "temperature": 0}


class Rig:
    """The client over the shim (SageMaker) and a Stubber'd bedrock-runtime client; EMF lines kept."""

    def __init__(self, shim: SageMakerShim) -> None:
        credentials = {"region_name": "us-east-1", "aws_access_key_id": "x", "aws_secret_access_key": "x"}
        runtime = boto3.client("sagemaker-runtime", endpoint_url=shim.url, config=botocore_config(60), **credentials)
        self.bedrock = boto3.client("bedrock-runtime", config=botocore_config(60), **credentials)
        self.stub = Stubber(self.bedrock)
        self.lines: list[str] = []
        clients = {"sagemaker-runtime": runtime, "bedrock-runtime": self.bedrock}
        config = ClientConfig(
            primary=SageMakerEndpoint(ENDPOINT),
            fallbacks=(BedrockImportedModels(dict.fromkeys(ADAPTERS, ARN)),),
            deadline_s=120,  # the CPU engine on 2 loaded cores, not an SLO
        )
        self.client = MangaAssistClient(
            config,
            metrics=EmfSink(endpoint_name=ENDPOINT, write=self.lines.append),
            client_factory=lambda service, region: clients[service],
        )

    def emf(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines]


@pytest.fixture(scope="module")
def rig(client_gateway: RealGateway) -> Iterator[Rig]:
    shim = SageMakerShim(client_gateway.url).start()
    setup = Rig(shim)
    with setup.stub:
        yield setup
    shim.stop()


def engine_answer(gateway: RealGateway, model: str, messages: list[dict[str, str]]) -> str:
    """vLLM's own greedy answer (its OpenAI route, no gateway in between)."""
    body = {"model": model, "messages": messages, "max_tokens": 8, "temperature": 0}
    response = httpx.post(gateway.engine_url + "/v1/chat/completions", json=body, timeout=120)
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


def test_the_engine_answers_through_sagemakers_protocol(rig: Rig, client_gateway: RealGateway) -> None:
    expected = engine_answer(client_gateway, ADAPTER, MESSAGES)
    result = rig.client.chat(**CALL)
    assert (result.text, result.backend, result.variant) == (expected, f"sagemaker:{ENDPOINT}", "AllTraffic")
    # The gateway's CustomAttributes, through SageMaker's header: which versions answered (no pins here).
    assert result.served == ServedVersions("base/unknown", f"{ADAPTER}/unknown")
    assert result.usage.prompt_tokens and result.usage.completion_tokens
    stream = rig.client.chat_stream(**CALL)
    assert "".join(stream) == expected
    assert stream.result is not None and stream.result.usage.completion_tokens == result.usage.completion_tokens
    with rig.client.open_session() as session:
        assert session.id and len(session.id) == 36
        assert session.chat(**CALL).text == expected
        assert "".join(session.chat_stream(**CALL)) == expected
    lines = rig.emf()
    assert [(line["ClientRequests"], line["ClientFallbacks"], line["Outcome"]) for line in lines] == [(1, 0, "ok")] * 4


def test_the_context_budget_trims_a_long_conversation_unless_the_caller_opts_out(rig: Rig) -> None:
    messages = conversation(12, 160)
    result = rig.client.chat(adapter=ADAPTER, messages=messages, max_tokens=8)
    assert result.context_budget is not None
    assert (result.context_budget.reason, result.context_budget.by) == ("context_length", "marker")
    assert result.context_budget.turns > 0 and result.context_budget.tokens > 0
    with pytest.raises(CallerError) as refused:
        rig.client.chat(adapter=ADAPTER, messages=messages, max_tokens=8, context_budget=False)
    assert refused.value.status == 400 and "maximum context length" in str(refused.value)
    assert rig.emf()[-1]["ClientFallbacks"] == 0  # a 4xx never falls back


def wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_killing_the_engine_sends_the_client_to_bedrock_and_counts_it(rig: Rig, client_gateway: RealGateway) -> None:
    gateway = client_gateway
    (core,) = [pid for pid in gateway.descendants() if "VLLM::EngineCore" in gateway.process_name(pid)]
    os.kill(core, signal.SIGKILL)  # as a CUDA fault would
    wait_for(lambda: not gateway.process_name(core), 30, "the engine core to be gone")

    expected = {"modelId": ARN, "body": ANY, "contentType": "application/json", "accept": "application/json"}
    answer = {"body": streaming_body(completion("Try Frieren.")), "contentType": "application/json"}
    rig.stub.add_response("invoke_model", answer, expected)
    result = rig.client.chat(**CALL)
    assert (result.text, result.backend, result.version) == ("Try Frieren.", "bedrock-import", ARN)
    # What the dead engine left the endpoint answering, as SageMaker hands it back: a 5xx (the gateway's
    # 502/503) or, once the gateway has exited, the service's own failure.
    assert result.fallback_from[0].startswith(f"sagemaker:{ENDPOINT}: server 50"), result.fallback_from

    chunk = {"choices": [{"index": 0, "delta": {"content": "Try Frieren."}, "finish_reason": "stop"}]}
    frames = [bedrock_chunk(json.dumps(chunk).encode())]
    add_event_stream_response(
        rig.stub, "invoke_model_with_response_stream", {"contentType": "application/json"}, frames
    )
    assert "".join(rig.client.chat_stream(**CALL)) == "Try Frieren."
    rig.stub.assert_no_pending_responses()

    fallback_lines = [line for line in rig.emf() if line["ClientFallbacks"] == 1]
    assert len(fallback_lines) == 2
    for line in fallback_lines:
        assert (line["EndpointName"], line["Backend"], line["Outcome"]) == (ENDPOINT, "bedrock-import", "ok")
        assert {"Name": "ClientFallbacks", "Unit": "Count"} in line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
    assert gateway.proc.wait(timeout=60) == 1  # the gateway follows its engine (SageMaker replaces the instance)
