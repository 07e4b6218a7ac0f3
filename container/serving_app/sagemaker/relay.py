"""Relaying vLLM's answers to the client: whole bodies and server-sent-event streams.

Bodies are forwarded as vLLM wrote them (no JSON re-serialisation on the hot path); streams are
relayed read by read as vLLM produces them: a read of whole events that carry no ``usage`` and no
``error`` (almost every token) goes out as it came in, without being split into events. Token
counts and the cached prompt tokens (the request's class) for its EMF line come from the ``usage``
vLLM reports; only that object is decoded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, Callable
from typing import Final

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from serving_app.errors import sse_error
from serving_app.metrics.requests import RequestRecord
from serving_app.upstream import UpstreamResponse

log = logging.getLogger("serving_app.sagemaker")

_DECODER: Final = json.JSONDecoder()


def is_oom(text: bytes) -> bool:
    """The engine's error text reports CUDA out-of-memory."""
    lowered = text.lower()
    return b"out of memory" in lowered or b"outofmemory" in lowered


def read_usage(content: bytes, record: RequestRecord) -> None:
    """Token counts (and cached prompt tokens) from a completion body without parsing all of it: only the ``usage``
    object is decoded (the answer text can be large; usage is a few numbers)."""
    index = content.rfind(b'"usage":')
    if index < 0:
        return
    with contextlib.suppress(ValueError, AttributeError, TypeError, UnicodeDecodeError):
        tail = content[index + 8 :].decode().lstrip()
        usage, _ = _DECODER.raw_decode(tail)
        if isinstance(usage, dict):
            record.read_usage(usage)


class RelayResponse(Response):
    """A streamed answer relayed event by event (``text/event-stream``, chunked).

    Sent with plain ASGI ``send`` calls and one task that watches for the client going away
    (then the upstream connection is aborted so vLLM stops generating). Starlette's
    ``StreamingResponse`` does the same with an anyio task group per response, which cost
    several times more per stream in the benchmark.

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


async def relay_events(
    upstream: UpstreamResponse,
    record: RequestRecord,
    started: float,
    *,
    timeout_s: float,
    strip_usage: bool,
    finish: Callable[[RequestRecord, float], None],
) -> AsyncGenerator[bytes, None]:
    """Yield SSE events as vLLM sends them; stop at ``timeout_s`` with an error event.

    A timer aborts the upstream connection at the deadline, which ends the pending read;
    cheaper than wrapping every chunk read in ``wait_for``. ``finish(record, started)`` runs
    once at the end (the request's EMF line).
    """
    loop = asyncio.get_running_loop()
    timed_out = False

    def expire() -> None:
        nonlocal timed_out
        timed_out = True
        upstream.abort()

    timer = loop.call_at(loop.time() + timeout_s - (time.perf_counter() - started), expire)
    buffer = b""
    read = upstream.read_any
    try:
        chunk = await read()
        if chunk:
            record.ttft_ms = (time.perf_counter() - started) * 1000.0
        while chunk:
            if buffer:
                chunk, buffer = buffer + chunk, b""
            if chunk.endswith(b"\n\n") and b'"usage"' not in chunk and b'"error"' not in chunk:
                # Fast path, almost every token: whole events with nothing to record or drop are
                # relayed as read, without splitting them into events and joining them again.
                yield chunk
            elif b"\n\n" not in chunk:
                buffer = chunk  # an event cut by the socket read: wait for its end
            else:
                *events, buffer = chunk.split(b"\n\n")
                out = [event for event in events if _keep(event, record, strip_usage)]
                if out:
                    yield b"\n\n".join(out) + b"\n\n"
            chunk = await read()
        if buffer.strip():
            yield buffer
    except Exception as exc:
        if record.disconnected:
            record.status = 499  # client went away; nothing left to tell it
            return
        record.engine_error = not timed_out
        record.stream_error = True  # the client already has a 200: only this event tells it
        if timed_out:
            record.status = 504
            message = f"stream exceeded REQUEST_TIMEOUT_S={timeout_s:g} s"
        else:
            record.status = 502
            message = f"engine stream failed: {exc.__class__.__name__}"
        log.warning("stream: %s", message)
        yield sse_error(message, record.status)
    finally:
        timer.cancel()
        await upstream.aclose()
        finish(record, started)


def _is_error_event(event: bytes) -> bool:
    """The event is vLLM's error object (``{"error": {...}}``), not a token whose text says "error"."""
    with contextlib.suppress(ValueError):
        payload = json.loads(event[6:])
        return isinstance(payload, dict) and "error" in payload and "choices" not in payload
    return False


def _keep(event: bytes, record: RequestRecord, strip_usage: bool) -> bool:
    """Record usage and errors from one event; False drops it (our own usage-only event)."""
    if b'"usage"' in event and event.startswith(b"data: {"):
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            payload = json.loads(event[6:])
            usage = payload.get("usage")
            if usage:
                record.read_usage(usage)
                if strip_usage and not payload.get("choices"):
                    return False
    elif b'"error"' in event and event.startswith(b"data: {") and _is_error_event(event):
        # vLLM's own error event after its 200 (generation failed mid-stream): an error for the
        # caller although SageMaker counts a 200 (StreamErrors).
        record.engine_error = record.stream_error = True
        record.oom = record.oom or is_oom(event)
    return True
