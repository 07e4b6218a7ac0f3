"""The gateway's HTTP client to vLLM on loopback: a thin wrapper over ``aiohttp``.

One :class:`UpstreamPool` (one ``aiohttp.ClientSession`` + ``TCPConnector``) carries both
the request hot path (``/v1/chat/completions``, ``/v1/completions``, streamed or not) and
the control plane (``/health`` polls, ``/metrics`` scrapes, warmup), so the gateway depends
on one HTTP client library. aiohttp rather than our own protocol code: house rule, a
well-kept library beats hand-written HTTP; aiohttp rather than httpx: vLLM 0.26.0 itself
depends on aiohttp (3.14.5 in its resolved environment, so it adds nothing to the image),
and it cost a fraction of httpx's CPU per request in ``benchmarks/serving_overhead.py``
(container/README.md, "Overhead").

The wrapper keeps the small interface the gateway needs: :meth:`UpstreamPool.request`
returns an :class:`UpstreamResponse` once status and headers are in (``status_code``,
``headers``, :meth:`~UpstreamResponse.read`, :meth:`~UpstreamResponse.iter_chunks`,
:meth:`~UpstreamResponse.text`, :meth:`~UpstreamResponse.aclose`,
:meth:`~UpstreamResponse.abort`), and every transport failure is :class:`UpstreamError`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final

import aiohttp
from multidict import CIMultiDictProxy

KEEPALIVE_EXPIRY_S: Final = 4.0
"""Idle connections older than this are not reused: below vLLM's uvicorn keep-alive (5 s,
uvicorn's ``timeout_keep_alive`` default), so the pool never reuses a socket the server is
about to close. aiohttp does not retry a POST on a reused socket that the server closed."""

MAX_CONNECTIONS: Final = 1024
"""Connector limit: well above ``--max-num-seqs`` (128, seeds/003 section 5) plus the
control plane, so the pool never queues requests ahead of vLLM's own scheduler."""

CONNECT_TIMEOUT_S: Final = 5.0
"""Bound on opening a loopback connection (vLLM accepting); the request itself is bounded
by the caller (``REQUEST_TIMEOUT_S``) or the ``timeout_s`` argument."""

STALE_SOCKET_RETRIES: Final = 1
"""Sends again, on another connection, a request that the server disconnected before answering.
vLLM answers some errors from its catch-all exception handler (an OOM's 500; 0.22's
context-length 400) and uvicorn then closes that socket a moment later, without a
``Connection: close`` header; aiohttp has already pooled it (a short body is read, and the
connection released, with the headers), so the next request can be written to a socket the
server no longer reads, which uvicorn drops unread. Seen in CI, 2026-11-26: a valid request
answered 503 right after a context-length 400. One retry: the engine being down shows up as a
refused connect on the second attempt."""

READ_BUFFER_BYTES: Final = 2**20
"""aiohttp's per-response read buffer (default 64 KiB): a whole completion body usually
arrives in one read."""


class UpstreamError(Exception):
    """The upstream could not be reached, timed out, or broke the protocol mid-response."""


def _describe(exc: BaseException) -> str:
    return exc.__class__.__name__


class UpstreamResponse:
    """A response whose status and headers are in; the body is read on demand.

    Finish with :meth:`read`, a full :meth:`iter_chunks`, or :meth:`aclose`: a fully read
    body returns the connection to the pool, anything else closes it.
    """

    __slots__ = ("_response",)

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    @property
    def status_code(self) -> int:
        return self._response.status

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        """Response headers (case-insensitive names)."""
        return self._response.headers

    async def read(self) -> bytes:
        """The whole body; raises :class:`UpstreamError` if it breaks off."""
        try:
            return await self._response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            self._response.close()
            raise UpstreamError(f"response body broken: {_describe(exc)}") from None

    async def text(self) -> str:
        """The whole body decoded as UTF-8 (invalid bytes replaced)."""
        return (await self.read()).decode("utf-8", "replace")

    async def read_any(self) -> bytes:
        """The body bytes that are in (waiting for some when none are), ``b""`` at the end.

        The stream relay's hot path: one call per socket read, no async-iterator layers
        (aiohttp's ``iter_any`` and a generator around it cost ~10 % of the gateway's CPU per
        streamed token in the profile, benchmarks/serving_overhead.py). Raises
        :class:`UpstreamError` when the body breaks off.
        """
        try:
            return await self._response.content.readany()
        except (aiohttp.ClientError, TimeoutError) as exc:
            self._response.close()
            raise UpstreamError(f"response body broken: {_describe(exc)}") from None
        except BaseException:
            self._response.close()
            raise

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        """Body bytes as they arrive (whatever the socket delivered, no re-chunking)."""
        while chunk := await self.read_any():
            yield chunk

    def abort(self) -> None:
        """Close the connection now (vLLM sees the disconnect and stops generating); a
        pending body read then raises :class:`UpstreamError`."""
        self._response.close()

    async def aclose(self) -> None:
        """Drop the connection unless the body was fully read (idempotent)."""
        self._response.close()


class UpstreamPool:
    """Keep-alive connections to one ``http://host:port`` (vLLM on loopback).

    The ``aiohttp.ClientSession`` is created on first use, inside the running event loop.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        max_connections: int = MAX_CONNECTIONS,
        keepalive_expiry_s: float = KEEPALIVE_EXPIRY_S,
    ) -> None:
        self.host = host
        self.port = port
        self._base_url = f"http://{host}:{port}"
        self._max_connections = max_connections
        self._keepalive_expiry_s = keepalive_expiry_s
        self._session: aiohttp.ClientSession | None = None
        self._default_timeout = aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT_S)

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._max_connections,
                limit_per_host=0,
                keepalive_timeout=self._keepalive_expiry_s,
            )
            self._session = aiohttp.ClientSession(
                base_url=self._base_url,
                connector=connector,
                timeout=self._default_timeout,
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                read_bufsize=READ_BUFFER_BYTES,
                raise_for_status=False,
            )
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        content_type: str = "application/json",
        *,
        timeout_s: float | None = None,
    ) -> UpstreamResponse:
        """Send one request; return once the status line and headers are in.

        ``timeout_s`` bounds the whole exchange, body included (control-plane calls); the
        hot path passes none and bounds the request itself. Raises :class:`UpstreamError`.
        """
        timeout = (
            self._default_timeout if timeout_s is None else aiohttp.ClientTimeout(timeout_s, connect=CONNECT_TIMEOUT_S)
        )
        for attempt in range(STALE_SOCKET_RETRIES + 1):
            try:
                response = await self._get_session().request(
                    method,
                    path,
                    data=body if method != "GET" else None,
                    headers={"Content-Type": content_type} if method != "GET" else None,
                    timeout=timeout,
                )
            except aiohttp.ClientConnectorError as exc:
                raise UpstreamError(f"connect failed: {_describe(exc)}") from None
            except aiohttp.ServerDisconnectedError as exc:
                if attempt < STALE_SOCKET_RETRIES:
                    continue  # see STALE_SOCKET_RETRIES
                raise UpstreamError(f"no response: {_describe(exc)}") from None
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise UpstreamError(f"no response: {_describe(exc)}") from None
            return UpstreamResponse(response)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def get(self, path: str, *, timeout_s: float) -> tuple[int, bytes]:
        """Control-plane GET: ``(status, body)``, the connection back in the pool."""
        response = await self.request("GET", path, timeout_s=timeout_s)
        return response.status_code, await response.read()

    async def aclose(self) -> None:
        """Close the session and every pooled connection."""
        if self._session is not None:
            await self._session.close()
            self._session = None
