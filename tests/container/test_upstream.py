"""The upstream wrapper (``serving_app.upstream``, over aiohttp) against a scripted
raw-socket server (in-process): what the gateway relies on, not aiohttp itself."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from serving_app.upstream import UpstreamError, UpstreamPool

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[bool]]


async def serve(handler: Handler) -> tuple[asyncio.Server, int, list[int]]:
    """Raw server; ``handler`` answers one request and says whether to keep the socket."""
    connections: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        index = len(connections)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                parts = head.lower().split(b"content-length: ")
                if len(parts) > 1:
                    await reader.readexactly(int(parts[1].split(b"\r\n")[0]))
                if not await handler(reader, writer, index):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], connections


def run(coro: Awaitable[None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 10))  # type: ignore[arg-type]


def test_content_length_bodies_reuse_one_connection() -> None:
    async def handler(reader, writer, index) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-type: x\r\n\r\nhello")
        return True

    async def main() -> None:
        server, port, connections = await serve(handler)
        pool = UpstreamPool("127.0.0.1", port)
        for _ in range(3):
            response = await pool.request("POST", "/v1/completions", b"{}")
            assert response.status_code == 200
            assert response.headers["Content-Type"] == "x"
            assert await response.read() == b"hello"
        assert len(connections) == 1
        await pool.aclose()
        server.close()

    run(main())


def test_chunked_stream_yields_each_chunk_as_it_arrives() -> None:
    release = asyncio.Event()

    async def handler(reader, writer, index) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await release.wait()
        writer.write(b"6\r\nsecond\r\n0\r\n\r\n")
        return True

    async def main() -> None:
        server, port, connections = await serve(handler)
        pool = UpstreamPool("127.0.0.1", port)
        response = await pool.request("POST", "/x", b"{}")
        chunks = response.iter_chunks()
        assert await chunks.__anext__() == b"first"  # before the server sent the rest
        release.set()
        assert [c async for c in chunks] == [b"second"]
        release.clear()
        assert (await pool.request("POST", "/x", b"{}")).status_code == 200
        assert len(connections) == 1  # fully read: the connection went back to the pool
        await pool.aclose()
        server.close()

    run(main())


def test_connection_closed_by_server_is_not_reused() -> None:
    async def handler(reader, writer, index) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        return False  # close after each answer, as a server past its keep-alive would

    async def main() -> None:
        server, port, connections = await serve(handler)
        pool = UpstreamPool("127.0.0.1", port)
        assert await (await pool.request("POST", "/x", b"{}")).read() == b"ok"
        await asyncio.sleep(0.05)  # server closed the socket we keep
        assert await (await pool.request("POST", "/x", b"{}")).read() == b"ok"
        assert len(connections) == 2
        await pool.aclose()
        server.close()

    run(main())


def test_a_request_on_a_socket_the_server_stopped_reading_is_sent_again() -> None:
    """vLLM's catch-all handler answers, then uvicorn closes the socket a moment later, with no
    ``Connection: close``: a request written to it in between is never answered. The server here
    answers 400 and stops reading that socket, so the pooled connection fails every time; the pool
    sends the request again on a new one (STALE_SOCKET_RETRIES; with 0 this test fails)."""

    async def handler(reader, writer, index) -> bool:
        if index == 1:
            writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 3\r\n\r\nbad")
            await writer.drain()
            await asyncio.sleep(0.5)  # the late close: nothing more is read from this socket
            return False
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        return True

    async def main() -> None:
        server, port, connections = await serve(handler)
        pool = UpstreamPool("127.0.0.1", port)
        first = await pool.request("POST", "/x", b"{}")
        assert (first.status_code, await first.read()) == (400, b"bad")
        second = await pool.request("POST", "/x", b"{}")  # at once: the first socket is still open
        assert (second.status_code, await second.read()) == (200, b"ok")
        assert len(connections) == 2
        await pool.aclose()
        server.close()

    run(main())


def test_refused_connection_and_broken_body_raise_upstream_error() -> None:
    async def handler(reader, writer, index) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort")
        return False

    async def main() -> None:
        server, port, _ = await serve(handler)
        pool = UpstreamPool("127.0.0.1", port)
        response = await pool.request("POST", "/x", b"{}")
        with pytest.raises(UpstreamError, match="response body broken"):
            await response.read()
        server.close()
        await server.wait_closed()
        with pytest.raises(UpstreamError, match="connect failed"):
            await pool.request("POST", "/x", b"{}")
        await pool.aclose()

    run(main())


def test_abort_ends_a_pending_read() -> None:
    async def handler(reader, writer, index) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        await asyncio.sleep(5)
        return False

    async def main() -> None:
        server, port, _ = await serve(handler)
        pool = UpstreamPool("127.0.0.1", port)
        response = await pool.request("POST", "/x", b"{}")
        asyncio.get_running_loop().call_later(0.1, response.abort)
        with pytest.raises(UpstreamError):
            await response.read()
        response = await pool.request("POST", "/x", b"{}")
        asyncio.get_running_loop().call_later(0.1, response.abort)
        with pytest.raises(UpstreamError):  # the stream relay's path
            async for _ in response.iter_chunks():
                pass
        await pool.aclose()
        server.close()

    run(main())


def test_unfinished_body_is_not_reused_and_idle_connections_expire() -> None:
    async def handler(reader, writer, index) -> bool:
        if index == 1:  # the body arrives late: the client closes before it is complete
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nok")
            await writer.drain()
            await asyncio.sleep(0.3)
            writer.write(b"ok")
            return True
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        return True

    async def main() -> None:
        server, port, connections = await serve(handler)
        pool = UpstreamPool("127.0.0.1", port, keepalive_expiry_s=0.2)
        await (await pool.request("POST", "/x", b"{}")).aclose()  # body not complete
        assert await (await pool.request("POST", "/x", b"{}")).read() == b"ok"
        assert len(connections) == 2
        await asyncio.sleep(0.5)  # past the keep-alive expiry: not reused
        assert await (await pool.request("POST", "/x", b"{}")).read() == b"ok"
        assert len(connections) == 3
        await pool.aclose()
        server.close()

    run(main())


def test_control_plane_get_returns_status_and_body_and_times_out() -> None:
    async def handler(reader, writer, index) -> bool:
        if index == 1:
            writer.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\n\r\nbusy")
            return True
        await asyncio.sleep(5)  # a hung engine
        return False

    async def main() -> None:
        server, port, _ = await serve(handler)
        pool = UpstreamPool("127.0.0.1", port, keepalive_expiry_s=0.0)
        assert await pool.get("/health", timeout_s=2) == (503, b"busy")
        with pytest.raises(UpstreamError, match=r"no response: .*Timeout"):
            await pool.get("/metrics", timeout_s=0.2)
        await pool.aclose()
        server.close()

    run(main())


def test_cancelled_read_closes_the_connection() -> None:
    """The gateway bounds a unary request with asyncio.timeout: the cancelled read must close
    the upstream connection (vLLM then aborts the request) and never return it to the pool."""
    closed = asyncio.Event()

    async def handler(reader, writer, index) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nok")
        await writer.drain()
        await reader.read()  # returns at EOF: the client closed the connection
        closed.set()
        return False

    async def main() -> None:
        server, port, _ = await serve(handler)
        pool = UpstreamPool("127.0.0.1", port)
        response = await pool.request("POST", "/x", b"{}")
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await response.read()
        await asyncio.wait_for(closed.wait(), 2)
        await pool.aclose()
        server.close()

    run(main())
