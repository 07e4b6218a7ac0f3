"""A call's deadline bounds the whole call, retries and the fallback included (issue 53, finding 2: with
``deadline_s=10`` a hung endpoint raised after 30 s and skipped Bedrock as "deadline passed", because every
attempt's read timeout was half of the config's 60 s whatever the call's deadline).

Real time and a real transport: botocore's clients against tests/client/wire.py, whose endpoint holds a
request on its socket without answering. The bounds are upper bounds with slack for a loaded runner; none
bets on the runner being fast.
"""

from __future__ import annotations

import time

import pytest

from mangaassist_client import BackendUnavailableError, ClientMetric, FailureKind
from tests.client import wire
from tests.client.stubs import CALL, IMPORTED, SAGEMAKER, Lines, gateway_error

DEADLINE_S = 2.0
SLACK_S = 3.0
"""What a call may take beyond its deadline: the last attempt's read timeout ends at the deadline, and the
answer's parsing, the threads' scheduling on a busy 2-core runner (the suite's other half starts vLLM
engines beside it) and the socket's close follow it. A client that ignored the deadline waits the config's
30 s read timeout: far outside this bound either way."""


def _timed(call: object) -> float:
    started = time.monotonic()
    call()  # type: ignore[operator]
    return time.monotonic() - started


def test_a_hung_endpoint_is_answered_by_the_fallback_within_the_calls_deadline() -> None:
    lines = Lines()
    with wire.services() as s:
        chat = wire.wired_client(s, lines)  # the config's own deadline: 60 s
        s.queue("InvokeEndpoint", wire.hang)
        s.queue("InvokeModel", wire.imported_answer("Try Frieren."))
        results = []
        elapsed = _timed(lambda: results.append(chat.chat(**CALL, deadline_s=DEADLINE_S)))
        assert s.unscripted == []
    (result,) = results
    assert (result.backend, result.text) == (IMPORTED, "Try Frieren.")
    assert result.fallback_from[0].startswith(f"{SAGEMAKER}: timeout ReadTimeoutError")
    assert elapsed < DEADLINE_S + SLACK_S
    assert lines.last()[ClientMetric.FALLBACKS] == 1


def test_the_endpoint_leaves_the_fallback_half_of_what_remains() -> None:
    """The endpoint's read timeout is half the remaining deadline when a fallback follows it.

    The try starts some time after the call (on a busy runner, later), and its timeout is half of what
    remains then: so the fallback comes no earlier than half the deadline after the call started,
    however slow the runner, and no later than half of it after the try reached the endpoint, plus slack."""
    with wire.services() as s:
        chat = wire.wired_client(s, Lines())
        s.queue("InvokeEndpoint", wire.hang)
        s.queue("InvokeModel", wire.imported_answer())
        started = time.monotonic()
        chat.chat(**CALL, deadline_s=DEADLINE_S)
        (endpoint,) = s.calls("InvokeEndpoint")
        (bedrock,) = s.calls("InvokeModel")
    assert bedrock.at - started >= DEADLINE_S / 2
    assert bedrock.at - endpoint.at < DEADLINE_S / 2 + SLACK_S


def test_when_every_backend_hangs_each_is_tried_and_the_call_ends_at_its_deadline() -> None:
    lines = Lines()
    with wire.services() as s:
        chat = wire.wired_client(s, lines)
        s.queue("InvokeEndpoint", wire.hang)
        s.queue("InvokeModel", wire.hang)
        started = time.monotonic()
        with pytest.raises(BackendUnavailableError) as raised:
            chat.chat(**CALL, deadline_s=DEADLINE_S)
        elapsed = time.monotonic() - started
    assert [(f.backend, f.kind) for f in raised.value.failures] == [
        (SAGEMAKER, FailureKind.TIMEOUT),
        (IMPORTED, FailureKind.TIMEOUT),
    ]
    assert all(f.code == "ReadTimeoutError" for f in raised.value.failures)  # both tried, none skipped
    assert elapsed < DEADLINE_S + SLACK_S


def test_a_stream_whose_first_piece_never_comes_falls_back_within_the_deadline() -> None:
    """SageMaker answered the stream's headers, then nothing: the first piece's read times out (urllib3's own
    error, which botocore's event stream does not wrap) and the imported model's stream answers."""
    with wire.services() as s:
        chat = wire.wired_client(s, Lines())
        s.queue("InvokeEndpointWithResponseStream", wire.stream("never", hold_after=0))
        s.queue("InvokeModelWithResponseStream", wire.imported_stream("Try ", "Frieren."))
        stream = chat.chat_stream(**CALL, deadline_s=DEADLINE_S)
        pieces: list[str] = []
        elapsed = _timed(lambda: pieces.extend(stream))
    assert pieces == ["Try ", "Frieren."]
    assert stream.result is not None and stream.result.backend == IMPORTED
    assert stream.result.fallback_from[0].startswith(f"{SAGEMAKER}: timeout ReadTimeoutError")
    assert elapsed < DEADLINE_S + SLACK_S


def test_a_retry_after_wait_and_its_retry_fit_the_deadline() -> None:
    """The container's OOM 503 asks for 1 s: the client waits (at least that), retries on the endpoint and
    gets its answer, all within a 3 s deadline."""
    lines = Lines()
    oom = gateway_error(503, "engine out of memory on this request; retry later", retry_after_s=1)
    with wire.services() as s:
        chat = wire.wired_client(s, lines)
        s.queue("InvokeEndpoint", wire.model_error(503, oom), wire.answer("Try Delicious in Dungeon."))
        results = []
        elapsed = _timed(lambda: results.append(chat.chat(**CALL, deadline_s=3)))
        first, second = s.calls("InvokeEndpoint")
    assert results[0].backend == SAGEMAKER
    assert second.at - first.at >= 1.0
    assert elapsed < 3 + SLACK_S
    assert lines.last()[ClientMetric.RETRIES] == 1


def test_attempt_timeout_s_caps_a_try_below_its_share_of_the_deadline() -> None:
    with wire.services() as s:
        chat = wire.wired_client(s, Lines(), attempt_timeout_s=0.5)
        s.queue("InvokeEndpoint", wire.hang)
        s.queue("InvokeModel", wire.imported_answer())
        assert chat.chat(**CALL, deadline_s=10).backend == IMPORTED
        (endpoint,) = s.calls("InvokeEndpoint")
        (bedrock,) = s.calls("InvokeModel")
    assert 0.45 <= bedrock.at - endpoint.at < 0.5 + SLACK_S
