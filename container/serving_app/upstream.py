"""A lean, pooled HTTP/1.1 client for the request hot path (gateway -> vLLM on loopback).

Why not httpx here: measured on this project's 2-core dev machine, one ``httpx.AsyncClient``
POST to a local server cost ~1.8 ms of CPU against ~0.05 ms for a bare keep-alive exchange
on asyncio streams (``benchmarks/serving_overhead.py``, container/README.md). The gateway's
whole job on the hot path is one such exchange, so it uses this client; httpx stays for the
control plane (health polls, ``/metrics`` scrapes, warmup), where its cost does not matter.

Scope is deliberately small: one known upstream on 127.0.0.1, HTTP/1.1 keep-alive,
``Content-Length`` or chunked responses, no redirects, no TLS, no proxies.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import Final

KEEPALIVE_EXPIRY_S: Final = 4.0
"""Idle connections older than this are dropped: below vLLM's uvicorn keep-alive (5 s), so
the pool never reuses a socket the server is about to close."""

MAX_IDLE: Final = 256
"""Idle connections kept for reuse (above ``--max-num-seqs`` 128 of the seed design)."""


class UpstreamError(Exception):
    """The upstream could not be reached or broke the protocol mid-response."""


class _Conn:
    __slots__ = ("idle_since", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class UpstreamResponse:
    """A response whose status and headers are read; the body is read on demand.

    Always finish with :meth:`read`, a full :meth:`iter_chunks`, or :meth:`aclose`; only a
    fully read body returns the connection to the pool.
    """

    def __init__(self, pool: UpstreamPool, conn: _Conn, status: int, headers: dict[bytes, bytes]) -> None:
        self._pool = pool
        self._conn: _Conn | None = conn
        self.status_code = status
        self.headers = headers
        self._chunked = headers.get(b"transfer-encoding", b"").lower() == b"chunked"
        length = headers.get(b"content-length")
        self._length = int(length) if length is not None else None
        self._reusable = headers.get(b"connection", b"").lower() != b"close" and (
            self._chunked or self._length is not None
        )

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([chunk async for chunk in self.iter_chunks()])

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        """Body bytes as they arrive (one item per HTTP chunk when chunked)."""
        conn = self._conn
        if conn is None:
            return
        reader = conn.reader
        try:
            if self._chunked:
                while True:
                    line = await reader.readuntil(b"\r\n")
                    size = int(line.split(b";", 1)[0].strip(), 16)
                    if size == 0:
                        while (await reader.readuntil(b"\r\n")) != b"\r\n":
                            pass  # trailers
                        break
                    data = await reader.readexactly(size + 2)
                    yield data[:-2]
            elif self._length is not None:
                if self._length:
                    yield await reader.readexactly(self._length)
            else:
                while chunk := await reader.read(65536):
                    yield chunk
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            self._discard()
            raise UpstreamError(f"response body broken: {exc.__class__.__name__}") from None
        except BaseException:
            self._discard()
            raise
        if self._reusable:
            self._conn = None
            self._pool._release(conn)
        else:
            self._discard()

    def _discard(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def abort(self) -> None:
        """Close the connection now; a pending body read then raises UpstreamError."""
        self._discard()

    async def aclose(self) -> None:
        """Drop the connection unless the body was fully read (idempotent)."""
        self._discard()


class UpstreamPool:
    """Keep-alive connections to one ``host:port``."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        max_idle: int = MAX_IDLE,
        keepalive_expiry_s: float = KEEPALIVE_EXPIRY_S,
    ) -> None:
        self.host = host
        self.port = port
        self._idle: deque[_Conn] = deque()
        self._max_idle = max_idle
        self._expiry = keepalive_expiry_s
        self._head = f"Host: {host}:{port}\r\n".encode()

    async def request(
        self, method: str, path: str, body: bytes = b"", content_type: bytes = b"application/json"
    ) -> UpstreamResponse:
        """Send one request; return once the status line and headers are in.

        A reused connection that the server closed before answering is retried once on a
        fresh one (the request never reached the application). Raises :class:`UpstreamError`.
        """
        raw = b"".join(
            (
                method.encode(),
                b" ",
                path.encode(),
                b" HTTP/1.1\r\n",
                self._head,
                b"Content-Type: ",
                content_type,
                b"\r\nContent-Length: ",
                str(len(body)).encode(),
                b"\r\n\r\n",
                body,
            )
        )
        conn = self._take_idle()
        if conn is not None:
            try:
                return await self._exchange(conn, raw)
            except _StaleConnectionError:
                pass
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port, limit=2**20)
        except OSError as exc:
            raise UpstreamError(f"connect failed: {exc.__class__.__name__}") from None
        try:
            return await self._exchange(_Conn(reader, writer), raw)
        except _StaleConnectionError:
            raise UpstreamError("connection closed before a response") from None

    async def _exchange(self, conn: _Conn, raw: bytes) -> UpstreamResponse:
        try:
            conn.writer.write(raw)
            status_line = await conn.reader.readuntil(b"\r\n")
        except (OSError, asyncio.IncompleteReadError) as exc:
            conn.close()
            if isinstance(exc, asyncio.IncompleteReadError) and not exc.partial:
                raise _StaleConnectionError from None
            if isinstance(exc, ConnectionError):
                raise _StaleConnectionError from None
            raise UpstreamError(f"no response: {exc.__class__.__name__}") from None
        except BaseException:
            conn.close()
            raise
        try:
            status = int(status_line.split(b" ", 2)[1])
            block = await conn.reader.readuntil(b"\r\n\r\n") if not status_line.endswith(b"\r\n\r\n") else b"\r\n"
        except (
            OSError,
            ValueError,
            IndexError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
        ) as exc:
            conn.close()
            raise UpstreamError(f"bad response head: {exc.__class__.__name__}") from None
        except BaseException:
            conn.close()
            raise
        headers: dict[bytes, bytes] = {}
        for line in block.split(b"\r\n"):
            name, sep, value = line.partition(b":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        return UpstreamResponse(self, conn, status, headers)

    def _take_idle(self) -> _Conn | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()  # most recently used first: warmest socket
            if now - conn.idle_since < self._expiry and not conn.reader.at_eof():
                return conn
            conn.close()
        return None

    def _release(self, conn: _Conn) -> None:
        if len(self._idle) >= self._max_idle or conn.reader.at_eof():
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)

    async def aclose(self) -> None:
        """Close every idle connection."""
        while self._idle:
            self._idle.pop().close()


class _StaleConnectionError(Exception):
    """A kept-alive connection was closed by the server before it answered."""
