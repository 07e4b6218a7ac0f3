"""Retries that do not bunch up, and deploys that do not trip the circuit (issue 53, finding 5).

* A ``Retry-After`` wait is the asked seconds plus full jitter of up to as many again, never past the turn's
  share of the deadline: callers that met the same out-of-memory 503 come back spread over that span, not
  together.
* A draining instance's 503 (SIGTERM; the gateway's ``InstanceDraining``, ``Retry-After: 1``) is retried,
  which SageMaker routes to another instance, and never counts against the endpoint's circuit: a deploy
  drains every old instance, and five drains within 30 s opened it.

The drain answer is the real gateway's (``Gateway.invocations`` while draining), sent through SageMaker's
``ModelError`` by tests/client/wire.py to botocore's real client, on the real clock.
"""

from __future__ import annotations

import json
import random
import time

from mangaassist_client import ClientMetric, RetryPolicy
from tests.client import wire
from tests.client.stubs import CALL, IMPORTED, SAGEMAKER, Lines, gateway_error, rig
from tests.client.wire import gateway_drain_answer

OOM_503 = gateway_error(503, "engine out of memory on this request; retry later", retry_after_s=5)


def test_retry_after_waits_are_spread_above_what_the_503_asked() -> None:
    """Twenty callers meet the same OOM 503 (Retry-After 5): each waits at least 5 s, and they come back
    spread over 5-10 s instead of together at 5 s."""
    draws = random.Random(53)
    waits = []
    for _ in range(20):
        with rig(rand=draws.random) as r:
            r.fail(503, OOM_503)
            r.answer()
            assert r.client.chat(**CALL).backend == SAGEMAKER
        (wait,) = r.clock.sleeps
        waits.append(wait)
    assert all(5 <= wait < 10 for wait in waits), waits
    assert len(set(waits)) == len(waits)
    assert max(waits) - min(waits) > 2.5  # spread over the span, not bunched


def test_a_jittered_wait_never_ends_past_the_turns_share_of_the_deadline() -> None:
    """With a fallback behind it the endpoint's turn is half of what remains: at a 14 s deadline a wait ends
    before 7 s; at 10 s, the asked 5 s does not fit, so the fallback answers at once."""
    with rig(rand=lambda: 0.99) as r:
        r.fail(503, OOM_503)
        r.answer()
        r.client.chat(**CALL, deadline_s=14)
        (wait,) = r.clock.sleeps
    assert 5 <= wait < 7
    with rig(rand=lambda: 0.0) as r:
        r.fail(503, OOM_503)
        r.imported_answer()
        assert r.client.chat(**CALL, deadline_s=10).backend == IMPORTED
    assert r.clock.sleeps == []


def test_the_gateways_drain_503_says_when_to_come_back() -> None:
    status, headers, body = gateway_drain_answer()
    error = json.loads(body)["error"]
    assert (status, headers["retry-after"], error["retry_after_s"]) == (503, "1", 1)
    assert error["type"] == "InstanceDraining"
    assert error["message"] == "instance is draining (SIGTERM); retry elsewhere"


def test_five_drain_503s_within_30_s_do_not_open_the_circuit() -> None:
    """A deploy drains the old instances: without a retry left, each drained call falls back, and the
    endpoint's circuit stays closed (the default policy opens at 5 failures within 30 s)."""
    status, _, body = gateway_drain_answer()
    lines = Lines()
    with wire.services() as s:
        chat = wire.wired_client(s, lines, retry=RetryPolicy(max_attempts=1))
        for _ in range(5):
            s.queue("InvokeEndpoint", wire.model_error(status, body))
            s.queue("InvokeModel", wire.imported_answer())
            assert chat.chat(**CALL, deadline_s=4).backend == IMPORTED
        assert chat.circuit(SAGEMAKER).state == "closed"
        s.queue("InvokeEndpoint", wire.answer("the new instance"))
        assert chat.chat(**CALL, deadline_s=4).backend == SAGEMAKER
        assert s.unscripted == []
    assert [counts[ClientMetric.CIRCUIT_OPENED] for counts, _ in lines.calls()] == [0] * 6
    assert all("draining 503" in props["Failures"][0] for _, props in lines.calls()[:5])


def test_a_drain_503_is_retried_after_its_retry_after_within_the_deadline() -> None:
    """Real time: the retry comes 1-2 s after the drain (Retry-After 1, plus jitter), reaches another
    instance (here: the same socket, answering), and the call ends within its 4 s deadline."""
    status, _, body = gateway_drain_answer()
    lines = Lines()
    with wire.services() as s:
        chat = wire.wired_client(s, lines)
        s.queue("InvokeEndpoint", wire.model_error(status, body), wire.answer("another instance"))
        started = time.monotonic()
        result = chat.chat(**CALL, deadline_s=4)
        elapsed = time.monotonic() - started
        first, second = s.calls("InvokeEndpoint")
    assert (result.backend, result.text) == (SAGEMAKER, "another instance")
    assert second.at - first.at >= 1.0
    assert elapsed < 4 + 3.0  # the deadline, and a busy runner's slack (test_deadlines.SLACK_S)
    assert lines.last()[ClientMetric.RETRIES] == 1
    assert chat.circuit(SAGEMAKER).state == "closed"
