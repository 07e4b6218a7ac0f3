"""Readiness state behind ``GET /ping``.

SageMaker gives ``/ping`` 2 s per call (docs/sources.md, "Container contract"), so ``/ping`` only reads this
object; :class:`serving_app.engine.monitor.EngineMonitor` keeps ``engine_healthy`` fresh.
"""

from __future__ import annotations

import enum
import time
from typing import Any


class Phase(enum.StrEnum):
    """Lifecycle phases, in order."""

    STARTING = "starting"  # engine loading weights, /health not yet 200
    WARMING_UP = "warming_up"  # engine up, warmup requests in flight
    READY = "ready"
    DRAINING = "draining"  # SIGTERM received
    FAILED = "failed"  # startup failed or engine died; the process is exiting


class Readiness:
    """Mutable lifecycle state; only touched from the event loop thread."""

    def __init__(self) -> None:
        self.phase = Phase.STARTING
        self.engine_healthy = False
        self.detail = "engine starting"
        self.warmed_up_adapters: list[str] = []
        self._started = time.monotonic()
        self._last_health_ok: float | None = None

    @property
    def ready(self) -> bool:
        """True when ``/ping`` should answer 200."""
        return self.phase is Phase.READY and self.engine_healthy

    @property
    def draining(self) -> bool:
        return self.phase in (Phase.DRAINING, Phase.FAILED)

    def set_phase(self, phase: Phase, detail: str) -> None:
        # Draining/failed are terminal: a late warmup completion must not undo them.
        if self.draining and phase not in (Phase.DRAINING, Phase.FAILED):
            return
        self.phase = phase
        self.detail = detail

    def record_health(self, ok: bool) -> None:
        self.engine_healthy = ok
        if ok:
            self._last_health_ok = time.monotonic()

    def body(self) -> dict[str, Any]:
        """JSON body of ``/ping``."""
        now = time.monotonic()
        return {
            "status": self.phase.value,
            "ready": self.ready,
            "engine_healthy": self.engine_healthy,
            "detail": self.detail,
            "warmed_up_adapters": self.warmed_up_adapters,
            "uptime_s": round(now - self._started, 3),
            "last_engine_health_ok_s_ago": None
            if self._last_health_ok is None
            else round(now - self._last_health_ok, 3),
        }
