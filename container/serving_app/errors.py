"""The OpenAI-style error body every gateway route answers with, and how caller text appears in it.

Any text a caller sent (a body key or value, a header, a path) may hold what no HTTP answer can
carry: a lone UTF-16 surrogate (``{"\\ud800": 1}`` is valid JSON and decodes to a ``str`` that
UTF-8 cannot encode), control characters, megabytes. Two rules keep every error answer writable
(issue 49, finding 1: such a key turned a 400 into a 500, and 500s feed the rollback guardrails):

* a message quotes a caller's value only through :func:`caller_text` (``repr``: quoted, control
  characters and surrogates escaped, cut to a bound);
* :func:`error_body` passes every message through :func:`printable`, so even a message built
  another way cannot make :func:`error_response`, :func:`sse_error` or the transport's refusals
  raise while encoding.
"""

from __future__ import annotations

import json
from typing import Final

from starlette.responses import JSONResponse

from serving_contract.validation import MAX_SHOWN_CHARS, shown

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


def caller_text(value: object, limit: int = MAX_SHOWN_CHARS) -> str:
    """``value`` as an error message may quote it: ``repr`` (quoted; control characters and lone
    surrogates written as escapes such as ``\\ud800``), cut to ``limit`` characters with ``...``.

    The one way caller-derived text enters a message (module docstring). ``limit`` defaults to
    ``serving_contract.validation.MAX_SHOWN_CHARS`` (100), the bound every refused value shares.
    """
    return shown(value, limit)


def printable(text: str) -> str:
    """``text`` with whatever UTF-8 cannot encode (lone surrogates) written as backslash escapes;
    any other text unchanged (the fast path: one encode)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def error_body(status: int, message: str, error_type: str | None = None) -> dict[str, dict[str, object]]:
    """``{"error": {"message", "type", "code"}}``; the message made :func:`printable`; ``type`` is
    ``error_type`` when given, else the status's (:data:`ERROR_TYPES`)."""
    kind = error_type or ERROR_TYPES.get(status, "Error")
    return {"error": {"message": printable(message), "type": kind, "code": status}}


def error_response(
    status: int, message: str, *, retry_after_s: int | None = None, error_type: str | None = None
) -> JSONResponse:
    """An error as a JSON response with ``status``; never raises for any ``message``.

    ``retry_after_s`` sets ``Retry-After`` and the same seconds as ``error.retry_after_s`` in the body:
    SageMaker hands a caller the container's status and body (``ModelError``'s ``OriginalStatusCode`` and
    ``OriginalMessage``) but no response header other than ``CustomAttributes``, so behind an endpoint
    the body is where a client finds it (client/mangaassist_client/errors.py reads both). ``error_type``
    names a refusal more closely than its status does (``InstanceDraining``)."""
    body = error_body(status, message, error_type)
    if retry_after_s is None:
        return JSONResponse(body, status_code=status)
    body["error"]["retry_after_s"] = retry_after_s
    return JSONResponse(body, status_code=status, headers={"Retry-After": str(retry_after_s)})


def sse_error(message: str, status: int) -> bytes:
    """An error as the last events of a stream: the error object, then ``[DONE]``."""
    return b"data: " + json.dumps(error_body(status, message)).encode() + b"\n\ndata: [DONE]\n\n"
