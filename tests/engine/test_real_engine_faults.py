"""SIGTERM and engine death with the real engine: SageMaker's 30 s SIGKILL and its health checks
(issue 13). Each test ends the gateway it uses, so each runs last on its gateway."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from typing import Any

import httpx
import pytest

from serving_contract.env import SAGEMAKER_SIGKILL_AFTER_S
from tests.engine.real_engine import ADAPTERS, ENGINE_ENV, RealGateway

pytestmark = pytest.mark.real_engine

STREAMS = 8
STREAM_TOKENS = 500
"""Tokens per stream. Too many and a stream outlives the relay's REQUEST_TIMEOUT_S (59 s, SageMaker's most): 1000
tokens of 8 streams took about 57 s on the slowest CI machine seen (2026-11-25), so 500 take ~29 s there, plus
the pace's 10 s (:data:`PACE_S`).
The drain itself is out of the race: the shared gateway's DRAIN_TIMEOUT_S is 240 s (``ENGINE_ENV``).
The first chunks are kept close together: every adapter is loaded and every connection open before
the streams start behind a barrier."""
PACE_S = 0.02
"""Seconds the engine core sleeps after each step while the streams run (``RealGateway.pace_engine``): every stream
lasts at least STREAM_TOKENS x PACE_S = 10 s after its first token, so none can end between the first chunk the
client sees and the SIGTERM it then sends, a few milliseconds later, on any runner.

Issue 53, finding 16: unpaced, the test failed 2 of 11 runs on an idle 2-core machine with the drain's count 0
while all 8 streams ended complete. The gateway's count was right (tests/container/test_lifecycle.py holds four
streams after their first chunk and the drain counts them): a stream is in flight from its request to its last
byte. The test raced: with two cores, vLLM's API server fell behind its engine core and sent each stream in a few
merged chunks (a slow reader's deltas are merged), so the first chunk a client saw came with the rest of the stream
behind it, and every stream had ended before the signal's handler ran. (Before 282d4a1 the test waited for every
stream's first chunk, which let them end on a busy runner too.)"""
ENGINE_MAX_MODEL_LEN = int(ENGINE_ENV["ENGINE_MAX_MODEL_LEN"])
SHUTDOWN_BUDGET_S = float(ENGINE_ENV["SHUTDOWN_BUDGET_S"])


def wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.ends_shared_gateway
def test_sigterm_finishes_every_stream_refuses_new_work_and_exits_0(shared_gateway: RealGateway) -> None:
    gateway = shared_gateway
    assert STREAM_TOKENS < ENGINE_MAX_MODEL_LEN - 64  # the prompt and the answer fit the context
    first_chunk = [threading.Event() for _ in range(STREAMS)]
    all_connected = threading.Barrier(STREAMS)
    bodies: list[str] = [""] * STREAMS
    statuses: list[int] = [0] * STREAMS

    for adapter in ADAPTERS:  # no stream pays for an adapter load after the barrier
        warm = {"model": adapter, "messages": [{"role": "user", "content": "warm"}], "max_tokens": 1}
        assert httpx.post(gateway.url + "/invocations", json=warm, timeout=120).status_code == 200
    gateway.pace_engine(PACE_S)  # the last test on this gateway: it ends with it

    def stream(index: int) -> None:
        body = {
            "model": ADAPTERS[index % len(ADAPTERS)],
            "messages": [{"role": "user", "content": f"stream {index}"}],
            "max_tokens": STREAM_TOKENS,
            "ignore_eos": True,  # vLLM's extension: exactly max_tokens, however random the weights
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        # No read timeout: the gateway's REQUEST_TIMEOUT_S and the drain bound a stream, not the client.
        with httpx.Client(timeout=httpx.Timeout(60, read=None)) as client:
            client.get(gateway.url + "/ping")  # the connection is open before the barrier
            all_connected.wait()
            with client.stream("POST", gateway.url + "/invocations", json=body) as response:
                statuses[index] = response.status_code
                for chunk in response.iter_text():
                    bodies[index] += chunk
                    first_chunk[index].set()

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(STREAMS)]
    for thread in threads:
        thread.start()
    # SIGTERM at the first chunk of any stream: the pace keeps every stream going for 10 s after it (PACE_S),
    # however far apart a busy runner starts them. A stream the gateway took before the signal is drained to its
    # end; one that reaches it later is refused (both are asserted below, and the drain's own count must match).
    wait_for(lambda: any(e.is_set() for e in first_chunk), 120, "a stream's first chunk")
    engine = gateway.descendants()
    gateway.proc.send_signal(signal.SIGTERM)

    wait_for(lambda: httpx.get(gateway.url + "/ping").status_code == 503, 30, "/ping to turn 503")
    assert httpx.get(gateway.url + "/ping").json()["status"] == "draining"
    refused = httpx.post(gateway.url + "/invocations", json={"prompt": "late"}, timeout=30)
    assert refused.status_code == 503
    assert refused.json()["error"]["message"] == "instance is draining (SIGTERM); retry elsewhere"

    # Every stream ends inside the drain budget and the gateway exits 0 inside its shutdown budget.
    assert gateway.proc.wait(timeout=SHUTDOWN_BUDGET_S) == 0
    for thread in threads:
        thread.join(timeout=30)
    drained_streams = [index for index, status in enumerate(statuses) if status == 200]
    assert drained_streams and all(status in (200, 503) for status in statuses), statuses
    for index in set(range(STREAMS)) - set(drained_streams):  # reached the gateway after the signal
        assert "instance is draining (SIGTERM)" in bodies[index], bodies[index]
    for body in [bodies[index] for index in drained_streams]:
        assert body.endswith("data: [DONE]\n\n")
        assert "REQUEST_TIMEOUT_S" not in body, f"a stream of {STREAM_TOKENS} tokens outlived the request budget"
        usage = [json.loads(e[6:])["usage"] for e in body.split("\n\n") if e.startswith("data: {") and '"usage"' in e]
        assert usage[-1]["completion_tokens"] == STREAM_TOKENS
    stderr = gateway.wait_for_log("drain: all requests finished")
    # The drain counted exactly the streams it then finished. The line itself, not a truncated log, if not.
    drained = re.findall(r"drain: SIGTERM, (\d+) request\(s\) in flight", stderr)
    lines = [line for line in stderr.splitlines() if "drain:" in line]
    assert drained == [str(len(drained_streams))], lines
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
