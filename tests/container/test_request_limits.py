"""Per-request limits (issue 22 item 1): the real gateway refuses work-multiplying fields with a 400.

On e706d98 every body here was forwarded and answered 200 (``"n": 1000`` included).
"""

from __future__ import annotations

from typing import Any

import pytest

from serving_app.sagemaker.limits import RequestLimits
from serving_app.settings import Settings
from serving_contract import env
from serving_contract import request_limits as spec
from tests.container.conftest import Serve
from tests.container.test_gateway_http import CHAT, message, post

PROMPT = {"prompt": "hello", "max_tokens": 2}


@pytest.mark.parametrize(
    ("body", "text"),
    [
        ({**CHAT, "n": 1000}, "n = 1000 is over the limit: at most 4 sequences per request (REQUEST_MAX_SEQUENCES)"),
        ({**CHAT, "n": "1000"}, "n = '1000' is invalid: must be an integer from 1 to 4 (REQUEST_MAX_SEQUENCES)"),
        ({**PROMPT, "best_of": 50}, "best_of = 50 is over the limit: at most 4 sequences per request"),
        (
            {**PROMPT, "prompt": ["a", "b", "c"], "n": 2},
            "prompt holds 3 prompts x n = 2: at most 4 sequences per request (REQUEST_MAX_SEQUENCES)",
        ),
        ({**PROMPT, "logprobs": 20}, "logprobs = 20 is not allowed: must be an integer from 0 to 5"),
        ({**CHAT, "logprobs": True, "top_logprobs": 6}, "top_logprobs = 6 is not allowed: must be an integer from 0"),
        ({**CHAT, "prompt_logprobs": -1}, "prompt_logprobs = -1 is not allowed: must be an integer from 0 to 5"),
        ({**CHAT, "stop": ["a", "b", "c", "d", "e"]}, "stop has 5 entries: at most 4 (REQUEST_MAX_STOP_SEQUENCES)"),
        ({**CHAT, "stop": "x" * 257}, "stop has an entry of 257 characters: at most 256"),
        ({**CHAT, "bad_words": ["w"] * 9}, "bad_words has 9 entries: at most 4"),
        ({**CHAT, "stop_token_ids": list(range(300))}, "stop_token_ids has 300 entries: at most 256"),
        ({**CHAT, "logit_bias": {str(i): 1.0 for i in range(257)}}, "logit_bias has 257 entries: at most 256"),
    ],
)
def test_work_multiplying_fields_over_their_limit_answer_400_naming_the_field(
    serve: Serve, body: dict[str, Any], text: str
) -> None:
    before = len(serve.engine_state()["requests"])
    response = post(serve, body)
    assert response.status_code == 400
    assert text in message(response)
    assert len(serve.engine_state()["requests"]) == before  # vLLM never saw it


def test_values_within_the_limits_reach_the_engine(serve: Serve) -> None:
    body = {**CHAT, "n": 4, "logprobs": True, "top_logprobs": 5, "stop": ["\n", "###"], "stop_token_ids": [1, 2]}
    before = len(serve.engine_state()["requests"])
    assert post(serve, body).status_code == 200
    assert len(serve.engine_state()["requests"]) == before + 1


def test_limits_come_from_the_environment() -> None:
    settings = Settings.from_env({env.REQUEST_MAX_SEQUENCES: "8", env.REQUEST_MAX_LOGPROBS: "0"})
    limits = RequestLimits.from_settings(settings)
    assert limits.violation({**CHAT, "n": 8}, is_chat=True) is None
    assert limits.violation({**PROMPT, "logprobs": 1}, is_chat=False) == (
        "logprobs = 1 is not allowed: must be an integer from 0 to 0 (REQUEST_MAX_LOGPROBS)"
    )


def test_a_limit_above_vllms_own_cap_stops_the_container() -> None:
    with pytest.raises(ValueError, match=r"REQUEST_MAX_SEQUENCES = '16385': must be <= 16384"):
        Settings.from_env({env.REQUEST_MAX_SEQUENCES: str(spec.VLLM_MAX_N_SEQUENCES + 1)})


# -- the body's size, relative to the engine's context (issue 49, finding 4) ----------------------------
MESSAGES_BOUND = (
    "at most 819, what one context holds (ENGINE_MAX_MODEL_LEN=4096 tokens / 5 chat-template tokens per "
    "message); send the most recent turns"
)


def test_a_chat_with_more_messages_than_a_context_holds_answers_400_naming_the_field(serve: Serve) -> None:
    before = len(serve.engine_state()["requests"])
    response = post(serve, {"messages": [{"role": "user", "content": "a"}] * 820})
    assert response.status_code == 400
    assert message(response) == f"messages has 820 entries: {MESSAGES_BOUND}"
    assert len(serve.engine_state()["requests"]) == before  # vLLM never saw it
    assert post(serve, {"messages": [{"role": "user", "content": "a"}] * 819}).status_code == 200


def test_a_body_over_the_context_bound_answers_413_naming_the_setting(serve: Serve) -> None:
    response = post(serve, {"prompt": "x" * 262_144})  # 262,158 bytes of JSON
    assert response.status_code == 413
    assert message(response) == (
        "body is 262158 bytes (Content-Length): at most 262144 bytes "
        "(ENGINE_MAX_MODEL_LEN=4096 tokens x REQUEST_MAX_BODY_BYTES_PER_TOKEN=64)"
    )


def test_size_bounds_follow_the_engines_context() -> None:
    limits = RequestLimits.from_settings(
        Settings.from_env(
            {
                env.ENGINE_MAX_MODEL_LEN: "2048",
                env.WARMUP_PREFILL_TOKENS: "0",
                env.REQUEST_MAX_BODY_BYTES_PER_TOKEN: "16",
            }
        )
    )
    assert (limits.max_body_bytes, limits.max_messages) == (32_768, 409)
    assert limits.body_violation(32_768) is None
    assert limits.body_violation(32_769) == (
        "body is 32769 bytes: at most 32768 bytes "
        "(ENGINE_MAX_MODEL_LEN=2048 tokens x REQUEST_MAX_BODY_BYTES_PER_TOKEN=16)"
    )
    assert limits.messages_violation({"messages": [{}] * 409}) is None
    assert limits.messages_violation({"messages": [{}] * 410}) == (
        "messages has 410 entries: at most 409, what one context holds (ENGINE_MAX_MODEL_LEN=2048 tokens / 5 "
        "chat-template tokens per message); send the most recent turns"
    )
    assert limits.messages_violation({"messages": "not a list"}) is None  # the request model refuses it


def test_the_body_bound_is_refused_outside_its_range() -> None:
    with pytest.raises(ValueError, match=r"REQUEST_MAX_BODY_BYTES_PER_TOKEN = '7': must be >= 8"):
        Settings.from_env({env.REQUEST_MAX_BODY_BYTES_PER_TOKEN: "7"})
