"""The serving process's state and lifecycle: what exists, in what order it starts and stops.

:class:`Gateway` composes the parts (each in its own module) and owns the background tasks:

* ``engine/``: the vLLM child process, readiness, the health monitor;
* ``lifecycle/``: start-up (wait for ``/health``, warm every adapter) and the SIGTERM drain;
* ``metrics/``: EMF lines, the ``/metrics`` scraper, one line per request, ``GET /metrics``;
* ``sessions/``: SageMaker stateful sessions on ``/invocations``;
* ``context_budget/``: trims a conversation vLLM refuses for the context length, contains
  per-request out-of-memory errors (retry once, compressed; 503 with ``Retry-After``);
* ``sagemaker/``: ``/ping`` and ``/invocations``;
* ``adapters/``: the model names requests may use; ``POST /adapters`` and
  ``DELETE /adapters/{name}`` when SageMaker loads adapters at runtime.

The HTTP app around it is ``serving_app.app.create_app``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Coroutine
from typing import Any, Final
from urllib.parse import urlsplit

from serving_app.adapters.registry import ModelRegistry
from serving_app.adapters.serving import AdapterService
from serving_app.context_budget.serving import ContextBudget
from serving_app.engine.monitor import EngineMonitor
from serving_app.engine.process import EngineProcess
from serving_app.engine.readiness import Phase, Readiness
from serving_app.lifecycle.drain import InflightTracker
from serving_app.lifecycle.warmup import StartupError, run_warmup, wait_for_engine
from serving_app.metrics.emf import EmfWriter
from serving_app.metrics.exposition import GatewayCollector, MetricsExposition
from serving_app.metrics.requests import RequestMetrics
from serving_app.metrics.scraper import scrape_loop
from serving_app.sagemaker.limits import RequestLimits
from serving_app.sagemaker.serving import InvocationService
from serving_app.sessions.manager import SessionStore
from serving_app.sessions.serving import SessionService
from serving_app.settings import Settings
from serving_app.upstream import UpstreamPool
from serving_app.versions import ModelVersions
from serving_contract import env
from serving_contract.metrics import Dimension

log = logging.getLogger("serving_app.gateway")

ENGINE_STOP_GRACE_S: Final = float(env.ENGINE_STOP_GRACE_S)
"""SIGTERM -> SIGKILL grace for vLLM after the gateway drained (budget in ``serving_contract.env``)."""


class Gateway:
    """State and lifecycle of the serving process.

    Attributes:
        readiness: what ``/ping`` answers.
        tracker: requests in flight (the drain waits for them).
        models: names requests may use (base model + adapters).
        monitor: engine health (poll, process watch, request-path reports).
        invocations: the ``/invocations`` service.
        adapters: the ``/adapters`` service (runtime LoRA adapters).
        pool: the HTTP client to vLLM on loopback.
        sessions: live SageMaker stateful sessions.
        exposition: what ``GET /metrics`` answers (engine + gateway Prometheus text).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        upstream_url: str,
        engine: EngineProcess | None,
        request_exit: Callable[[int], None],
        emf: EmfWriter | None = None,
        on_ready: Callable[[float], None] | None = None,
    ) -> None:
        self.settings = settings
        self.on_ready = on_ready
        self.engine = engine
        self.request_exit = request_exit
        self.readiness = Readiness()
        self.tracker = InflightTracker()
        self.emf = emf or EmfWriter(
            settings.metrics_namespace,
            {Dimension.ENDPOINT: settings.endpoint_name, Dimension.VARIANT: settings.variant_name},
        )
        url = urlsplit(upstream_url)
        self.pool = UpstreamPool(url.hostname or "127.0.0.1", url.port or 80)
        self.models = ModelRegistry(settings.served_model_name, settings.lora_adapters)
        self.monitor = EngineMonitor(self.readiness, self.pool, engine)
        self.sessions = SessionStore(max_live=settings.sessions_max, ttl_s=settings.session_ttl_s)
        self.exposition = MetricsExposition(self.pool, GatewayCollector(self.sessions.__len__, self._inflight))
        self.invocations = InvocationService(
            models=self.models,
            readiness=self.readiness,
            pool=self.pool,
            monitor=self.monitor,
            metrics=RequestMetrics(
                self.emf, self.exposition.histograms, warm_min_cached_fraction=settings.warm_min_cached_fraction
            ),
            sessions=SessionService(self.sessions),
            request_timeout_s=settings.request_timeout_s,
            limits=RequestLimits.from_settings(settings),
            budget=ContextBudget(settings, pool=self.pool, emf=self.emf, base_model=settings.served_model_name),
            versions=ModelVersions.from_env(os.environ, settings.served_model_name),
        )
        self.adapters = AdapterService(
            settings=settings,
            models=self.models,
            readiness=self.readiness,
            pool=self.pool,
            monitor=self.monitor,
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._drain_task: asyncio.Task[None] | None = None
        self._started = time.monotonic()

    # ------------------------------------------------------------------ start and stop
    async def startup(self) -> None:
        """Spawn vLLM and the background tasks (lifespan start)."""
        if self.engine is not None:
            await self.engine.start()
            self._spawn(self.monitor.watch_process(self._engine_exited))
        self._spawn(self._startup_sequence())
        self._spawn(self.monitor.poll())
        self._spawn(
            scrape_loop(self.pool, self.emf, self.settings.metrics_interval_s, self._engine_up),
        )

    async def shutdown(self) -> None:
        """Cancel background tasks, stop vLLM if still running, close the pool (lifespan end)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        if self.engine is not None:
            await self.engine.stop(ENGINE_STOP_GRACE_S)
        await self.pool.aclose()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self._tasks.append(asyncio.create_task(coro))

    def _inflight(self) -> int:
        return self.tracker.count

    def _engine_up(self) -> bool:
        return self.readiness.phase is not Phase.STARTING and (self.engine is None or self.engine.alive)

    async def _startup_sequence(self) -> None:
        deadline = self._started + self.settings.startup_timeout_s
        try:
            waited = await wait_for_engine(
                self.pool,
                deadline,
                lambda: self.engine is None or self.engine.alive or self.readiness.draining,
            )
            log.info("startup: engine healthy after %.1f s", waited)
            self.readiness.record_health(True)
            self.readiness.set_phase(Phase.WARMING_UP, "warming up")
            await run_warmup(
                self.pool,
                self.models.names,
                self.settings.warmup_num_requests,
                deadline,
                self.readiness.warmed_up_adapters.append,
                prefill_tokens=self.settings.warmup_prefill_tokens,
            )
        except StartupError as exc:
            if not self.readiness.draining:
                self._fail(f"startup failed: {exc}")
            return
        self.readiness.set_phase(Phase.READY, "ready")
        ready_s = time.monotonic() - self._started
        log.info("startup: ready after %.1f s (warmed %s)", ready_s, ", ".join(self.readiness.warmed_up_adapters))
        if self.on_ready is not None:
            self.on_ready(ready_s)

    def _fail(self, message: str) -> None:
        log.error(message)
        self.readiness.set_phase(Phase.FAILED, message)
        self.request_exit(1)

    def _engine_exited(self, code: int) -> None:
        if not self.readiness.draining:
            self._fail(f"vLLM exited unexpectedly with code {code}")

    # ------------------------------------------------------------------ SIGTERM
    def begin_drain(self) -> None:
        """SIGTERM handler: start the drain once; later signals are ignored."""
        if self._drain_task is None:
            self._drain_task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        started = time.monotonic()
        budget = self.settings.drain_timeout_s
        self.readiness.set_phase(Phase.DRAINING, "SIGTERM received, draining")
        log.info("drain: SIGTERM, %d request(s) in flight, budget %.1f s", self.tracker.count, budget)
        if await self.tracker.wait_idle(budget):
            log.info("drain: all requests finished in %.2f s", time.monotonic() - started)
        else:
            log.warning(
                "drain: %d request(s) still in flight after %.1f s, stopping anyway", self.tracker.count, budget
            )
        if self.engine is not None:
            code = await self.engine.stop(ENGINE_STOP_GRACE_S)
            log.info("drain: engine stopped (exit %s)", code)
        self.request_exit(0)
