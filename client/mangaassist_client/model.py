"""One call shape for every backend: the request a caller makes and the result it gets back.

The endpoint's container names what answered and what its context budget did in the one response
header SageMaker hands back, ``CustomAttributes`` (``X-Amzn-SageMaker-Custom-Attributes``)::

    context_budget=context_length;turns=4;tokens=812;by=marker;base_model=base/v4/<sha256>;adapter=manga_domain_v3/v3/<sha256>

(``context_budget=...`` only when the gateway trimmed the request, ``adapter=...`` only when an adapter
answered; container/serving_app/versions.py and context_budget/protocol.py write it). A Bedrock backend
has no such header: its version is the model it called (the imported model's ARN, a new one per import,
or the foundation model's id).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

ROLES: Final = ("system", "user", "assistant")
"""Message roles every backend carries (Converse has no ``developer`` or ``tool`` text role)."""
MAX_MESSAGES: Final = 512
"""Messages in one request: a bound on caller input, far above a conversation that fits a 4,096-token
context (seed 002: ~190 tokens a turn)."""
MAX_OUTPUT_TOKENS: Final = 8192
"""``max_tokens`` at most the model's positions: Llama-3-8B-Instruct's ``max_position_embeddings`` 8,192
(``model.max_position_embeddings``); the endpoint refuses more than its own ``max_model_len`` allows."""
MAX_BODY_BYTES: Final = 6 * 1024 * 1024
"""SageMaker InvokeEndpoint's payload limit (6 MB): a larger body never reaches the endpoint."""
MAX_PREFIX_AWARE_ID_CHARS: Final = 64
"""``PrefixAwareId``: 1-64 printable characters, the first not a space (sagemaker-runtime API model)."""
_PREFIX_AWARE_ID = re.compile(r"[!-~][ -~]*")
MAX_CUSTOM_ATTRIBUTES_CHARS: Final = 1024
"""``CustomAttributes``: at most 1,024 visible ASCII characters (sagemaker-runtime API model)."""

REQUIRED_FIELDS: Final = ("adapter", "messages", "max_tokens")
OPTIONAL_FIELDS: Final = ("temperature", "top_p", "context_budget", "prefix_aware_id", "language")
"""The fields of a call (:func:`chat_request`)."""
_LANGUAGE = re.compile(r"[a-z]{2,3}(-[A-Za-z0-9]{2,8})*")
"""A BCP 47 tag's language and optional subtags (``ja``, ``en``, ``en-US``); what eval rows name (ISO 639)."""
UNDETERMINED_LANGUAGE: Final = "und"
"""ISO 639-2's code for "undetermined": the language a stored pair names when the caller gave none."""

CONTEXT_BUDGET_ATTRIBUTE: Final = "context_budget"
"""``CustomAttributes: context_budget=off`` sends one request as it is (no trim); in an answer,
``context_budget=<reason>`` reports a trim. The gateway's name: serving_contract.context_budget."""
CONTEXT_BUDGET_OFF: Final = "off"


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat completion, as the caller asked for it (validated by :func:`chat_request`).

    Attributes:
        adapter: the LoRA adapter by name, or the base model's (config ``model.name``, the container's
            ``ENGINE_SERVED_MODEL_NAME``).
        messages: ``{"role": "system"|"user"|"assistant", "content": str}``, oldest first, the last a user turn.
        max_tokens: answer tokens at most.
        temperature, top_p: sampling (None: the backend's default).
        context_budget: False sends ``CustomAttributes: context_budget=off`` (vLLM's 400 instead of a trim).
        prefix_aware_id: SageMaker's ``PrefixAwareId`` routing hint, or None.
        session_id: the SageMaker stateful session (set by :class:`~mangaassist_client.client.Session`).
        allow_substitute: a model without ``adapter`` may answer (set by the client from the call or its
            config; :class:`Origin`).
        language: the conversation's language as the caller knows it (``ja``, ``en``), for the migration's
            comparisons per language; sent to no backend. None: not given.
        request_id: the call's id (set by the client, 32 hex digits): SageMaker's ``InferenceId`` (its data
            capture records it, so the shadow variant's answer pairs with the primary's) and a stored pair's id.
    """

    adapter: str
    messages: tuple[Mapping[str, str], ...]
    max_tokens: int
    temperature: float | None = None
    top_p: float | None = None
    context_budget: bool = True
    prefix_aware_id: str | None = None
    session_id: str | None = None
    allow_substitute: bool = False
    language: str | None = None
    request_id: str | None = None

    def openai_body(self, *, model: str | None, stream: bool) -> dict[str, Any]:
        """The OpenAI chat-completions body (``model`` omitted when None, e.g. for a Bedrock imported model)."""
        body: dict[str, Any] = {"messages": [dict(m) for m in self.messages], "max_tokens": self.max_tokens}
        if model is not None:
            body = {"model": model, **body}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.top_p is not None:
            body["top_p"] = self.top_p
        if stream:  # the usage event at the stream's end carries the token counts
            body.update(stream=True, stream_options={"include_usage": True})
        return body


def _check_messages(messages: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, str], ...]:
    if not 1 <= len(messages) <= MAX_MESSAGES:
        raise ValueError(f"messages: {len(messages)} given; allowed 1 to {MAX_MESSAGES}")
    checked = []
    for index, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise ValueError(f"messages[{index}].role = {role!r}: allowed {', '.join(ROLES)}")
        if not isinstance(content, str) or not content:
            raise ValueError(f"messages[{index}].content: must be a non-empty string")
        checked.append({"role": role, "content": content})
    if checked[-1]["role"] != "user":
        raise ValueError(f"messages[{len(checked) - 1}].role = {checked[-1]['role']!r}: the last message must be user")
    return tuple(checked)


def check_flag(name: str, value: object) -> bool:
    """``value`` if it is a bool; raises ValueError (one line) otherwise (``"yes"``, ``1``: a typo, not a choice)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} = {value!r}: must be True or False")
    return value


def check_prefix_aware_id(value: str | None) -> str | None:
    """``value`` if SageMaker accepts it as ``PrefixAwareId``; raises ValueError (one line) otherwise."""
    if value is not None and not (
        len(value) <= MAX_PREFIX_AWARE_ID_CHARS and _PREFIX_AWARE_ID.fullmatch(value) is not None
    ):
        raise ValueError(
            f"prefix_aware_id = {value[:80]!r}: must be 1 to {MAX_PREFIX_AWARE_ID_CHARS} printable ASCII characters, "
            "the first not a space (SageMaker PrefixAwareId)"
        )
    return value


def check_language(value: object) -> str | None:
    """``value`` if it is None or a language tag (``ja``, ``en-US``); raises ValueError (one line) otherwise."""
    if value is not None and not (isinstance(value, str) and len(value) <= 35 and _LANGUAGE.fullmatch(value)):
        raise ValueError(
            f"language = {value!r}: must be a lowercase ISO 639 code with optional BCP 47 subtags, e.g. 'ja', "
            "'en' or 'en-US'"
        )
    return value


def chat_request(
    *,
    adapter: str,
    messages: Sequence[Mapping[str, Any]],
    max_tokens: int,
    temperature: float | None = None,
    top_p: float | None = None,
    context_budget: bool = True,
    prefix_aware_id: str | None = None,
    language: str | None = None,
) -> ChatRequest:
    """A validated :class:`ChatRequest`.

    Raises:
        ValueError: one line naming the field, the value and what is allowed.
    """
    if not isinstance(adapter, str) or not 1 <= len(adapter) <= 256:
        raise ValueError(f"adapter = {adapter!r}: must be a model or adapter name of 1 to 256 characters")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= MAX_OUTPUT_TOKENS:
        raise ValueError(f"max_tokens = {max_tokens!r}: must be an integer from 1 to {MAX_OUTPUT_TOKENS}")
    if temperature is not None and not 0 <= temperature <= 2:
        raise ValueError(f"temperature = {temperature!r}: must be from 0 to 2")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p = {top_p!r}: must be above 0 and at most 1")
    request = ChatRequest(
        adapter=adapter,
        messages=_check_messages(messages),
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        context_budget=context_budget,
        prefix_aware_id=check_prefix_aware_id(prefix_aware_id),
        language=check_language(language),
    )
    size = len(json.dumps(request.openai_body(model=adapter, stream=True)).encode())
    if size > MAX_BODY_BYTES:
        raise ValueError(f"messages: the request body is {size:,} bytes; SageMaker takes at most {MAX_BODY_BYTES:,}")
    return request


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one answer, as its backend reported them (None: not reported).

    ``cached_prompt_tokens`` is vLLM's ``usage.prompt_tokens_details.cached_tokens`` (the prompt tokens
    the prefix cache served); Bedrock reports none for these models.
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_prompt_tokens: int | None = None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def openai_usage(usage: object) -> Usage:
    """:class:`Usage` of an OpenAI ``usage`` object (anything else: all None)."""
    if not isinstance(usage, Mapping):
        return Usage()
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return Usage(
        _int_or_none(usage.get("prompt_tokens")), _int_or_none(usage.get("completion_tokens")), _int_or_none(cached)
    )


@dataclass(frozen=True, slots=True)
class ContextBudgetReport:
    """What the endpoint's context budget did to the request (docs/sessions.md, "Context budget").

    Attributes:
        reason: ``context_length`` (vLLM refused the length) or ``oom`` (an out-of-memory retry).
        turns: older turns replaced.
        tokens: prompt tokens the request lost.
        by: ``marker`` or ``summary``.
    """

    reason: str
    turns: int
    tokens: int
    by: str


@dataclass(frozen=True, slots=True)
class ServedVersions:
    """The base-model and adapter versions that answered (``<name>/<version>/<sha256>``; None: not named)."""

    base_model: str | None
    adapter: str | None


def parse_custom_attributes(text: str | None) -> dict[str, str]:
    """``k=v`` pairs of a ``CustomAttributes`` value (split by ``;`` or ``,``; keys lower-cased), as the
    gateway reads them; items without ``=`` are ignored."""
    pairs = (item.partition("=") for item in (text or "").replace(",", ";").split(";"))
    return {key.strip().lower(): value.strip() for key, sep, value in pairs if sep}


def served_versions(attributes: Mapping[str, str]) -> ServedVersions | None:
    """The versions named in parsed ``CustomAttributes``, or None when they name none."""
    if "base_model" not in attributes and "adapter" not in attributes:
        return None
    return ServedVersions(attributes.get("base_model"), attributes.get("adapter"))


def context_budget_report(attributes: Mapping[str, str]) -> ContextBudgetReport | None:
    """The context-budget report in parsed ``CustomAttributes``, or None (no trim, or a malformed one)."""
    reason = attributes.get(CONTEXT_BUDGET_ATTRIBUTE)
    turns, tokens = attributes.get("turns", ""), attributes.get("tokens", "")
    if not reason or not turns.isdigit() or not tokens.isdigit():
        return None
    return ContextBudgetReport(reason, int(turns), int(tokens), attributes.get("by", ""))


@dataclass(frozen=True, slots=True)
class Completion:
    """One backend's whole answer, before the client adds how it got there."""

    text: str
    usage: Usage
    version: str
    finish_reason: str | None = None
    served: ServedVersions | None = None
    context_budget: ContextBudgetReport | None = None
    variant: str | None = None


@dataclass(frozen=True, slots=True)
class Origin:
    """Which backend, model and adapter answer a call (known before a stream's first piece: ``ChatStream.start``).

    Attributes:
        backend: ``sagemaker:<endpoint>``, ``bedrock-import`` or ``bedrock:<model id>``.
        model: what that backend calls the model that answers: the endpoint's served name (the request's
            ``adapter``, an adapter's or the base model's), the adapter's imported model ARN, or the
            foundation model's id.
        adapter: the request's adapter when the answering model has it (the endpoint; the adapter's imported
            model, its merged weights); None when a model without it answers, which the caller allowed
            (``allow_substitute``; a foundation model through Converse serves no LoRA adapter).
    """

    backend: str
    model: str
    adapter: str | None


@dataclass(frozen=True, slots=True)
class ChatResult:
    """What a call returns, whichever backend answered.

    Attributes:
        text: the answer.
        usage: token counts.
        backend: the backend that answered (``sagemaker:<endpoint>``, ``bedrock-import``, ``bedrock:<model id>``).
        version: what answered, in one string: the endpoint's ``CustomAttributes`` versions
            (``base_model=...;adapter=...``), or the Bedrock model's ARN or id.
        served: the endpoint's base-model and adapter versions (None from Bedrock).
        context_budget: the endpoint's context-budget report, None when it did not trim.
        finish_reason: ``stop``, ``length``, ... as the backend said (Converse's ``stopReason``).
        variant: the SageMaker production variant that answered (``InvokedProductionVariant``).
        fallback_from: why each backend before this one did not answer (empty: the first one did).
        model, adapter: the model that answered and the adapter it has, None when it has not the requested
            one (:class:`Origin`).
    """

    text: str
    usage: Usage
    backend: str
    version: str
    served: ServedVersions | None = None
    context_budget: ContextBudgetReport | None = None
    finish_reason: str | None = None
    variant: str | None = None
    fallback_from: tuple[str, ...] = field(default=())
    model: str = ""
    adapter: str | None = None

    @property
    def origin(self) -> Origin:
        """:class:`Origin` of the answer: its backend, model and adapter."""
        return Origin(self.backend, self.model, self.adapter)

    @classmethod
    def of(cls, completion: Completion, origin: Origin, fallback_from: tuple[str, ...]) -> ChatResult:
        return cls(
            text=completion.text,
            usage=completion.usage,
            backend=origin.backend,
            model=origin.model,
            adapter=origin.adapter,
            version=completion.version,
            served=completion.served,
            context_budget=completion.context_budget,
            finish_reason=completion.finish_reason,
            variant=completion.variant,
            fallback_from=fallback_from,
        )
