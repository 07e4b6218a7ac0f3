"""The container's entrypoint in front of the real vLLM 0.26.0 engine: what SageMaker and the
alarms depend on (issue 13). One gateway serves this whole module (``shared_gateway``)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from serving_app.metrics.scraper import WANTED, parse_samples
from serving_contract.metrics import CLIENT_EMITTED, Dimension, RequestMetric
from tests.engine.real_engine import ADAPTERS, BASE_MODEL, ENGINE_ENV, RealGateway
from tests.engine.test_real_context_budget import MAX_TOKENS as BUDGET_MAX_TOKENS
from tests.engine.test_real_context_budget import long_messages
from tests.metric_refs import metrics_read
from tests.synth_helpers import Synth

pytestmark = pytest.mark.real_engine

MODELS = (BASE_MODEL, *ADAPTERS)
MESSAGES = [{"role": "user", "content": "recommend an action manga"}]
GREEDY = {"messages": MESSAGES, "max_tokens": 8, "temperature": 0}


def invoke(gateway: RealGateway, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(gateway.url + "/invocations", json=body, headers=headers, timeout=60)


def stream_text(response: httpx.Response) -> tuple[str, list[dict[str, Any]]]:
    """The concatenated deltas of an SSE chat stream, and every JSON event."""
    events = [json.loads(line[6:]) for line in response.text.split("\n\n") if line.startswith("data: {")]
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
    return text, events


@pytest.fixture(scope="module")
def reference(shared_gateway: RealGateway) -> dict[str, str]:
    """Each model's greedy answer, asked of vLLM's own OpenAI route (no gateway in between)."""
    answers = {}
    for name in MODELS:
        response = httpx.post(
            shared_gateway.engine_url + "/v1/chat/completions", json={**GREEDY, "model": name}, timeout=60
        )
        assert response.status_code == 200, response.text
        answers[name] = response.json()["choices"][0]["message"]["content"]
    return answers


def test_ping_is_503_until_the_engine_is_up_and_every_adapter_is_warmed(shared_gateway: RealGateway) -> None:
    log = shared_gateway.ping_log
    *before, ready = log
    assert before, "/ping was never seen before it turned 200"
    assert {o.status for o in before} == {503}
    phases = [o.body["status"] for o in before]
    assert phases[0] == "starting" and set(phases) <= {"starting", "warming_up"}
    assert ready.status == 200 and ready.body["engine_healthy"] is True
    assert sorted(ready.body["warmed_up_adapters"]) == sorted(MODELS)
    stderr = shared_gateway.wait_for_log("startup: ready after")
    assert stderr.index("startup: engine healthy after") < stderr.index("startup: ready after")
    # The warmup really went through the engine: at least one finished request per model name.
    finished = sum(
        sample.value
        for family in text_string_to_metric_families(httpx.get(shared_gateway.engine_url + "/metrics").text)
        for sample in family.samples
        if sample.name == "vllm:request_success_total"
    )
    assert finished >= int(ENGINE_ENV["WARMUP_NUM_REQUESTS"])
    # The prefill warm-up (issue 35): 256 and 255 token ids through every name, logged before ready.
    for name in MODELS:
        line = f"warmup: {name} prefill done (256, 255 tokens)"
        assert stderr.index(line) < stderr.index("startup: ready after"), line
    prompt_tokens = sum(
        sample.value
        for family in text_string_to_metric_families(httpx.get(shared_gateway.engine_url + "/metrics").text)
        for sample in family.samples
        if sample.name == "vllm:prompt_tokens_total"
    )
    assert prompt_tokens >= len(MODELS) * (256 + 255)


def _select(selector: str, name: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Body and headers that ask for ``name`` the way ``selector`` does."""
    if selector == "model":
        return {**GREEDY, "model": name}, {}
    if selector == "custom_attribute":
        return dict(GREEDY), {"X-Amzn-SageMaker-Custom-Attributes": f"adapter={name}"}
    # SageMaker's adapter header wins over whatever the body says.
    return {**GREEDY, "model": BASE_MODEL}, {"X-Amzn-SageMaker-Adapter-Identifier": name}


def test_every_adapter_answers_differently_from_the_base_model(reference: dict[str, str]) -> None:
    # Without this, routing tests could pass while every request ran the base model.
    assert len(set(reference.values())) == len(MODELS), reference


@pytest.mark.parametrize("stream", [False, True], ids=["sync", "stream"])
@pytest.mark.parametrize("selector", ["model", "custom_attribute", "adapter_header"])
def test_invocations_reach_the_requested_model(
    shared_gateway: RealGateway, reference: dict[str, str], selector: str, stream: bool
) -> None:
    for name in MODELS:
        body, headers = _select(selector, name)
        response = invoke(shared_gateway, {**body, "stream": stream}, headers)
        assert response.status_code == 200, response.text
        if not stream:
            answer = response.json()
            assert answer["model"] == name
            assert answer["choices"][0]["message"]["content"] == reference[name]
            continue
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["transfer-encoding"] == "chunked"
        assert response.text.endswith("data: [DONE]\n\n")
        text, events = stream_text(response)
        assert text == reference[name]
        assert {e["model"] for e in events} == {name}
        assert all(e.get("choices") for e in events)  # the usage-only event the gateway asked for is gone


@pytest.mark.parametrize(
    ("body", "headers", "status", "message"),
    [
        (
            {"model": "nope", "messages": MESSAGES},
            {},
            400,
            "unknown adapter 'nope'",
        ),
        (
            {"messages": MESSAGES},
            {"X-Amzn-SageMaker-Adapter-Identifier": "retired_v0"},
            400,
            "unknown adapter 'retired_v0'",
        ),
        # vLLM itself refuses it: the gateway passes its 400 through (not a 500, not a traceback).
        ({"messages": MESSAGES, "max_tokens": 100_000}, {}, 400, "max_model_len"),
        ({"prompt": "manga " * 3000, "max_tokens": 4}, {}, 400, "maximum context length"),
    ],
    ids=["unknown-model", "unknown-adapter-header", "max-tokens-above-context", "prompt-above-context"],
)
def test_bad_requests_get_a_4xx_with_the_reason(
    shared_gateway: RealGateway, body: dict[str, Any], headers: dict[str, str], status: int, message: str
) -> None:
    response = invoke(shared_gateway, body, headers)
    assert response.status_code == status, response.text
    assert message in response.json()["error"]["message"]


LONE_SURROGATES = {
    "in-content": '{"messages":[{"role":"user","content":"\\ud800 manga"}],"max_tokens":4,"stream":%s}',
    "in-a-message-key": '{"messages":[{"role":"user","content":"hi","\\udfff":1}],"max_tokens":4,"stream":%s}',
    "in-the-prompt": '{"prompt":"manga \\udc00","max_tokens":4,"stream":%s}',
}


@pytest.mark.parametrize("stream", ["false", "true"])
@pytest.mark.parametrize("template", LONE_SURROGATES.values(), ids=LONE_SURROGATES.keys())
def test_lone_surrogates_never_get_a_5xx(shared_gateway: RealGateway, template: str, stream: str) -> None:
    """Issue 49, finding 1, at the engine: text no UTF-8 encoder takes must not become a 5xx (which the
    error-rate guardrails count), whether the gateway or vLLM answers, before or after a stream's 200."""
    response = httpx.post(
        shared_gateway.url + "/invocations",
        content=(template % stream).encode(),
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert response.status_code < 500, response.text
    assert "error" not in response.text or response.status_code >= 400, response.text


def test_malformed_and_oversized_bodies_are_refused(shared_gateway: RealGateway) -> None:
    malformed = httpx.post(
        shared_gateway.url + "/invocations", content=b'{"messages": [', headers={"content-type": "application/json"}
    )
    assert malformed.status_code == 400
    assert malformed.json()["error"]["message"].startswith("malformed JSON body")
    oversized = httpx.post(
        shared_gateway.url + "/invocations",
        content=json.dumps({"prompt": "x" * (7 * 1024 * 1024)}).encode(),
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert oversized.status_code == 413
    # Refused from the declared Content-Length, before the body is read (serving_app.transport); the bound
    # follows the engine's context (ENGINE_MAX_MODEL_LEN 2048 here x 64 bytes per token).
    assert oversized.json()["error"]["message"].endswith(
        "at most 131072 bytes (ENGINE_MAX_MODEL_LEN=2048 tokens x REQUEST_MAX_BODY_BYTES_PER_TOKEN=64)"
    )


def test_a_6_mb_body_of_tiny_messages_is_refused_while_a_stream_runs_on(shared_gateway: RealGateway) -> None:
    """Issue 49, finding 4: 174,000 messages in ~6 MB were parsed and validated on the event loop (~1.1 s)
    before vLLM refused them. Now the transport refuses the body from its Content-Length, and a stream in
    flight meanwhile is answered exactly as alone (the same greedy text)."""
    # 16 tokens: the EMF test of this module holds every stream of the shared gateway to <= 16.
    body = {**GREEDY, "model": BASE_MODEL, "stream": True, "max_tokens": 16}
    alone, _ = stream_text(invoke(shared_gateway, body))
    flood = json.dumps({"messages": [{"role": "user", "content": "a"}] * 174_000}).encode()
    assert len(flood) > 5_900_000
    with (
        httpx.Client(timeout=60) as client,
        client.stream("POST", shared_gateway.url + "/invocations", json=body) as stream,
    ):
        assert stream.status_code == 200
        chunks = stream.iter_raw()
        first = next(chunks)  # the stream is under way
        refused = client.post(
            shared_gateway.url + "/invocations", content=flood, headers={"content-type": "application/json"}
        )
        rest = b"".join(chunks)
    assert refused.status_code == 413
    assert refused.json()["error"]["message"].startswith("body is 5916014 bytes (Content-Length): at most 131072")
    text, events = stream_text(httpx.Response(200, content=first + rest))
    assert text == alone and not [e for e in events if "error" in e]


def test_the_engine_exposes_every_metric_the_scraper_reads(shared_gateway: RealGateway) -> None:
    text = httpx.get(shared_gateway.engine_url + "/metrics").text
    assert set(parse_samples(text)) == WANTED


def _values(lines: list[dict[str, Any]], name: str) -> Iterator[float]:
    for line in lines:
        if name in line:
            yield line[name]


def test_emf_lines_carry_every_metric_the_stacks_read_with_engine_values(
    shared_gateway: RealGateway, default_synth: Synth
) -> None:
    namespace = default_synth.config.observability.metrics_namespace
    read = {
        name for ns, name in metrics_read([t.to_json() for t in default_synth.templates.values()]) if ns == namespace
    }
    assert read, "the stacks read no custom metric?"
    # The client library's counts share the namespace but come from the callers (tests/client/test_metrics.py,
    # tests/engine/test_real_client.py), never from the container.
    assert read & CLIENT_EMITTED
    read -= CLIENT_EMITTED
    # One conversation over max_model_len, which the context budget trims: the trim metric is
    # emitted only when one happens, and this test must not lean on an earlier file having done it.
    over = {"messages": long_messages(shared_gateway), "max_tokens": BUDGET_MAX_TOKENS, "temperature": 0}
    assert invoke(shared_gateway, over).status_code == 200
    # Traffic across several scrape intervals (METRICS_INTERVAL_S=1): streams for TTFT, repeated
    # prompts for prefix-cache hits, every adapter for the per-adapter dimension.
    deadline = time.monotonic() + 60
    missing = set(read)
    while missing and time.monotonic() < deadline:
        for name in MODELS:
            invoke(shared_gateway, {**GREEDY, "model": name, "stream": True, "max_tokens": 16})
        missing = read - {key for line in shared_gateway.emf() for key in line}
    assert not missing, f"never emitted: {sorted(missing)}"
    lines = shared_gateway.emf()
    for line in lines:
        directive = line["_aws"]["CloudWatchMetrics"][0]
        assert directive["Namespace"] == namespace
        for metric in directive["Metrics"]:
            value = line[metric["Name"]]
            assert isinstance(value, int | float) and math.isfinite(value), (metric, value)
        assert line[Dimension.ENDPOINT] == ENGINE_ENV["ENDPOINT_NAME"]
    # Engine figures come from the real /metrics: tokens were generated, the cache is a percentage.
    assert max(_values(lines, "GenerationTokensPerSecond")) > 0
    assert all(0 <= v <= 100 for v in _values(lines, "KvCacheUsagePercent"))
    assert max(_values(lines, "PrefixCacheHitRatePercent")) > 0  # the same prompt, over and over
    request_lines = [line for line in lines if RequestMetric.REQUESTS in line]
    assert {line[Dimension.ADAPTER] for line in request_lines} >= set(MODELS)
    streamed = [line for line in request_lines if line["Stream"] and line["StatusCode"] == 200]
    assert streamed and all(line[RequestMetric.TIME_TO_FIRST_TOKEN] > 0 for line in streamed)
    # Token counts are vLLM's usage, which the gateway asked for and stripped from the stream.
    assert all(1 <= line[RequestMetric.OUTPUT_TOKENS] <= 16 for line in streamed)
    assert all(line[RequestMetric.INPUT_TOKENS] > 0 for line in streamed)
