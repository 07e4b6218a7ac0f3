"""``POST /invocations``: validate, pick the model, forward to vLLM, relay the answer.

The body goes to vLLM's OpenAI routes (``/v1/chat/completions`` for ``messages``,
``/v1/completions`` for ``prompt``), which honour ``model``; vLLM's own ``/invocations``
answers from the base model whatever the body says (docs/sources.md, "Container contract").
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, Final

from pydantic import ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from serving_app.adapters.registry import ModelRegistry
from serving_app.context_budget.serving import BudgetAttempt, ContextBudget
from serving_app.engine.monitor import EngineMonitor, reports_dead_engine
from serving_app.engine.readiness import Phase, Readiness
from serving_app.errors import caller_text, error_response
from serving_app.metrics.requests import RequestMetrics, RequestRecord
from serving_app.sagemaker.limits import RequestLimits
from serving_app.sagemaker.protocol import ChatCompletionBody, CompletionBody, requested_model
from serving_app.sagemaker.relay import RelayResponse, is_oom, read_usage, relay_events
from serving_app.sessions.serving import SessionService
from serving_app.upstream import UpstreamError, UpstreamPool, UpstreamResponse
from serving_app.versions import CUSTOM_ATTRIBUTES_HEADER, ModelVersions
from serving_contract.lifecycle import DRAIN_RETRY_AFTER_S, DRAINING_ERROR_TYPE
from serving_contract.validation import describe

log = logging.getLogger("serving_app.sagemaker")

USAGE_OPTION_MEMBER: Final = b',"stream_options":{"include_usage":true}}'
"""Appended to a JSON object body in place of its closing brace (the object has ``messages`` or
``prompt``, so it is never empty and the comma is always right)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _summarise(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False)[:3]:
        loc = ".".join(str(p) for p in error.get("loc", ())) or "body"
        parts.append(describe(error, loc, error.get("input")))
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def _json_object(body: bytes, limits: RequestLimits) -> dict[str, Any] | Response:
    """The body as a JSON object, or the 413/400/422 answer to one too large, malformed or not an object.

    The size is checked before parsing: the transport refuses a declared ``Content-Length`` over
    ``limits.max_body_bytes`` before the body is read; this covers a body that reaches the app
    some other way (a test calling the service, a chunked body the transport counted)."""
    over = limits.body_violation(len(body))
    if over:
        return error_response(413, over)
    try:
        data = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        return error_response(400, f"malformed JSON body: {str(exc)[:200]}")
    if not isinstance(data, dict):
        return error_response(422, "body must be a JSON object with 'messages' (chat) or 'prompt' (completions)")
    return data


class InvocationService:
    """Everything ``/invocations`` does between the request and the relayed answer."""

    def __init__(
        self,
        *,
        models: ModelRegistry,
        readiness: Readiness,
        pool: UpstreamPool,
        monitor: EngineMonitor,
        metrics: RequestMetrics,
        sessions: SessionService,
        request_timeout_s: float,
        limits: RequestLimits | None = None,
        budget: ContextBudget | None = None,
        versions: ModelVersions | None = None,
    ) -> None:
        self.limits = limits or RequestLimits()
        self.budget = budget
        self.versions = versions or ModelVersions(models.base)
        self.models = models
        self.readiness = readiness
        self.pool = pool
        self.monitor = monitor
        self.metrics = metrics
        self.sessions = sessions
        self.timeout_s = request_timeout_s

    async def handle(self, request: Request) -> Response:
        """Answer one request; never raises (a bug costs one request, not the process)."""
        started = time.perf_counter()
        record = RequestRecord()
        try:
            response = await self._handle(request, record, started)
        except ClientDisconnect:  # the client left while sending its body
            response = error_response(499, "client disconnected before the body was read")
        except Exception:
            log.exception("invocations: unhandled error")
            response = error_response(500, "internal error in the serving gateway")
        record.status = response.status_code
        if record.adapter in self.models:  # a served model took the request: name its versions
            # After what the context budget reported, in the one header SageMaker returns (k=v;k=v).
            versions = self.versions.attributes(record.adapter)
            earlier = response.headers.get(CUSTOM_ATTRIBUTES_HEADER)
            response.headers[CUSTOM_ATTRIBUTES_HEADER] = f"{earlier};{versions}" if earlier else versions
        if not isinstance(response, RelayResponse):
            self.metrics.emit(record, started)
        return response

    async def _handle(self, request: Request, record: RequestRecord, started: float) -> Response:
        """Refuse, validate, pick the model and forward: each check answers in this order."""
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        body = await request.body()
        data = _json_object(body, self.limits)
        if isinstance(data, Response):
            return data
        if self.sessions.is_session_request(data):
            return self.sessions.handle(data, request.headers)
        session_error = self.sessions.check(request.headers)
        if session_error is not None:
            return session_error
        checked = self._validated(data)
        if isinstance(checked, Response):
            return checked
        is_chat, parsed = checked

        name = requested_model(request.headers, parsed.model, self.models.base)
        if name not in self.models:
            record.adapter = "unknown"
            # The names served are other tenants' business: the caller learns only its own was wrong.
            log.info("invocations: unknown adapter %r; available: %s", name[:100], self.models.available)
            return error_response(400, f"unknown adapter {caller_text(name)}")
        record.adapter = name
        record.version = self.versions.dimension(name) if self.versions.pins else None
        record.stream = parsed.stream
        strip_usage = parsed.stream and (parsed.stream_options or {}).get("include_usage") is not True
        engine_body = self._engine_body(data, body, name, rewrite=name != parsed.model, ask_usage=strip_usage)
        if isinstance(engine_body, Response):
            return engine_body
        path = "/v1/chat/completions" if is_chat else "/v1/completions"
        attempt = (
            None if self.budget is None else self.budget.attempt(engine_body, request.headers, record, is_chat=is_chat)
        )
        if parsed.stream:
            return await self._stream(path, engine_body, record, started, strip_usage, attempt=attempt)
        return await self._unary(path, engine_body, record, attempt)

    def _refusal(self, request: Request) -> Response | None:
        """503 while draining or not ready, 415 for a body that is not JSON; None to go on."""
        if self.readiness.draining:  # a retry a second later is routed to another instance (issue 53, finding 5)
            return error_response(
                503,
                "instance is draining (SIGTERM); retry elsewhere",
                retry_after_s=DRAIN_RETRY_AFTER_S,
                error_type=DRAINING_ERROR_TYPE,
            )
        if not self.readiness.ready:
            ready_phase = self.readiness.phase is Phase.READY
            return error_response(
                503, f"not ready: {'engine unhealthy' if ready_phase else self.readiness.phase.value}"
            )
        content_type = request.headers.get("content-type")
        if content_type:
            media = content_type.split(";", 1)[0].strip().lower()
            if not (media == "application/json" or media.endswith("+json")):
                return error_response(415, f"content-type {caller_text(media)} is not supported; send application/json")
        return None

    def _validated(self, data: dict[str, Any]) -> tuple[bool, ChatCompletionBody | CompletionBody] | Response:
        """``(is_chat, parsed body)``, or the 422/400 answer to a body of neither or both kinds, an invalid
        one, or one over the request limits."""
        is_chat, is_completion = "messages" in data, "prompt" in data
        if is_chat == is_completion:
            return error_response(
                422, "body must have exactly one of 'messages' (chat completions) or 'prompt' (completions)"
            )
        too_many = self.limits.messages_violation(data)  # before validating each message
        if too_many:
            return error_response(400, too_many)
        model_cls = ChatCompletionBody if is_chat else CompletionBody
        try:
            parsed = model_cls.model_validate(data)
        except ValidationError as exc:
            return error_response(422, "invalid request: " + _summarise(exc))
        except RecursionError:
            return error_response(422, "invalid request: body is nested too deeply")
        over_limit = self.limits.violation(data, is_chat=is_chat)
        if over_limit:
            return error_response(400, over_limit)
        return is_chat, parsed

    def _engine_body(
        self, data: dict[str, Any], body: bytes, name: str, *, rewrite: bool, ask_usage: bool
    ) -> bytes | Response:
        """The body vLLM gets: the client's bytes unless the model name, a cache salt or the usage
        option must be set; 422 when re-serialising fails."""
        salt = self.models.cache_salt(name)
        if salt is not None:
            # A runtime adapter: keep its prefix-cache blocks apart from those of earlier loads of
            # the same name (serving_app.adapters.serving, "Prefix cache").
            data["cache_salt"] = salted(data.get("cache_salt"), salt)
            rewrite = True
        if ask_usage:
            # Ask vLLM for token counts; the extra usage-only event is removed again before the
            # client sees it, so the stream is what the client asked for.
            body, rewrite = ask_for_usage(data, body, rewrite)
        if not rewrite:
            return body
        data["model"] = name
        try:
            return json.dumps(data, separators=(",", ":")).encode()
        except (ValueError, RecursionError):
            return error_response(422, "invalid request: body is nested too deeply")

    def _unavailable(self, record: RequestRecord, exc: UpstreamError) -> Response:
        record.engine_error = True
        self.monitor.report_engine_down("engine unreachable from a request")
        log.warning("invocations: engine unavailable: %s", exc)
        return error_response(503, "engine unavailable")

    def _timed_out(self, record: RequestRecord) -> Response:
        # Not an engine error (EngineErrors pages at one): a long generation or a busy engine ends here
        # too; the 504 counts in ServerErrors and SageMaker's 5xx rate, and a dead or hung engine is the
        # health monitor's to find (issue 49, finding 7).
        return error_response(504, f"engine did not answer within REQUEST_TIMEOUT_S={self.timeout_s:g} s")

    async def _unary(self, path: str, body: bytes, record: RequestRecord, attempt: BudgetAttempt | None) -> Response:
        try:
            async with asyncio.timeout(self.timeout_s):
                upstream = await self.pool.request("POST", path, body)
                content: bytes | None = await upstream.read()
                if attempt is not None and upstream.status_code != 200:  # the context budget, OOM containment
                    upstream, content = await attempt.recover(path, upstream, content or b"", stream=False)
        except TimeoutError:
            return self._timed_out(record)
        except UpstreamError as exc:
            return self._unavailable(record, exc)
        content = content or b""
        status = upstream.status_code
        if status >= 500:
            return self._engine_failure(status, content, record, attempt)
        response = Response(content, status_code=status, media_type="application/json")
        if status == 200:
            read_usage(content, record)
            if attempt is not None:
                attempt.annotate(response)
        return response

    def _engine_failure(
        self, status: int, content: bytes, record: RequestRecord, attempt: BudgetAttempt | None = None
    ) -> Response:
        record.engine_error = True
        record.oom = record.oom or is_oom(content)  # the budget may have seen an OOM before a retry
        if reports_dead_engine(content):
            self.monitor.report_engine_down("engine core dead (EngineDeadError)")
        else:
            self.monitor.report_engine_error()
        # vLLM's 5xx text (stack traces, CUDA errors, paths) is for the log, not the caller.
        log.warning("engine answered %d: %s", status, content[:300])
        if attempt is not None and attempt.gave_up:
            return attempt.fallback()
        return error_response(503 if status == 503 else 502, f"engine error {status}")

    async def _stream(
        self,
        path: str,
        body: bytes,
        record: RequestRecord,
        started: float,
        strip_usage: bool,
        *,
        attempt: BudgetAttempt | None = None,
    ) -> Response:
        upstream: UpstreamResponse | None = None
        content: bytes | None = None
        try:
            async with asyncio.timeout(self.timeout_s):
                upstream = await self.pool.request("POST", path, body)
                if upstream.status_code != 200:
                    content = await upstream.read()
                    if attempt is not None:  # the context budget, OOM containment
                        upstream, content = await attempt.recover(path, upstream, content, stream=True)
        except TimeoutError:
            if upstream is not None:
                await upstream.aclose()
            return self._timed_out(record)
        except UpstreamError as exc:
            return self._unavailable(record, exc)
        if upstream.status_code != 200:
            content = content or b""
            if upstream.status_code >= 500:
                return self._engine_failure(upstream.status_code, content, record, attempt)
            return Response(content, status_code=upstream.status_code, media_type="application/json")
        record.status = 200
        stream = upstream

        def on_disconnect() -> None:
            record.disconnected = True
            stream.abort()

        def on_close() -> None:
            stream.abort()  # no-op after a full read or the relay's own aclose
            if not record.emitted:  # the relay never started: nothing reached the client
                record.status = 499 if record.disconnected else 503
                self.metrics.emit(record, started)

        relay = relay_events(
            stream, record, started, timeout_s=self.timeout_s, strip_usage=strip_usage, finish=self.metrics.emit
        )
        response = RelayResponse(relay, on_disconnect, on_close)
        if attempt is not None:
            attempt.annotate(response)
        return response


def ask_for_usage(data: dict[str, Any], body: bytes, rewrite: bool) -> tuple[bytes, bool]:
    """Add ``stream_options.include_usage``: ``(body, rewrite)``.

    The usual stream (nothing else rewritten, no ``stream_options`` sent) gets the option spliced
    into its raw body instead of re-serialising a prompt of thousands of tokens; otherwise it is
    set in ``data`` and ``rewrite`` becomes True.
    """
    if not rewrite and "stream_options" not in data and body.rstrip().endswith(b"}"):
        return body.rstrip()[:-1] + USAGE_OPTION_MEMBER, False
    data["stream_options"] = {**(data.get("stream_options") or {}), "include_usage": True}
    return body, True


def salted(client_salt: object, load_salt: str) -> object:
    """``cache_salt`` for vLLM: the adapter load's salt, after the client's own when it sent one.

    A client value that is not a non-empty string is passed on unchanged, for vLLM to refuse with
    its own 400 (the request then never runs, so it cannot read another load's blocks).
    """
    if client_salt is None:
        return load_salt
    if isinstance(client_salt, str) and client_salt:
        return f"{client_salt}:{load_salt}"
    return client_salt
