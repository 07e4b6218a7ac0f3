"""``load --open-loop`` (issue 45): conversations arriving at random, users pausing between turns, against a
local server speaking ``/invocations`` with SageMaker's stateful sessions, as the real endpoint would be driven.

The server is a stand-in for the endpoint (SageMaker's session protocol and vLLM's usage event, which no
local component speaks together): a follow-up finds its history cached, as vLLM's prefix cache would have
it, so the classes split as the gateway splits them; it answers in milliseconds, so both classes hold.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ops.cli import Deps, main
from ops.sessions import CLOSED_SESSION_HEADER, NEW_SESSION_HEADER, SESSION_HEADER


class _Endpoint(ThreadingHTTPServer):
    daemon_threads = True
    lock = threading.Lock()
    sessions: dict[str, int]
    closed: list[str]
    turns_without_session = 0


class _Handler(BaseHTTPRequestHandler):
    server: _Endpoint

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        session = self.headers.get(SESSION_HEADER)
        if request.get("requestType") == "NEW_SESSION":
            new = str(uuid.uuid4())
            with self.server.lock:
                self.server.sessions[new] = 0
            self._empty({NEW_SESSION_HEADER: f"{new}; Expires=2026-11-28T00:00:00Z"})
            return
        if request.get("requestType") == "CLOSE":
            with self.server.lock:
                self.server.closed.append(str(session))
            self._empty({CLOSED_SESSION_HEADER: str(session)})
            return
        with self.server.lock:
            if session is None:
                self.server.turns_without_session += 1
        messages = request["messages"]
        prompt = sum(len(m["content"]) for m in messages) // 4 + 600
        follow_up = any(m["role"] == "assistant" for m in messages)
        cached = (prompt * 9) // 10 if follow_up else 0  # a follow-up meets its history
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for word in ("Try ", "Frieren."):
            chunk = {"choices": [{"index": 0, "delta": {"content": word}}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        usage = {"prompt_tokens": prompt, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": cached}}
        self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def _empty(self, headers: dict[str, str]) -> None:
        self.send_response(200)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def endpoint() -> Iterator[_Endpoint]:
    server = _Endpoint(("127.0.0.1", 0), _Handler)
    server.sessions, server.closed = {}, []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _run(args: list[str]) -> tuple[int, list[str]]:
    lines: list[str] = []
    code = main(["load", "--open-loop", *args], Deps(out=lines.append))
    return code, lines


def test_conversations_arrive_at_each_rate_and_each_class_is_judged(endpoint: _Endpoint) -> None:
    url = f"http://127.0.0.1:{endpoint.server_address[1]}"
    code, lines = _run(["--url", url, "--rates", "600,900", "--step-s", "4", "--think-s", "0.05"])
    # Exit 0: both classes held their SLO at the lowest rate at least (the server answers in milliseconds).
    assert code == 0, "\n".join(lines)
    report = lines[lines.index("open loop: think 0.05 s, 3 adapter(s), 1 instance(s)") :]
    steps = [line for line in report if "/min offered" in line]
    assert [step.split("/min")[0].strip() for step in steps] == ["600.0", "900.0"]
    # First turns are cold, follow-ups warm (their history cached): both classes measured in every step.
    assert all("cold n=0 " not in step and "warm n=0 " not in step for step in steps), steps
    assert any(line.startswith("  both: holds both SLOs up to ") for line in report)
    # Every conversation ran in its own stateful session, and the finished ones were closed.
    assert endpoint.turns_without_session == 0 and endpoint.sessions and endpoint.closed
    assert set(endpoint.closed) <= set(endpoint.sessions)


def test_without_sessions_no_turn_opens_one(endpoint: _Endpoint) -> None:
    url = f"http://127.0.0.1:{endpoint.server_address[1]}"
    code, _ = _run(["--url", url, "--rates", "600", "--step-s", "4", "--think-s", "0.05", "--no-sessions"])
    assert code == 0 and not endpoint.sessions and endpoint.turns_without_session > 0


def test_a_rate_beyond_the_senders_is_refused_before_anything_is_sent(
    endpoint: _Endpoint, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{endpoint.server_address[1]}"
    assert _run(["--url", url, "--rates", "60,5000"])[0] == 2
    assert capsys.readouterr().err.strip() == (
        "error: --rates 5000: at most 4000 requests per minute (its requests in flight at 15 s an answer fill the "
        "1024 this command sends at once)"
    )
    assert not endpoint.sessions and endpoint.turns_without_session == 0
