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
  started); with them after it, two of two full-suite runs passed;
* ``client_gateway``: the client library's end-to-end test (issue 48, test_real_client.py), which
  kills its engine to see the fallback: a gateway of its own, with the shared one's baked adapters,
  started only when that test is selected. Its tests rank with the shared gateway's (file order), so
  it has exited before the drain test's streams start;
* ``offload_gateway``: the shared one's environment with a 0.25 GiB KV offload to host memory
  (issue 56, test_kv_offload.py), started only when that test is selected. vLLM 0.26's CPU build
  refuses to offload once it has built the connector, so its engine exits during start-up (its model
  load and compile warm-up: ~1 minute of one core on a quiet machine) and it is gone long before
  the drain test.

The GPU harnesses' CPU smoke runs (:data:`SMOKES`: ``benchmarks/gpu_startup.py`` making a compile
cache on the real engine, then starting from it; ``gpu_serving.py``'s side-by-side setup;
``gpu_capacity.py``'s capacity run; one to two minutes of one core each) also start at collection,
one after another in a thread, for the same reason: they run beside the synth and unit tests, which
leave a core idle once the two gateways are up, instead of adding their minutes at the end of CI
(issue 44: the two run in the foreground took 88 and 92 s of a 1,015 s suite). Their tests are the
first real-engine tests (file order), so every run has finished before the SIGTERM drain test.

Real-engine tests run after every other test. Without the engine environment they skip with
the reason, unless ``REQUIRE_REAL_ENGINE=1`` (CI), where they fail instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.engine.real_engine import (
    OFFLOAD_ENV,
    REPO,
    RUNTIME_ADAPTER_ENV,
    SHIM,
    VLLM_PYTHON,
    RealGateway,
    engine_missing_reason,
    make_tiny_model,
)

_STATE: dict[str, object] = {}
GATEWAY_ENV: dict[str, Mapping[str, str] | None] = {
    # fixture key -> what its gateway sets over ENGINE_ENV (module docstring)
    "shared": None,
    "disposable": RUNTIME_ADAPTER_ENV,
    "client": None,
    "offload": OFFLOAD_ENV,
}
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
    smokes = [name for name in SMOKES if any(name in getattr(i, "fixturenames", ()) for i in real)]
    if smokes:
        _start_smokes(smokes)
    wanted = [key for key in GATEWAY_ENV if any(f"{key}_gateway" in getattr(i, "fixturenames", ()) for i in real)]
    if not wanted:
        return
    root = Path(tempfile.mkdtemp(prefix="real-engine-"))
    _STATE["root"] = root
    model = make_tiny_model(root / "model")
    for key in wanted:
        _STATE[key] = RealGateway(model, GATEWAY_ENV[key])


@dataclass(frozen=True)
class SmokeRun:
    """A finished harness run: its exit status, output folder and log text (stdout and stderr)."""

    returncode: int
    out_dir: Path
    log: str


STARTUP_SMOKE_LEVERS = "gateway-make,gateway-made-hit"
SMOKES: dict[str, tuple[str, ...]] = {
    # fixture -> the harness and its arguments (then --out-dir); ports the kernel picks where the harness
    # takes --port 0 (local_gateway.PortReservation). In this order, one at a time.
    "startup_smoke_run": ("gpu_startup.py", "startup", "--smoke", "--levers", STARTUP_SMOKE_LEVERS, "--port", "0"),
    "serving_smoke_run": ("gpu_serving.py", "--smoke", "--setups", "gateway-ab", "--port", "0"),
    "capacity_smoke_run": ("gpu_capacity.py", "capacity", "--smoke", "--port", "0"),
}
SMOKE_TIMEOUT_S = 900
"""Each harness run's liveness bound (about two minutes each on a quiet 2-core machine)."""
_SMOKE_DONE: dict[str, threading.Event] = {}
_SMOKE_RESULTS: dict[str, SmokeRun] = {}
_SMOKE_RUNNING: list[subprocess.Popen[bytes]] = []
_SMOKE_DIRS: list[Path] = []
_SMOKE_STOP = threading.Event()


def _start_smokes(names: list[str]) -> None:
    """Run the harnesses ``names`` one after another in a thread (module docstring)."""
    for name in names:
        _SMOKE_DONE[name] = threading.Event()
    threading.Thread(target=_run_smokes, args=(names,), daemon=True).start()


def _run_smokes(names: list[str]) -> None:
    for name in names:
        out = Path(tempfile.mkdtemp(prefix=f"{name}-"))
        _SMOKE_DIRS.append(out)
        script, *args = SMOKES[name]
        command = [str(VLLM_PYTHON), str(REPO / "benchmarks" / script), *args, "--out-dir", str(out / "results")]
        with (out / "run.log").open("w") as log:
            if _SMOKE_STOP.is_set():
                return
            process = subprocess.Popen(
                command, env={**os.environ, "PYTHONPATH": str(SHIM)}, stdout=log, stderr=subprocess.STDOUT
            )
            _SMOKE_RUNNING[:] = [process]
            try:
                code = process.wait(timeout=SMOKE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                code = process.wait()
        _SMOKE_RESULTS[name] = SmokeRun(returncode=code, out_dir=out / "results", log=(out / "run.log").read_text())
        _SMOKE_DONE[name].set()


def _smoke(name: str) -> SmokeRun:
    if "missing" in _STATE:
        pytest.fail(f"REQUIRE_REAL_ENGINE is set but {_STATE['missing']}")
    done = _SMOKE_DONE.get(name)
    assert done is not None, f"{name} was not started at collection"
    bound_s = len(SMOKES) * SMOKE_TIMEOUT_S + 60  # the runs before it, then its own
    assert done.wait(timeout=bound_s), f"{name}: no result in {bound_s} s"
    return _SMOKE_RESULTS[name]


@pytest.fixture(scope="session")
def startup_smoke_run() -> SmokeRun:
    """``benchmarks/gpu_startup.py startup --smoke`` (STARTUP_SMOKE_LEVERS), run from collection on."""
    return _smoke("startup_smoke_run")


@pytest.fixture(scope="session")
def serving_smoke_run() -> SmokeRun:
    """``benchmarks/gpu_serving.py --smoke --setups gateway-ab``, run from collection on."""
    return _smoke("serving_smoke_run")


@pytest.fixture(scope="session")
def capacity_smoke_run() -> SmokeRun:
    """``benchmarks/gpu_capacity.py capacity --smoke``, run from collection on."""
    return _smoke("capacity_smoke_run")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _SMOKE_STOP.set()
    for process in _SMOKE_RUNNING:  # an aborted session: SIGTERM lets the harness stop its servers
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    for out in _SMOKE_DIRS:
        shutil.rmtree(out, ignore_errors=True)
    for key in GATEWAY_ENV:
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


@pytest.fixture(scope="session")
def client_gateway() -> Iterator[RealGateway]:
    """A third one, like the shared gateway, for the client library's test that kills its engine."""
    yield _gateway("client")


@pytest.fixture(scope="session")
def offload_gateway() -> RealGateway:
    """One with a small KV offload to host memory (``OFFLOAD_ENV``), as started: it never gets ready on the CPU
    build, so the test waits for its exit, not for ``/ping``."""
    if "missing" in _STATE:
        pytest.fail(f"REQUIRE_REAL_ENGINE is set but {_STATE['missing']}")
    gateway = _STATE.get("offload")
    assert isinstance(gateway, RealGateway), "no offload gateway was started at collection"
    return gateway
