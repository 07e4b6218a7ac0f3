"""Stateful sessions through the client (docs/sessions.md): open, use, close, with SageMaker's own parameter
shapes; a session the endpoint forgot is reopened and the turn resent; a session that cannot be opened
leaves calls answering without one; a fallback answer ignores the session."""

from __future__ import annotations

import json

import pytest
from botocore.stub import ANY

from mangaassist_client import CallerError
from tests.botocore_helpers import add_event_stream_response, streaming_body
from tests.client.stubs import (
    CALL,
    ENDPOINT,
    IMPORTED,
    SAGEMAKER,
    Rig,
    completion,
    gateway_error,
    model_error,
    parts,
    rig,
    sse,
)


def _open(r: Rig, session_id: str = "sess-1") -> None:
    r.sagemaker.add_response(
        "invoke_endpoint",
        {"Body": streaming_body(b""), "NewSessionId": f"{session_id}; Expires=2026-11-27T12:00:00Z"},
        {
            "EndpointName": ENDPOINT,
            "SessionId": "NEW_SESSION",
            "ContentType": "application/json",
            "Body": json.dumps({"requestType": "NEW_SESSION"}).encode(),
        },
    )


def _turn(r: Rig, session_id: str, text: str) -> None:
    expected = r.invoke_params(SessionId=session_id)
    r.sagemaker.add_response("invoke_endpoint", {"Body": streaming_body(completion(text))}, expected)


def _close(r: Rig, session_id: str) -> None:
    r.sagemaker.add_response(
        "invoke_endpoint",
        {"Body": streaming_body(b""), "ClosedSessionId": session_id},
        {
            "EndpointName": ENDPOINT,
            "SessionId": session_id,
            "ContentType": "application/json",
            "Body": json.dumps({"requestType": "CLOSE"}).encode(),
        },
    )


def test_open_use_close() -> None:
    with rig() as r:
        _open(r)
        _turn(r, "sess-1", "Try Delicious in Dungeon.")
        _turn(r, "sess-1", "It ended at volume 14.")
        _close(r, "sess-1")
        with r.client.open_session() as session:
            assert (session.id, session.expires) == ("sess-1", "2026-11-27T12:00:00Z")
            assert session.chat(**CALL).text == "Try Delicious in Dungeon."
            assert session.chat(**CALL).text == "It ended at volume 14."
        assert session.id is None
        r.pending()


def test_a_forgotten_session_is_reopened_and_the_turn_resent() -> None:
    with rig() as r:
        _open(r, "sess-1")
        r.sagemaker.add_client_error(
            "invoke_endpoint", **model_error(400, gateway_error(400, "session not found: 'sess-1'"))
        )
        _open(r, "sess-2")
        _turn(r, "sess-2", "Try Frieren.")
        session = r.client.open_session()
        assert session.chat(**CALL).text == "Try Frieren."
        assert session.id == "sess-2"
        r.pending()


def test_other_4xx_in_a_session_are_raised() -> None:
    with rig() as r:
        _open(r)
        r.sagemaker.add_client_error("invoke_endpoint", **model_error(400, gateway_error(400, "unknown adapter 'x'")))
        with pytest.raises(CallerError, match="unknown adapter"):
            r.client.open_session().chat(**CALL)
        r.pending()


def test_a_session_that_cannot_be_opened_still_answers() -> None:
    with rig() as r:
        r.sagemaker.add_client_error("invoke_endpoint", **model_error(429, gateway_error(429, "session limit reached")))
        r.sagemaker.add_response(
            "invoke_endpoint", {"Body": streaming_body(completion("ok"))}, r.invoke_params()
        )  # no SessionId
        session = r.client.open_session()
        assert session.id is None
        assert session.open_failure is not None and session.open_failure.status == 429
        assert session.chat(**CALL).backend == SAGEMAKER
        session.close()  # nothing to close
        r.pending()


def test_a_fallback_answers_a_session_turn_without_the_session() -> None:
    with rig() as r:
        _open(r)
        r.fail(502, gateway_error(502, "engine error 500"))
        r.imported_answer("Try Frieren.")
        r.sagemaker.add_client_error("invoke_endpoint", "ServiceUnavailable", "busy", 503)  # the close fails
        with r.client.open_session() as session:
            assert session.chat(**CALL).backend == IMPORTED
        r.pending()


def test_a_stream_in_a_session_carries_its_id() -> None:
    with rig() as r:
        _open(r)
        expected = {
            "EndpointName": ENDPOINT,
            "Body": ANY,
            "ContentType": "application/json",
            "Accept": "text/event-stream",
            "SessionId": "sess-1",
            "InferenceId": ANY,
        }
        add_event_stream_response(r.sagemaker, "invoke_endpoint_with_response_stream", {}, parts(sse("ok")), expected)
        assert "".join(r.client.open_session().chat_stream(**CALL)) == "ok"
        r.pending()


def test_a_forgotten_session_is_reopened_for_a_streamed_turn_too() -> None:
    with rig() as r:
        _open(r, "sess-1")
        r.sagemaker.add_client_error(
            "invoke_endpoint_with_response_stream",
            **model_error(400, gateway_error(400, "session not found: 'sess-1'")),
        )
        _open(r, "sess-2")
        expected = {**r.invoke_params(SessionId="sess-2"), "Accept": "text/event-stream"}
        add_event_stream_response(r.sagemaker, "invoke_endpoint_with_response_stream", {}, parts(sse("ok")), expected)
        session = r.client.open_session()
        stream = session.chat_stream(**CALL)
        assert list(stream) == ["ok"]
        assert stream.result is not None and stream.result.text == "ok"
        assert session.id == "sess-2"
        r.pending()
