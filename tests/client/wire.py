"""SageMaker Runtime and Bedrock Runtime on a local socket, for the client's tests that need real time and a
real transport: botocore's own clients (``endpoint_url`` = :attr:`Services.url`) send real HTTP to it, through
botocore's urllib3 session with its real connect and read timeouts, and parse what it answers with their own
service models.

Each operation answers from a script the test queues (:meth:`Services.sagemaker` ... ``hang``, ``fail``,
``answer``, ``stream``); a request with nothing queued gets a 500 ``InternalFailure`` and is listed in
:attr:`Services.unscripted`. What goes on the wire, as the API models and references describe it:

* SageMaker ``InvokeEndpoint`` (``POST /endpoints/<name>/invocations``): the body, ``Content-Type``,
  ``X-Amzn-SageMaker-Custom-Attributes`` and ``x-Amzn-Invoked-Production-Variant``; a container's error is
  ``ModelError`` (HTTP 424, ``OriginalStatusCode``, ``OriginalMessage``), as tests/engine/sagemaker_shim.py
  relays it from a real gateway;
* ``InvokeEndpointWithResponseStream`` (``.../invocations-response-stream``): a chunked
  ``application/vnd.amazon.eventstream`` body of ``PayloadPart`` events carrying the container's SSE;
* Bedrock ``InvokeModel`` (``POST /model/<id>/invoke``) and ``Converse`` (``.../converse``): JSON; errors as
  ``x-amzn-ErrorType`` with the status the API model gives the exception.

A hanging request is held until the test ends (:meth:`Services.close` releases it), so a client that waits
for it waits on a real socket, and nothing is left blocked after the test. :func:`gateway_drain_answer` is
the real gateway's own refusal while it drains, for a script to send as the container's answer.
"""

from __future__ import annotations

import asyncio
import io
import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlparse

import boto3

from mangaassist_client import (
    BedrockImportedModels,
    ClientConfig,
    MangaAssistClient,
    SageMakerEndpoint,
    botocore_config,
)
from mangaassist_client.config import BackendConfig
from serving_app.engine.readiness import Phase
from serving_app.gateway import Gateway
from serving_app.metrics.emf import EmfWriter
from serving_app.settings import Settings
from tests.botocore_helpers import bedrock_chunk, event, payload_part
from tests.client.stubs import DOMAIN_ARN, ENDPOINT, VERSIONS, completion, sse
from tests.container.test_gateway_unit import request

HOLD_S = 60.0
"""Most a hanging request is held (the test's end releases it sooner)."""

Reply = Callable[["_Handler", "Services"], None]
"""What one request gets: writes the answer (or holds the request) through the handler."""


def _send(handler: _Handler, status: int, body: bytes, headers: Mapping[str, str]) -> None:
    handler.send_response(status)
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def hang(handler: _Handler, services: Services) -> None:
    """Read the request, answer nothing until the test ends (an endpoint whose container stopped answering)."""
    services.released.wait(HOLD_S)
    handler.close_connection = True


def answer(text: str = "Try Delicious in Dungeon.") -> Reply:
    """SageMaker's 200 to InvokeEndpoint: the container's chat completion and the headers SageMaker returns."""

    def reply(handler: _Handler, services: Services) -> None:
        headers = {
            "Content-Type": "application/json",
            "X-Amzn-SageMaker-Custom-Attributes": VERSIONS,
            "x-Amzn-Invoked-Production-Variant": "primary",
        }
        _send(handler, 200, completion(text), headers)

    return reply


def model_error(status: int, body: Mapping[str, Any] | str) -> Reply:
    """SageMaker's ``ModelError``: the container answered ``status`` with ``body`` (no container header passes)."""
    text = body if isinstance(body, str) else json.dumps(body)

    def reply(handler: _Handler, services: Services) -> None:
        members = {
            "ErrorCode": "SERVER_ERROR_FROM_MODEL" if status >= 500 else "CLIENT_ERROR_FROM_MODEL",
            "Message": f'Received error ({status}) from primary with message "{text}". See the log.',
            "OriginalStatusCode": status,
            "OriginalMessage": text,
            "LogStreamArn": f"arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/Endpoints/{ENDPOINT}",
        }
        headers = {"Content-Type": "application/json", "x-amzn-ErrorType": "ModelError"}
        _send(handler, 424, json.dumps(members).encode(), headers)

    return reply


def service_error(code: str, status: int, message: str = "failed") -> Reply:
    """A service's own error (``InternalFailure`` 500, Bedrock's ``ServiceUnavailableException`` 503, ...)."""

    def reply(handler: _Handler, services: Services) -> None:
        headers = {"Content-Type": "application/json", "x-amzn-ErrorType": code}
        _send(handler, status, json.dumps({"message": message}).encode(), headers)

    return reply


def stream(*pieces: str, pause_s: float = 0.0, hold_after: int | None = None) -> Reply:
    """SageMaker's 200 to InvokeEndpointWithResponseStream: the container's SSE (a role chunk, one chunk per
    piece, ``[DONE]``) in ``PayloadPart`` events, one HTTP chunk each, ``pause_s`` apart; with ``hold_after``,
    the body stops after that many events and is held (a container that stopped mid-answer)."""
    frames = [payload_part(event + b"\n\n") for event in sse(*pieces).split(b"\n\n") if event]

    def reply(handler: _Handler, services: Services) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/vnd.amazon.eventstream")
        handler.send_header("X-Amzn-SageMaker-Content-Type", "text/event-stream")
        handler.send_header("X-Amzn-SageMaker-Custom-Attributes", VERSIONS)
        handler.send_header("x-Amzn-Invoked-Production-Variant", "primary")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        handler.wfile.flush()
        try:
            for index, frame in enumerate(frames):
                if hold_after is not None and index >= hold_after:
                    services.released.wait(HOLD_S)
                    handler.close_connection = True
                    return
                handler.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
                handler.wfile.flush()
                if pause_s and services.released.wait(pause_s):
                    break
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()
        except OSError:  # the client closed the stream early: what a caller that stops reading does
            handler.close_connection = True

    return reply


def imported_answer(text: str = "Try Frieren.") -> Reply:
    """Bedrock's 200 to InvokeModel: the imported model's OpenAI chat completion."""

    def reply(handler: _Handler, services: Services) -> None:
        _send(handler, 200, completion(text), {"Content-Type": "application/json"})

    return reply


def converse_answer(text: str = "Try Blue Giant.") -> Reply:
    """Bedrock's 200 to Converse."""
    body = {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 30, "outputTokens": 5, "totalTokens": 35},
        "metrics": {"latencyMs": 300},
    }

    def reply(handler: _Handler, services: Services) -> None:
        _send(handler, 200, json.dumps(body).encode(), {"Content-Type": "application/json"})

    return reply


def converse_stream(*pieces: str) -> Reply:
    """Bedrock's 200 to ConverseStream: ``messageStart``, a ``contentBlockDelta`` per piece, ``contentBlockStop``,
    ``messageStop`` and ``metadata`` events (bedrock-runtime API model), one HTTP body."""
    frames = [event("messageStart", b'{"role": "assistant"}')]
    frames += [
        event("contentBlockDelta", json.dumps({"delta": {"text": p}, "contentBlockIndex": 0}).encode()) for p in pieces
    ]
    frames += [
        event("contentBlockStop", b'{"contentBlockIndex": 0}'),
        event("messageStop", b'{"stopReason": "end_turn"}'),
        event(
            "metadata",
            json.dumps(
                {
                    "usage": {"inputTokens": 30, "outputTokens": len(pieces), "totalTokens": 30 + len(pieces)},
                    "metrics": {"latencyMs": 300},
                }
            ).encode(),
        ),
    ]
    body = b"".join(frames)

    def reply(handler: _Handler, services: Services) -> None:
        _send(handler, 200, body, {"Content-Type": "application/vnd.amazon.eventstream"})

    return reply


OPERATIONS = {
    "invocations": "InvokeEndpoint",
    "invocations-response-stream": "InvokeEndpointWithResponseStream",
    "invoke": "InvokeModel",
    "invoke-with-response-stream": "InvokeModelWithResponseStream",
    "converse": "Converse",
    "converse-stream": "ConverseStream",
}
"""The last path segment of each operation's URI (sagemaker-runtime and bedrock-runtime API models)."""


@dataclass
class Request:
    """One request the services received: its operation, when (monotonic seconds) and its JSON body."""

    operation: str
    at: float
    body: Any
    target: str


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    services: Services

    def do_POST(self) -> None:
        path = unquote(urlparse(self.path).path).strip("/")
        operation = OPERATIONS.get(path.rsplit("/", 1)[-1], "Unknown")
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        target = path.split("/")[1] if "/" in path else path
        self.services.received.append(Request(operation, time.monotonic(), body, target))
        script = self.services.scripts.setdefault(operation, deque())
        if not script:
            self.services.unscripted.append(operation)
            return service_error("InternalFailure", 500, f"nothing scripted for {operation}")(self, self.services)
        script.popleft()(self, self.services)

    def log_message(self, format: str, *args: Any) -> None:
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up on a request (its timeout, a closed stream) is not the server's failure."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


@dataclass
class Services:
    """The two runtimes on one local port (bound to port 0; :attr:`url` says which one it got)."""

    scripts: dict[str, deque[Reply]] = field(default_factory=dict)
    received: list[Request] = field(default_factory=list)
    unscripted: list[str] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        handler = type("Handler", (_Handler,), {"services": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True, name="wire-services").start()

    def queue(self, operation: str, *replies: Reply) -> None:
        """Answer the next requests of ``operation`` (``InvokeEndpoint``, ``Converse``, ...) with ``replies``."""
        self.scripts.setdefault(operation, deque()).extend(replies)

    def calls(self, operation: str) -> list[Request]:
        return [request for request in self.received if request.operation == operation]

    def client(self, service: str, *, timeout_s: float = 60.0) -> Any:
        """A real botocore client of ``service`` aimed at this server, with the package's own config."""
        return boto3.client(
            service,
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="x",
            aws_secret_access_key="x",
            config=botocore_config(timeout_s),
        )

    def close(self) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def services() -> Iterator[Services]:
    """:class:`Services` for one test; closed (every held request released) when it ends."""
    running = Services()
    try:
        yield running
    finally:
        running.close()


def wait_until(predicate: Callable[[], object], what: str, *, within_s: float = 10.0) -> None:
    """Poll ``predicate`` every 10 ms until it holds; fail naming ``what`` after ``within_s`` seconds."""
    end = time.monotonic() + within_s
    while not predicate():
        assert time.monotonic() < end, f"timed out after {within_s} s waiting for {what}"
        time.sleep(0.01)


def imported_stream(*pieces: str) -> Reply:
    """Bedrock's 200 to InvokeModelWithResponseStream: one ``chunk`` event per OpenAI ``chat.completion.chunk``."""
    chunks: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {"content": piece}}]} for piece in pieces]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = b"".join(bedrock_chunk(json.dumps(chunk).encode()) for chunk in chunks)

    def reply(handler: _Handler, services: Services) -> None:
        _send(handler, 200, body, {"Content-Type": "application/vnd.amazon.eventstream"})

    return reply


def wired_client(
    running: Services,
    lines: Any,
    *,
    fallbacks: tuple[BackendConfig, ...] = (BedrockImportedModels({"manga_domain_v3": DOMAIN_ARN}),),
    **config: Any,
) -> MangaAssistClient:
    """A client over :class:`Services` (the endpoint first, ``fallbacks`` behind it), with the clients the
    package's default factory makes (botocore's retries off, :func:`botocore_config`), on the real clock."""
    settings = ClientConfig(primary=SageMakerEndpoint(ENDPOINT), fallbacks=fallbacks, **config)
    names = ("sagemaker-runtime", "bedrock-runtime")
    clients = {name: running.client(name, timeout_s=settings.attempt_timeout) for name in names}
    return MangaAssistClient(settings, metrics=lines, client_factory=lambda service, region: clients[service])


def gateway_drain_answer() -> tuple[int, dict[str, str], str]:
    """``(status, headers, body)`` the real gateway answers an invocation while it drains."""

    async def handle() -> Any:
        gateway = Gateway(
            Settings.from_env({}),
            upstream_url="http://127.0.0.1:9",  # never reached: a draining gateway refuses first
            engine=None,
            request_exit=lambda code: None,
            emf=EmfWriter("NS", {"EndpointName": "e", "VariantName": "v"}, io.StringIO()),
        )
        gateway.readiness.set_phase(Phase.DRAINING, "SIGTERM received, draining")
        response = await gateway.invocations.handle(request({"prompt": "x"}, {"content-type": "application/json"}))
        await gateway.pool.aclose()
        return response

    response = asyncio.run(handle())
    return response.status_code, dict(response.headers), bytes(response.body).decode()
