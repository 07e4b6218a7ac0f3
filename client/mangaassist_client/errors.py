"""What can go wrong with one backend, sorted into what the client does about it.

Every botocore error of a call becomes a :class:`Failure` of one :class:`FailureKind`:

========================  ==========================================================  ====================
kind                      from                                                        the client
========================  ==========================================================  ====================
``throttled``             HTTP 429 (Bedrock ``ThrottlingException``,                  retries with backoff
                          ``ModelNotReadyException``, the container's 429 through     within the deadline,
                          SageMaker's ``ModelError``), or a throttling code           then falls back
``retry_after``           a 503 that says when to come back (a ``Retry-After``        waits that long (plus
                          header, or the container's ``retry_after_s`` in the         jitter) and retries,
                          error body that SageMaker's ``ModelError`` carries)         then falls back
``draining``              the container's 503 while it drains after SIGTERM           as ``retry_after``, and
                          (``error.type`` ``InstanceDraining``, Retry-After 1 s)      never counts against
                                                                                      the circuit
``server``                any other 5xx, a connection failure, a failed stream        falls back
``timeout``               a read/connect timeout (botocore's, or urllib3's in an      falls back
                          event stream), HTTP 408/504, Bedrock
                          ``ModelTimeoutException``
``caller``                any other 4xx: the request itself is wrong                  raises it as is
========================  ==========================================================  ====================

SageMaker answers a container's own error as ``ModelError`` (HTTP 424) with the container's status in
``OriginalStatusCode`` and its body in ``OriginalMessage`` (sagemaker-runtime API model), so those two,
not the 424, decide. The container's 503 after an out-of-memory error it could not contain carries
``Retry-After`` and, for callers behind SageMaker, which passes no other response header back, the same
seconds as ``error.retry_after_s`` in its body (container/serving_app/errors.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import urllib3.exceptions
from botocore.exceptions import (
    ClientError,
    ConnectionError,
    ConnectTimeoutError,
    HTTPClientError,
    ReadTimeoutError,
)


class FailureKind(StrEnum):
    """What the client does about a failure (module docstring)."""

    THROTTLED = "throttled"
    RETRY_AFTER = "retry_after"
    SERVER = "server"
    TIMEOUT = "timeout"
    CALLER = "caller"
    DRAINING = "draining"
    """The instance that took the call is draining (SIGTERM, a deploy or a scale-in): retried, which SageMaker
    routes to another instance, and never a circuit failure (issue 53, finding 5)."""
    CIRCUIT_OPEN = "circuit_open"
    """Not a call: the backend's circuit is open, so the call went to the next backend."""
    NOT_SERVED = "not_served"
    """Not a call: the backend has no model for the adapter (no imported model configured for it)."""


THROTTLING_CODES: Final = frozenset(
    {"Throttling", "ThrottlingException", "throttlingException", "TooManyRequestsException", "ModelNotReadyException"}
)
"""Error codes that mean "not now" whatever their status (SageMaker Runtime answers throttling with
``ThrottlingException``; Bedrock's stream events are lower camel case; ``ModelNotReadyException``:
a cold imported model, which Bedrock's API model marks retryable)."""
TIMEOUT_CODES: Final = frozenset({"ModelTimeoutException", "modelTimeoutException"})
SERVER_CODES: Final = frozenset(
    {"ModelErrorException", "ModelStreamError", "InternalStreamFailure", "modelStreamErrorException"}
)
"""Codes of a backend's failure that carry a 4xx status or none (Bedrock's model error is 424, stream
error events have no status): the backend failed, not the request."""
DRAINING_ERROR_TYPE: Final = "InstanceDraining"
"""``error.type`` of the container's drain 503 (``serving_contract.lifecycle.DRAINING_ERROR_TYPE``; this package
cannot import the app, tests/client/test_contract_agreement.py keeps the two equal)."""
DRAINING_MESSAGE: Final = "instance is draining (SIGTERM)"
"""How the drain 503's message starts: a container built before issue 53 sends it without the type."""
DRAIN_RETRY_AFTER_S: Final = 1.0
"""The wait before retrying a drain 503 that names none (a container built before issue 53): its own 1 s."""
CALLER_CODES: Final = frozenset({"validationException", "ValidationException", "ValidationError"})
"""Codes of a refused request that may come without a status (Bedrock's stream exception events)."""


@dataclass(frozen=True, slots=True)
class Failure:
    """One backend's failure, sorted (module docstring).

    Attributes:
        backend: the backend's name.
        kind: what the client does about it.
        status: the HTTP status that decided (the container's, behind SageMaker), None for none.
        code: the error code (``ModelError``, ``ThrottlingException``, ``ReadTimeoutError``, ...).
        message: the backend's message, at most 300 characters.
        retry_after_s: seconds the backend asked to wait, if it said.
    """

    backend: str
    kind: FailureKind
    status: int | None
    code: str
    message: str
    retry_after_s: float | None = None

    def __str__(self) -> str:
        status = f" {self.status}" if self.status is not None else ""
        return f"{self.backend}: {self.kind}{status} {self.code}: {self.message}"


class MangaAssistClientError(Exception):
    """Base of the errors a call raises."""


class CallerError(MangaAssistClientError):
    """The request itself was refused (a 4xx): never sent to another backend. ``failure`` says by whom."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(str(failure))
        self.failure = failure

    @property
    def status(self) -> int | None:
        return self.failure.status

    @property
    def session_not_found(self) -> bool:
        """The endpoint no longer knows the request's session (its instance was replaced; docs/sessions.md)."""
        return self.failure.status == 400 and "session not found" in self.failure.message


class BackendUnavailableError(MangaAssistClientError):
    """No backend answered within the deadline; ``failures`` says why, per backend, in order."""

    def __init__(self, failures: tuple[Failure, ...]) -> None:
        super().__init__("no backend answered: " + "; ".join(str(f) for f in failures))
        self.failures = failures


class StreamInterruptedError(MangaAssistClientError):
    """A stream failed after its first token. It is not restarted elsewhere: the caller has part of an
    answer and decides (show it, ask again). ``partial_text`` is what arrived, ``failure`` why it stopped."""

    def __init__(self, partial_text: str, failure: Failure) -> None:
        super().__init__(f"stream interrupted after {len(partial_text)} characters: {failure}")
        self.partial_text = partial_text
        self.failure = failure


class AnswerError(Exception):
    """A backend answered, but with a failure inside the answer (an error object in a stream, a stream that
    ended early, a body that is no completion): raised by a backend, sorted like a botocore error
    (``status`` None or 5xx: ``server``)."""

    def __init__(self, code: str, message: str, status: int | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.status = code, message, status


def _error_object(body: str) -> Mapping[str, Any]:
    try:
        payload = json.loads(body)
    except ValueError:
        return {}
    error = payload.get("error") if isinstance(payload, Mapping) else None
    return error if isinstance(error, Mapping) else {}


MAX_RETRY_AFTER_S: Final = 3600.0
"""A longer wait than an hour is read as no advice (the container's own bound, ``oom_retry_after_s``)."""


def _seconds(value: object, scale: float = 1.0) -> float | None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        seconds = float(value) * scale
    except ValueError:  # an HTTP date: nothing here sends one, so it reads as no advice
        return None
    return seconds if 0 <= seconds <= MAX_RETRY_AFTER_S else None


def _retry_after(headers: Mapping[str, str], error: Mapping[str, Any]) -> float | None:
    """Seconds to wait: ``Retry-After`` (seconds, RFC 9110), AWS's ``x-amz-retry-after`` (milliseconds, as
    botocore reads it), or the container's ``error.retry_after_s``; None when none is given."""
    for value, scale in (
        (headers.get("retry-after"), 1.0),
        (headers.get("x-amz-retry-after"), 0.001),
        (error.get("retry_after_s"), 1.0),
    ):
        seconds = _seconds(value, scale)
        if seconds is not None:
            return seconds
    return None


def _kind(status: int | None, code: str, retry_after_s: float | None, draining: bool = False) -> FailureKind:
    if code in THROTTLING_CODES or status == 429:
        return FailureKind.THROTTLED
    if status == 503 and draining:
        return FailureKind.DRAINING
    if status == 503 and retry_after_s is not None:
        return FailureKind.RETRY_AFTER
    if code in TIMEOUT_CODES or status in (408, 504):
        return FailureKind.TIMEOUT
    if code in CALLER_CODES:
        return FailureKind.CALLER
    if code in SERVER_CODES or status is None or status >= 500:
        return FailureKind.SERVER
    return FailureKind.CALLER


def _client_error(error: ClientError, backend: str) -> Failure:
    response: Mapping[str, Any] = error.response
    details = response.get("Error", {})
    code = str(details.get("Code", "ClientError"))
    message = str(details.get("Message", ""))
    metadata = response.get("ResponseMetadata", {})
    headers = {str(k).lower(): str(v) for k, v in metadata.get("HTTPHeaders", {}).items()}
    status: int | None = metadata.get("HTTPStatusCode")
    body_error: Mapping[str, Any] = {}
    original = response.get("OriginalStatusCode")
    if code == "ModelError" and original is not None:  # the container answered: its status and body decide
        status = int(original)
        body = str(response.get("OriginalMessage", ""))
        body_error = _error_object(body)
        message = str(body_error.get("message", body))
    retry_after_s = _retry_after(headers, body_error)
    draining = body_error.get("type") == DRAINING_ERROR_TYPE or message.startswith(DRAINING_MESSAGE)
    if draining and retry_after_s is None:
        retry_after_s = DRAIN_RETRY_AFTER_S
    kind = _kind(status, code, retry_after_s, draining)
    return Failure(backend, kind, status, code, message[:300], retry_after_s)


def classify(error: Exception, backend: str) -> Failure | None:
    """The :class:`Failure` ``error`` is, or None when it is no backend's failure (a bug, bad
    credentials, a parameter botocore refused): then the caller sees the error itself."""
    if isinstance(error, AnswerError):
        return Failure(backend, _kind(error.status, error.code, None), error.status, error.code, error.message[:300])
    if isinstance(error, ClientError):  # EventStreamError, raised mid-stream, is one too
        return _client_error(error, backend)
    # botocore wraps urllib3's errors while it sends a request and reads a blob, but an event stream reads
    # urllib3's response itself: a stream that stalls or breaks before its first piece raises urllib3's own
    # ReadTimeoutError or ProtocolError (botocore/eventstream.py).
    if isinstance(error, ReadTimeoutError | ConnectTimeoutError | urllib3.exceptions.TimeoutError):
        return Failure(backend, FailureKind.TIMEOUT, None, type(error).__name__, str(error)[:300])
    if isinstance(error, ConnectionError | HTTPClientError | urllib3.exceptions.HTTPError):
        return Failure(backend, FailureKind.SERVER, None, type(error).__name__, str(error)[:300])
    # Anything else (NoCredentialsError, ParamValidationError, a bug) is configuration, not availability:
    # another backend would not help.
    return None
