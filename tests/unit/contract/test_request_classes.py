"""serving_contract.request_classes: cold/warm from vLLM's usage (issue 33)."""

from __future__ import annotations

from typing import Any

import pytest

from serving_contract.request_classes import (
    WARM_MIN_CACHED_FRACTION_DEFAULT,
    RequestClass,
    cached_prompt_tokens,
    classify_usage,
    request_class,
)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        # vLLM 0.22 leaves prompt_tokens_details out when nothing was cached: 0 cached, cold.
        ({"prompt_tokens": 2380, "completion_tokens": 180}, RequestClass.COLD),
        # A first turn: only the block-aligned shared prefix (592 of 2,380 tokens) hit.
        ({"prompt_tokens": 2380, "prompt_tokens_details": {"cached_tokens": 592}}, RequestClass.COLD),
        # A follow-up with its history cached: ~90 % hit.
        ({"prompt_tokens": 2200, "prompt_tokens_details": {"cached_tokens": 1984}}, RequestClass.WARM),
        # Exactly at the threshold counts as warm.
        ({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 50}}, RequestClass.WARM),
        ({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 49}}, RequestClass.COLD),
        # Nonsense counts read as nothing cached.
        ({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": True}}, RequestClass.COLD),
        ({"prompt_tokens": 100, "prompt_tokens_details": None}, RequestClass.COLD),
        # No prompt count: no class.
        ({"completion_tokens": 3}, None),
        ({"prompt_tokens": "100"}, None),
    ],
)
def test_classify_usage(usage: dict[str, Any], expected: RequestClass | None) -> None:
    assert classify_usage(usage, WARM_MIN_CACHED_FRACTION_DEFAULT) is expected


def test_the_threshold_moves_the_boundary() -> None:
    assert request_class(100, 30, 0.25) is RequestClass.WARM
    assert request_class(100, 30, 0.5) is RequestClass.COLD
    assert request_class(0, 0, 0.5) is RequestClass.COLD
    assert cached_prompt_tokens({"prompt_tokens_details": {"cached_tokens": -4}}) == 0


def test_the_default_sits_between_a_first_turns_hits_and_a_follow_ups() -> None:
    # The prompt layout the default is derived from (app_config.monitoring, seed 002 §3).
    first_turn = (600 // 16) * 16 / 2380
    follow_up = (2200 - 220) / 2200
    assert first_turn < WARM_MIN_CACHED_FRACTION_DEFAULT < follow_up
