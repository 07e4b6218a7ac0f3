"""Request classes on the real vLLM 0.26.0 engine (issue 33): a conversation's first turn lands in
``cold`` and its follow-up (same history, now in the prefix cache) in ``warm``, in the EMF line
and on the gateway's ``/metrics``. The class comes from vLLM's own
``usage.prompt_tokens_details.cached_tokens``, which the container's argv turns on."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from serving_app.metrics.exposition import REQUEST_CLASS_LABEL, REQUEST_LATENCY, TIME_TO_FIRST_TOKEN
from serving_contract.metrics import Dimension, RequestMetric
from serving_contract.request_classes import WARM_MIN_CACHED_FRACTION_DEFAULT
from tests.engine.real_engine import BASE_MODEL, RealGateway

pytestmark = pytest.mark.real_engine


def class_counts(gateway: RealGateway) -> dict[tuple[str, str], float]:
    """(histogram, request class) -> observations so far, from the gateway's ``/metrics``."""
    text = httpx.get(gateway.url + "/metrics", timeout=10).text
    return {
        (sample.name.removesuffix("_count"), sample.labels[REQUEST_CLASS_LABEL]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name in {f"{TIME_TO_FIRST_TOKEN}_count", f"{REQUEST_LATENCY}_count"}
    }


def request_line(gateway: RealGateway, seen: int) -> dict[str, Any]:
    """The first request EMF line after the first ``seen`` ones; polled (the relay writes it as the
    stream closes, which can trail the client's read), bounded at 10 s."""
    deadline = time.monotonic() + 10
    while True:
        lines = [line for line in gateway.emf() if RequestMetric.REQUESTS in line][seen:]
        if lines:
            return lines[0]
        assert time.monotonic() < deadline, "no EMF line for the request"
        time.sleep(0.1)


def stream(gateway: RealGateway, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    response = httpx.post(gateway.url + "/invocations", json={**body, "stream": True}, timeout=60)
    assert response.status_code == 200, response.text
    events = [json.loads(part[6:]) for part in response.text.split("\n\n") if part.startswith("data: {")]
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
    return text, events


def test_a_first_turn_is_cold_and_its_follow_up_warm_in_emf_and_metrics(shared_gateway: RealGateway) -> None:
    # A history no earlier request sent (a fresh id first): only a partial first block could match.
    tag = uuid.uuid4().hex
    history = f"conversation {tag}: " + " ".join(f"volume {i} of series {tag[:6]} is on the shelf" for i in range(40))
    first_turn = [{"role": "user", "content": history}]
    base = {"model": BASE_MODEL, "max_tokens": 8, "temperature": 0}
    before = class_counts(shared_gateway)
    seen = sum(1 for line in shared_gateway.emf() if RequestMetric.REQUESTS in line)

    # Turn 1, a stream that did not ask for usage: the gateway asks vLLM and strips the usage event.
    answer, events = stream(shared_gateway, {**base, "messages": first_turn})
    assert all(e.get("choices") for e in events)
    cold = request_line(shared_gateway, seen)
    assert cold[Dimension.REQUEST_CLASS] == "cold", cold
    assert [Dimension.ENDPOINT, Dimension.VARIANT, Dimension.REQUEST_CLASS] in cold["_aws"]["CloudWatchMetrics"][0][
        "Dimensions"
    ]
    assert cold[RequestMetric.TIME_TO_FIRST_TOKEN] > 0 and cold[RequestMetric.INPUT_TOKENS] > 100

    # Turn 2: the same history, now in the prefix cache, plus a short question; this caller asks for
    # usage itself, so it gets vLLM's usage event, cached tokens included.
    follow_up = [*first_turn, {"role": "assistant", "content": answer}, {"role": "user", "content": "and next?"}]
    _, events = stream(shared_gateway, {**base, "messages": follow_up, "stream_options": {"include_usage": True}})
    usage = next(e["usage"] for e in events if e.get("usage") and not e.get("choices"))
    warm = request_line(shared_gateway, seen + 1)
    assert warm[Dimension.REQUEST_CLASS] == "warm", (warm, usage)
    assert usage["prompt_tokens_details"]["cached_tokens"] >= WARM_MIN_CACHED_FRACTION_DEFAULT * usage["prompt_tokens"]
    assert warm[RequestMetric.INPUT_TOKENS] == usage["prompt_tokens"]

    # /metrics: one TTFT and one latency observation in each class, cold first, then warm.
    after = class_counts(shared_gateway)
    for name in (TIME_TO_FIRST_TOKEN, REQUEST_LATENCY):
        assert after[(name, "cold")] - before[(name, "cold")] == 1
        assert after[(name, "warm")] - before[(name, "warm")] == 1
