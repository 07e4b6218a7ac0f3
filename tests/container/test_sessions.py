"""SageMaker stateful sessions: the store (ids, expiry, the cap) and the session answers."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest

from serving_app.sessions.manager import SessionLimitError, SessionStore, UnknownSessionError
from serving_app.sessions.serving import SessionService


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def store(max_live: int = 3, ttl_s: float = 60) -> tuple[SessionStore, Clock]:
    clock = Clock()
    return SessionStore(max_live=max_live, ttl_s=ttl_s, clock=clock), clock


def error(response: object) -> tuple[int, str]:
    body = json.loads(response.body)  # type: ignore[attr-defined]
    return response.status_code, body["error"]["message"]  # type: ignore[attr-defined]


def test_new_session_is_a_uuid4_with_an_expiry_ttl_from_now() -> None:
    sessions, clock = store(ttl_s=1200)
    session = sessions.create()
    assert uuid.UUID(session.session_id).version == 4
    assert session.expires_at == clock.now + 1200
    expires = datetime.fromtimestamp(clock.now + 1200, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert session.header_value() == f"{session.session_id}; Expires={expires}"


def test_live_session_is_touched_unknown_one_raises() -> None:
    sessions, _ = store()
    session = sessions.create()
    assert sessions.touch(session.session_id) is True
    with pytest.raises(UnknownSessionError):
        sessions.touch(str(uuid.uuid4()))


def test_expired_session_is_served_once_then_unknown() -> None:
    sessions, clock = store(ttl_s=60)
    session = sessions.create()
    clock.now += 61
    assert sessions.touch(session.session_id) is False  # served without the session, as the library does
    with pytest.raises(UnknownSessionError):
        sessions.touch(session.session_id)


def test_close_ends_a_session_and_a_second_close_is_unknown() -> None:
    sessions, _ = store()
    session = sessions.create()
    sessions.close(session.session_id)
    assert len(sessions) == 0
    with pytest.raises(UnknownSessionError):
        sessions.close(session.session_id)
    with pytest.raises(UnknownSessionError):
        sessions.touch(session.session_id)


def test_cap_refuses_past_max_live_until_one_expires_or_closes() -> None:
    sessions, clock = store(max_live=2, ttl_s=60)
    first = sessions.create()  # expires at +60
    clock.now += 30
    second = sessions.create()  # expires at +90
    with pytest.raises(SessionLimitError, match="2 sessions are live"):
        sessions.create()
    clock.now += 31  # the first expired: the sweep at the cap frees its slot
    third = sessions.create()
    with pytest.raises(UnknownSessionError):
        sessions.touch(first.session_id)
    with pytest.raises(SessionLimitError):
        sessions.create()
    sessions.close(second.session_id)
    sessions.create()
    assert len(sessions) == 2 and sessions.touch(third.session_id)


@pytest.mark.parametrize(("kwargs", "text"), [({"max_live": 0}, "max_live=0 must be >= 1"), ({"ttl_s": 0}, "ttl_s=0")])
def test_store_refuses_bad_bounds(kwargs: dict[str, float], text: str) -> None:
    with pytest.raises(ValueError, match=text):
        SessionStore(**{"max_live": 1, "ttl_s": 1, **kwargs})  # type: ignore[arg-type]


def test_service_new_session_and_close_headers() -> None:
    service = SessionService(store(ttl_s=1200)[0])
    created = service.handle({"requestType": "NEW_SESSION"}, {})
    assert created.status_code == 200
    session_id, expires = created.headers["X-Amzn-SageMaker-New-Session-Id"].split("; Expires=")
    assert datetime.strptime(expires, "%Y-%m-%dT%H:%M:%SZ")
    assert service.check({"X-Amzn-SageMaker-Session-Id": session_id}) is None
    closed = service.handle({"requestType": "CLOSE"}, {"X-Amzn-SageMaker-Session-Id": session_id})
    assert closed.status_code == 200 and closed.headers["X-Amzn-SageMaker-Closed-Session-Id"] == session_id


@pytest.mark.parametrize(
    ("body", "headers", "text"),
    [
        ({"requestType": "OPEN"}, {}, "requestType 'OPEN' is not supported; allowed: NEW_SESSION, CLOSE"),
        (
            {"requestType": "NEW_SESSION", "messages": []},
            {},
            "a NEW_SESSION request has only 'requestType'; found also 'messages'",
        ),
        # Keys and values a caller controls are quoted with escapes: a lone surrogate key made this a 500.
        (
            {"requestType": "NEW_SESSION", "\ud800": 1, "a\nb": 2},
            {},
            "a NEW_SESSION request has only 'requestType'; found also '\\ud800', 'a\\nb'",
        ),
        (
            {"requestType": "NEW_SESSION", **{f"k{i}": i for i in range(7)}},
            {},
            "found also 'k0', 'k1', 'k2', 'k3', 'k4' and 2 more",
        ),
        ({"requestType": "\udfff"}, {}, "requestType '\\udfff' is not supported"),
        ({"requestType": "CLOSE"}, {}, "a CLOSE request needs the X-Amzn-SageMaker-Session-Id header"),
        ({"requestType": "CLOSE"}, {"X-Amzn-SageMaker-Session-Id": "nope"}, "session not found: 'nope'"),
    ],
)
def test_service_refuses_bad_session_requests(body: dict[str, str], headers: dict[str, str], text: str) -> None:
    response = SessionService(store()[0]).handle(body, headers)
    status, message = error(response)
    assert status == 400 and text in message
    bytes(response.body).decode("utf-8")  # the answer is UTF-8 text, whatever the caller sent


def test_service_unknown_or_oversized_id_on_a_request_is_400() -> None:
    service = SessionService(store()[0])
    for session_id in ("0b5d6a4e-0000-4000-8000-000000000000", "x" * 300, " "):
        status, message = error(service.check({"X-Amzn-SageMaker-Session-Id": session_id}))
        assert status == 400 and message.startswith("session not found: ")
    assert service.check({}) is None


def test_service_cap_answers_429_naming_the_limit() -> None:
    service = SessionService(store(max_live=1)[0])
    assert service.handle({"requestType": "NEW_SESSION"}, {}).status_code == 200
    status, message = error(service.handle({"requestType": "NEW_SESSION"}, {}))
    assert status == 429
    assert message.startswith("session limit reached: 1 live sessions on this instance (SESSIONS_MAX)")
