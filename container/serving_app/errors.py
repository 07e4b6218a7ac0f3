"""The OpenAI-style error body every gateway route answers with."""

from __future__ import annotations

import json
from typing import Final

from starlette.responses import JSONResponse

ERROR_TYPES: Final = {
    499: "ClientClosedRequest",
    400: "BadRequest",
    404: "NotFound",
    409: "Conflict",
    413: "PayloadTooLarge",
    415: "UnsupportedMediaType",
    422: "UnprocessableEntity",
    429: "TooManyRequests",
    502: "EngineError",
    503: "ServiceUnavailable",
    504: "EngineTimeout",
}


def error_body(status: int, message: str) -> dict[str, dict[str, object]]:
    """``{"error": {"message", "type", "code"}}``."""
    return {"error": {"message": message, "type": ERROR_TYPES.get(status, "Error"), "code": status}}


def error_response(status: int, message: str, *, retry_after_s: int | None = None) -> JSONResponse:
    """An error as a JSON response with ``status``.

    ``retry_after_s`` sets ``Retry-After`` and the same seconds as ``error.retry_after_s`` in the body:
    SageMaker hands a caller the container's status and body (``ModelError``'s ``OriginalStatusCode`` and
    ``OriginalMessage``) but no response header other than ``CustomAttributes``, so behind an endpoint
    the body is where a client finds it (client/mangaassist_client/errors.py reads both)."""
    body = error_body(status, message)
    if retry_after_s is None:
        return JSONResponse(body, status_code=status)
    body["error"]["retry_after_s"] = retry_after_s
    return JSONResponse(body, status_code=status, headers={"Retry-After": str(retry_after_s)})


def sse_error(message: str, status: int) -> bytes:
    """An error as the last events of a stream: the error object, then ``[DONE]``."""
    return b"data: " + json.dumps(error_body(status, message)).encode() + b"\n\ndata: [DONE]\n\n"
