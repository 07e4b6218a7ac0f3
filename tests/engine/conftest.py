"""Session plan of the real-engine suite (issue 13): which tests share which gateway.

The engine takes ~45 s to start on 2 cores, so the suite starts two gateways once, as soon as
collection is done, and they boot while the rest of the suite (synth, unit tests) runs:

* ``shared_gateway``: every test that leaves the engine as it found it, then the SIGTERM drain
  test, which ends it (marked ``ends_shared_gateway``: after every other shared-gateway test);
* ``disposable_gateway``: tests that change or break the engine: it runs in SageMaker's
  inference-components mode (``RUNTIME_ADAPTER_ENV``: no baked adapter, ``POST /adapters``
  on), for the runtime-adapter tests, then the engine-death test (``ends_disposable_gateway``).
  Its tests run after the shared gateway's drain test, which needs all eight of its streams
  still in flight at SIGTERM: when the runtime-adapter tests ran just before it, it failed in
  two of three full-suite runs on the 2-core machine (one stream finished before the last one
  started); with them after it, two of two full-suite runs passed.

The start-up smoke (``startup_smoke_run``: ``benchmarks/gpu_startup.py`` making a compile cache
on the real engine, then starting from it; about two minutes of one core) also starts at
collection, for the same reason: it runs beside the synth and unit tests, which leave a core
idle once the two gateways are up, instead of adding its minutes at the end of CI.

Real-engine tests run after every other test. Without the engine environment they skip with
the reason, unless ``REQUIRE_REAL_ENGINE=1`` (CI), where they fail instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from tests.engine.real_engine import (
    REPO,
    RUNTIME_ADAPTER_ENV,
    SHIM,
    VLLM_PYTHON,
    RealGateway,
    engine_missing_reason,
    make_tiny_model,
)

_STATE: dict[str, object] = {}
_ORDER = {"ends_shared_gateway": 1, "ends_disposable_gateway": 3}
_USES_DISPOSABLE = 2
"""Rank of the other disposable-gateway tests: after the shared gateway's drain (module docstring)."""


def _order(item: pytest.Item) -> int:
    rank = max((rank for name, rank in _ORDER.items() if item.get_closest_marker(name)), default=0)
    if rank == 0 and "disposable_gateway" in getattr(item, "fixturenames", ()):
        return _USES_DISPOSABLE
    return rank


@pytest.hookimpl(trylast=True)  # after -k/-m deselection: start only what selected tests use
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    real = [item for item in items if item.get_closest_marker("real_engine")]
    if not real:
        return
    others = [item for item in items if not item.get_closest_marker("real_engine")]
    items[:] = others + sorted(real, key=_order)  # stable: file order within each rank
    reason = engine_missing_reason()
    if reason is not None:
        if not os.environ.get("REQUIRE_REAL_ENGINE"):
            for item in real:
                item.add_marker(pytest.mark.skip(reason=reason))
        _STATE["missing"] = reason
        return
    if any("startup_smoke_run" in getattr(i, "fixturenames", ()) for i in real):
        _start_startup_smoke()
    wanted = [
        key for key in ("shared", "disposable") if any(f"{key}_gateway" in getattr(i, "fixturenames", ()) for i in real)
    ]
    if not wanted:
        return
    root = Path(tempfile.mkdtemp(prefix="real-engine-"))
    _STATE["root"] = root
    model = make_tiny_model(root / "model")
    for key in wanted:
        _STATE[key] = RealGateway(model, RUNTIME_ADAPTER_ENV if key == "disposable" else None)


STARTUP_SMOKE_LEVERS = "gateway-make,gateway-made-hit"
STARTUP_SMOKE_TIMEOUT_S = 900
_STARTUP_SMOKE: list[tuple[subprocess.Popen[bytes], Path, IO[str]]] = []


def _start_startup_smoke() -> None:
    out = Path(tempfile.mkdtemp(prefix="startup-smoke-"))
    log = (out / "run.log").open("w")
    command = [
        str(VLLM_PYTHON),
        str(REPO / "benchmarks" / "gpu_startup.py"),
        "startup",
        "--smoke",
        "--levers",
        STARTUP_SMOKE_LEVERS,
        "--port",
        "0",  # ports the kernel picks, reserved while the servers run (local_gateway.PortReservation)
        "--out-dir",
        str(out / "results"),
    ]
    process = subprocess.Popen(
        command, env={**os.environ, "PYTHONPATH": str(SHIM)}, stdout=log, stderr=subprocess.STDOUT
    )
    _STARTUP_SMOKE.append((process, out, log))


@dataclass(frozen=True)
class SmokeRun:
    """A finished harness run: its exit status, output folder and log text."""

    returncode: int
    out_dir: Path
    log: str


@pytest.fixture(scope="session")
def startup_smoke_run() -> Iterator[SmokeRun]:
    """The start-up smoke started at collection, waited for (STARTUP_SMOKE_LEVERS)."""
    if "missing" in _STATE:
        pytest.fail(f"REQUIRE_REAL_ENGINE is set but {_STATE['missing']}")
    assert _STARTUP_SMOKE, "the start-up smoke was not started at collection"
    process, out, log = _STARTUP_SMOKE[0]
    code = process.wait(timeout=STARTUP_SMOKE_TIMEOUT_S)
    log.close()
    yield SmokeRun(returncode=code, out_dir=out / "results", log=(out / "run.log").read_text())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    while _STARTUP_SMOKE:
        process, out, log = _STARTUP_SMOKE.pop()
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
        shutil.rmtree(out, ignore_errors=True)
    for key in ("shared", "disposable"):
        gateway = _STATE.pop(key, None)
        if isinstance(gateway, RealGateway):
            gateway.stop()
    root = _STATE.pop("root", None)
    if isinstance(root, Path):
        shutil.rmtree(root, ignore_errors=True)


def _gateway(key: str) -> RealGateway:
    if "missing" in _STATE:
        pytest.fail(f"REQUIRE_REAL_ENGINE is set but {_STATE['missing']}")
    gateway = _STATE.get(key)
    assert isinstance(gateway, RealGateway), f"no {key} gateway was started at collection"
    gateway.wait_ready()
    return gateway


@pytest.fixture(scope="session")
def shared_gateway() -> Iterator[RealGateway]:
    """The real entrypoint in front of the real engine, ready; shared by the whole session."""
    yield _gateway("shared")


@pytest.fixture(scope="session")
def disposable_gateway() -> Iterator[RealGateway]:
    """A second one, in inference-components mode (runtime adapters), for tests that change or
    kill the engine; the tiny model's adapters are in ``model_root / "adapters"``."""
    yield _gateway("disposable")
