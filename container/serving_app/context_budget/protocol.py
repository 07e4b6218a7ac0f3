"""The context budget's shapes: a conversation split into what stays and what may go, the trimmed
message lists, vLLM 0.26's answers the budget acts on, and the header that reports a trim.

Pure functions, no I/O: :mod:`serving_app.context_budget.serving` counts tokens with the engine
and decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from serving_app.engine.monitor import reports_dead_engine
from serving_app.sagemaker.protocol import CUSTOM_ATTRIBUTES_HEADER, parse_custom_attributes
from serving_app.sagemaker.relay import is_oom
from serving_contract import context_budget as spec

Message = dict[str, Any]

HEAD_ROLES: Final = frozenset({"system", "developer"})
"""Leading messages of these roles are the shared prefix: kept whole, always first."""

CONTEXT_LENGTH_MESSAGE: Final = b"maximum context length"
"""In every 400 vLLM 0.26 answers for a prompt (+ max_tokens) over ``max_model_len``:
``TokenizeParams._token_len_check`` / ``_text_len_check`` in vllm/renderers/params.py ("This
model's maximum context length is N tokens. However, you requested M output tokens and your
prompt contains K input tokens ...") and ``get_max_tokens`` in vllm/entrypoints/serve/utils/api_utils.py
("Input length (K) exceeds model's maximum context length (N).")."""

RESPONSE_HEADER: Final = CUSTOM_ATTRIBUTES_HEADER
"""The trim is reported in ``X-Amzn-SageMaker-Custom-Attributes``: the one response header
SageMaker hands back to the caller (``CustomAttributes`` of InvokeEndpoint and
InvokeEndpointWithResponseStream)."""


def exceeds_context(status: int, content: bytes) -> bool:
    """vLLM refused the request because prompt + max_tokens is over ``max_model_len``."""
    return status == 400 and CONTEXT_LENGTH_MESSAGE in content


def is_request_oom(status: int, content: bytes) -> bool:
    """vLLM answered a per-request out-of-memory error and its engine core is alive.

    vLLM 0.26's V1 engine core has no per-request OOM: a ``torch.OutOfMemoryError`` in a forward
    pass ends ``EngineCoreProc.run_busy_loop`` ("EngineCore encountered a fatal error",
    vllm/v1/engine/core.py), every request then gets ``EngineDeadError`` (500, "EngineCore
    encountered an issue. ...") and the API server exits: that is engine death
    (``reports_dead_engine``), never retried. An OOM raised while the API server handles one
    request (rendering, tokenizing, output processing) is caught by the route and answered 500
    ``{"error": {"message": "CUDA out of memory. Tried to allocate ...", "type":
    "InternalServerError", "param": null, "code": 500}}`` (``create_error_response`` in
    vllm/entrypoints/serve/utils/error_response.py) with the engine still serving: that one is retried.
    """
    return status >= 500 and is_oom(content) and not reports_dead_engine(content)


def opted_out(headers: Mapping[str, str]) -> bool:
    """The caller sent ``CustomAttributes: context_budget=off``."""
    attributes = parse_custom_attributes(headers.get(CUSTOM_ATTRIBUTES_HEADER))
    return attributes.get(spec.OPT_OUT_ATTRIBUTE, "").lower() == spec.OPT_OUT_VALUE


@dataclass(frozen=True, slots=True)
class Conversation:
    """A chat request's messages in three parts.

    Attributes:
        head: the leading system/developer messages (the shared prefix), kept whole.
        turns: the history between them and the latest user turn, oldest first; a turn is a user
            message and what followed it (assistant and tool messages), the first turn may start
            with non-user messages.
        tail: the latest user message and anything after it, kept whole.
    """

    head: tuple[Message, ...]
    turns: tuple[tuple[Message, ...], ...]
    tail: tuple[Message, ...]

    @classmethod
    def split(cls, messages: Sequence[Message]) -> Conversation:
        """Split ``messages`` (a request's ``messages``, already validated as a list of objects)."""
        start = 0
        while start < len(messages) and messages[start].get("role") in HEAD_ROLES:
            start += 1
        last_user = max((i for i in range(start, len(messages)) if messages[i].get("role") == "user"), default=None)
        if last_user is None:
            return cls(tuple(messages[:start]), (), tuple(messages[start:]))
        turns: list[list[Message]] = []
        for message in messages[start:last_user]:
            if message.get("role") == "user" or not turns:
                turns.append([])
            turns[-1].append(message)
        return cls(tuple(messages[:start]), tuple(tuple(t) for t in turns), tuple(messages[last_user:]))

    def without(self, dropped: int, replacement: Message) -> list[Message]:
        """The messages with the oldest ``dropped`` turns replaced by ``replacement``, placed right
        after the head so the head's prefix-cache blocks still match."""
        kept = [message for turn in self.turns[dropped:] for message in turn]
        return [*self.head, replacement, *kept, *self.tail]


def marker_message(turns: int) -> Message:
    """The truncation marker for ``turns`` dropped turns (seed 001's text, a system message)."""
    return {"role": "system", "content": spec.marker_text(turns)}


def summary_message(turns: int, summary: str) -> Message:
    """The summary of ``turns`` dropped turns, in place of the marker."""
    return {"role": "system", "content": spec.SUMMARY_PREFIX_TEMPLATE.format(turns=turns) + summary.strip()}


def transcript(turns: Sequence[Sequence[Message]]) -> str:
    """The dropped turns as ``role: text`` lines for the summary request (non-text parts left out)."""
    lines = []
    for turn in turns:
        for message in turn:
            content = message.get("content")
            if isinstance(content, list):
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            if content:
                lines.append(f"{message.get('role', 'user')}: {content}")
    return "\n".join(lines)


SUMMARY_INSTRUCTION: Final = (
    "Summarise the conversation below for the assistant that continues it: the customer's preferences, "
    "the titles discussed and any open question. Plain sentences, no preamble."
)


@dataclass(frozen=True, slots=True)
class Trim:
    """What the budget did to one request, for the response header and the EMF line.

    Attributes:
        reason: ``context_length`` (vLLM's 400) or ``oom`` (a per-request out-of-memory error).
        turns: turns replaced.
        tokens: prompt tokens the request lost (the engine's count before less after).
        by: ``marker`` or ``summary``.
    """

    reason: str
    turns: int
    tokens: int
    by: str

    def header_value(self) -> str:
        """``context_budget=<reason>;turns=<n>;tokens=<n>;by=<marker|summary>``."""
        return f"{spec.OPT_OUT_ATTRIBUTE}={self.reason};turns={self.turns};tokens={self.tokens};by={self.by}"
