"""The context budget and OOM containment on ``/invocations`` (seed 001 user story 5, seed 002
scenario 5).

A request goes to vLLM as it came. Only two of vLLM's answers bring the budget in, so a request
that fits costs nothing extra and reaches vLLM byte for byte:

* **400 for the context length** (prompt + ``max_tokens`` over ``max_model_len``; a chat request
  with ``container.context_budget.enabled``): the system messages and the latest user turn stay
  whole, the oldest turns after the system messages are replaced by one marker message (seed
  001's "[Earlier conversation truncated — N turns not shown]") or, with ``summarize``, by a
  summary from the same engine (bounded in tokens and time; the marker when it fails or is late),
  and the most recent turns that fit stay. Tokens are counted by the engine's own tokenizer and
  chat template (vLLM's ``POST /tokenize`` with the request's ``messages``, which also reports
  ``max_model_len``), never estimated. The request is sent once more, trimmed.
* **500 with an out-of-memory error while the engine lives** (``protocol.is_request_oom``): sent
  once more with the older half of the turns replaced by the marker; when that fails too, or
  there was nothing to compress, the caller gets a 503 with ``Retry-After``
  (``container.context_budget.oom_retry_after_s``). An engine that died is not retried: the
  monitor marks it down, ``/ping`` turns 503 and SageMaker replaces the instance.

Why trim from the oldest turn after the system messages: vLLM's prefix cache matches whole KV
blocks from the first token, so the system prompt shared by every conversation of an adapter keeps
its cached blocks in a trimmed request (docs/sessions.md, "Context budget").

A trimmed answer carries ``X-Amzn-SageMaker-Custom-Attributes: context_budget=<reason>;turns=N;
tokens=N;by=<marker|summary>`` and one EMF line with ``TokenBudgetTrimmed`` and ``TrimmedTokens``
per adapter. A caller opts a request out with ``CustomAttributes: context_budget=off``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import Mapping
from typing import Any, Final

from starlette.responses import Response

from serving_app.context_budget.protocol import (
    RESPONSE_HEADER,
    SUMMARY_INSTRUCTION,
    Conversation,
    Message,
    Trim,
    exceeds_context,
    is_request_oom,
    marker_message,
    opted_out,
    summary_message,
    transcript,
)
from serving_app.context_budget.settings import BudgetSettings
from serving_app.errors import error_response
from serving_app.metrics.emf import EmfWriter
from serving_app.metrics.requests import RequestRecord
from serving_app.upstream import UpstreamError, UpstreamPool, UpstreamResponse
from serving_contract.metrics import BudgetMetric, Dimension

log = logging.getLogger("serving_app.context_budget")

TOKENIZE_PATH: Final = "/tokenize"
"""vLLM 0.26's tokenizer route (vllm/entrypoints/serve/tokenize/api_router.py): a chat body
(``TokenizeChatRequest``: ``messages``, ``tools``, ``chat_template_kwargs``, ...) answers
``{"count", "max_model_len", "tokens"}`` after applying the model's chat template."""

TOKENIZE_FIELDS: Final = (
    "tools",
    "chat_template",
    "chat_template_kwargs",
    "add_generation_prompt",
    "continue_final_message",
    "add_special_tokens",
)
"""Request fields that change the prompt's tokens; copied into the ``/tokenize`` body."""


class BudgetUnavailableError(Exception):
    """The engine could not count tokens (its answer is in the message)."""


class ContextBudget:
    """The budget's settings and its ways to the engine; one per gateway."""

    def __init__(self, settings: BudgetSettings, *, pool: UpstreamPool, emf: EmfWriter, base_model: str) -> None:
        self.enabled = settings.context_budget_enabled
        self.reserve = settings.context_budget_generation_reserve_tokens
        self.summary_tokens = settings.context_budget_summary_tokens
        self.summarize = settings.context_budget_summarize and self.summary_tokens > 0
        self.summary_timeout_s = settings.context_budget_summary_timeout_s
        self.retry_after_s = settings.oom_retry_after_s
        self.pool = pool
        self.emf = emf
        self.base_model = base_model

    def attempt(
        self, body: bytes, headers: Mapping[str, str], record: RequestRecord, *, is_chat: bool
    ) -> BudgetAttempt:
        """The budget's view of one request; ``body`` is exactly what goes to vLLM (parsed again only
        when vLLM's answer calls for a change, which is rare)."""
        may_change = is_chat and not opted_out(headers)
        return BudgetAttempt(self, body, record, may_trim=may_change and self.enabled, may_compress=may_change)

    async def count(self, data: Mapping[str, Any], messages: list[Message]) -> tuple[int, int]:
        """``(prompt tokens, max_model_len)`` of ``messages`` with ``data``'s template fields, by the
        engine's tokenizer. Raises :class:`BudgetUnavailableError`."""
        body: dict[str, Any] = {"model": self.base_model, "messages": messages}
        body.update({key: data[key] for key in TOKENIZE_FIELDS if key in data})
        payload = json.dumps(body).encode()
        for attempt in range(2):
            try:
                upstream = await self.pool.request("POST", TOKENIZE_PATH, payload)
                content = await upstream.read()
                break
            except UpstreamError as exc:
                # Counting is idempotent: one more try on a fresh connection. The first call after
                # an answer from vLLM's catch-all handler (an OOM; vLLM 0.22's context-length 400)
                # found that connection reset on the CPU engine.
                if attempt:
                    raise BudgetUnavailableError(str(exc)) from None
        if upstream.status_code != 200:
            raise BudgetUnavailableError(f"/tokenize answered {upstream.status_code}: {content[:200]!r}")
        try:
            answer = json.loads(content)
            return int(answer["count"]), int(answer["max_model_len"])
        except (ValueError, KeyError, TypeError):
            raise BudgetUnavailableError(f"/tokenize answered {content[:200]!r}") from None

    async def summary(self, turns: tuple[tuple[Message, ...], ...]) -> str | None:
        """A summary of ``turns`` from the engine, or None when it fails or takes longer than
        ``summary_timeout_s`` (the caller then uses the marker)."""
        body = {
            "model": self.base_model,
            "messages": [
                {"role": "system", "content": SUMMARY_INSTRUCTION},
                {"role": "user", "content": transcript(turns)},
            ],
            "max_tokens": self.summary_tokens,
            "temperature": 0,
        }
        upstream: UpstreamResponse | None = None
        try:
            async with asyncio.timeout(self.summary_timeout_s):
                upstream = await self.pool.request("POST", "/v1/chat/completions", json.dumps(body).encode())
                content = await upstream.read()
        except (TimeoutError, UpstreamError) as exc:
            if upstream is not None:
                await upstream.aclose()
            log.warning("context budget: summary failed (%s); using the marker", exc.__class__.__name__)
            return None
        if upstream.status_code != 200:
            log.warning("context budget: summary answered %d; using the marker", upstream.status_code)
            return None
        with contextlib.suppress(ValueError, KeyError, IndexError, TypeError):
            text = json.loads(content)["choices"][0]["message"]["content"]
            if isinstance(text, str) and text.strip():
                return text
        return None

    def emit(self, trim: Trim, adapter: str) -> None:
        """One EMF line: ``TokenBudgetTrimmed`` 1 and ``TrimmedTokens``, fleet-wide and per adapter."""
        with contextlib.suppress(OSError, ValueError):
            self.emf.emit(
                {BudgetMetric.TOKEN_BUDGET_TRIMMED: 1, BudgetMetric.TRIMMED_TOKENS: trim.tokens},
                dimension_sets=self.emf.request_dimension_sets,
                dimensions={Dimension.ADAPTER: adapter},
                properties={"Reason": trim.reason, "By": trim.by, "TrimmedTurns": trim.turns},
            )


class BudgetAttempt:
    """One request's way through the budget.

    Attributes:
        trim: what was replaced in the request that was finally sent (None: sent as it came).
        gave_up: an out-of-memory error could not be contained; answer :meth:`fallback`.
    """

    def __init__(
        self, budget: ContextBudget, body: bytes, record: RequestRecord, *, may_trim: bool, may_compress: bool
    ) -> None:
        self.budget = budget
        self.body = body
        self._data: dict[str, Any] | None = None
        self.record = record
        self.may_trim = may_trim
        self.may_compress = may_compress
        self.trim: Trim | None = None
        self.gave_up = False

    async def recover(
        self, path: str, upstream: UpstreamResponse, content: bytes, *, stream: bool
    ) -> tuple[UpstreamResponse, bytes | None]:
        """After vLLM answered ``upstream`` (body ``content``, read): trim and send once more where the
        answer calls for it. Returns the answer to relay; its body is None when it is a stream's 200
        (not read). Raises :class:`UpstreamError` like ``UpstreamPool.request``."""
        status = upstream.status_code
        if self.may_trim and exceeds_context(status, content):
            body = await self._trimmed(reason="context_length")
            if body is None:
                return upstream, content
            return await self._send(path, body, stream=stream)
        if is_request_oom(status, content):
            self.record.oom = True
            body = await self._compressed() if self.may_compress else None
            if body is None:
                self.gave_up = True
                return upstream, content
            log.warning("context budget: engine out of memory; retrying once with the older half compressed")
            retried, retried_content = await self._send(path, body, stream=stream)
            if retried.status_code >= 500:
                self.gave_up, self.trim = True, None
            return retried, retried_content
        return upstream, content

    def fallback(self) -> Response:
        """503 with ``Retry-After``: the out-of-memory error was not contained on this instance."""
        return error_response(
            503,
            "engine out of memory on this request, also after compressing the older turns; retry later",
            retry_after_s=self.budget.retry_after_s,
        )

    def annotate(self, response: Response) -> None:
        """Mark a successful answer of a trimmed request (header) and count it (EMF)."""
        if self.trim is None:
            return
        response.headers[RESPONSE_HEADER] = self.trim.header_value()
        self.budget.emit(self.trim, self.record.adapter)

    @property
    def data(self) -> dict[str, Any]:
        """The body sent, parsed (a JSON object with ``messages``: the gateway validated it)."""
        if self._data is None:
            self._data = json.loads(self.body)
        return self._data

    async def _send(self, path: str, body: bytes, *, stream: bool) -> tuple[UpstreamResponse, bytes | None]:
        upstream = await self.budget.pool.request("POST", path, body)
        if stream and upstream.status_code == 200:
            return upstream, None
        return upstream, await upstream.read()

    def _body(self, messages: list[Message]) -> bytes:
        return json.dumps({**self.data, "messages": messages}, separators=(",", ":")).encode()

    async def _trimmed(self, *, reason: str) -> bytes | None:
        """The request with the fewest oldest turns replaced that fits, or None when even replacing
        every turn does not (vLLM's 400 then stands) or the engine cannot count."""
        conversation = Conversation.split(self.data.get("messages") or [])
        if not conversation.turns:
            return None
        budget = self.budget
        output = self.data.get("max_completion_tokens") or self.data.get("max_tokens") or budget.reserve
        slack = budget.summary_tokens if budget.summarize else 0
        counts: dict[int, int] = {}
        try:
            original, max_model_len = await budget.count(self.data, list(self.data["messages"]))
            limit = max_model_len - output - slack

            async def fits(dropped: int) -> bool:
                counts[dropped], _ = await budget.count(
                    self.data, conversation.without(dropped, marker_message(dropped))
                )
                return counts[dropped] <= limit

            low, high = 1, len(conversation.turns)
            if not await fits(high):
                log.info("context budget: %d tokens do not fit even without any earlier turn", counts[high])
                return None
            while low < high:  # the fewest dropped turns that fit; fewer tokens with more dropped
                middle = (low + high) // 2
                if await fits(middle):
                    high = middle
                else:
                    low = middle + 1
        except BudgetUnavailableError as exc:
            log.warning("context budget: cannot count tokens (%s); vLLM's answer stands", exc)
            return None
        dropped = high
        messages = conversation.without(dropped, marker_message(dropped))
        kept_tokens, by = counts[dropped], "marker"
        if budget.summarize:
            summary = await budget.summary(conversation.turns[:dropped])
            if summary is not None:
                candidate = conversation.without(dropped, summary_message(dropped, summary))
                with contextlib.suppress(BudgetUnavailableError):
                    tokens, _ = await budget.count(self.data, candidate)
                    if tokens + output <= max_model_len:
                        messages, kept_tokens, by = candidate, tokens, "summary"
        self.trim = Trim(reason=reason, turns=dropped, tokens=original - kept_tokens, by=by)
        log.info(
            "context budget: replaced %d of %d turns (%d tokens) by the %s",
            dropped,
            len(conversation.turns),
            original - kept_tokens,
            by,
        )
        return self._body(messages)

    async def _compressed(self) -> bytes | None:
        """The request with the older half of its turns replaced by the marker (None: no turns)."""
        conversation = Conversation.split(self.data.get("messages") or [])
        if not conversation.turns:
            return None
        dropped = math.ceil(len(conversation.turns) / 2)
        messages = conversation.without(dropped, marker_message(dropped))
        tokens = 0
        with contextlib.suppress(BudgetUnavailableError):
            before, _ = await self.budget.count(self.data, list(self.data["messages"]))
            after, _ = await self.budget.count(self.data, messages)
            tokens = before - after
        self.trim = Trim(reason="oom", turns=dropped, tokens=tokens, by="marker")
        return self._body(messages)
