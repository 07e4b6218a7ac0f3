"""A local stand-in for SageMaker Runtime in front of a container: a botocore ``sagemaker-runtime`` client
pointed at it (``endpoint_url``) talks its real wire protocol to a real gateway.

What it does, as the SageMaker Runtime API reference and API model describe the service:

* ``POST /endpoints/<name>/invocations`` (InvokeEndpoint): forwards the body to the container's
  ``POST /invocations`` with ``Content-Type``, ``Accept``, ``X-Amzn-SageMaker-Custom-Attributes`` and
  ``X-Amzn-SageMaker-Session-Id``; a 2xx comes back with the body and the headers the API model returns
  (``CustomAttributes``, ``NewSessionId``, ``ClosedSessionId``, ``InvokedProductionVariant``); any other
  status comes back as ``ModelError`` (HTTP 424, ``OriginalStatusCode``, ``OriginalMessage``, ``LogStreamArn``),
  no container header with it;
* ``POST /endpoints/<name>/invocations-response-stream`` (InvokeEndpointWithResponseStream): the same, and a
  200 is relayed as an ``application/vnd.amazon.eventstream`` body, one ``PayloadPart`` event per read of
  the container's chunked answer; a container that breaks off mid-stream gets a ``ModelStreamError`` event;
* a container that cannot be reached: ``InternalFailure`` (500), one of the API's documented errors (what the
  service itself answers then is not documented).

``PrefixAwareId`` and ``TargetVariant`` are routing headers SageMaker consumes: with one container there is
nothing to route, so they are recorded (:attr:`SageMakerShim.requests`) and dropped.
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlparse

from tests.botocore_helpers import exception_event, payload_part

FORWARDED = ("Content-Type", "Accept", "X-Amzn-SageMaker-Custom-Attributes", "X-Amzn-SageMaker-Session-Id")
RETURNED = (
    "X-Amzn-SageMaker-Custom-Attributes",
    "X-Amzn-SageMaker-New-Session-Id",
    "X-Amzn-SageMaker-Closed-Session-Id",
)
"""The container's response headers SageMaker hands back (the API model's CustomAttributes, NewSessionId,
ClosedSessionId)."""
VARIANT = "AllTraffic"
READ_TIMEOUT_S = 120.0


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that closes a kept-alive connection is not the shim's failure; anything else is printed."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class SageMakerShim:
    """``SageMakerShim(container_url).start()``; ``.url`` is the ``endpoint_url`` to give botocore."""

    def __init__(self, container_url: str) -> None:
        parsed = urlparse(container_url)
        self.container = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self.requests: list[dict[str, str]] = []  # each request's headers, as the client sent them
        shim = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                shim.handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> SageMakerShim:
        threading.Thread(target=self._server.serve_forever, daemon=True, name="sagemaker-shim").start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- one request -----------------------------------------------------------------------------------

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        parts = urlparse(request.path).path.strip("/").split("/")
        body = request.rfile.read(int(request.headers.get("Content-Length", "0")))
        self.requests.append({k: v for k, v in request.headers.items()})
        if len(parts) != 3 or parts[0] != "endpoints" or parts[2] not in ("invocations", "invocations-response-stream"):
            return _json(request, 404, {"message": f"no such operation: {request.path}"}, "UnknownOperationException")
        endpoint, streaming = unquote(parts[1]), parts[2] == "invocations-response-stream"
        headers = {name: request.headers[name] for name in FORWARDED if request.headers.get(name)}
        if streaming:  # the streaming call's Accept travels as X-Amzn-SageMaker-Accept (API model)
            headers["Accept"] = request.headers.get("X-Amzn-SageMaker-Accept", "text/event-stream")
        connection = http.client.HTTPConnection(*self.container, timeout=READ_TIMEOUT_S)
        try:
            connection.request("POST", "/invocations", body=body, headers=headers)
            answer = connection.getresponse()
        except OSError as error:
            connection.close()
            return _json(request, 500, {"message": f"container unreachable: {error}"}, "InternalFailure")
        try:
            if not 200 <= answer.status < 300:
                return _model_error(request, endpoint, answer.status, answer.read())
            returned = {name: answer.getheader(name, "") for name in RETURNED if answer.getheader(name)}
            if streaming:
                return _relay(request, answer, returned)
            return _send(
                request, 200, answer.read(), {"Content-Type": answer.getheader("Content-Type", ""), **returned}
            )
        finally:
            connection.close()


def _send(request: BaseHTTPRequestHandler, status: int, payload: bytes, headers: dict[str, str]) -> None:
    request.send_response(status)
    for name, value in {**headers, "x-Amzn-Invoked-Production-Variant": VARIANT}.items():
        request.send_header(name, value)
    request.send_header("Content-Length", str(len(payload)))
    request.end_headers()
    request.wfile.write(payload)


def _json(request: BaseHTTPRequestHandler, status: int, members: dict[str, Any], error_type: str) -> None:
    headers = {"Content-Type": "application/json", "x-amzn-ErrorType": error_type}
    _send(request, status, json.dumps(members).encode(), headers)


def _model_error(request: BaseHTTPRequestHandler, endpoint: str, status: int, body: bytes) -> None:
    text = body.decode("utf-8", "replace")
    kind = "server" if status >= 500 else "client"
    members = {
        "ErrorCode": f"{kind.upper()}_ERROR_FROM_MODEL",
        "Message": f'Received {kind} error ({status}) from primary with message "{text}". See the log.',
        "OriginalStatusCode": status,
        "OriginalMessage": text,
        "LogStreamArn": f"arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/Endpoints/{endpoint}",
    }
    _json(request, 424, members, "ModelError")


def _relay(request: BaseHTTPRequestHandler, answer: http.client.HTTPResponse, headers: dict[str, str]) -> None:
    request.send_response(200)
    request.send_header("Content-Type", "application/vnd.amazon.eventstream")
    request.send_header("X-Amzn-SageMaker-Content-Type", answer.getheader("Content-Type", "text/event-stream"))
    request.send_header("x-Amzn-Invoked-Production-Variant", VARIANT)
    for name, value in headers.items():
        request.send_header(name, value)
    request.send_header("Transfer-Encoding", "chunked")
    request.end_headers()

    def write(frame: bytes) -> None:  # one HTTP chunk per event-stream message
        request.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")

    try:
        while chunk := answer.read1(65536):
            write(payload_part(chunk))
            request.wfile.flush()
    except (OSError, http.client.HTTPException) as error:  # the container broke off mid-stream
        write(
            exception_event(
                "ModelStreamError", {"Message": f"container stream failed: {error}", "ErrorCode": "ModelStreamError"}
            )
        )
    request.wfile.write(b"0\r\n\r\n")
    request.wfile.flush()
