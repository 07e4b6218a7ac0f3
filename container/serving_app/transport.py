"""HTTP transport limits on :8080: what a client may send before the app sees a request.

uvicorn 0.54 (httptools parser) caps none of these: no header count or size limit (its h11
option ``h11_max_incomplete_event_size`` applies to the h11 parser only, and vLLM's
``h11_max_header_count`` is not a uvicorn setting at all), no deadline for the request line
and headers (the keep-alive timer is armed only after a response), and no early refusal of a
declared ``Content-Length``. :func:`limited_protocol` subclasses uvicorn's own httptools
protocol and adds them at the parser callbacks, so a refused request never reaches the app,
the in-flight count or the SIGTERM drain.

Refusals are written straight to the socket (``431``, ``413``, ``408``) with ``Connection: close``, then
the connection closes the way nginx's ``lingering_close`` does (issue 53, finding 17): the write side is shut
(the client reads the answer and then end of stream) and whatever the client still sends is read and discarded,
up to :data:`LINGER_MAX_BYTES` and the request read deadline, before the socket closes. Closing at once while
the body was still arriving made the kernel answer the unread bytes with a reset, and a client that sends its
whole body before it reads (urllib, botocore) saw a connection error instead of its 413; botocore retries that
as a network fault.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from serving_app.errors import error_body
from serving_contract.request_limits import SAGEMAKER_MAX_BODY_BYTES

log = logging.getLogger("serving_app.transport")


@dataclass(frozen=True, slots=True)
class TransportLimits:
    """Limits per connection and per request.

    Attributes:
        request_read_timeout_s: a request's line, headers and whole body must arrive within this
            many seconds of the connection opening or the previous response ending (408 and
            close). SageMaker buffers the whole payload (<= 6 MB) before it calls the
            container, so a body arrives at network speed; 10 s is half the drain budget
            (DRAIN_TIMEOUT_S 20), so a client that stalls its upload cannot hold the drain.
        max_headers: header fields per request (431). Apache httpd's ``LimitRequestFields``
            default, 100; SageMaker forwards a handful of its own plus the client's
            custom attributes.
        max_header_bytes: request line plus all header names and values, bytes (431). nginx's
            default ``large_client_header_buffers 4 8k``: 32 KiB.
        max_body_bytes: declared ``Content-Length`` or received chunked body, bytes (413).
            SageMaker's 6 MB payload limit by default; the gateway passes the body bound of
            ``/invocations`` (``RequestLimits.max_body_bytes``, relative to the engine's context),
            so a body over it is refused from its headers, before it is read or parsed.
        body_bound: what the 413 says the limit is (``RequestLimits.body_bound``).
    """

    request_read_timeout_s: float = 10.0
    max_headers: int = 100
    max_header_bytes: int = 32 * 1024
    max_body_bytes: int = SAGEMAKER_MAX_BODY_BYTES
    body_bound: str = f"{SAGEMAKER_MAX_BODY_BYTES} bytes"


LINGER_MAX_BYTES: Final = 2 * SAGEMAKER_MAX_BODY_BYTES
"""Bytes of a refused request's remaining upload read and discarded before the connection closes: twice the most
SageMaker forwards (its 6 MB payload limit), so a direct client a little over it (a 7 MB test body) still reads
its 413. A client sending more is cut off (reset) at this, or at the read deadline."""

KEEP_ALIVE_S: Final = 65
"""Idle keep-alive after a response, seconds: longer than the 60 s idle timeout of AWS's
proxies (ALB's default), so the proxy in front closes idle connections first and never
reuses one the container has just closed. Connections that never send a request are closed
by ``request_read_timeout_s`` instead."""

LIMIT_CONCURRENCY: Final = 512
"""Open connections + running tasks above which uvicorn answers 503 (``limit_concurrency``):
a backstop against a connection flood exhausting file descriptors; 16 x the engine's
``max_num_seqs`` (32, seed 003) leaves room for SageMaker's own connection pool."""


class _RefusedError(Exception):
    """Raised inside a parser callback to stop parsing after a refusal was written (httptools
    wraps it in ``HttpParserCallbackError``, which uvicorn's ``data_received`` catches)."""


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with :attr:`limits` enforced at the parser callbacks;
    :func:`limited_protocol` binds the limits."""

    limits: ClassVar[TransportLimits] = TransportLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_timer: asyncio.TimerHandle | None = None
        self._header_count = 0
        self._header_bytes = 0
        self._body_bytes = 0
        self._refused = False
        self._linger_timer: asyncio.TimerHandle | None = None
        self._discarded = 0

    # -- the read deadline: from connection/previous response to the last body byte
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._read_timer is None:
            self._read_timer = self.loop.call_later(self.limits.request_read_timeout_s, self._read_timed_out)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if self.cycle is not None and self.cycle.response_started:
            if self.cycle.response_complete and not self.transport.is_closing():
                self.transport.close()  # answered early; the rest of its body never came
            return  # the app is answering; let it finish
        if self._header_count or self.cycle is not None:
            self._refuse(408, f"request not received within {self.limits.request_read_timeout_s:g} s")
        elif not self.transport.is_closing():
            self.transport.close()  # a connection that never sent a header

    # -- parser callbacks
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_count = self._header_bytes = self._body_bytes = 0
        self._arm()

    def on_url(self, url: bytes) -> None:
        self._header_bytes += len(url)
        self._check_headers()
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        self._header_bytes += len(name) + len(value)
        self._check_headers()
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        declared = self._content_length()
        if declared is not None and declared > self.limits.max_body_bytes:
            self._refuse(413, f"body is {declared} bytes (Content-Length): at most {self.limits.body_bound}")
            raise _RefusedError
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        if self._body_bytes > self.limits.max_body_bytes:
            self._refuse(413, f"body is over the limit: at most {self.limits.body_bound}")
            raise _RefusedError
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    # -- refusals
    def data_received(self, data: bytes) -> None:
        if not self._refused:
            super().data_received(data)
            return
        self._discarded += len(data)  # lingering: read and dropped
        if self._discarded > LINGER_MAX_BYTES:
            self._close()

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown: a refused connection has nothing left to answer."""
        if self._refused:
            self._close()
            return
        super().shutdown()

    def send_400_response(self, msg: str) -> None:
        if not self._refused:  # the parser error is our own _RefusedError
            super().send_400_response(msg)

    def _check_headers(self) -> None:
        if self._header_count > self.limits.max_headers:
            self._refuse(431, f"more than {self.limits.max_headers} header fields")
            raise _RefusedError
        if self._header_bytes > self.limits.max_header_bytes:
            self._refuse(431, f"request line and headers over {self.limits.max_header_bytes} bytes")
            raise _RefusedError

    def _content_length(self) -> int | None:
        for name, value in self.headers:
            if name == b"content-length":
                try:
                    return int(value)
                except ValueError:
                    return None  # httptools refuses a malformed length itself
        return None

    def _refuse(self, status: int, message: str) -> None:
        self._disarm()
        if not self._refused and not self.transport.is_closing():
            log.warning("transport: %d %s from %s", status, message, self.client)
            payload = json.dumps(error_body(status, message)).encode()
            head = (
                f"HTTP/1.1 {status} {_REASONS[status]}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n"
            )
            self.transport.write(head.encode() + payload)
            self._linger()
        self._refused = True

    def _linger(self) -> None:
        """Half-close after the refusal and discard what still arrives, within the read deadline (module docstring).
        A request the app already holds (a 413 or 408 mid-body) sees the client gone, so it ends and leaves the
        in-flight count and the drain."""
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()  # after the answer: the client reads it, then end of stream
        self.flow.resume_reading()  # the app's flow control may have paused reads mid-body
        self._linger_timer = self.loop.call_later(self.limits.request_read_timeout_s, self._close)

    def _close(self) -> None:
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def limited_protocol(limits: TransportLimits) -> type[HttpToolsProtocol]:
    """A uvicorn ``http`` protocol class (pass as ``uvicorn.Config(http=...)``) enforcing ``limits``."""

    class Bound(LimitedHttpToolsProtocol):
        pass

    Bound.limits = limits
    return Bound


_REASONS: Final = {408: "Request Timeout", 413: "Content Too Large", 431: "Request Header Fields Too Large"}
