"""Request classes: ``cold`` (most of the prompt missed the prefix cache) and ``warm``.

A conversation's first turn prefills ~1,800-2,000 tokens nobody has sent before; a follow-up whose
history is still in the prefix cache prefills ~220. Their TTFTs differ ~10x (docs/performance.md,
"Request classes"), so one TTFT p95 over both cannot tell a healthy fleet from a broken one: the
alarms, rollback guardrails and canary gates read TTFT per class (config ``slo``).

The class comes from vLLM's own per-request count of prompt tokens served from the prefix cache,
``usage.prompt_tokens_details.cached_tokens``. vLLM reports it only with
``--enable-prompt-tokens-details`` (``vllm/entrypoints/openai/cli_args.py``). vLLM 0.22 left
``prompt_tokens_details`` out when the count was 0 (``chat_completion/serving.py``: ``if
self.enable_prompt_tokens_details and num_cached_tokens``); vLLM 0.26 sends ``cached_tokens: 0``
(``_make_prompt_tokens_details`` there). Either way a missing count reads as 0 cached.
The gateway, ``ops load`` and the GPU harness all classify with :func:`request_class`.

Standard library only: the container image copies this package in as-is.
"""

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final


class RequestClass(StrEnum):
    """The value of the ``RequestClass`` dimension (EMF) and ``request_class`` label (/metrics)."""

    COLD = "cold"
    WARM = "warm"


WARM_MIN_CACHED_FRACTION_DEFAULT: Final = 0.5
"""A request is ``warm`` when at least this fraction of its prompt tokens came from the prefix cache.

Source: MangaAssist's prompt layout (seed 002 §3 context budget; app_config.monitoring): a first
turn can hit only the shared 600-token system prefix, block-aligned 592 of ~2,380 prompt tokens
(24.9 %; measured 24.8 % on an H200, benchmarks/results/h200-2026-11-25/capacity.json ``fresh``);
a follow-up whose history is cached misses only its new turn, ~220 of ~2,200 tokens (~90 %). 0.5
sits between the two with room either side for block alignment and partial evictions."""


def cached_prompt_tokens(usage: Mapping[str, Any]) -> int:
    """``usage.prompt_tokens_details.cached_tokens``, 0 when vLLM left it out (0 cached) or it is
    not a non-negative integer."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return cached if isinstance(cached, int) and not isinstance(cached, bool) and cached > 0 else 0


def request_class(prompt_tokens: int, cached_tokens: int, warm_min_cached_fraction: float) -> RequestClass:
    """``warm`` when ``cached_tokens / prompt_tokens >= warm_min_cached_fraction``, else ``cold``.

    Args:
        prompt_tokens: ``usage.prompt_tokens`` (> 0 for any request vLLM ran; 0 reads as cold).
        cached_tokens: :func:`cached_prompt_tokens` of the same usage.
        warm_min_cached_fraction: 0 < fraction <= 1 (:data:`WARM_MIN_CACHED_FRACTION_DEFAULT`).
    """
    if prompt_tokens <= 0:
        return RequestClass.COLD
    return RequestClass.WARM if cached_tokens >= warm_min_cached_fraction * prompt_tokens else RequestClass.COLD


def classify_usage(usage: Mapping[str, Any], warm_min_cached_fraction: float) -> RequestClass | None:
    """The class of a request from its OpenAI ``usage`` object; None when it has no prompt count."""
    prompt = usage.get("prompt_tokens")
    if not isinstance(prompt, int) or isinstance(prompt, bool):
        return None
    return request_class(prompt, cached_prompt_tokens(usage), warm_min_cached_fraction)
