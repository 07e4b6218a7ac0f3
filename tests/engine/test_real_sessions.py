"""SageMaker stateful sessions through the container in front of the real vLLM 0.26.0 engine
(issue 26): NEW_SESSION, requests with the id (sync, streamed, every adapter selector), CLOSE,
unknown ids and the cap (``SESSIONS_MAX`` = 8 in ``ENGINE_ENV``)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from tests.engine.real_engine import ADAPTERS, ENGINE_ENV, RealGateway
from tests.engine.test_real_gateway import GREEDY, _select, invoke, stream_text

pytestmark = pytest.mark.real_engine

SESSION = "X-Amzn-SageMaker-Session-Id"


def open_session(gateway: RealGateway) -> tuple[str, datetime]:
    response = invoke(gateway, {"requestType": "NEW_SESSION"})
    assert response.status_code == 200, response.text
    session_id, _, expires = response.headers["X-Amzn-SageMaker-New-Session-Id"].partition("; Expires=")
    return session_id, datetime.strptime(expires, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def close_session(gateway: RealGateway, session_id: str) -> httpx.Response:
    return invoke(gateway, {"requestType": "CLOSE"}, {SESSION: session_id})


def engine_answer(gateway: RealGateway, name: str) -> str:
    response = httpx.post(gateway.engine_url + "/v1/chat/completions", json={**GREEDY, "model": name}, timeout=60)
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


def test_new_session_answers_the_id_with_an_expiry_twenty_minutes_out(shared_gateway: RealGateway) -> None:
    before = time.time()
    session_id, expires = open_session(shared_gateway)
    try:
        assert len(session_id) == 36
        # Expires is whole seconds (UTC): the default lifetime is 1200 s from creation.
        assert before + 1200 - 1 <= expires.timestamp() <= time.time() + 1200
    finally:
        close_session(shared_gateway, session_id)


@pytest.mark.parametrize("stream", [False, True], ids=["sync", "stream"])
@pytest.mark.parametrize("selector", ["model", "custom_attribute", "adapter_header"])
def test_requests_with_the_session_id_are_served_by_the_requested_model(
    shared_gateway: RealGateway, selector: str, stream: bool
) -> None:
    name = ADAPTERS[0]
    expected = engine_answer(shared_gateway, name)
    session_id, _ = open_session(shared_gateway)
    try:
        for _turn in range(2):  # a follow-up turn in the same session is served the same way
            body, headers = _select(selector, name)
            response = invoke(shared_gateway, {**body, "stream": stream}, {**headers, SESSION: session_id})
            assert response.status_code == 200, response.text
            if stream:
                text, events = stream_text(response)
                assert text == expected and {e["model"] for e in events} == {name}
            else:
                assert response.json()["model"] == name
                assert response.json()["choices"][0]["message"]["content"] == expected
    finally:
        close_session(shared_gateway, session_id)


def test_close_answers_the_closed_id_and_the_id_is_then_unknown(shared_gateway: RealGateway) -> None:
    session_id, _ = open_session(shared_gateway)
    closed = close_session(shared_gateway, session_id)
    assert closed.status_code == 200
    assert closed.headers["X-Amzn-SageMaker-Closed-Session-Id"] == session_id
    after = invoke(shared_gateway, GREEDY, {SESSION: session_id})
    assert after.status_code == 400
    assert after.json()["error"]["message"].startswith(f"session not found: {session_id!r}")


@pytest.mark.parametrize(
    "body", [GREEDY, {**GREEDY, "stream": True}, {"requestType": "CLOSE"}], ids=["sync", "stream", "close"]
)
def test_an_unknown_session_id_is_a_400_naming_it(shared_gateway: RealGateway, body: dict[str, Any]) -> None:
    response = invoke(shared_gateway, body, {SESSION: "3f1c0d9e-5b7a-4c1e-9d2f-000000000000"})
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"
    message = response.json()["error"]["message"]
    assert message.startswith("session not found: '3f1c0d9e-5b7a-4c1e-9d2f-000000000000' (never opened here")


def test_new_session_past_the_cap_is_a_429_until_one_closes(shared_gateway: RealGateway) -> None:
    cap = int(ENGINE_ENV["SESSIONS_MAX"])
    opened: list[str] = []
    try:
        for _ in range(cap + 1):
            response = invoke(shared_gateway, {"requestType": "NEW_SESSION"})
            if response.status_code != 200:
                break
            opened.append(response.headers["X-Amzn-SageMaker-New-Session-Id"].split(";")[0])
        assert len(opened) == cap
        assert response.status_code == 429
        assert response.json()["error"]["message"].startswith(
            f"session limit reached: {cap} live sessions on this instance (SESSIONS_MAX)"
        )
        # Requests without a session are not affected by the cap.
        assert invoke(shared_gateway, GREEDY).status_code == 200
        assert close_session(shared_gateway, opened.pop()).status_code == 200
        again, _ = open_session(shared_gateway)
        opened.append(again)
    finally:
        for session_id in opened:
            close_session(shared_gateway, session_id)
