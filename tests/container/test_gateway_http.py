"""The real gateway process (uvicorn on a free port) against the scripted vLLM."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from serving_contract.metrics import EMITTED, UNITS, BudgetMetric, Dimension, EngineMetric, RequestMetric
from tests.container.conftest import ADAPTERS, Serve
from tests.container.conversations import long_conversation

CHAT = {"messages": [{"role": "user", "content": "hello"}]}


def post(
    serve: Serve,
    body: Any = None,
    *,
    content: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout_s: float = 10,
) -> httpx.Response:
    if content is None:
        content = json.dumps(body).encode()
        headers = {"content-type": "application/json", **(headers or {})}
    return httpx.post(serve.url + "/invocations", content=content, headers=headers, timeout=timeout_s)


def message(response: httpx.Response) -> str:
    return str(response.json()["error"]["message"])


def last_request(serve: Serve) -> dict[str, Any]:
    return serve.engine_state()["requests"][-1]


def test_ping_is_200_with_status_body_once_ready(serve: Serve) -> None:
    response = serve.ping()
    assert response is not None and response.status_code == 200
    body = response.json()
    assert body["status"] == "ready" and body["engine_healthy"] is True
    assert sorted(body["warmed_up_adapters"]) == sorted(["base", *ADAPTERS])


def test_chat_routes_by_model_field(serve: Serve) -> None:
    response = post(serve, {**CHAT, "model": "manga_domain_v3"})
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"].startswith("tok")
    seen = last_request(serve)
    assert seen["path"] == "/v1/chat/completions" and seen["model"] == "manga_domain_v3"


def test_completion_routes_by_prompt_and_defaults_to_base(serve: Serve) -> None:
    response = post(serve, {"prompt": "hello", "max_tokens": 2})
    assert response.status_code == 200
    assert response.json()["object"] == "text_completion"
    seen = last_request(serve)
    assert seen["path"] == "/v1/completions" and seen["model"] == "base"


def test_custom_attributes_header_picks_the_adapter(serve: Serve) -> None:
    response = post(
        serve,
        {**CHAT, "model": "base"},
        headers={"X-Amzn-SageMaker-Custom-Attributes": "trace=1; adapter=jp_style_v1"},
    )
    assert response.status_code == 200
    assert last_request(serve)["model"] == "jp_style_v1"


@pytest.mark.parametrize(
    ("kwargs", "status", "text"),
    [
        (
            {"content": b"{not json", "headers": {"content-type": "application/json"}},
            400,
            "malformed JSON body",
        ),
        (
            {"content": b'{"prompt": NaN}', "headers": {"content-type": "application/json"}},
            400,
            "malformed JSON body: NaN is not valid JSON",
        ),
        (
            {"content": b"hello", "headers": {"content-type": "text/plain"}},
            415,
            "content-type 'text/plain' is not supported",
        ),
        ({"body": [1, 2]}, 422, "body must be a JSON object"),
        ({"body": {"model": "base"}}, 422, "exactly one of 'messages'"),
        ({"body": {"prompt": "x", "messages": []}}, 422, "exactly one of 'messages'"),
        ({"body": {"messages": []}}, 422, "invalid request: messages = []: must have at least 1 item(s)"),
        (
            {"body": {**CHAT, "stream": "yes"}},
            422,
            "invalid request: stream = 'yes': must be true or false",
        ),
        (
            {"body": {"messages": [{"role": "wizard", "content": "x"}]}},
            422,
            "invalid request: messages.0.role = 'wizard': must be one of",
        ),
        (
            {"body": {"prompt": "x", "max_tokens": 0}},
            422,
            "max_tokens = 0: must be >= 1",
        ),
        (
            {"body": {**CHAT, "model": "nope"}},
            400,
            "unknown adapter 'nope'",
        ),
        (
            {"body": CHAT, "headers": {"X-Amzn-SageMaker-Custom-Attributes": "adapter=ghost"}},
            400,
            "unknown adapter 'ghost'",
        ),
        (
            {"body": {"prompt": "x", "max_tokens": 5000}},
            400,
            "max_tokens must be an integer <= 1000",
        ),
    ],
)
def test_client_errors_have_status_and_message(serve: Serve, kwargs: dict[str, Any], status: int, text: str) -> None:
    response = post(serve, kwargs.get("body"), content=kwargs.get("content"), headers=kwargs.get("headers"))
    assert response.status_code == status, response.text
    assert text in message(response)
    assert "manga_domain_v3" not in response.text  # no list of the adapters served


def test_engine_out_of_memory_is_the_fallback_503_and_counted(serve: Serve) -> None:
    """A completions request has no turns to compress: the OOM gets the fallback at once."""
    response = post(serve, {"prompt": "boom"})
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"  # container.context_budget.oom_retry_after_s
    assert response.json()["error"]["retry_after_s"] == 5  # the same, where a caller behind SageMaker sees it
    assert message(response) == (
        "engine out of memory on this request, also after compressing the older turns; retry later"
    )  # vLLM's text stays in the log
    serve.log_line("engine answered 500", "out of memory")
    line = wait_for_emf(serve, lambda d: d.get("StatusCode") == 503 and d.get(RequestMetric.OUT_OF_MEMORY_ERRORS) == 1)
    assert line[RequestMetric.OUT_OF_MEMORY_ERRORS] == 1
    assert line[RequestMetric.ENGINE_ERRORS] == 1
    assert line[RequestMetric.SERVER_ERRORS] == 1


def test_slow_engine_hits_the_request_timeout(tmp_path: Path) -> None:
    # Its own gateway with a 1 s budget, and an engine that never answers until released: the 504
    # depends only on the relay's timer firing, not on how fast the runner is.
    serve = Serve(tmp_path, env={"REQUEST_TIMEOUT_S": "1"})
    try:
        serve.wait_ready()
        response = post(serve, {"prompt": "hold"})
        assert response.status_code == 504
        assert "REQUEST_TIMEOUT_S=1" in message(response)
        # A 5xx, not an engine error: one slow request must not page on engine-errors (issue 49, finding 7).
        line = wait_for_emf(serve, lambda d: d.get("StatusCode") == 504)
        assert (line[RequestMetric.SERVER_ERRORS], line[RequestMetric.ENGINE_ERRORS]) == (1, 0)
    finally:
        httpx.post(serve.engine_url + "/_control/release", timeout=10)
        serve.stop()


def test_an_error_event_after_a_streams_200_counts_as_a_stream_error(serve: Serve) -> None:
    """vLLM ends a stream whose generation failed with an error event after its 200: SageMaker counts a
    200, so the EMF line's StreamErrors is what the error-rate alarms and guardrails read (issue 49)."""
    body = {"messages": [{"role": "user", "content": "fail-mid-stream"}], "stream": True, "model": "jp_style_v1"}
    since = len(serve.emf_lines())
    response = post(serve, body)
    assert response.status_code == 200
    events = sse_events(response.text)
    assert json.loads(events[-2])["error"]["code"] == 500 and events[-1] == "[DONE]"
    line = wait_for_emf(
        serve, lambda d: d.get("Adapter") == "jp_style_v1" and d.get(RequestMetric.STREAM_ERRORS), since=since
    )
    assert line["StatusCode"] == 200 and line[RequestMetric.SERVER_ERRORS] == 0
    since = len(serve.emf_lines())
    post(serve, {**CHAT, "stream": True, "model": "jp_style_v1"})
    fine = wait_for_emf(
        serve, lambda d: d.get("Adapter") == "jp_style_v1" and d[RequestMetric.STREAM_ERRORS] == 0, since=since
    )
    assert fine["StatusCode"] == 200


def sse_events(raw: str) -> list[str]:
    return [part.removeprefix("data: ") for part in raw.split("\n\n") if part.strip()]


def test_stream_chunks_arrive_before_the_engine_finishes(serve: Serve) -> None:
    """The fake sends one chunk, then holds the stream open until released."""
    body = {
        "messages": [{"role": "user", "content": "hold"}],
        "stream": True,
        "model": "general_support_v2",
    }
    since = len(serve.emf_lines())
    with httpx.stream("POST", serve.url + "/invocations", json=body, timeout=10) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert "content-length" not in response.headers  # chunked transfer
        chunks = response.iter_raw()
        first = next(chunks)
        state = serve.engine_state()
        assert state["streams_open"] == 1  # the engine has not finished ...
        assert b'"role": "assistant"' in first  # ... yet the first event is already here
        httpx.post(serve.engine_url + "/_control/release", timeout=5)
        rest = b"".join(chunks)
    events = sse_events((first + rest).decode())
    assert events[-1] == "[DONE]"
    assert all("usage" not in json.loads(e) for e in events[:-1])  # injected usage removed
    assert last_request(serve)["stream_options"] == {"include_usage": True}
    line = wait_for_emf(serve, lambda d: d.get("Stream") and d.get("Adapter") == "general_support_v2", since=since)
    assert line[RequestMetric.OUTPUT_TOKENS] == 3 and line[RequestMetric.INPUT_TOKENS] == 7
    assert line[RequestMetric.TIME_TO_FIRST_TOKEN] <= line[RequestMetric.REQUEST_LATENCY]


def test_stream_keeps_usage_the_client_asked_for(serve: Serve) -> None:
    body = {"prompt": "x", "stream": True, "stream_options": {"include_usage": True}}
    response = post(serve, body)
    events = sse_events(response.text)
    usage = [json.loads(e) for e in events[:-1] if "usage" in json.loads(e)]
    assert usage and usage[-1]["usage"]["completion_tokens"] == 3


def test_ping_answers_while_requests_are_busy(tmp_path: Path) -> None:
    """SageMaker allows /ping 2 s; it must not wait for the busy engine. Eight streams are
    held open by the fake engine (blocked on its release event) while /ping is asked; the
    only bound is the client timeout (no timed assertion: speed is for benchmarks)."""
    # Its own gateway: the engine state it reads (8 streams open) must not see other tests' requests.
    serve = Serve(tmp_path)
    body = {"prompt": "hold", "stream": True}
    # A held stream sends nothing until released below; on a loaded machine that outlasted the
    # client's 10 s read timeout and the first streams closed before /ping was asked (4 == 8).
    threads = [threading.Thread(target=post, args=(serve, body), kwargs={"timeout_s": 60}) for _ in range(8)]
    try:
        serve.wait_ready()
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 10
        while serve.engine_state()["streams_open"] < 8:
            assert time.monotonic() < deadline, "the fake engine never held 8 streams"
            time.sleep(0.05)
        response = httpx.get(serve.url + "/ping", timeout=2)
        assert response.status_code == 200
        assert serve.engine_state()["streams_open"] == 8  # still blocked while /ping answered
    finally:
        if any(thread.is_alive() for thread in threads):
            httpx.post(serve.engine_url + "/_control/release", timeout=5)
        for thread in threads:
            if thread.ident is not None:
                thread.join()
        serve.stop()


def wait_for_emf(serve: Serve, predicate: Any, timeout_s: float = 5.0, *, since: int = 0) -> dict[str, Any]:
    """The newest EMF line matching ``predicate`` among those after the first ``since`` (a count taken
    before the request: on a shared server an earlier test's line can match before this request's is
    written), waited for up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in reversed(serve.emf_lines()[since:]):
            if predicate(line):
                return line
        time.sleep(0.05)
    raise AssertionError("no matching EMF line")


def check_emf(document: dict[str, Any]) -> None:
    """EMF spec: _aws.Timestamp (ms int), one CloudWatchMetrics directive whose dimensions
    and metric names all resolve to top-level members."""
    meta = document["_aws"]
    assert isinstance(meta["Timestamp"], int) and meta["Timestamp"] > 1_600_000_000_000
    (directive,) = meta["CloudWatchMetrics"]
    assert directive["Namespace"] == "MangaAssist/Inference"
    for dimension_set in directive["Dimensions"]:
        assert 1 <= len(dimension_set) <= 30
        for name in dimension_set:
            assert isinstance(document[name], str) and document[name]
    for metric in directive["Metrics"]:
        assert metric["Unit"] == UNITS[metric["Name"]]
        value = document[metric["Name"]]
        assert isinstance(value, int | float) and not isinstance(value, bool)


def test_emf_lines_are_valid_and_use_contract_names(serve: Serve) -> None:
    since = len(serve.emf_lines())
    post(serve, {**CHAT, "model": "jp_style_v1"})
    engine = wait_for_emf(serve, lambda d: EngineMetric.GENERATION_TOKENS_PER_SECOND in d)
    request = wait_for_emf(serve, lambda d: d.get("Adapter") == "jp_style_v1", since=since)
    lines = serve.emf_lines()
    assert len(lines) >= 3
    for document in lines:
        check_emf(document)
    # Engine metrics: (EndpointName, VariantName); values derived from the fake's /metrics.
    assert engine["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [[Dimension.ENDPOINT, Dimension.VARIANT]]
    assert engine[Dimension.ENDPOINT] == "test-endpoint"
    assert engine[EngineMetric.QUEUE_DEPTH] == 3.0  # 2 + 1: summed across engine labels
    assert engine[EngineMetric.KV_CACHE_USAGE] == 25.0  # 0.25 x 100
    names = {m["Name"] for d in lines for m in d["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert names <= set(UNITS)
    assert {
        EngineMetric.QUEUE_DEPTH,
        EngineMetric.RUNNING_REQUESTS,
        EngineMetric.KV_CACHE_USAGE,
        EngineMetric.PREEMPTIONS,
        EngineMetric.PROMPT_TOKENS_PER_SECOND,
    } <= names
    # Per request: fleet-wide, per-adapter and (usage reported) per-class dimension sets.
    assert request["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [
        [Dimension.ENDPOINT, Dimension.VARIANT],
        [Dimension.ENDPOINT, Dimension.VARIANT, Dimension.ADAPTER],
        [Dimension.ENDPOINT, Dimension.VARIANT, Dimension.REQUEST_CLASS],
    ]
    # The fake reports no prompt_tokens_details: as vLLM with 0 cached tokens, a cold request.
    assert request[Dimension.REQUEST_CLASS] == "cold"
    assert request[RequestMetric.REQUESTS] == 1 and request["StatusCode"] == 200
    assert request[RequestMetric.REQUEST_LATENCY] > 0
    assert request[RequestMetric.OUTPUT_TOKENS] == 3
    assert RequestMetric.TIME_TO_FIRST_TOKEN not in request  # streaming only


def test_client_disconnect_mid_stream_stops_the_engine_stream(serve: Serve) -> None:
    body = {"prompt": "hold", "stream": True, "model": "manga_domain_v3"}
    finished_before = serve.engine_state()["streams_finished"]
    since = len(serve.emf_lines())
    with httpx.stream("POST", serve.url + "/invocations", json=body, timeout=10) as response:
        assert next(response.iter_raw())  # first event, the engine still holds the stream
    # The client is gone; the gateway must abort its upstream stream (vLLM stops generating).
    deadline = time.monotonic() + 5
    while serve.engine_state()["streams_finished"] == finished_before:
        assert time.monotonic() < deadline, "engine stream still open after client left"
        time.sleep(0.05)
    line = wait_for_emf(serve, lambda d: d.get("StatusCode") == 499, since=since)
    assert line["Adapter"] == "manga_domain_v3" and line[RequestMetric.CLIENT_ERRORS] == 1


def test_a_scripted_run_emits_every_contract_metric(serve: Serve) -> None:
    """Union of the names in the EMF lines of a run == ``serving_contract.metrics.EMITTED``:
    alarms and dashboards never reference a name the container does not write."""
    stream = {**CHAT, "stream": True, "model": "manga_domain_v3"}
    with httpx.stream("POST", serve.url + "/invocations", json=stream, timeout=10) as response:
        assert response.status_code == 200
        response.read()
    assert post(serve, {**CHAT, "model": "jp_style_v1"}).status_code == 200  # unary, tokens
    assert post(serve, {"prompt": "boom"}).status_code == 503  # engine error, OOM
    assert post(serve, long_conversation()).headers["x-amzn-sagemaker-custom-attributes"]  # context budget
    assert post(serve, {**CHAT, "model": "nope"}).status_code == 400  # client error

    def names(lines: list[dict[str, Any]], *, requests_only: bool) -> set[str]:
        chosen = [d for d in lines if "Adapter" in d or not requests_only]
        return {m["Name"] for d in chosen for m in d["_aws"]["CloudWatchMetrics"][0]["Metrics"]}

    # Each request's line trails its answer (written after the relay ends, then read from a pipe), and
    # the engine's queue-wait figures need a scrape after the requests: wait for the whole state.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (
        names(serve.emf_lines(), requests_only=True) != set(RequestMetric) | set(BudgetMetric)
        or names(serve.emf_lines(), requests_only=False) != EMITTED
    ):
        time.sleep(0.05)
    lines = serve.emf_lines()
    for document in lines:
        check_emf(document)
    assert names(lines, requests_only=True) == set(RequestMetric) | set(BudgetMetric)
    assert names(lines, requests_only=False) == EMITTED


def test_without_runtime_adapters_the_adapter_routes_are_404(serve: Serve) -> None:
    expected = (
        "runtime adapters are off (LORA_RUNTIME_ADAPTERS=false): this container serves the adapters baked "
        "into the image (LORA_ADAPTERS)"
    )
    folder = serve.tmp / "model" / "adapters" / "manga_domain_v3"
    registration = httpx.post(serve.url + "/adapters", json={"name": "extra", "src": str(folder)}, timeout=10)
    assert (registration.status_code, message(registration)) == (404, expected)
    deletion = httpx.delete(serve.url + "/adapters/manga_domain_v3", timeout=10)
    assert (deletion.status_code, message(deletion)) == (404, expected)
    assert serve.engine_state()["lora_calls"] == []
    assert serve.ping().json()["adapters"] == list(ADAPTERS)  # type: ignore[union-attr]
