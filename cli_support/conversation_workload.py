"""MangaAssist's conversations as token ids: the request shape, one conversation's prompts, and the
router that sends its turns to engines. Standard library only.

Shared by the closed-loop benchmarks (``benchmarks/conversations.py``, whose docstring gives the
shape's sources), the open-loop sweep (``cdk_constructs/capacity_job/runtime/sweep.py``) and the capacity job
that runs that sweep in the serving image (``cdk_constructs/capacity_job/runtime``).

Every prompt is the shared system prompt (``shared_prefix_tokens``), the conversation's retrieved
context (``conversation_tokens``), its history (each earlier user message and the answer vLLM
actually generated) and the turn's user message (``turn_tokens``); answers are exactly
``output_tokens`` long. 4 turns a conversation, every fifth 5 (4.2 on average, seed 002).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Route = Literal["least_outstanding", "affinity"]

TOKEN_ID_RANGE = (16, 1000)
"""Prompt token ids are drawn from here: inside the synthetic tokenizer's 1,024 tokens and past
its special tokens (benchmarks/synthetic_model.py), so vLLM accepts and can detokenize them."""


@dataclass(frozen=True)
class RequestShape:
    """MangaAssist's prompt layout and answer length, tokens (module docstring for sources)."""

    shared_prefix_tokens: int = 600
    conversation_tokens: int = 1400
    turn_tokens: int = 40
    output_tokens: int = 180
    long_conversation_every: int = 5
    """Every n-th conversation has 5 turns, the rest 4: 4.2 on average for n = 5 (seed 002)."""

    def turns(self, conversation: int) -> int:
        """Turns of conversation number ``conversation``."""
        return 5 if conversation % self.long_conversation_every == self.long_conversation_every - 1 else 4

    @property
    def mean_turns(self) -> float:
        """Mean turns per conversation (4.2 with the defaults)."""
        n = self.long_conversation_every
        return (4 * (n - 1) + 5) / n

    def prompt_tokens(self, turn: int) -> int:
        """Prompt length of turn ``turn`` (0-based) when every earlier answer was ``output_tokens`` long."""
        return (
            self.shared_prefix_tokens
            + self.conversation_tokens
            + turn * (self.turn_tokens + self.output_tokens)
            + self.turn_tokens
        )

    @property
    def mean_prompt_tokens(self) -> float:
        """Mean prompt over every turn of every conversation (2,396 with the defaults)."""
        n = self.long_conversation_every
        turns = [t for c in range(n) for t in range(self.turns(c))]
        return statistics.fmean(self.prompt_tokens(t) for t in turns)

    def turn_cycle(self) -> list[int]:
        """Turn indexes of ``long_conversation_every`` conversations in order: the real mix of turns."""
        return [t for c in range(self.long_conversation_every) for t in range(self.turns(c))]


def _tokens(rng: random.Random, count: int) -> list[int]:
    return [rng.randrange(*TOKEN_ID_RANGE) for _ in range(count)]


@dataclass
class Conversation:
    """One conversation: its adapter, its context, and the history so far (token ids)."""

    number: int
    adapter: str
    turns: int
    context: list[int]
    rng: random.Random
    history: list[int] = field(default_factory=list)
    turn: int = 0
    engine: int | None = None

    def next_prompt(self, shape: RequestShape) -> list[int]:
        """The next turn's prompt: context + history + a new user message (kept in the history)."""
        message = _tokens(self.rng, shape.turn_tokens)
        prompt = self.context + self.history + message
        self.history += message
        return prompt


class Workload:
    """Makes conversations (deterministic per ``seed``) and routes their turns to engines."""

    def __init__(
        self,
        shape: RequestShape,
        adapters: Sequence[str],
        engines: int,
        route: Route,
        seed: int,
    ) -> None:
        self.shape = shape
        self.adapters = list(adapters)
        self.route = route
        self.in_flight = [0] * engines
        self._rng = random.Random(seed)
        self._shared = _tokens(random.Random(0), shape.shared_prefix_tokens)  # one system prompt for every run
        self._seed = seed
        self._next = 0
        self._turn_cycle = shape.turn_cycle()

    def new_conversation(self) -> Conversation:
        """The next conversation: adapters round-robin, its own retrieved context."""
        number = self._next
        self._next += 1
        rng = random.Random(f"{self._seed}-{number}")
        return Conversation(
            number=number,
            adapter=self.adapters[number % len(self.adapters)],
            turns=self.shape.turns(number),
            context=self._shared + _tokens(rng, self.shape.conversation_tokens),
            rng=rng,
        )

    def resume(self, conversation: Conversation, turn: int) -> None:
        """Give ``conversation`` the history of ``turn`` earlier turns (random messages and answers
        of the shape's lengths, never sent to an engine), so its next prompt is turn ``turn``'s."""
        conversation.turn = turn
        conversation.history = _tokens(conversation.rng, turn * (self.shape.turn_tokens + self.shape.output_tokens))

    def fresh_request(self) -> tuple[Conversation, list[int]]:
        """A turn of a conversation no engine has seen: history of the right length, random answers."""
        conversation = self.new_conversation()
        self.resume(conversation, self._turn_cycle[conversation.number % len(self._turn_cycle)])
        return conversation, conversation.next_prompt(self.shape)

    def pick_engine(self, conversation: Conversation) -> int:
        """Least outstanding requests (random among ties), or the conversation's engine under affinity."""
        if self.route == "affinity" and conversation.engine is not None:
            return conversation.engine
        fewest = min(self.in_flight)
        engine = self._rng.choice([i for i, n in enumerate(self.in_flight) if n == fewest])
        conversation.engine = engine
        return engine


def completion_body(adapter: str, prompt: list[int], output_tokens: int) -> dict[str, Any]:
    """A streaming completion of exactly ``output_tokens`` (``ignore_eos``) that returns token ids."""
    return {
        "model": adapter,
        "prompt": prompt,
        "max_tokens": output_tokens,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "return_token_ids": True,
    }
