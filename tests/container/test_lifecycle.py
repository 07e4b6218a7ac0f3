"""Startup gating, warmup, SIGTERM drain, engine death and bad configuration, each with a
fresh ``serve`` process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from serving_contract.env import SAGEMAKER_SIGKILL_AFTER_S
from tests.container.conftest import ADAPTERS, REPO, Serve


def wait_until(predicate: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def engine_requests(serve: Serve) -> list[dict[str, Any]]:
    try:
        return list(serve.engine_state()["requests"])
    except httpx.HTTPError:
        return []


def test_ping_is_503_until_warmup_through_every_adapter(tmp_path: Path) -> None:
    serve = Serve(tmp_path, fake_env={"FAKE_GATE": "closed"})
    try:
        # The engine is healthy, but warmup requests are held by the fake's gate.
        wait_until(lambda: len(engine_requests(serve)) >= 4, timeout_s=60)
        response = serve.ping()
        assert response is not None and response.status_code == 503
        assert response.json()["status"] == "warming_up"
        refused = httpx.post(serve.url + "/invocations", json={"prompt": "x"}, timeout=5)
        assert refused.status_code == 503
        assert "not ready: warming_up" in refused.json()["error"]["message"]
        httpx.post(serve.engine_url + "/_control/open", timeout=5)
        serve.wait_ready()
        chats = [r for r in engine_requests(serve) if r["path"] == "/v1/chat/completions"]
        assert {r["model"] for r in chats} == {"base", *ADAPTERS}
        assert len(chats) == 4  # WARMUP_NUM_REQUESTS=4 covers all 4 names
    finally:
        serve.stop()
    assert serve.proc.returncode == 0


def test_warmup_sends_prefill_sized_prompts_through_every_adapter_before_ping(tmp_path: Path) -> None:
    # Issue 35: short chats leave vLLM's prefill-sized LoRA kernels to be compiled on the first
    # user's long prompt; WARMUP_PREFILL_TOKENS (default 2048) sends 2048 and 2047 token ids
    # (both Triton specialisations of the token count) through every name, one at a time.
    serve = Serve(tmp_path, fake_env={"FAKE_PREFILL_GATE": "closed"})
    names = ("base", *ADAPTERS)
    try:

        def prefill() -> list[dict[str, Any]]:
            return [r for r in engine_requests(serve) if r["path"] == "/v1/completions"]

        wait_until(lambda: len(prefill()) >= 1)
        response = serve.ping()
        assert response is not None and response.status_code == 503
        assert response.json()["status"] == "warming_up"
        # The chat warm-up is done and the first prefill prompt is held: no second one is sent.
        assert len([r for r in engine_requests(serve) if r["path"] == "/v1/chat/completions"]) == 4
        assert len(prefill()) == 1
        httpx.post(serve.engine_url + "/_control/open_prefill", timeout=5)
        serve.wait_ready()
        sizes = {name: [r["prompt_token_count"] for r in prefill() if r["model"] == name] for name in names}
        assert sizes == {name: [2048, 2047] for name in names}
        assert len(prefill()) == 8
    finally:
        serve.stop()


def test_warmup_prefill_tokens_0_sends_no_prefill_prompt(tmp_path: Path) -> None:
    serve = Serve(tmp_path, env={"WARMUP_PREFILL_TOKENS": "0"})
    try:
        serve.wait_ready()
        assert [r["path"] for r in engine_requests(serve)] == ["/v1/chat/completions"] * 4
    finally:
        serve.stop()


def test_sigterm_drains_in_flight_requests_then_exits_0(tmp_path: Path) -> None:
    # Every request is held by the engine until the test releases it, after SIGTERM: in flight
    # at the signal by construction, on a runner of any speed.
    serve = Serve(tmp_path, env={"REQUEST_TIMEOUT_S": "30"})
    results: list[httpx.Response] = []
    try:
        serve.wait_ready()
        before = len(engine_requests(serve))

        def call(body: dict[str, Any]) -> None:
            results.append(httpx.post(serve.url + "/invocations", json=body, timeout=30))

        bodies = [{"prompt": "hold"}] * 4 + [{"prompt": "hold", "stream": True}] * 4
        threads = [threading.Thread(target=call, args=(b,)) for b in bodies]
        for thread in threads:
            thread.start()
        wait_until(lambda: len(engine_requests(serve)) >= before + len(bodies))
        serve.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: (ping := serve.ping()) is not None and ping.status_code == 503)
        ping = serve.ping()
        assert ping is not None and ping.json()["status"] == "draining"
        refused = httpx.post(serve.url + "/invocations", json={"prompt": "x"}, timeout=10)
        assert refused.status_code == 503 and "draining" in refused.json()["error"]["message"]
        assert results == []  # nothing answered yet: every request is still held
        httpx.post(serve.engine_url + "/_control/release", timeout=10)
        for thread in threads:
            thread.join(timeout=30)
        assert serve.proc.wait(timeout=30) == 0
    finally:
        serve.stop()
    assert len(results) == len(bodies)
    assert [r.status_code for r in results] == [200] * len(bodies)
    streamed = [r.text for r in results if r.headers["content-type"].startswith("text/event")]
    assert len(streamed) == 4 and all(text.endswith("data: [DONE]\n\n") for text in streamed)
    assert "drain: SIGTERM, 8 request(s) in flight" in serve.log_line("drain:", "SIGTERM")
    engine_pid = int(serve.pid_file.read_text())
    assert not Path(f"/proc/{engine_pid}").exists() or "Z" in Path(f"/proc/{engine_pid}/stat").read_text().split()[2]


def test_a_request_held_past_the_drain_budget_is_cut_and_the_gateway_exits_inside_sigkill(tmp_path: Path) -> None:
    # SageMaker's own budget: the drain gives up at DRAIN_TIMEOUT_S, and vLLM's stop grace and
    # uvicorn's follow, so the gateway exits 0 before the SIGKILL 30 s after SIGTERM.
    serve = Serve(tmp_path, env={"DRAIN_TIMEOUT_S": "1", "REQUEST_TIMEOUT_S": "30"})
    try:
        serve.wait_ready()
        before = len(engine_requests(serve))

        def hold() -> None:
            with contextlib.suppress(httpx.HTTPError):  # cut when the gateway exits: the point of the test
                httpx.post(serve.url + "/invocations", json={"prompt": "hold"}, timeout=60)

        held = threading.Thread(target=hold, daemon=True)
        held.start()
        wait_until(lambda: len(engine_requests(serve)) > before)
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=SAGEMAKER_SIGKILL_AFTER_S) == 0
        assert "1 request(s) still in flight after 1.0 s, stopping anyway" in serve.log_line("drain:", "stopping")
    finally:
        serve.stop()


def test_engine_death_fails_ping_and_exits_nonzero(tmp_path: Path) -> None:
    serve = Serve(tmp_path)
    try:
        serve.wait_ready()
        os.kill(int(serve.pid_file.read_text()), signal.SIGKILL)
        assert serve.proc.wait(timeout=60) == 1  # liveness only: the exit code is the check
    finally:
        serve.stop()
    serve.log_line("vLLM exited unexpectedly with code -9")


def test_startup_timeout_exits_nonzero_with_message(tmp_path: Path) -> None:
    serve = Serve(tmp_path, env={"STARTUP_TIMEOUT_S": "1"}, fake_env={"FAKE_STARTUP_DELAY_S": "30"})
    try:
        assert serve.proc.wait(timeout=60) == 1  # liveness only: the exit code is the check
    finally:
        serve.stop()
    serve.log_line("startup failed: vLLM /health not 200 within STARTUP_TIMEOUT_S")


def run_serve(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    from tests.container.conftest import make_artifacts

    root = make_artifacts(tmp_path / "m")
    environ = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'container'}", **env}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "serving_app",
            "serve",
            "--model-dir",
            str(root / "base"),
            "--adapter-dir",
            str(root / "adapters"),
            "--engine-command",
            "false",
        ],
        capture_output=True,
        text=True,
        env=environ,
        timeout=20,
        check=False,
    )


def test_bad_environment_exits_at_once_with_one_line(tmp_path: Path) -> None:
    result = run_serve({"LORA_MAX_RANK": "24"}, tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "serve: configuration error: LORA_MAX_RANK = '24': must be one of 1, 8, 16, 32, 64, 128, 256, 320 or 512"
    )


def test_adapter_missing_from_image_exits_at_once(tmp_path: Path) -> None:
    result = run_serve({"LORA_ADAPTERS": "manga_domain_v3,not_baked"}, tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().endswith("not_baked: adapter folder is missing")
    assert json.dumps(result.stderr.count("\n")) == "1"
