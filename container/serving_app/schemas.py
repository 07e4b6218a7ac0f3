"""Pydantic models of the ``/invocations`` bodies the gateway accepts.

Only what the gateway relies on is validated (shape, ``model``, ``stream``, token limits);
every other OpenAI field passes through untouched (``extra="allow"``) and vLLM validates it,
answering 400 itself when a value is out of range.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr


class _Base(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    model: StrictStr | None = Field(None, max_length=256)
    stream: StrictBool = False
    max_tokens: StrictInt | None = Field(None, ge=1)
    stream_options: dict[str, Any] | None = None


class ChatMessage(BaseModel):
    """One chat message: content is text or OpenAI content parts."""

    model_config = ConfigDict(extra="allow", frozen=True)

    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: StrictStr | list[dict[str, Any]] | None = None


class ChatCompletionBody(_Base):
    """``POST /v1/chat/completions`` body (routed when the body has ``messages``)."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: StrictInt | None = Field(None, ge=1)


class CompletionBody(_Base):
    """``POST /v1/completions`` body (routed when the body has ``prompt``)."""

    prompt: StrictStr | list[StrictStr] | list[StrictInt] | list[list[StrictInt]]


def parse_custom_attributes(header: str | None) -> dict[str, str]:
    """Parse ``X-Amzn-SageMaker-Custom-Attributes`` (``k=v`` pairs split by ``;`` or ``,``).

    SageMaker passes the header through verbatim (max 1024 visible ASCII characters); items
    without ``=`` are ignored.
    """
    if not header:
        return {}
    attributes: dict[str, str] = {}
    for item in header.replace(",", ";").split(";"):
        key, sep, value = item.partition("=")
        if sep:
            attributes[key.strip().lower()] = value.strip()
    return attributes
