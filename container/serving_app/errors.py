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


def error_response(status: int, message: str) -> JSONResponse:
    """An error as a JSON response with ``status``."""
    return JSONResponse(error_body(status, message), status_code=status)


def sse_error(message: str, status: int) -> bytes:
    """An error as the last events of a stream: the error object, then ``[DONE]``."""
    return b"data: " + json.dumps(error_body(status, message)).encode() + b"\n\ndata: [DONE]\n\n"
