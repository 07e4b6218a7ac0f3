"""The circuit of a backend (issue 48): it opens after too many failures in a window, sends calls straight to
the fallback while open, lets one probe through after ``open_s``, and closes on the probe's success (or opens
again on its failure). Every opening is counted."""

from __future__ import annotations

import time
from typing import Any

import pytest
from botocore.exceptions import NoCredentialsError

from mangaassist_client import CircuitPolicy, ClientMetric, MangaAssistClient
from mangaassist_client.resilience import Circuit
from tests.client import wire
from tests.client.stubs import CALL, IMPORTED, SAGEMAKER, Lines, Rig, gateway_error, rig
from tests.client.wire import Services

POLICY = CircuitPolicy(failures=3, window_s=30, open_s=30)


def _fail_over(r: Rig, times: int) -> None:
    for _ in range(times):
        r.fail(502, gateway_error(502, "engine error 500"))
        r.imported_answer()
        assert r.client.chat(**CALL).backend == IMPORTED


def test_the_circuit_opens_sends_calls_to_the_fallback_then_a_probe_closes_it() -> None:
    with rig(circuit=POLICY) as r:
        _fail_over(r, 3)
        assert r.client.circuit(SAGEMAKER).is_open
        assert [counts[ClientMetric.CIRCUIT_OPENED] for counts, _ in r.lines.calls()] == [0, 0, 1]

        # Open: the endpoint is not called at all (its Stubber has nothing queued and would raise).
        r.clock.now += 29
        r.imported_answer("from the fallback")
        result = r.client.chat(**CALL)
        r.pending()
        assert (result.backend, result.fallback_from) == (IMPORTED, (f"{SAGEMAKER}: circuit_open CircuitOpen: open",))
        assert r.lines.last()[ClientMetric.FALLBACKS] == 1

        # After open_s one call probes the endpoint; it answers, so the circuit closes.
        r.clock.now += 2
        r.answer("the endpoint again")
        assert r.client.chat(**CALL).backend == SAGEMAKER
        assert not r.client.circuit(SAGEMAKER).is_open
        r.answer()
        assert r.client.chat(**CALL).backend == SAGEMAKER
        r.pending()


def test_a_failed_probe_opens_the_circuit_again_and_is_counted() -> None:
    with rig(circuit=POLICY) as r:
        _fail_over(r, 3)
        r.clock.now += 31
        _fail_over(r, 1)  # the probe fails: open again for open_s
        assert r.lines.last()[ClientMetric.CIRCUIT_OPENED] == 1
        r.clock.now += 29
        r.imported_answer()
        assert r.client.chat(**CALL).backend == IMPORTED  # still open: no endpoint call queued
        r.pending()


def test_failures_outside_the_window_do_not_open_it() -> None:
    with rig(circuit=POLICY) as r:
        _fail_over(r, 2)
        r.clock.now += 31
        _fail_over(r, 2)
        assert not r.client.circuit(SAGEMAKER).is_open
        assert all(counts[ClientMetric.CIRCUIT_OPENED] == 0 for counts, _ in r.lines.calls())


def test_caller_errors_and_answers_never_open_it() -> None:
    with rig(circuit=POLICY) as r:
        for _ in range(4):
            r.fail(400, gateway_error(400, "unknown adapter 'ghost'"))
            with pytest.raises(Exception, match="ghost"):
                r.client.chat(**CALL)
        assert not r.client.circuit(SAGEMAKER).is_open


def test_only_one_probe_at_a_time() -> None:
    now = [0.0]
    circuit = Circuit(CircuitPolicy(failures=1, window_s=10, open_s=5), lambda: now[0])
    assert circuit.failure() is True
    assert circuit.allow() is None and circuit.state == "open"
    now[0] = 6
    assert circuit.state == "half_open"
    probe = circuit.allow()
    assert probe is not None and probe.probe  # the probe
    assert circuit.allow() is None and circuit.state == "probing"  # a second call while the probe runs
    assert probe.failure() is True  # the probe failed: open again
    assert circuit.allow() is None
    now[0] = 12
    probe = circuit.allow()
    assert probe is not None and probe.success() is True
    admission = circuit.allow()
    assert admission is not None and not admission.probe and not circuit.is_open


def test_a_probe_ended_without_a_verdict_frees_the_next_probe_and_keeps_the_circuit_as_it_was() -> None:
    """Issue 53, finding 1: leaving the admission's block (a closed stream, an error the client does not sort)
    releases the probe; only the first verdict counts."""
    now = [0.0]
    circuit = Circuit(CircuitPolicy(failures=1, window_s=10, open_s=5), lambda: now[0])
    circuit.failure()
    now[0] = 6
    probe = circuit.allow()
    assert probe is not None
    with pytest.raises(KeyError), probe:
        raise KeyError("Body")
    assert circuit.state == "half_open" and circuit.is_open
    second = circuit.allow()
    assert second is not None and second.probe
    assert second.success() is True
    assert second.failure() is False  # a verdict after the first one is ignored
    assert circuit.state == "closed"
    assert probe.failure() is False  # the released probe's late verdict changes nothing


def test_a_late_failure_of_a_call_let_in_before_the_circuit_opened_ends_no_probe() -> None:
    now = [0.0]
    circuit = Circuit(CircuitPolicy(failures=1, window_s=10, open_s=5), lambda: now[0])
    early = circuit.allow()
    assert early is not None and circuit.failure() is True
    now[0] = 6
    probe = circuit.allow()
    assert probe is not None and early.failure() is False  # open already; the probe still runs
    assert circuit.state == "probing"
    assert probe.success() is True and circuit.state == "closed"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"failures": 0}, "circuit.failures = 0: must be from 1 to 1000"),
        ({"open_s": 0}, "circuit.window_s = 30.0, open_s = 0: each must be above 0 and at most 3600"),
    ],
)
def test_policy_limits(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        CircuitPolicy(**kwargs)  # type: ignore[arg-type]
    assert str(raised.value) == message


# Issue 53, finding 1: every path that starts a half-open probe ends it. Real time and a real transport
# (botocore against tests/client/wire.py): the circuit's open_s passes on the real clock.

OPEN_S = 0.2
"""open_s of these tests: short, so the probe comes after a real 0.2 s."""


def _open_circuit(s: Services, chat: MangaAssistClient) -> None:
    """One failed call opens a ``failures=1`` circuit; then ``open_s`` passes, so the next call probes."""
    s.queue("InvokeEndpoint", wire.model_error(502, gateway_error(502, "engine error 500")))
    s.queue("InvokeModel", wire.imported_answer())
    assert chat.chat(**CALL).backend == IMPORTED
    assert chat.circuit(SAGEMAKER).is_open
    time.sleep(OPEN_S * 1.5)


def test_a_streamed_probe_the_caller_closes_after_its_first_piece_lets_the_circuit_close() -> None:
    with wire.services() as s:
        chat = wire.wired_client(s, Lines(), circuit=CircuitPolicy(failures=1, window_s=30, open_s=OPEN_S))
        _open_circuit(s, chat)
        s.queue("InvokeEndpointWithResponseStream", wire.stream("Try ", "Dungeon ", "Meshi.", pause_s=0.05))
        stream = chat.chat_stream(**CALL)
        assert next(stream) == "Try "
        stream.close()  # the caller has what it needed
        s.queue("InvokeEndpoint", wire.answer("the endpoint again"))
        assert chat.chat(**CALL).backend == SAGEMAKER  # the endpoint, not the fallback: the probe ended
        assert not chat.circuit(SAGEMAKER).is_open
        assert s.unscripted == []


@pytest.mark.parametrize("error", [NoCredentialsError(), KeyError("Body")], ids=["no-credentials", "key-error"])
def test_a_probe_that_meets_an_error_the_client_does_not_sort_lets_the_circuit_close(error: Exception) -> None:
    """The error is raised to the caller (another backend would not help), and the probe ends with it."""
    with wire.services() as s:
        chat = wire.wired_client(s, Lines(), circuit=CircuitPolicy(failures=1, window_s=30, open_s=OPEN_S))
        _open_circuit(s, chat)
        events = chat.backends[0].runtime.meta.events  # type: ignore[attr-defined]

        def fail(**_: Any) -> None:
            raise error

        events.register_first("before-sign.sagemaker-runtime.InvokeEndpoint", fail, unique_id="probe-error")
        with pytest.raises(type(error)):
            chat.chat(**CALL)
        events.unregister("before-sign.sagemaker-runtime.InvokeEndpoint", unique_id="probe-error")
        s.queue("InvokeEndpoint", wire.answer("the endpoint again"))
        assert chat.chat(**CALL).backend == SAGEMAKER
        assert not chat.circuit(SAGEMAKER).is_open
        assert s.unscripted == []
