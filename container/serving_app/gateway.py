"""The HTTP gateway on :8080: ``/ping`` and ``/invocations`` in front of vLLM.

``create_app`` builds a Starlette app whose lifespan owns the pooled upstream client
(``serving_app.upstream``, aiohttp),
the vLLM child process and the background tasks (startup + warmup, engine health poller,
``/metrics`` scraper, engine watcher). Request bodies are forwarded as the client sent them
whenever possible (no JSON re-serialisation on the hot path) and streams are relayed event by
event as vLLM produces them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from serving_app.drain import InflightTracker
from serving_app.emf import EmfWriter
from serving_app.engine import EngineProcess
from serving_app.health import Phase, Readiness
from serving_app.schemas import ChatCompletionBody, CompletionBody, parse_custom_attributes
from serving_app.scraper import EngineMetricsCalculator, parse_samples
from serving_app.settings import Settings
from serving_app.upstream import UpstreamError, UpstreamPool, UpstreamResponse
from serving_app.warmup import StartupError, run_warmup, wait_for_engine
from serving_contract import env
from serving_contract.metrics import Dimension, RequestMetric

log = logging.getLogger("serving_app.gateway")

CUSTOM_ATTRIBUTES_HEADER: Final = "x-amzn-sagemaker-custom-attributes"
MAX_BODY_BYTES: Final = 6 * 1024 * 1024
"""SageMaker real-time InvokeEndpoint payload limit (6 MB); larger bodies never reach us."""

HEALTH_POLL_INTERVAL_S: Final = 1.0
HEALTH_PROBE_TIMEOUT_S: Final = 2.0
HEALTH_FAILURE_THRESHOLD: Final = 3
"""Consecutive failed ``/health`` probes before ``/ping`` turns 503 (a busy engine may be
slow to answer one probe; a dead one fails all of them, and the watcher sees an exit at once)."""

ENGINE_STOP_GRACE_S: Final = float(env.ENGINE_STOP_GRACE_S)
"""SIGTERM -> SIGKILL grace for vLLM after the gateway drained (budget in ``serving_contract.env``)."""

JSON_HEADERS: Final = {"content-type": "application/json"}
_ERROR_TYPES: Final = {
    499: "ClientClosedRequest",
    400: "BadRequest",
    404: "NotFound",
    413: "PayloadTooLarge",
    415: "UnsupportedMediaType",
    422: "UnprocessableEntity",
    502: "EngineError",
    503: "ServiceUnavailable",
    504: "EngineTimeout",
}


def error_response(status: int, message: str) -> JSONResponse:
    """OpenAI-style error body ``{"error": {"message", "type", "code"}}``."""
    return JSONResponse(
        {"error": {"message": message, "type": _ERROR_TYPES.get(status, "Error"), "code": status}},
        status_code=status,
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _is_oom(text: bytes) -> bool:
    lowered = text.lower()
    return b"out of memory" in lowered or b"outofmemory" in lowered


class RelayResponse(Response):
    """A streamed answer relayed event by event (``text/event-stream``, chunked).

    Sent by :class:`_FrontDoor` with plain ASGI ``send`` calls and one task that watches for
    the client going away (then the upstream connection is aborted so vLLM stops
    generating). Starlette's ``StreamingResponse`` does the same with an anyio task group
    per response, which cost several times more per stream in the benchmark.

    ``on_close`` runs whenever ``__call__`` ends (normally, by error or cancelled, e.g. by
    uvicorn's graceful-shutdown timeout at ``send(http.response.start)`` before ``body``
    ever started, when the generator's own ``finally`` would never run): it must release
    the upstream stream and be idempotent.
    """

    def __init__(
        self,
        body: AsyncGenerator[bytes, None],
        on_disconnect: Callable[[], None],
        on_close: Callable[[], None],
    ) -> None:
        self.status_code = 200
        self.body_iterator = body
        self.on_disconnect = on_disconnect
        self.on_close = on_close
        self.raw_headers = [
            (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-cache"),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watcher = asyncio.ensure_future(self._watch(receive))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for chunk in self.body_iterator:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()
            try:
                await self.body_iterator.aclose()  # runs the generator's finally if it started
            finally:
                self.on_close()  # covers a generator that never started

    async def _watch(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.on_disconnect()
                return


@dataclass(slots=True)
class RequestRecord:
    """What one ``/invocations`` call reports as EMF."""

    adapter: str = "none"
    status: int = 0
    stream: bool = False
    ttft_ms: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    engine_error: bool = False
    oom: bool = False
    disconnected: bool = False
    emitted: bool = False


class Gateway:
    """State and handlers of the serving process."""

    def __init__(
        self,
        settings: Settings,
        *,
        upstream_url: str,
        engine: EngineProcess | None,
        request_exit: Callable[[int], None],
        emf: EmfWriter | None = None,
    ) -> None:
        self.settings = settings
        self.upstream_url = upstream_url
        self.engine = engine
        self.request_exit = request_exit
        self.readiness = Readiness()
        self.tracker = InflightTracker()
        self.emf = emf or EmfWriter(
            settings.metrics_namespace,
            {Dimension.ENDPOINT: settings.endpoint_name, Dimension.VARIANT: settings.variant_name},
        )
        self.model_names = frozenset(settings.model_names)
        self._available = ", ".join(settings.model_names)
        self._request_dims = self.emf.request_dimension_sets
        self._timeout = settings.request_timeout_s
        url = urlsplit(upstream_url)
        self._pool = UpstreamPool(url.hostname or "127.0.0.1", url.port or 80)
        self._tasks: list[asyncio.Task[None]] = []
        self._drain_task: asyncio.Task[None] | None = None
        self._started = time.monotonic()

    # ------------------------------------------------------------------ lifecycle
    async def startup(self) -> None:
        """Open the upstream pool, spawn vLLM and the background tasks (lifespan start)."""
        if self.engine is not None:
            await self.engine.start()
            self._spawn(self._watch_engine())
        self._spawn(self._startup_sequence())
        self._spawn(self._health_loop())
        self._spawn(self._scrape_loop())

    async def shutdown(self) -> None:
        """Cancel background tasks, stop vLLM if still running, close the pool."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        if self.engine is not None:
            await self.engine.stop(ENGINE_STOP_GRACE_S)
        await self._pool.aclose()

    def _spawn(self, coro: Any) -> None:
        self._tasks.append(asyncio.create_task(coro))

    def begin_drain(self) -> None:
        """SIGTERM handler: start the drain once; later signals are ignored."""
        if self._drain_task is None:
            self._drain_task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        started = time.monotonic()
        inflight = self.tracker.count
        self.readiness.set_phase(Phase.DRAINING, "SIGTERM received, draining")
        log.info(
            "drain: SIGTERM, %d request(s) in flight, budget %.1f s",
            inflight,
            self.settings.drain_timeout_s,
        )
        idle = await self.tracker.wait_idle(self.settings.drain_timeout_s)
        if idle:
            log.info("drain: all requests finished in %.2f s", time.monotonic() - started)
        else:
            log.warning(
                "drain: %d request(s) still in flight after %.1f s, stopping anyway",
                self.tracker.count,
                self.settings.drain_timeout_s,
            )
        if self.engine is not None:
            code = await self.engine.stop(ENGINE_STOP_GRACE_S)
            log.info("drain: engine stopped (exit %s)", code)
        self.request_exit(0)

    async def _startup_sequence(self) -> None:
        deadline = self._started + self.settings.startup_timeout_s
        try:
            waited = await wait_for_engine(
                self._pool,
                deadline,
                lambda: self.engine is None or self.engine.alive or self.readiness.draining,
            )
            log.info("startup: engine healthy after %.1f s", waited)
            self.readiness.record_health(True)
            self.readiness.set_phase(Phase.WARMING_UP, "warming up")

            def done(name: str) -> None:
                self.readiness.warmed_up_adapters.append(name)

            await run_warmup(
                self._pool,
                self.settings.model_names,
                self.settings.warmup_num_requests,
                deadline,
                done,
            )
        except StartupError as exc:
            if not self.readiness.draining:
                self._fail(f"startup failed: {exc}")
            return
        self.readiness.set_phase(Phase.READY, "ready")
        log.info(
            "startup: ready after %.1f s (warmed %s)",
            time.monotonic() - self._started,
            ", ".join(self.readiness.warmed_up_adapters),
        )

    def _fail(self, message: str) -> None:
        log.error(message)
        self.readiness.set_phase(Phase.FAILED, message)
        self.request_exit(1)

    async def _watch_engine(self) -> None:
        assert self.engine is not None
        code = await self.engine.wait()
        self.readiness.record_health(False)
        if not self.readiness.draining:
            self._fail(f"vLLM exited unexpectedly with code {code}")

    async def _health_loop(self) -> None:
        failures = 0
        while True:
            await asyncio.sleep(HEALTH_POLL_INTERVAL_S)
            if self.readiness.phase is Phase.STARTING:
                continue
            if self.engine is not None and not self.engine.alive:
                self.readiness.record_health(False)
                continue
            try:
                status, _ = await self._pool.get("/health", timeout_s=HEALTH_PROBE_TIMEOUT_S)
                ok = status == 200
            except UpstreamError:
                ok = False
            if ok:
                failures = 0
                self.readiness.record_health(True)
            else:
                failures += 1
                if failures >= HEALTH_FAILURE_THRESHOLD and self.readiness.engine_healthy:
                    log.warning("health: vLLM /health failed %d times in a row", failures)
                    self.readiness.record_health(False)

    async def _scrape_loop(self) -> None:
        calculator = EngineMetricsCalculator()
        interval = self.settings.metrics_interval_s
        warned = False
        while True:
            await asyncio.sleep(interval)
            if self.readiness.phase is Phase.STARTING or (self.engine is not None and not self.engine.alive):
                continue
            try:
                status, content = await self._pool.get("/metrics", timeout_s=min(interval, 5.0))
                if status != 200:
                    raise UpstreamError(f"/metrics answered {status}")
                totals = parse_samples(content.decode("utf-8", "replace"))
            except Exception as exc:  # a bad scrape must never stop the loop
                if not warned:
                    log.warning("metrics: scrape failed: %s", exc.__class__.__name__)
                    warned = True
                continue
            values = calculator.update(totals, time.monotonic())
            self.emf.emit(values, properties={"Source": "vllm_metrics"})

    # ------------------------------------------------------------------ handlers
    async def ping(self, request: Request) -> Response:
        """200 only when warmed up, engine healthy and not draining; never awaits the engine."""
        return JSONResponse(self.readiness.body(), status_code=200 if self.readiness.ready else 503)

    async def invocations(self, request: Request) -> Response:
        """Route a chat-completions (``messages``) or completions (``prompt``) body to vLLM."""
        started = time.perf_counter()
        record = RequestRecord()
        try:
            response = await self._invocations(request, record, started)
        except ClientDisconnect:  # the client left while sending its body
            response = error_response(499, "client disconnected before the body was read")
        except Exception:  # last resort: a bug must cost one request, not the process
            log.exception("invocations: unhandled error")
            response = error_response(500, "internal error in the serving gateway")
        record.status = response.status_code
        if not isinstance(response, RelayResponse):
            self._emit(record, started)
        return response

    async def _invocations(self, request: Request, record: RequestRecord, started: float) -> Response:
        if self.readiness.draining:
            return error_response(503, "instance is draining (SIGTERM); retry elsewhere")
        if not self.readiness.ready:
            return error_response(503, f"not ready: {self.readiness.phase.value}")
        content_type = request.headers.get("content-type")
        if content_type:
            media = content_type.split(";", 1)[0].strip().lower()
            if not (media == "application/json" or media.endswith("+json")):
                return error_response(415, f"content-type {media!r} is not supported; send application/json")
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return error_response(413, f"body is {len(body)} bytes; limit {MAX_BODY_BYTES}")
        try:
            data = json.loads(body, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            return error_response(400, f"malformed JSON body: {str(exc)[:200]}")
        if not isinstance(data, dict):
            return error_response(422, "body must be a JSON object with 'messages' (chat) or 'prompt' (completions)")
        is_chat, is_completion = "messages" in data, "prompt" in data
        if is_chat == is_completion:
            return error_response(
                422,
                "body must have exactly one of 'messages' (chat completions) or 'prompt' (completions)",
            )
        model_cls = ChatCompletionBody if is_chat else CompletionBody
        try:
            parsed = model_cls.model_validate(data)
        except ValidationError as exc:
            return error_response(422, "invalid request: " + _summarise(exc))
        except RecursionError:
            return error_response(422, "invalid request: body is nested too deeply")

        attributes = parse_custom_attributes(request.headers.get(CUSTOM_ATTRIBUTES_HEADER))
        from_header = attributes.get("adapter") or None
        name = from_header or parsed.model or self.settings.served_model_name
        if name not in self.model_names:
            record.adapter = "unknown"
            return error_response(400, f"unknown adapter {name[:100]!r}; available: {self._available}")
        record.adapter = name
        record.stream = parsed.stream
        rewrite = name != parsed.model
        strip_usage = False
        if parsed.stream:
            options = parsed.stream_options or {}
            if options.get("include_usage") is not True:
                # Ask vLLM for token counts; the extra usage-only event is removed again
                # before the client sees it, so the stream is what the client asked for.
                data["stream_options"] = {**options, "include_usage": True}
                strip_usage = rewrite = True
        if rewrite:
            data["model"] = name
            try:
                body = json.dumps(data, separators=(",", ":")).encode()
            except (ValueError, RecursionError):
                return error_response(422, "invalid request: body is nested too deeply")
        path = "/v1/chat/completions" if is_chat else "/v1/completions"
        if parsed.stream:
            return await self._stream(path, body, record, started, strip_usage)
        return await self._unary(path, body, record)

    async def _unary(self, path: str, body: bytes, record: RequestRecord) -> Response:
        try:
            async with asyncio.timeout(self._timeout):
                upstream = await self._pool.request("POST", path, body)
                content = await upstream.read()
        except TimeoutError:
            record.engine_error = True
            return error_response(504, f"engine did not answer within REQUEST_TIMEOUT_S={self._timeout:g} s")
        except UpstreamError as exc:
            record.engine_error = True
            return error_response(503, f"engine unavailable: {exc}")
        status = upstream.status_code
        if status >= 500:
            return self._engine_failure(status, content, record)
        if status == 200:
            _read_usage(content, record)
        return Response(content, status_code=status, media_type="application/json")

    def _engine_failure(self, status: int, content: bytes, record: RequestRecord) -> Response:
        record.engine_error = True
        record.oom = _is_oom(content)
        log.warning("engine answered %d: %s", status, content[:300])
        detail = content[:300].decode("utf-8", "replace")
        return error_response(503 if status == 503 else 502, f"engine error {status}: {detail}")

    async def _stream(
        self, path: str, body: bytes, record: RequestRecord, started: float, strip_usage: bool
    ) -> Response:
        upstream: UpstreamResponse | None = None
        try:
            async with asyncio.timeout(self._timeout):
                upstream = await self._pool.request("POST", path, body)
                if upstream.status_code != 200:
                    content = await upstream.read()
        except TimeoutError:
            if upstream is not None:
                await upstream.aclose()
            record.engine_error = True
            return error_response(504, f"engine did not answer within REQUEST_TIMEOUT_S={self._timeout:g} s")
        except UpstreamError as exc:
            record.engine_error = True
            return error_response(503, f"engine unavailable: {exc}")
        if upstream.status_code != 200:
            if upstream.status_code >= 500:
                return self._engine_failure(upstream.status_code, content, record)
            return Response(content, status_code=upstream.status_code, media_type="application/json")
        record.status = 200

        def on_disconnect() -> None:
            record.disconnected = True
            upstream.abort()

        def on_close() -> None:
            upstream.abort()  # no-op after a full read or the relay's own aclose
            if not record.emitted:  # the relay never started: nothing reached the client
                record.status = 499 if record.disconnected else 503
                self._emit(record, started)

        relay = self._relay(upstream, record, started, strip_usage)
        return RelayResponse(relay, on_disconnect, on_close)

    async def _relay(
        self,
        upstream: UpstreamResponse,
        record: RequestRecord,
        started: float,
        strip_usage: bool,
    ) -> AsyncGenerator[bytes, None]:
        """Yield SSE events as vLLM sends them; stop at REQUEST_TIMEOUT_S with an error event.

        A timer aborts the upstream connection at the deadline, which ends the pending read;
        cheaper than wrapping every chunk read in ``wait_for``.
        """
        loop = asyncio.get_running_loop()
        timed_out = False

        def expire() -> None:
            nonlocal timed_out
            timed_out = True
            upstream.abort()

        timer = loop.call_at(loop.time() + self._timeout - (time.perf_counter() - started), expire)
        buffer = b""
        try:
            async for chunk in upstream.iter_chunks():
                if record.ttft_ms is None:
                    record.ttft_ms = (time.perf_counter() - started) * 1000.0
                buffer += chunk
                if b"\n\n" not in buffer:
                    continue
                *events, buffer = buffer.split(b"\n\n")
                out = [event for event in events if self._keep(event, record, strip_usage)]
                if out:
                    yield b"\n\n".join(out) + b"\n\n"
            if buffer.strip():
                yield buffer
        except Exception as exc:
            if record.disconnected:
                record.status = 499  # client went away; nothing left to tell it
                return
            record.engine_error = not timed_out
            if timed_out:
                record.status = 504
                message = f"stream exceeded REQUEST_TIMEOUT_S={self._timeout:g} s"
            else:
                record.status = 502
                message = f"engine stream failed: {exc.__class__.__name__}"
            log.warning("stream: %s", message)
            yield _sse_error(message, record.status)
        finally:
            timer.cancel()
            await upstream.aclose()
            self._emit(record, started)

    @staticmethod
    def _keep(event: bytes, record: RequestRecord, strip_usage: bool) -> bool:
        if b'"usage"' in event and event.startswith(b"data: {"):
            with contextlib.suppress(ValueError, AttributeError, TypeError):
                payload = json.loads(event[6:])
                usage = payload.get("usage")
                if usage:
                    record.input_tokens = usage.get("prompt_tokens")
                    record.output_tokens = usage.get("completion_tokens")
                    if strip_usage and not payload.get("choices"):
                        return False
        elif b'"error"' in event and event.startswith(b"data: {"):
            record.engine_error = True
            record.oom = record.oom or _is_oom(event)
        return True

    def _emit(self, record: RequestRecord, started: float) -> None:
        record.emitted = True
        status = record.status
        metrics: dict[str, float | int] = {
            RequestMetric.REQUESTS: 1,
            RequestMetric.REQUEST_LATENCY: round((time.perf_counter() - started) * 1000.0, 3),
            RequestMetric.CLIENT_ERRORS: int(400 <= status < 500),
            RequestMetric.SERVER_ERRORS: int(status >= 500),
            RequestMetric.ENGINE_ERRORS: int(record.engine_error),
            RequestMetric.OUT_OF_MEMORY_ERRORS: int(record.oom),
        }
        if record.ttft_ms is not None:
            metrics[RequestMetric.TIME_TO_FIRST_TOKEN] = round(record.ttft_ms, 3)
        if isinstance(record.input_tokens, int):
            metrics[RequestMetric.INPUT_TOKENS] = record.input_tokens
        if isinstance(record.output_tokens, int):
            metrics[RequestMetric.OUTPUT_TOKENS] = record.output_tokens
        # stdout closed or a non-finite value: drop the line, never the request.
        with contextlib.suppress(OSError, ValueError):
            self.emf.emit(
                metrics,
                dimension_sets=self._request_dims,
                dimensions={Dimension.ADAPTER: record.adapter},
                properties={"StatusCode": status, "Stream": record.stream},
            )


_DECODER: Final = json.JSONDecoder()


def _read_usage(content: bytes, record: RequestRecord) -> None:
    """Token counts from a completion body without parsing all of it: only the ``usage``
    object is decoded (the answer text can be large; usage is a few numbers)."""
    index = content.rfind(b'"usage":')
    if index < 0:
        return
    with contextlib.suppress(ValueError, AttributeError, TypeError, UnicodeDecodeError):
        tail = content[index + 8 :].decode().lstrip()
        usage, _ = _DECODER.raw_decode(tail)
        if isinstance(usage, dict):
            record.input_tokens = usage.get("prompt_tokens")
            record.output_tokens = usage.get("completion_tokens")


def _sse_error(message: str, status: int) -> bytes:
    payload = {"error": {"message": message, "type": _ERROR_TYPES.get(status, "Error"), "code": status}}
    return b"data: " + json.dumps(payload).encode() + b"\n\ndata: [DONE]\n\n"


def _summarise(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False)[:3]:
        loc = ".".join(str(p) for p in error.get("loc", ())) or "body"
        parts.append(f"{loc}: {error.get('msg', 'invalid')}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


class _FrontDoor:
    """Outermost ASGI app: the two SageMaker routes go straight to their handlers.

    Starlette's middleware stack and router cost ~100 us per request on the dev machine;
    ``/ping`` and ``POST /invocations`` skip them (the handlers catch their own errors).
    Everything else (404s, 405s, lifespan) goes through the Starlette app. Requests to
    ``/invocations`` count as in flight until their last byte, streams included.
    """

    def __init__(self, app: ASGIApp, gateway: Gateway) -> None:
        self.app = app
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path, method = scope["path"], scope["method"]
            if path == "/invocations" and method == "POST":
                tracker = self.gateway.tracker
                tracker.enter()
                try:
                    response = await self.gateway.invocations(Request(scope, receive))
                    await response(scope, receive, send)
                finally:
                    tracker.exit()
                return
            if path == "/ping" and method == "GET":
                await (await self.gateway.ping(Request(scope, receive)))(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(gateway: Gateway) -> ASGIApp:
    """Starlette app with lifespan-managed gateway resources behind :class:`_FrontDoor`."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gateway.startup()
        try:
            yield
        finally:
            await gateway.shutdown()

    app = Starlette(
        routes=[
            Route("/ping", gateway.ping, methods=["GET"]),
            Route("/invocations", gateway.invocations, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    return _FrontDoor(app, gateway)
