"""vLLM's own ports under the test shim (tests/engine/engine_shim/sitecustomize.py, CI failure of 2026-11-29).

Processes with the shim on ``PYTHONPATH``, alive at once, as concurrent engine starts are: each holds a
kernel-picked port of the ephemeral range and points ``VLLM_PORT`` below that range, and vLLM's own
``get_open_port()`` (what the engine core asks for the worker's rendezvous) answers that port. No engine starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from tests.engine.real_engine import SHIM, VLLM_PYTHON

pytestmark = pytest.mark.real_engine  # skipped with the reason without .venv-vllm (tests/engine/conftest.py)

PROBE = """
import json, os, sys
import sitecustomize
from vllm.utils.network_utils import get_open_port
held = sitecustomize._PORT_BAND[0].getsockname()[1]
print(json.dumps({"held": held, "vllm_port": int(os.environ["VLLM_PORT"]), "open_port": get_open_port()}), flush=True)
sys.stdin.read()  # alive, holding, until the test has seen every probe
"""
PROBE_TIMEOUT_S = 300
"""Far above a probe's start (vLLM's import: a few seconds on 2 cores), so only a hung one reaches it."""


def _ephemeral_range() -> tuple[int, int]:
    low, high = (int(field) for field in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return low, high


def test_live_engine_processes_search_from_distinct_ports_below_the_ephemeral_range() -> None:
    low, high = _ephemeral_range()
    width = high - low + 1
    if low - width < 1024:
        pytest.skip(f"ephemeral range {low}-{high} leaves no band below it: the shim leaves VLLM_PORT alone")
    with contextlib.ExitStack() as files:
        # Files, not pipes nobody reads: a chatty import cannot block a probe.
        errors = [files.enter_context(tempfile.TemporaryFile(mode="w+")) for _ in range(3)]
        probes = [
            subprocess.Popen(
                [str(VLLM_PYTHON), "-c", PROBE],
                env={**os.environ, "PYTHONPATH": str(SHIM)},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=error,
                text=True,
            )
            for error in errors
        ]
        seen = []

        # The bound on a probe that never prints: killed, its readline answers "" and the test fails saying so.
        def kill_all() -> None:
            for probe in probes:
                probe.kill()

        watchdog = threading.Timer(PROBE_TIMEOUT_S, kill_all)
        watchdog.start()
        try:
            for probe, error in zip(probes, errors, strict=True):
                assert probe.stdout is not None
                line = probe.stdout.readline()  # blocks until the probe printed (or exited: "")
                if not line:
                    probe.wait(timeout=60)
                    error.seek(0)
                    pytest.fail(f"probe exited with {probe.returncode}: {error.read()[-2000:]}")
                seen.append(json.loads(line))
        finally:
            watchdog.cancel()
            for probe in probes:
                if probe.poll() is None:
                    probe.kill()
                probe.communicate(timeout=60)
    for ports in seen:
        assert low <= ports["held"] <= high
        assert ports["vllm_port"] == ports["held"] - width < low
        assert ports["open_port"] == ports["vllm_port"]
    assert len({ports["vllm_port"] for ports in seen}) == len(seen)


def test_a_range_with_no_room_below_it_leaves_vllm_to_pick_its_ports(tmp_path: Path) -> None:
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("1024\t60999\n")
    script = (
        "import sitecustomize as shim; shim.EPHEMERAL_RANGE = __import__('sys').argv[1]; print(shim._vllm_port_band())"
    )
    done = subprocess.run(
        [str(VLLM_PYTHON), "-c", script, str(ranges)],
        env={**os.environ, "PYTHONPATH": str(SHIM)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "None"
