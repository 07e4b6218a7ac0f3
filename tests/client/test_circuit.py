"""The circuit of a backend (issue 48): it opens after too many failures in a window, sends calls straight to
the fallback while open, lets one probe through after ``open_s``, and closes on the probe's success (or opens
again on its failure). Every opening is counted."""

from __future__ import annotations

import pytest

from mangaassist_client import CircuitPolicy, ClientMetric
from mangaassist_client.resilience import Circuit
from tests.client.stubs import CALL, IMPORTED, SAGEMAKER, Rig, gateway_error, rig

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
    assert circuit.allow() is False
    now[0] = 6
    assert circuit.allow() is True  # the probe
    assert circuit.allow() is False  # a second call while the probe runs
    assert circuit.failure() is True  # the probe failed: open again
    assert circuit.allow() is False
    now[0] = 12
    assert circuit.allow() is True
    assert circuit.success() is True
    assert circuit.allow() is True and not circuit.is_open


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
