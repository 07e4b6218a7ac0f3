"""Gateway handlers in-process, for failure paths a live fake engine cannot easily show."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request

from local_gateway import PortReservation
from serving_app.engine.readiness import Phase
from serving_app.gateway import Gateway
from serving_app.metrics.emf import EmfWriter
from serving_app.sagemaker.protocol import ChatCompletionBody
from serving_app.settings import Settings
from serving_contract.lifecycle import DRAIN_RETRY_AFTER_S, DRAINING_ERROR_TYPE
from tests.container.conftest import make_artifacts


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port nothing listens on for the whole test: held by a reservation, so no other process can."""
    with PortReservation() as reservation:
        yield reservation.port


def request(body: dict[str, Any], headers: dict[str, str] | None = None) -> Request:
    raw = json.dumps(body).encode()
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            await asyncio.sleep(3600)
        sent = True
        return {"type": "http.request", "body": raw, "more_body": False}

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/invocations",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    }
    return Request(scope, receive)


def test_unreachable_engine_is_a_503_counted_as_engine_error(closed_port: int) -> None:
    emf_out = io.StringIO()

    async def main() -> list[str]:
        settings = Settings.from_env({"LORA_ADAPTERS": "a"})
        gateway = Gateway(
            settings,
            upstream_url=f"http://127.0.0.1:{closed_port}",
            engine=None,
            request_exit=lambda code: None,
            emf=EmfWriter("NS", {"EndpointName": "e", "VariantName": "v"}, emf_out),
        )
        gateway.readiness.set_phase(Phase.READY, "ready")
        gateway.readiness.record_health(True)
        messages = []
        for stream in (False, True, True):
            if stream:  # the first failure marked the engine unhealthy; a probe finds it still down
                gateway.readiness.record_health(True)
            response = await gateway.invocations.handle(
                request({"prompt": "x", "stream": stream}, {"content-type": "application/json"})
            )
            assert response.status_code == 503
            messages.append(json.loads(bytes(response.body))["error"]["message"])
            assert gateway.readiness.engine_healthy is False  # /ping turns 503 at once
        await gateway.pool.aclose()
        return messages

    messages = asyncio.run(main())
    assert messages == ["engine unavailable"] * len(messages)
    lines = [json.loads(line) for line in emf_out.getvalue().splitlines()]
    assert [line["EngineErrors"] for line in lines] == [1, 1, 1]
    assert [line["ServerErrors"] for line in lines] == [1, 1, 1]


def test_requests_while_the_engine_is_unhealthy_are_refused_without_reaching_it(closed_port: int) -> None:
    emf_out = io.StringIO()

    async def main() -> dict[str, Any]:
        gateway = Gateway(
            Settings.from_env({}),
            upstream_url=f"http://127.0.0.1:{closed_port}",
            engine=None,
            request_exit=lambda code: None,
            emf=EmfWriter("NS", {"EndpointName": "e", "VariantName": "v"}, emf_out),
        )
        gateway.readiness.set_phase(Phase.READY, "ready")
        gateway.monitor.report_engine_down("probe")
        response = await gateway.invocations.handle(request({"prompt": "x"}, {"content-type": "application/json"}))
        await gateway.pool.aclose()
        assert response.status_code == 503
        return dict(json.loads(bytes(response.body)))

    body = asyncio.run(main())
    assert body["error"]["message"] == "not ready: engine unhealthy"
    (line,) = [json.loads(line) for line in emf_out.getvalue().splitlines()]
    assert (line["EngineErrors"], line["ServerErrors"]) == (0, 1)


def test_a_draining_gateway_refuses_with_a_503_that_says_when_to_retry(closed_port: int) -> None:
    """Issue 53, finding 5: the drain 503 carries Retry-After (1 s) and its own error type, so the client
    library retries it elsewhere and never counts it against the endpoint's circuit."""
    emf_out = io.StringIO()

    async def main() -> Any:
        gateway = Gateway(
            Settings.from_env({}),
            upstream_url=f"http://127.0.0.1:{closed_port}",
            engine=None,
            request_exit=lambda code: None,
            emf=EmfWriter("NS", {"EndpointName": "e", "VariantName": "v"}, emf_out),
        )
        gateway.readiness.set_phase(Phase.DRAINING, "SIGTERM received, draining")
        response = await gateway.invocations.handle(request({"prompt": "x"}, {"content-type": "application/json"}))
        await gateway.pool.aclose()
        return response

    response = asyncio.run(main())
    assert (response.status_code, response.headers["retry-after"]) == (503, str(DRAIN_RETRY_AFTER_S))
    assert json.loads(bytes(response.body))["error"] == {
        "message": "instance is draining (SIGTERM); retry elsewhere",
        "type": DRAINING_ERROR_TYPE,
        "code": 503,
        "retry_after_s": DRAIN_RETRY_AFTER_S,
    }


def test_cancel_before_the_first_chunk_aborts_the_upstream_stream() -> None:
    """Cancelled at ``send(http.response.start)`` (uvicorn's graceful-shutdown timeout):
    the relay generator never starts, yet the vLLM stream is closed and one EMF line out."""
    emf_out = io.StringIO()
    upstream_closed = asyncio.Event()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6\r\ndata: \r\n")
        await writer.drain()
        if await reader.read(1) == b"":  # the gateway closed the connection
            upstream_closed.set()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        gateway = Gateway(
            Settings.from_env({"LORA_ADAPTERS": "a"}),
            upstream_url=f"http://127.0.0.1:{port}",
            engine=None,
            request_exit=lambda code: None,
            emf=EmfWriter("NS", {"EndpointName": "e", "VariantName": "v"}, emf_out),
        )
        gateway.readiness.set_phase(Phase.READY, "ready")
        gateway.readiness.record_health(True)
        response = await gateway.invocations.handle(
            request({"prompt": "x", "stream": True}, {"content-type": "application/json"})
        )
        assert response.status_code == 200
        at_start = asyncio.Event()

        async def send(message: Any) -> None:
            at_start.set()
            await asyncio.sleep(3600)  # a client that never takes the response head

        async def receive() -> dict[str, Any]:
            await asyncio.sleep(3600)
            return {}

        task = asyncio.create_task(response({"type": "http"}, receive, send))
        await asyncio.wait_for(at_start.wait(), 5)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await asyncio.wait_for(upstream_closed.wait(), 5)
        await gateway.pool.aclose()
        server.close()

    asyncio.run(main())
    lines = [json.loads(line) for line in emf_out.getvalue().splitlines()]
    assert [line["StatusCode"] for line in lines] == [503]  # one line: cut before any byte


def test_adapter_registration_needs_a_ready_gateway_and_a_reachable_engine(tmp_path: Path, closed_port: int) -> None:
    folder = make_artifacts(tmp_path) / "adapters" / "manga_domain_v3"

    async def register(phase: Phase, healthy: bool) -> tuple[int, str, bool]:
        gateway = Gateway(
            Settings.from_env({"LORA_RUNTIME_ADAPTERS": "true", "ADAPTER_SRC_ROOT": str(tmp_path)}),
            upstream_url=f"http://127.0.0.1:{closed_port}",
            engine=None,
            request_exit=lambda code: None,
            emf=EmfWriter("NS", {"EndpointName": "e", "VariantName": "v"}, io.StringIO()),
        )
        gateway.readiness.set_phase(phase, phase.value)
        gateway.readiness.record_health(healthy)
        response = await gateway.adapters.register(request({"name": "manga", "src": str(folder)}))
        await gateway.pool.aclose()
        message = json.loads(bytes(response.body))["error"]["message"]
        return response.status_code, message, gateway.readiness.engine_healthy

    assert asyncio.run(register(Phase.WARMING_UP, True)) == (
        503,
        "not ready: warming_up; register adapters once /ping answers 200",
        True,
    )
    assert asyncio.run(register(Phase.READY, False)) == (
        503,
        "not ready: engine unhealthy; register adapters once /ping answers 200",
        False,
    )
    assert asyncio.run(register(Phase.DRAINING, True)) == (
        503,
        "instance is draining (SIGTERM); adapters cannot be registered",
        True,
    )
    # Nothing listens on the engine port: 503, and /ping turns 503 at once (as for /invocations).
    assert asyncio.run(register(Phase.READY, True)) == (
        503,
        "engine unavailable",
        False,
    )


def test_oversized_bodies_are_refused_before_any_parse(monkeypatch: pytest.MonkeyPatch, closed_port: int) -> None:
    """Issue 49, finding 4: a 6 MB body of tiny messages held the event loop ~1.1 s in json.loads and
    the request model. Over the byte bound nothing is parsed; over the message bound (a body the
    byte bound lets through, here with REQUEST_MAX_BODY_BYTES_PER_TOKEN raised) the messages are
    counted, not validated."""
    from serving_app.sagemaker import serving

    parsed: list[str] = []

    def loads(text: Any, **kwargs: Any) -> Any:
        parsed.append("json")
        return json.loads(text, **kwargs)

    def validate(cls: Any, data: Any) -> Any:
        parsed.append("model")
        raise AssertionError("the request model validated an oversized body")

    # The serving module's own json (a namespace with the real dumps), not the json module everyone shares.
    monkeypatch.setattr(serving, "json", types.SimpleNamespace(loads=loads, dumps=json.dumps))
    monkeypatch.setattr(ChatCompletionBody, "model_validate", classmethod(validate))

    async def answer(body: dict[str, Any], environ: dict[str, str]) -> tuple[int, str]:
        gateway = Gateway(
            Settings.from_env(environ),
            upstream_url=f"http://127.0.0.1:{closed_port}",
            engine=None,
            request_exit=lambda code: None,
            emf=EmfWriter("NS", {"EndpointName": "e", "VariantName": "v"}, io.StringIO()),
        )
        gateway.readiness.set_phase(Phase.READY, "ready")
        gateway.readiness.record_health(True)
        response = await gateway.invocations.handle(request(body, {"content-type": "application/json"}))
        await gateway.pool.aclose()
        return response.status_code, str(json.loads(bytes(response.body))["error"]["message"])

    tiny = {"role": "user", "content": "a"}
    status, text = asyncio.run(answer({"messages": [tiny] * 174_000}, {}))
    assert status == 413 and text.startswith("body is 5916014 bytes: at most 262144 bytes")
    assert parsed == []
    status, text = asyncio.run(answer({"messages": [tiny] * 100_000}, {"REQUEST_MAX_BODY_BYTES_PER_TOKEN": "1536"}))
    assert status == 400 and text.startswith("messages has 100000 entries: at most 819")
    assert parsed == ["json"]  # decoded once to count the messages; no message validated
