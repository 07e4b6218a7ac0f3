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

Real-engine tests run after every other test. Without the engine environment they skip with
the reason, unless ``REQUIRE_REAL_ENGINE=1`` (CI), where they fail instead.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.real_engine import RUNTIME_ADAPTER_ENV, RealGateway, engine_missing_reason, make_tiny_model

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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
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
