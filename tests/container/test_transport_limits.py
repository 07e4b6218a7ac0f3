"""Transport limits on :8080 (issue 22 item 2), against the real entrypoint over raw sockets.

On e706d98: 2,000 headers and a 1 MB header were served, a declared 1 GB Content-Length got
no early answer, an idle connection stayed open and a stalled upload held the drain.
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.container.conftest import Serve

READ_TIMEOUT_S = "1"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    server = Serve(tmp_path_factory.mktemp("transport"), env={"REQUEST_READ_TIMEOUT_S": READ_TIMEOUT_S})
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def connect(serve: Serve) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", serve.port), timeout=10)
    return sock


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def status_and_message(raw: bytes) -> tuple[int, str]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, str(json.loads(body)["error"]["message"])


def request_head(extra: str = "", length: int | None = 2) -> bytes:
    head = "POST /invocations HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    if length is not None:
        head += f"content-length: {length}\r\n"
    return (head + extra + "\r\n").encode()


def test_too_many_header_fields_get_431_and_the_connection_closes(gateway: Serve) -> None:
    with connect(gateway) as sock:
        sock.sendall(request_head("".join(f"x-h{i}: v\r\n" for i in range(2000))) + b"{}")
        assert status_and_message(read_all(sock)) == (431, "more than 100 header fields")


def test_an_oversized_header_gets_431(gateway: Serve) -> None:
    with connect(gateway) as sock:
        sock.sendall(request_head("x-big: " + "a" * 1_000_000 + "\r\n") + b"{}")
        assert status_and_message(read_all(sock)) == (431, "request line and headers over 32768 bytes")


# The body bound follows the engine's context (issue 49, finding 4): the fixture's defaults,
# ENGINE_MAX_MODEL_LEN 4096 x REQUEST_MAX_BODY_BYTES_PER_TOKEN 64.
BODY_BOUND = "262144 bytes (ENGINE_MAX_MODEL_LEN=4096 tokens x REQUEST_MAX_BODY_BYTES_PER_TOKEN=64)"


@pytest.mark.parametrize("length", [262_145, 1_000_000_000])
def test_a_declared_length_over_the_body_bound_gets_413_before_any_body_is_sent(gateway: Serve, length: int) -> None:
    with connect(gateway) as sock:
        sock.sendall(request_head(length=length))
        assert status_and_message(read_all(sock)) == (
            413,
            f"body is {length} bytes (Content-Length): at most {BODY_BOUND}",
        )


FLOOD = json.dumps({"messages": [{"role": "user", "content": "x"}] * 150_000}).encode()
"""Issue 53, finding 17's body: ~5 MB of 150k tiny messages, over the body bound, under SageMaker's 6 MB."""


def test_a_client_that_sends_its_whole_body_before_reading_gets_its_413(gateway: Serve) -> None:
    """Issue 53, finding 17: the gateway answered 413 at the headers and closed while the body still arrived; the
    kernel reset the connection, and a client that reads only after sending (this one) got a connection error."""
    assert 5_000_000 < len(FLOOD) < 6_291_456
    with connect(gateway) as sock:
        sock.sendall(request_head(length=len(FLOOD)) + FLOOD)
        assert status_and_message(read_all(sock)) == (
            413,
            f"body is {len(FLOOD)} bytes (Content-Length): at most {BODY_BOUND}",
        )


def test_urllib_posting_the_flood_reads_the_413_and_its_message(gateway: Serve) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{gateway.port}/invocations", data=FLOOD, headers={"content-type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 413
    message = json.loads(refused.value.read())["error"]["message"]
    assert message == f"body is {len(FLOOD)} bytes (Content-Length): at most {BODY_BOUND}"


def test_a_refused_connection_lingers_no_longer_than_the_read_deadline(gateway: Serve) -> None:
    """The lingering close is bounded: a client that keeps the connection open and sends nothing more is cut off
    once REQUEST_READ_TIMEOUT_S (1 s here) has passed since the refusal."""
    with connect(gateway) as sock:
        sock.sendall(request_head(length=1_000_000_000))
        assert status_and_message(read_all(sock))[0] == 413  # the answer, then end of stream: half-closed

        def closed() -> bool:
            try:
                sock.sendall(b"x" * 1024)  # the server's reset, once it has closed, fails a later send
            except (BrokenPipeError, ConnectionResetError):
                return True
            return False

        deadline = time.monotonic() + 10
        while not closed():
            assert time.monotonic() < deadline, "the refused connection was still open after 10 s"
            time.sleep(0.1)


def test_a_chunked_body_over_the_bound_gets_413(gateway: Serve) -> None:
    with connect(gateway) as sock:
        sock.sendall(request_head("transfer-encoding: chunked\r\n", length=None))
        sock.sendall(b"%x\r\n" % 262_145 + b"a" * 262_145)
        assert status_and_message(read_all(sock)) == (413, f"body is over the limit: at most {BODY_BOUND}")


def test_the_body_bound_stops_at_sagemakers_6_mb(tmp_path: Path) -> None:
    server = Serve(tmp_path, env={"ENGINE_MAX_MODEL_LEN": "131072", "REQUEST_MAX_BODY_BYTES_PER_TOKEN": "1536"})
    try:
        server.wait_ready()
        with connect(server) as sock:
            sock.sendall(request_head(length=6_291_457))
            assert status_and_message(read_all(sock)) == (
                413,
                "body is 6291457 bytes (Content-Length): at most 6291456 bytes (SageMaker's InvokeEndpoint payload "
                "limit)",
            )
    finally:
        server.stop()


def test_a_connection_that_sends_nothing_is_closed(gateway: Serve) -> None:
    with connect(gateway) as sock:
        assert read_all(sock) == b""  # closed by the server after REQUEST_READ_TIMEOUT_S


def test_a_stalled_upload_gets_408(gateway: Serve) -> None:
    with connect(gateway) as sock:
        sock.sendall(request_head(length=100) + b'{"messages"')
        assert status_and_message(read_all(sock)) == (408, "request not received within 1 s")


def test_requests_within_the_limits_share_one_keep_alive_connection(gateway: Serve) -> None:
    body = json.dumps({"prompt": "hi", "max_tokens": 2}).encode()
    with connect(gateway) as sock:
        for _ in range(2):
            sock.sendall(request_head(length=len(body)) + body)
            assert read_response(sock).startswith(b"HTTP/1.1 200")


def read_response(sock: socket.socket) -> bytes:
    """One whole response (headers + Content-Length body), however TCP split it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, rest
        rest += chunk
    return head + b"\r\n\r\n" + rest


def test_a_stalled_upload_does_not_hold_the_sigterm_drain(tmp_path: Path) -> None:
    serve = Serve(tmp_path, env={"REQUEST_READ_TIMEOUT_S": READ_TIMEOUT_S, "DRAIN_TIMEOUT_S": "20"})
    try:
        serve.wait_ready()
        sock = connect(serve)
        sock.sendall(request_head(length=100) + b"{")  # in flight: headers read, body never comes
        answer: list[bytes] = []
        reader = threading.Thread(target=lambda: answer.append(read_all(sock)))
        reader.start()
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=30) == 0
        reader.join(timeout=5)
        sock.close()
    finally:
        serve.stop()
    serve.log_line("drain:", "all requests finished")
    drain = [line for line in serve.stderr_lines if "drain:" in line]
    assert not any("still in flight" in line for line in drain), drain
    assert answer and answer[0].startswith(b"HTTP/1.1 408")
