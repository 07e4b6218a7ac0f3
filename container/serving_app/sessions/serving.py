"""SageMaker stateful sessions on ``/invocations``: NEW_SESSION, CLOSE and the session header.

The contract (AWS docs "Stateful sessions with Amazon SageMaker AI models"; the same as
model_hosting_container_standards 0.1.16 ``sagemaker/sessions/``, which vLLM 0.26's own
``/invocations`` wraps):

* body ``{"requestType": "NEW_SESSION"}`` -> 200, header
  ``X-Amzn-SageMaker-New-Session-Id: <id>; Expires=<UTC timestamp>``; SageMaker then routes every
  request carrying ``X-Amzn-SageMaker-Session-Id: <id>`` to this instance;
* body ``{"requestType": "CLOSE"}`` with the session header -> 200, header
  ``X-Amzn-SageMaker-Closed-Session-Id: <id>``;
* a body with ``requestType`` and anything else, or another value -> 400;
* a request with an id this instance did not issue (or closed) -> 400 ``session not found``;
  with an id that has just expired -> served (the session is forgotten), as the library does.

Past ``container.sessions_max`` live sessions NEW_SESSION answers 429; requests without a
session are unaffected. A session changes nothing about the request itself: streaming and
every adapter-selection path (``serving_app.sagemaker.protocol``) work the same with or without.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from starlette.responses import PlainTextResponse, Response

from serving_app.errors import caller_text, error_response
from serving_app.sessions.manager import MAX_ID_CHARS, SessionLimitError, SessionStore, UnknownSessionError

SESSION_ID_HEADER: Final = "X-Amzn-SageMaker-Session-Id"
NEW_SESSION_ID_HEADER: Final = "X-Amzn-SageMaker-New-Session-Id"
CLOSED_SESSION_ID_HEADER: Final = "X-Amzn-SageMaker-Closed-Session-Id"
REQUEST_TYPE_KEY: Final = "requestType"
NEW_SESSION: Final = "NEW_SESSION"
CLOSE: Final = "CLOSE"
MAX_NAMED_KEYS: Final = 5
"""Unexpected keys a refusal names; the rest are counted."""


class SessionService:
    """Answers session requests and checks the session header of every other request."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    @staticmethod
    def is_session_request(data: Mapping[str, Any]) -> bool:
        """The body asks for a session operation (it has ``requestType``)."""
        return REQUEST_TYPE_KEY in data

    def handle(self, data: Mapping[str, Any], headers: Mapping[str, str]) -> Response:
        """Answer NEW_SESSION or CLOSE (the body had ``requestType``); never raises."""
        request_type = data[REQUEST_TYPE_KEY]
        if request_type not in (NEW_SESSION, CLOSE):
            return error_response(
                400, f"requestType {caller_text(request_type, 50)} is not supported; allowed: NEW_SESSION, CLOSE"
            )
        extra = [key for key in data if key != REQUEST_TYPE_KEY]
        if extra:
            # The caller's keys, quoted (caller_text: a lone surrogate in a key made this answer a 500 before).
            named = ", ".join(caller_text(key, 50) for key in extra[:MAX_NAMED_KEYS])
            more = f" and {len(extra) - MAX_NAMED_KEYS} more" if len(extra) > MAX_NAMED_KEYS else ""
            return error_response(400, f"a {request_type} request has only 'requestType'; found also {named}{more}")
        if request_type == NEW_SESSION:
            return self._create()
        return self._close(headers.get(SESSION_ID_HEADER))

    def check(self, headers: Mapping[str, str]) -> Response | None:
        """The error answer for a request whose session header names no live session, else None."""
        session_id = headers.get(SESSION_ID_HEADER)
        if session_id is None:
            return None
        try:
            self.store.touch(_valid_id(session_id))
        except UnknownSessionError as exc:
            return _not_found(str(exc))
        return None

    def _create(self) -> Response:
        try:
            session = self.store.create()
        except SessionLimitError:
            return error_response(
                429,
                f"session limit reached: {self.store.max_live} live sessions on this instance (SESSIONS_MAX); "
                'close finished ones with {"requestType": "CLOSE"} or send the request without a session',
            )
        return PlainTextResponse(
            f"Session {session.session_id} created",
            headers={NEW_SESSION_ID_HEADER: session.header_value()},
        )

    def _close(self, session_id: str | None) -> Response:
        if not session_id:
            return error_response(400, f"a CLOSE request needs the {SESSION_ID_HEADER} header")
        try:
            self.store.close(_valid_id(session_id))
        except UnknownSessionError as exc:
            return _not_found(str(exc))
        return PlainTextResponse(f"Session {session_id} closed", headers={CLOSED_SESSION_ID_HEADER: session_id})


def _valid_id(session_id: str) -> str:
    """The id itself, or :class:`UnknownSessionError` for one no session of ours can have."""
    session_id = session_id.strip()
    if not session_id or len(session_id) > MAX_ID_CHARS:
        raise UnknownSessionError(session_id[:100])
    return session_id


def _not_found(session_id: str) -> Response:
    return error_response(
        400,
        f"session not found: {caller_text(session_id)} (never opened here, closed or expired); "
        'open one with {"requestType": "NEW_SESSION"}',
    )
