"""The context budget against the real vLLM 0.26.0 engine (issue 38): a long conversation is
trimmed by the engine's own token counts and answered, the next turn still reads the shared system
prefix from vLLM's prefix cache, and a request that fits is what vLLM would have answered itself.

Uses the session's ``shared_gateway`` (``ENGINE_MAX_MODEL_LEN`` 2048); it leaves the engine as it
found it. The per-request out-of-memory path cannot be provoked on the CPU engine: it is tested
against the exact error shape in tests/container/test_context_budget_http.py, and engine death
(``/ping`` 503, the gateway exits) in test_real_engine_faults.py.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from serving_contract.context_budget import marker_text
from serving_contract.metrics import BudgetMetric, Dimension
from tests.container.conversations import SYSTEM_PROMPT, conversation
from tests.engine.real_engine import ENGINE_ENV, RealGateway

pytestmark = pytest.mark.real_engine

MAX_MODEL_LEN = int(ENGINE_ENV["ENGINE_MAX_MODEL_LEN"])
MAX_TOKENS = 8
HEADER = "x-amzn-sagemaker-custom-attributes"
LONG_SYSTEM = " ".join([SYSTEM_PROMPT] * 8)
"""A system prompt of several KV blocks, so its prefix-cache hit is visible in the counters."""


def count(gateway: RealGateway, messages: list[dict[str, Any]], **extra: Any) -> int:
    """Prompt tokens of ``messages`` by the engine's tokenizer and chat template."""
    response = httpx.post(gateway.engine_url + "/tokenize", json={"messages": messages, **extra}, timeout=30)
    assert response.status_code == 200, response.text
    return int(response.json()["count"])


def engine_counters(gateway: RealGateway) -> dict[str, float]:
    """vLLM's prefix-cache counters, its block size and how often ``/tokenize`` was called."""
    text = httpx.get(gateway.engine_url + "/metrics", timeout=10).text
    found: dict[str, float] = {"hits": 0.0, "queries": 0.0, "tokenize": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "vllm:prefix_cache_hits_total":
                found["hits"] += sample.value
            elif sample.name == "vllm:prefix_cache_queries_total":
                found["queries"] += sample.value
            elif sample.name == "vllm:cache_config_info":
                found["block_size"] = float(sample.labels["block_size"])
            elif sample.name == "http_requests_total" and sample.labels.get("handler") == "/tokenize":
                found["tokenize"] += sample.value
    return found


def long_messages(gateway: RealGateway, turns: int = 12) -> list[dict[str, Any]]:
    """``turns`` earlier turns under the long system prompt, over ``max_model_len`` with
    ``MAX_TOKENS`` (sized with the engine's own counts: the tiny model's tokenizer is its own)."""
    words = 20
    while True:
        messages = conversation(turns, words)
        messages[0] = {"role": "system", "content": LONG_SYSTEM}
        if count(gateway, messages) + MAX_TOKENS > MAX_MODEL_LEN + 200:
            return messages
        words += 20


def trimmed(messages: list[dict[str, Any]], dropped: int) -> list[dict[str, Any]]:
    return [messages[0], {"role": "system", "content": marker_text(dropped)}, *messages[1 + 2 * dropped :]]


def invoke(gateway: RealGateway, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(gateway.url + "/invocations", json=body, headers=headers, timeout=120)


def test_a_12_turn_conversation_over_max_model_len_is_trimmed_and_the_next_turn_hits_the_prefix_cache(
    shared_gateway: RealGateway,
) -> None:
    gateway = shared_gateway
    messages = long_messages(gateway)
    original = count(gateway, messages)
    assert original + MAX_TOKENS > MAX_MODEL_LEN
    body = {"messages": messages, "max_tokens": MAX_TOKENS, "temperature": 0}
    assert invoke(gateway, body, {HEADER: "context_budget=off"}).status_code == 400  # what callers got before

    response = invoke(gateway, body)
    assert response.status_code == 200, response.text
    attributes = dict(item.split("=", 1) for item in response.headers[HEADER].split(";"))
    assert attributes["context_budget"] == "context_length" and attributes["by"] == "marker"
    dropped = int(attributes["turns"])
    sent = count(gateway, trimmed(messages, dropped))
    # What reached vLLM is the marker version: its prompt has exactly that many tokens, it fits,
    # and replacing one turn fewer would not have.
    assert response.json()["usage"]["prompt_tokens"] == sent
    fewer = trimmed(messages, dropped - 1) if dropped > 1 else messages
    assert sent + MAX_TOKENS <= MAX_MODEL_LEN < count(gateway, fewer) + MAX_TOKENS
    assert int(attributes["tokens"]) == original - sent
    gateway.wait_for_log(f"context budget: replaced {dropped} of 12 turns")
    line = next(d for d in reversed(gateway.emf()) if BudgetMetric.TOKEN_BUDGET_TRIMMED in d)
    assert line[BudgetMetric.TOKEN_BUDGET_TRIMMED] == 1
    assert line[BudgetMetric.TRIMMED_TOKENS] == original - sent
    assert line[Dimension.ADAPTER] == "base"

    # The next turn: the client resends the history with the answer and a new question.
    answer = response.json()["choices"][0]["message"]["content"]
    follow_up = [*messages, {"role": "assistant", "content": answer}, {"role": "user", "content": "And after that?"}]
    system_tokens = count(gateway, messages[:1], add_generation_prompt=False)
    before = engine_counters(gateway)
    second = invoke(gateway, {"messages": follow_up, "max_tokens": MAX_TOKENS, "temperature": 0})
    after = engine_counters(gateway)
    assert second.status_code == 200, second.text
    assert second.headers[HEADER].startswith("context_budget=context_length;")
    block = int(before["block_size"])
    assert system_tokens >= 2 * block, "the system prompt must span whole KV blocks for this check"
    hits = after["hits"] - before["hits"]
    # vLLM counts hits in tokens of whole blocks: at least every full block of the system prefix.
    assert hits >= (system_tokens // block) * block, (hits, system_tokens, block)


def test_a_request_that_fits_is_answered_as_vllm_answers_it_and_never_counted(shared_gateway: RealGateway) -> None:
    gateway = shared_gateway
    messages = conversation(3, 10)
    body = {"messages": messages, "max_tokens": MAX_TOKENS, "temperature": 0}
    direct = httpx.post(gateway.engine_url + "/v1/chat/completions", json={**body, "model": "base"}, timeout=60)
    before = engine_counters(gateway)["tokenize"]
    count(gateway, messages)
    counted = engine_counters(gateway)["tokenize"]
    assert counted > before  # vLLM counts /tokenize calls (so the check below can fail)
    response = invoke(gateway, body)
    assert response.status_code == 200, response.text
    # The header names the served versions (issue 36), never a trim here.
    assert "context_budget=" not in response.headers.get(HEADER, "")
    assert engine_counters(gateway)["tokenize"] == counted  # the usual path never asks /tokenize
    assert response.json()["choices"] == direct.json()["choices"]
    # The same tokens either way; only the prefix cache differs: the direct call computed it, this
    # one reads it (usage.prompt_tokens_details, on since issue 33).
    served, expected = response.json()["usage"], direct.json()["usage"]
    cached = {
        key: usage.pop("prompt_tokens_details", {}).get("cached_tokens", 0)
        for key, usage in (("served", served), ("expected", expected))
    }
    assert served == expected
    assert cached["served"] >= cached["expected"]
