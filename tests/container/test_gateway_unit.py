"""Gateway handlers in-process, for failure paths a live fake engine cannot easily show."""

from __future__ import annotations

import asyncio
import io
import json
import socket
from typing import Any

from starlette.requests import Request

from serving_app.emf import EmfWriter
from serving_app.gateway import Gateway
from serving_app.health import Phase
from serving_app.settings import Settings


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket closes


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
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    }
    return Request(scope, receive)


def test_unreachable_engine_is_a_503_counted_as_engine_error() -> None:
    emf_out = io.StringIO()

    async def main() -> None:
        settings = Settings.from_env({"LORA_ADAPTERS": "a"})
        gateway = Gateway(
            settings,
            upstream_url=f"http://127.0.0.1:{closed_port()}",
            engine=None,
            request_exit=lambda code: None,
            emf=EmfWriter("NS", {"EndpointName": "e", "VariantName": "v"}, emf_out),
        )
        gateway.readiness.set_phase(Phase.READY, "ready")
        gateway.readiness.record_health(True)
        for stream in (False, True):
            response = await gateway.invocations(
                request({"prompt": "x", "stream": stream}, {"content-type": "application/json"})
            )
            assert response.status_code == 503
            assert json.loads(bytes(response.body))["error"]["message"].startswith("engine unavailable: connect failed")
        await gateway._pool.aclose()

    asyncio.run(main())
    lines = [json.loads(line) for line in emf_out.getvalue().splitlines()]
    assert [line["EngineErrors"] for line in lines] == [1, 1]
    assert [line["ServerErrors"] for line in lines] == [1, 1]
