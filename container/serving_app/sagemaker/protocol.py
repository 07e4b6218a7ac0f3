"""What ``/invocations`` accepts: the request bodies and SageMaker's headers.

Only what the gateway relies on is validated (shape, ``model``, ``stream``, token limits);
every other OpenAI field passes through untouched (``extra="allow"``) and vLLM validates it,
answering 400 itself when a value is out of range (``max_tokens`` above ``max_model_len``).

Which model answers, first match wins:

1. ``X-Amzn-SageMaker-Adapter-Identifier``: set by SageMaker itself when a client invokes an
   adapter inference component (aws/model-hosting-container-standards, ``SageMakerLoRAApiHeader``);
2. ``X-Amzn-SageMaker-Custom-Attributes: adapter=<name>``: set by the client;
3. the body's ``model``;
4. the base model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

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


ADAPTER_IDENTIFIER_HEADER: Final = "x-amzn-sagemaker-adapter-identifier"
CUSTOM_ATTRIBUTES_HEADER: Final = "x-amzn-sagemaker-custom-attributes"


def requested_model(headers: Mapping[str, str], body_model: str | None, base: str) -> str:
    """The model name a request asks for (see the module docstring for the order)."""
    from_platform = headers.get(ADAPTER_IDENTIFIER_HEADER)
    if from_platform:
        return from_platform.strip()
    from_client = parse_custom_attributes(headers.get(CUSTOM_ATTRIBUTES_HEADER)).get("adapter")
    return from_client or body_model or base


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
