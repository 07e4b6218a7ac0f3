"""Chat bodies for the context-budget tests (fake engine and real engine alike)."""

from __future__ import annotations

from typing import Any

SYSTEM_PROMPT = "You are MangaAssist, a shopping assistant for manga. Answer briefly and politely."


def conversation(turns: int, words_per_turn: int, *, latest: str = "What should I read next?") -> list[dict[str, Any]]:
    """System prompt, ``turns`` earlier user/assistant pairs of about ``words_per_turn`` words each
    (half in the question, half in the answer), then the latest user turn."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
    half = max(1, words_per_turn // 2)
    for turn in range(turns):
        messages.append({"role": "user", "content": " ".join(f"question{turn}w{i}" for i in range(half))})
        messages.append({"role": "assistant", "content": " ".join(f"answer{turn}w{i}" for i in range(half))})
    messages.append({"role": "user", "content": latest})
    return messages


def long_conversation(max_tokens: int = 8) -> dict[str, Any]:
    """A 12-turn chat body over the fake engine's default 4,096-token context (12 x 400 words)."""
    return {"messages": conversation(12, 400), "max_tokens": max_tokens}
