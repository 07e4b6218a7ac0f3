"""The context budget and OOM containment through the real ``serve`` process, against fake_vllm.

The fake counts tokens by words (``fake_vllm.count_tokens``), answers vLLM 0.26's 400 for a chat
prompt over ``--max-model-len`` and its exact 500 for a per-request out-of-memory error, which the
real CPU engine cannot be made to raise (tests/engine/test_real_context_budget.py covers the rest
against the real engine).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from serving_contract.context_budget import marker_text
from serving_contract.metrics import BudgetMetric, Dimension, RequestMetric
from tests.container.conftest import Serve
from tests.container.conversations import SYSTEM_PROMPT, conversation
from tests.container.fake_vllm import count_tokens
from tests.container.test_gateway_http import message, post, wait_for_emf

MAX_MODEL_LEN = 1024
HEADER = "x-amzn-sagemaker-custom-attributes"


def budget_report(response: httpx.Response) -> str | None:
    """The context budget's part of the custom-attributes header (the served versions follow it, issue 36)."""
    value = response.headers.get(HEADER, "")
    return value.split(";base_model=", 1)[0] if value.startswith("context_budget=") else None


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """A gateway whose fake engine has a 1,024-token context, summaries on with a short bound."""
    env = {
        "ENGINE_MAX_MODEL_LEN": str(MAX_MODEL_LEN),
        "WARMUP_PREFILL_TOKENS": "256",  # the prefill warm-up fits the short context (issue 35's check)
        "REQUEST_TIMEOUT_S": "10",
        "CONTEXT_BUDGET_GENERATION_RESERVE_TOKENS": "100",
    }
    server = Serve(tmp_path_factory.mktemp("budget"), env=env)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def summarizing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    env = {
        "ENGINE_MAX_MODEL_LEN": str(MAX_MODEL_LEN),
        "WARMUP_PREFILL_TOKENS": "256",  # the prefill warm-up fits the short context (issue 35's check)
        "REQUEST_TIMEOUT_S": "10",
        "CONTEXT_BUDGET_SUMMARIZE": "true",
        "CONTEXT_BUDGET_SUMMARY_TOKENS": "50",
        "CONTEXT_BUDGET_SUMMARY_TIMEOUT_S": "1",
    }
    server = Serve(tmp_path_factory.mktemp("summary"), env=env)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def engine_requests(serve: Serve) -> list[dict[str, Any]]:
    return [r for r in serve.engine_state()["requests"] if r.get("messages")]


def expected_drop(messages: list[dict[str, Any]], max_tokens: int, slack: int = 0) -> int:
    """Fewest oldest turns (user + assistant pairs after the system prompt) whose replacement by the
    marker makes the fake's count fit: what the gateway must choose."""
    turns = (len(messages) - 2) // 2
    for dropped in range(1, turns + 1):
        kept = [messages[0], {"role": "system", "content": marker_text(dropped)}, *messages[1 + 2 * dropped :]]
        if count_tokens(kept) + max_tokens + slack <= MAX_MODEL_LEN:
            return dropped
    raise AssertionError("nothing fits")


def test_a_request_that_fits_goes_to_the_engine_byte_for_byte_and_uncounted(serve: Serve) -> None:
    body = {"model": "jp_style_v1", "messages": conversation(3, 20), "max_tokens": 8}
    content = json.dumps(body, indent=1).encode()  # not how the gateway would serialise it
    before = serve.engine_state()["tokenize_calls"]
    response = post(serve, content=content, headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert budget_report(response) is None
    assert engine_requests(serve)[-1]["sha256"] == hashlib.sha256(content).hexdigest()
    assert serve.engine_state()["tokenize_calls"] == before  # no token counting on the usual path


def test_a_12_turn_conversation_over_max_model_len_keeps_the_system_prompt_and_latest_turn(serve: Serve) -> None:
    body: dict[str, Any] = {"messages": conversation(12, 100), "max_tokens": 8, "model": "manga_domain_v3"}
    original = count_tokens(body["messages"])
    assert original + 8 > MAX_MODEL_LEN
    response = post(serve, body)
    assert response.status_code == 200, response.text
    dropped = expected_drop(body["messages"], 8)
    sent = engine_requests(serve)[-1]["messages"]
    assert sent[0] == {"role": "system", "content": SYSTEM_PROMPT}  # the shared prefix first, whole
    marker = f"[Earlier conversation truncated \u2014 {dropped} turns not shown]"  # seed 001's words
    assert sent[1] == {"role": "system", "content": marker}
    assert sent[2:] == body["messages"][1 + 2 * dropped :]  # the most recent turns and the latest, whole
    trimmed = original - count_tokens(sent)
    assert budget_report(response) == f"context_budget=context_length;turns={dropped};tokens={trimmed};by=marker"
    line = wait_for_emf(serve, lambda d: BudgetMetric.TOKEN_BUDGET_TRIMMED in d)
    assert line[BudgetMetric.TOKEN_BUDGET_TRIMMED] == 1
    assert line[BudgetMetric.TRIMMED_TOKENS] == trimmed
    assert line[Dimension.ADAPTER] == "manga_domain_v3"
    assert line["_aws"]["CloudWatchMetrics"][0]["Dimensions"][-1][-1] == Dimension.ADAPTER


def test_a_request_without_max_tokens_is_given_the_generation_reserve(serve: Serve) -> None:
    body: dict[str, Any] = {"messages": conversation(12, 100)}
    response = post(serve, body)
    assert response.status_code == 200, response.text
    dropped = expected_drop(body["messages"], 100)  # CONTEXT_BUDGET_GENERATION_RESERVE_TOKENS
    assert f"turns={dropped};" in (budget_report(response) or "")


def test_a_trimmed_stream_carries_the_header(serve: Serve) -> None:
    body = {"messages": conversation(12, 100), "max_tokens": 8, "stream": True}
    with httpx.stream("POST", serve.url + "/invocations", json=body, timeout=10) as response:
        assert response.status_code == 200
        assert (budget_report(response) or "").startswith("context_budget=context_length;")
        text = response.read().decode()
    assert text.rstrip().endswith("data: [DONE]")


def test_a_caller_opts_out_and_gets_vllms_400(serve: Serve) -> None:
    body = {"messages": conversation(12, 100), "max_tokens": 8}
    response = post(serve, body, headers={HEADER: "context_budget=off"})
    assert response.status_code == 400
    assert "maximum context length is 1024 tokens" in message(response)


def test_a_latest_turn_too_long_for_any_trim_gets_vllms_400(serve: Serve) -> None:
    body = {"messages": conversation(2, 10, latest="word " * 1100), "max_tokens": 8}
    response = post(serve, body)
    assert response.status_code == 400
    assert "maximum context length" in message(response)


def test_an_oom_is_retried_once_with_the_older_half_compressed(serve: Serve) -> None:
    messages = conversation(12, 20, latest="oom-over:250")
    assert count_tokens(messages) > 250
    response = post(serve, {"messages": messages, "max_tokens": 8})
    assert response.status_code == 200, response.text
    first, retry = engine_requests(serve)[-2:]
    assert first["messages"] == messages
    assert retry["messages"][1]["content"] == marker_text(6)  # ceil(12 / 2)
    assert retry["messages"][2:] == messages[13:]
    trimmed = count_tokens(messages) - count_tokens(retry["messages"])
    assert budget_report(response) == f"context_budget=oom;turns=6;tokens={trimmed};by=marker"
    line = wait_for_emf(serve, lambda d: d.get("StatusCode") == 200 and d.get(RequestMetric.OUT_OF_MEMORY_ERRORS))
    assert line[RequestMetric.ENGINE_ERRORS] == 0


def test_an_oom_whose_retry_fails_gets_the_fallback_503_with_retry_after(serve: Serve) -> None:
    response = post(serve, {"messages": conversation(4, 20, latest="oom-over:1"), "max_tokens": 8})
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert budget_report(response) is None
    assert len([r for r in engine_requests(serve) if r["messages"][-1]["content"] == "oom-over:1"]) == 2
    line = wait_for_emf(serve, lambda d: d.get("StatusCode") == 503 and d.get(RequestMetric.OUT_OF_MEMORY_ERRORS))
    assert line[RequestMetric.ENGINE_ERRORS] == 1


def test_summaries_replace_the_dropped_turns_when_summarize_is_on(summarizing: Serve) -> None:
    body: dict[str, Any] = {"messages": conversation(12, 100), "max_tokens": 8}
    response = post(summarizing, body)
    assert response.status_code == 200, response.text
    summary_request, sent = engine_requests(summarizing)[-2:]
    assert summary_request["messages"][0]["content"].startswith("Summarise")
    dropped = expected_drop(body["messages"], 8, slack=50)  # room kept for a 50-token summary
    assert sent["messages"][1]["content"] == f"[Summary of {dropped} earlier turns] tok tok tok"
    assert (budget_report(response) or "").endswith(";by=summary")


def test_a_late_summary_falls_back_to_the_marker(summarizing: Serve) -> None:
    messages = conversation(12, 100)
    messages[1] = {"role": "user", "content": "slow-summary " + messages[1]["content"]}
    response = post(summarizing, {"messages": messages, "max_tokens": 8})
    assert response.status_code == 200, response.text
    sent = engine_requests(summarizing)[-1]["messages"]
    assert sent[1]["content"].startswith("[Earlier conversation truncated")
    assert (budget_report(response) or "").endswith(";by=marker")
    summarizing.log_line("summary failed (TimeoutError); using the marker")


def test_summary_turns_are_counted_from_the_engine(summarizing: Serve) -> None:
    """The fit uses the engine's /tokenize (never an estimate): each trim asks it more than once."""
    before = summarizing.engine_state()["tokenize_calls"]
    post(summarizing, {"messages": conversation(12, 100), "max_tokens": 8})
    calls = summarizing.engine_state()["tokenize_calls"] - before
    assert 3 <= calls <= 3 + math.ceil(math.log2(12))  # the original, all dropped, the search, the summary
