"""The context budget's pure parts: how a conversation splits, what replaces the dropped turns,
which vLLM answers bring the budget in, and its settings (issue 38)."""

from __future__ import annotations

from typing import Any

import pytest

from serving_app.context_budget.protocol import (
    Conversation,
    Trim,
    exceeds_context,
    is_request_oom,
    marker_message,
    opted_out,
    transcript,
)
from serving_app.settings import Settings, SettingsError
from tests.container.fake_vllm import OOM_MESSAGE


def msg(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "content": content}


def test_a_conversation_splits_into_system_prefix_whole_turns_and_the_latest_turn() -> None:
    messages = [
        msg("system", "s1"),
        msg("developer", "s2"),
        msg("assistant", "hello"),  # a greeting before any question: a turn of its own
        msg("user", "u1"),
        msg("assistant", "a1"),
        msg("tool", "t1"),
        msg("user", "u2"),
        msg("assistant", "a2"),
        msg("user", "latest"),
    ]
    conversation = Conversation.split(messages)
    assert conversation.head == (messages[0], messages[1])
    assert conversation.turns == ((messages[2],), tuple(messages[3:6]), tuple(messages[6:8]))
    assert conversation.tail == (messages[8],)
    replaced = conversation.without(2, marker_message(2))
    assert replaced == [messages[0], messages[1], marker_message(2), messages[6], messages[7], messages[8]]


def test_the_marker_is_seed_001s_text() -> None:
    assert marker_message(8) == {
        "role": "system",
        "content": "[Earlier conversation truncated \u2014 8 turns not shown]",
    }


def test_a_conversation_without_history_has_nothing_to_trim() -> None:
    assert Conversation.split([msg("system", "s"), msg("user", "q")]).turns == ()
    only_system = Conversation.split([msg("system", "s")])
    assert (only_system.turns, only_system.tail) == ((), ())
    prefill = Conversation.split([msg("user", "q"), msg("assistant", "Sure,")])  # continue_final_message
    assert prefill.tail == (msg("user", "q"), msg("assistant", "Sure,"))


def test_only_vllms_context_length_400_and_a_live_engines_oom_bring_the_budget_in() -> None:
    too_long = b'{"error":{"message":"This model\'s maximum context length is 2048 tokens. However, ...","code":400}}'
    assert exceeds_context(400, too_long)
    assert not exceeds_context(400, b'{"error":{"message":"max_tokens must be at least 1"}}')
    assert not exceeds_context(500, too_long)
    oom = ('{"error":{"message":"' + OOM_MESSAGE + '","type":"InternalServerError","param":null,"code":500}}').encode()
    assert is_request_oom(500, oom)
    dead = b'{"error":{"message":"EngineCore encountered an issue. See stack trace (above) for the root cause."}}'
    assert not is_request_oom(500, dead)  # engine death is not retried
    assert not is_request_oom(500, dead[:-3] + b' CUDA out of memory"}}')
    assert not is_request_oom(400, oom)


def test_opting_out_is_a_custom_attribute() -> None:
    assert opted_out({"x-amzn-sagemaker-custom-attributes": "adapter=a; context_budget=OFF"})
    assert not opted_out({"x-amzn-sagemaker-custom-attributes": "context_budget=on"})
    assert not opted_out({})


def test_the_header_value_says_what_was_trimmed() -> None:
    trim = Trim(reason="context_length", turns=8, tokens=1234, by="summary")
    assert trim.header_value() == "context_budget=context_length;turns=8;tokens=1234;by=summary"


def test_the_transcript_keeps_text_and_roles() -> None:
    turns = ((msg("user", "u1"), {"role": "assistant", "content": [{"type": "text", "text": "a1"}]}),)
    assert transcript(turns) == "user: u1\nassistant: a1"


def test_settings_default_to_the_seed_budget_and_name_a_bad_variable() -> None:
    settings = Settings.from_env({})
    assert settings.context_budget_enabled is True
    assert settings.context_budget_generation_reserve_tokens == 696
    assert settings.context_budget_summary_tokens == 400
    assert Settings.from_env({"CONTEXT_BUDGET_ENABLED": "off"}).context_budget_enabled is False
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"CONTEXT_BUDGET_GENERATION_RESERVE_TOKENS": "0"})
    assert str(caught.value) == "CONTEXT_BUDGET_GENERATION_RESERVE_TOKENS = '0': must be >= 1"
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"CONTEXT_BUDGET_SUMMARIZE": "maybe"})
    assert str(caught.value) == "CONTEXT_BUDGET_SUMMARIZE = 'maybe': must be true or false"
