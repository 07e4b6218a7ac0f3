"""Keeps ``Readiness.engine_healthy`` true to the engine: polls vLLM's ``/health``, watches the
process, and believes a failed request at once.

Three sources, fastest first:

* the process exits: :meth:`EngineMonitor.watch_process` sees it immediately;
* a request finds the engine down: connection refused (its API server is gone) or vLLM's
  ``EngineDeadError`` answer (the engine core died; :data:`ENGINE_DEAD_MESSAGE`). The request
  path calls :meth:`EngineMonitor.report_engine_down`, which marks the engine unhealthy at
  once. Any other 5xx calls :meth:`report_engine_error`, which only probes ``/health`` at once,
  because vLLM also answers 500 for one bad request while healthy. Measured on the real engine
  (tests/engine): when the engine core was killed, vLLM's API server answered 500 with the dead
  message and exited ~0.5 s later, while the 1 s poll below still reported healthy;
* the poll: ``/health`` every second; a busy engine may be slow to answer one probe, so
  :data:`HEALTH_FAILURE_THRESHOLD` failures in a row are needed to turn unhealthy.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from serving_app.engine.process import EngineProcess
from serving_app.engine.readiness import Phase, Readiness
from serving_app.upstream import UpstreamError, UpstreamPool

log = logging.getLogger("serving_app.engine")

HEALTH_POLL_INTERVAL_S: Final = 1.0
HEALTH_PROBE_TIMEOUT_S: Final = 2.0
HEALTH_FAILURE_THRESHOLD: Final = 3
"""Consecutive failed ``/health`` polls before ``/ping`` turns 503."""

ENGINE_DEAD_MESSAGE: Final = b"EngineCore encountered an issue"
"""The start of vLLM 0.26's ``EngineDeadError`` message (vllm/v1/engine/exceptions.py), which
its API server returns for every request once the engine core is gone (unrecoverable)."""


def reports_dead_engine(body: bytes) -> bool:
    """The engine's error answer says its engine core died."""
    return ENGINE_DEAD_MESSAGE in body


class EngineMonitor:
    """Background tasks and request-path signals that decide whether the engine is healthy."""

    def __init__(self, readiness: Readiness, pool: UpstreamPool, engine: EngineProcess | None) -> None:
        self.readiness = readiness
        self.pool = pool
        self.engine = engine
        self._probe_now = asyncio.Event()

    async def watch_process(self, on_exit: Callable[[int], None]) -> None:
        """Wait for the engine process to exit, mark it unhealthy and call ``on_exit(code)``."""
        assert self.engine is not None
        code = await self.engine.wait()
        self.readiness.record_health(False)
        on_exit(code)

    def report_engine_down(self, why: str) -> None:
        """A request found the engine down: unhealthy now, until a probe succeeds again."""
        if self.readiness.engine_healthy:
            log.warning("health: %s; /ping turns 503", why)
        self.readiness.record_health(False)
        self._probe_now.set()

    def report_engine_error(self) -> None:
        """The engine answered a request with 5xx: probe ``/health`` now instead of in a second."""
        self._probe_now.set()

    async def poll(self) -> None:
        """Probe ``/health`` every second (or at once when a request reported trouble)."""
        failures = 0
        while True:
            with_urgency = False
            try:
                await asyncio.wait_for(self._probe_now.wait(), timeout=HEALTH_POLL_INTERVAL_S)
                with_urgency = True
            except TimeoutError:
                pass
            self._probe_now.clear()
            if self.readiness.phase is Phase.STARTING:
                continue
            if self.engine is not None and not self.engine.alive:
                self.readiness.record_health(False)
                continue
            if await self._probe():
                failures = 0
                self.readiness.record_health(True)
                continue
            failures += 1
            # After a reported request failure one failed probe is enough: the request
            # already showed the engine in trouble.
            if (with_urgency or failures >= HEALTH_FAILURE_THRESHOLD) and self.readiness.engine_healthy:
                log.warning("health: vLLM /health failed (%d in a row); /ping turns 503", failures)
                self.readiness.record_health(False)

    async def _probe(self) -> bool:
        try:
            status, _ = await self.pool.get("/health", timeout_s=HEALTH_PROBE_TIMEOUT_S)
        except UpstreamError:
            return False
        return status == 200
