"""Fixtures: tiny fake model artifacts and the real ``serve`` process against fake_vllm."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from local_gateway import collect_lines, explain_exit, reserve_ports, serve_command, wait_for_line
from tests.container.vllm_parser import VLLM_PYTHON, contract_argvs, start_parser

REPO = Path(__file__).resolve().parents[2]
FAKE_VLLM = Path(__file__).with_name("fake_vllm.py")
ADAPTERS = ("manga_domain_v3", "general_support_v2", "jp_style_v1")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start vLLM's parser subprocess once collection is done (~10 s of imports) so it
    overlaps the rest of the suite; only when a selected test needs it."""
    if VLLM_PYTHON.exists() and any(item.get_closest_marker("vllm_contract") for item in items):
        start_parser(contract_argvs())


def write_safetensors(path: Path, tensors: dict[str, Any] | None = None) -> None:
    """A valid, tiny safetensors file: u64 header length, JSON header, data bytes."""
    header = tensors or {"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}}
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\x00" * 4)


def make_artifacts(root: Path, ranks: dict[str, int] | None = None) -> Path:
    """Lay out ``<root>/base`` and ``<root>/adapters/<name>`` like the build context."""
    base = root / "base"
    base.mkdir(parents=True)
    (base / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (base / "tokenizer_config.json").write_text("{}")
    (base / "tokenizer.json").write_text("{}")
    write_safetensors(base / "model.safetensors")
    for name, rank in (dict.fromkeys(ADAPTERS, 16) if ranks is None else ranks).items():
        adapter = root / "adapters" / name
        adapter.mkdir(parents=True)
        (adapter / "adapter_config.json").write_text(json.dumps({"r": rank, "lora_alpha": 32}))
        write_safetensors(adapter / "adapter_model.safetensors")
    return root


class Serve:
    """The real entrypoint (``python -m serving_app serve``) as a child process."""

    def __init__(
        self,
        tmp: Path,
        env: dict[str, str] | None = None,
        fake_env: dict[str, str] | None = None,
        command: tuple[str, ...] = ("serve",),
    ) -> None:
        self.tmp = tmp
        artifacts = make_artifacts(tmp / "model")
        # Held until stop(): the gateway and the fake engine bind them (local_gateway.PortReservation).
        self.reservations = reserve_ports(2)
        self.port, self.engine_port = (r.port for r in self.reservations)
        self.pid_file = tmp / "engine.pid"
        environ = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "container")]),
            "PYTHONUNBUFFERED": "1",
            "LORA_ADAPTERS": ",".join(ADAPTERS),
            "WARMUP_NUM_REQUESTS": "4",
            "METRICS_INTERVAL_S": "0.3",
            "ENDPOINT_NAME": "test-endpoint",
            "VARIANT_NAME": "AllTraffic",
            "DRAIN_TIMEOUT_S": "10",
            # Far above any request the fake answers: a held stream is released by the test, not cut by
            # the relay's timer (1 s cut held streams on a loaded runner, issue 32). The tests about the
            # timeout start their own gateway with REQUEST_TIMEOUT_S=1.
            "REQUEST_TIMEOUT_S": "30",
            "FAKE_PID_FILE": str(self.pid_file),
            "ADAPTER_SRC_ROOT": tempfile.gettempdir(),  # tests' adapter folders live in tmp_path
            **(fake_env or {}),
            **(env or {}),
        }
        argv = serve_command(
            sys.executable,
            port=self.port,
            engine_port=self.engine_port,
            model_root=artifacts,
            engine_command=f"{sys.executable} {FAKE_VLLM}",
            command=command,
        )
        self.proc = subprocess.Popen(argv, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stdout_lines, self.stderr_lines = collect_lines(self.proc)
        self.url = f"http://127.0.0.1:{self.port}"
        self.engine_url = f"http://127.0.0.1:{self.engine_port}"

    def ping(self) -> httpx.Response | None:
        try:
            return httpx.get(self.url + "/ping", timeout=2.0)
        except httpx.HTTPError:
            return None

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            response = self.ping()
            if response is not None and response.status_code == 200:
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited with {self.proc.returncode}; {explain_exit(self.stderr_lines)}")
            time.sleep(0.05)
        raise AssertionError(f"not ready in {timeout_s} s; {explain_exit(self.stderr_lines)}")

    def engine_state(self) -> dict[str, Any]:
        return httpx.get(self.engine_url + "/_control/state", timeout=2.0).json()

    def emf_lines(self) -> list[dict[str, Any]]:
        out = []
        for line in list(self.stdout_lines):
            if line.startswith("{") and '"_aws"' in line:
                out.append(json.loads(line))
        return out

    def log_line(self, *fragments: str, timeout_s: float = 5.0) -> str:
        """The first stderr line holding every fragment, waited for (``wait_for_line``)."""
        return wait_for_line(self.stderr_lines, *fragments, timeout_s=timeout_s)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.pid_file.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(self.pid_file.read_text()), signal.SIGKILL)
        for reservation in self.reservations:
            reservation.release()


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """One ready gateway + fake engine shared by a test module."""
    server = Serve(tmp_path_factory.mktemp("serve"))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()
