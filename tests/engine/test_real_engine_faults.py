"""SIGTERM and engine death with the real engine: SageMaker's 30 s SIGKILL and its health checks
(issue 13). Each test ends the gateway it uses, so each runs last on its gateway."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from typing import Any

import httpx
import pytest

from serving_contract.env import SAGEMAKER_SIGKILL_AFTER_S
from tests.engine.real_engine import ADAPTERS, RealGateway

pytestmark = pytest.mark.real_engine

STREAMS = 8
STREAM_SECONDS = 6.0
"""How long each stream should run: in flight when every stream has its first chunk (threads start
within about a second), done well inside the 20 s drain (DRAIN_TIMEOUT_S).

A fixed token count cannot do both across runners: 1000 tokens took about 57 s on one CI machine
and outran the drain; 64 tokens finished before the last of 8 streams started on another
(both CI, 2026-11-25). So the test times the engine first (``tokens_for``)."""
CALIBRATION_TOKENS = 16


def tokens_for(gateway: RealGateway, seconds: float) -> int:
    """Tokens per stream that keep ``STREAMS`` concurrent streams busy for about ``seconds``.

    Times ``STREAMS`` concurrent requests of ``CALIBRATION_TOKENS`` tokens (one per adapter in turn,
    which also loads every adapter) and scales; clamped to 32..2000.
    """

    statuses: list[int] = []

    def one(index: int) -> None:
        body = {
            "model": ADAPTERS[index % len(ADAPTERS)],
            "messages": [{"role": "user", "content": f"calibrate {index}"}],
            "max_tokens": CALIBRATION_TOKENS,
            "ignore_eos": True,
        }
        statuses.append(httpx.post(gateway.url + "/invocations", json=body, timeout=60).status_code)

    one(0)  # the first request after other tests may pay for an adapter load: not part of the rate
    threads = [threading.Thread(target=one, args=(i,)) for i in range(STREAMS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Checked here, not in the threads: an assertion raised in a thread does not fail the test,
    # and a failed request would time nothing.
    assert statuses == [200] * (STREAMS + 1), statuses
    seconds_per_token = (time.monotonic() - started) / CALIBRATION_TOKENS
    return max(32, min(2000, round(seconds / seconds_per_token)))


def wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.ends_shared_gateway
def test_sigterm_finishes_every_stream_refuses_new_work_and_exits_0(shared_gateway: RealGateway) -> None:
    gateway = shared_gateway
    tokens = tokens_for(gateway, STREAM_SECONDS)
    first_chunk = [threading.Event() for _ in range(STREAMS)]
    all_connected = threading.Barrier(STREAMS)
    bodies: list[str] = [""] * STREAMS
    statuses: list[int] = [0] * STREAMS

    def stream(index: int) -> None:
        body = {
            "model": ADAPTERS[index % len(ADAPTERS)],
            "messages": [{"role": "user", "content": f"stream {index}"}],
            "max_tokens": tokens,
            "ignore_eos": True,  # vLLM's extension: exactly max_tokens, however random the weights
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        with httpx.Client(timeout=60) as client:  # built before the barrier: the streams start together
            all_connected.wait()
            with client.stream("POST", gateway.url + "/invocations", json=body) as response:
                statuses[index] = response.status_code
                for chunk in response.iter_text():
                    bodies[index] += chunk
                    first_chunk[index].set()

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(STREAMS)]
    for thread in threads:
        thread.start()
    wait_for(lambda: all(e.is_set() for e in first_chunk), 60, "every stream's first chunk")
    engine = gateway.descendants()
    finished_before_sigterm = [body.endswith("data: [DONE]\n\n") for body in bodies]
    gateway.proc.send_signal(signal.SIGTERM)
    assert not any(finished_before_sigterm), f"a stream of {tokens} tokens ended before SIGTERM"

    wait_for(lambda: httpx.get(gateway.url + "/ping").status_code == 503, 5, "/ping to turn 503")
    assert httpx.get(gateway.url + "/ping").json()["status"] == "draining"
    refused = httpx.post(gateway.url + "/invocations", json={"prompt": "late"}, timeout=10)
    assert refused.status_code == 503
    assert refused.json()["error"]["message"] == "instance is draining (SIGTERM); retry elsewhere"

    # SageMaker sends SIGKILL 30 s after SIGTERM: everything below must happen before that.
    assert gateway.proc.wait(timeout=SAGEMAKER_SIGKILL_AFTER_S) == 0
    for thread in threads:
        thread.join(timeout=5)
    assert statuses == [200] * STREAMS
    for body in bodies:
        assert body.endswith("data: [DONE]\n\n")
        usage = [json.loads(e[6:])["usage"] for e in body.split("\n\n") if e.startswith("data: {") and '"usage"' in e]
        assert usage[-1]["completion_tokens"] == tokens
    stderr = gateway.wait_for_log("drain: all requests finished")
    assert f"drain: SIGTERM, {STREAMS} request(s) in flight" in stderr
    assert not [pid for pid in engine if gateway.process_name(pid)]  # no engine process outlives it


@pytest.mark.ends_disposable_gateway
def test_engine_death_turns_ping_unhealthy_and_requests_fail_fast(disposable_gateway: RealGateway) -> None:
    gateway = disposable_gateway
    cores = [pid for pid in gateway.descendants() if "VLLM::EngineCore" in gateway.process_name(pid)]
    assert len(cores) == 1, [gateway.process_name(pid) for pid in gateway.descendants()]
    os.kill(cores[0], signal.SIGKILL)  # as a CUDA fault would: the engine core is gone

    timeline: list[tuple[str, int | str]] = []
    deadline = time.monotonic() + SAGEMAKER_SIGKILL_AFTER_S
    while gateway.proc.poll() is None and time.monotonic() < deadline:
        for kind, call in (
            (
                "invoke",
                lambda: httpx.post(gateway.url + "/invocations", json={"prompt": "x", "max_tokens": 2}, timeout=10),
            ),
            ("ping", lambda: httpx.get(gateway.url + "/ping", timeout=2)),
        ):
            try:
                timeline.append((kind, call().status_code))
            except httpx.TransportError:  # the gateway stopped listening: also not healthy
                timeline.append((kind, "refused"))
    assert gateway.proc.wait(timeout=SAGEMAKER_SIGKILL_AFTER_S) == 1
    invokes = [status for kind, status in timeline if kind == "invoke"]
    assert invokes and all(status in (502, 503, "refused") for status in invokes), timeline
    # Once a request has failed, /ping never says healthy again.
    first_failure = next(i for i, (kind, _) in enumerate(timeline) if kind == "invoke")
    assert all(status != 200 for kind, status in timeline[first_failure:] if kind == "ping"), timeline
    gateway.wait_for_log("vLLM exited unexpectedly")
