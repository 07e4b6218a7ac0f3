"""``GET /metrics``: the engine's Prometheus text with the gateway's own series after it.

SageMaker scrapes Prometheus text from ``/metrics`` on port 8080 when the endpoint config's
``MetricsConfig.EnableDetailedObservability`` is on (the default for new endpoint configs since
2026-06; botocore's SageMaker model, ``MetricsConfig``/``ContainerMetricsConfig``). vLLM serves
its ``/metrics`` on loopback only (the engine port), so the gateway relays it: the engine's
text unchanged (``vllm:`` series with ``model_name``/``engine`` labels), then the gateway's
gauges rendered by prometheus_client (already the scraper's dependency). The gateway's
gauges are read when scraped (a custom collector), so nothing is added to the request path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Final

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from serving_app.upstream import UpstreamError, UpstreamPool

log = logging.getLogger("serving_app.metrics")

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
"""Prometheus text exposition format 0.0.4 (what vLLM and prometheus_client serve)."""

ENGINE_SCRAPE_TIMEOUT_S: Final = 2.0
"""Bound on relaying the engine's ``/metrics``: vLLM renders it in milliseconds; a stuck engine
must not hold SageMaker's scrape (the gateway's own series are still answered)."""

LIVE_SESSIONS: Final = "mangaassist_gateway_live_sessions"
INFLIGHT_REQUESTS: Final = "mangaassist_gateway_inflight_requests"
ENGINE_METRICS_UP: Final = "mangaassist_gateway_engine_metrics_up"


class GatewayCollector(Collector):
    """The gateway's gauges, read at scrape time.

    Args:
        live_sessions: number of live stateful sessions (``SessionStore.__len__``).
        inflight: ``/invocations`` requests being served, streams until their last byte.
    """

    def __init__(self, live_sessions: Callable[[], int], inflight: Callable[[], int]) -> None:
        self.live_sessions = live_sessions
        self.inflight = inflight
        self.engine_up = 0.0

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(LIVE_SESSIONS, "Live SageMaker stateful sessions", value=self.live_sessions())
        yield GaugeMetricFamily(INFLIGHT_REQUESTS, "/invocations requests in flight", value=self.inflight())
        yield GaugeMetricFamily(
            ENGINE_METRICS_UP, "1 when the engine's /metrics answered this scrape, else 0", value=self.engine_up
        )


class MetricsExposition:
    """Builds the ``/metrics`` answer: engine text + gateway text, always 200."""

    def __init__(self, pool: UpstreamPool, collector: GatewayCollector) -> None:
        self.pool = pool
        self.collector = collector
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)

    async def render(self) -> bytes:
        """Prometheus text; the engine's part is left out (and ``..._engine_metrics_up`` 0)
        when it does not answer 200 within ENGINE_SCRAPE_TIMEOUT_S."""
        engine = b""
        try:
            status, content = await self.pool.get("/metrics", timeout_s=ENGINE_SCRAPE_TIMEOUT_S)
            if status == 200:
                engine = content if content.endswith(b"\n") or not content else content + b"\n"
            else:
                log.warning("/metrics: engine answered %d", status)
        except UpstreamError as exc:
            log.warning("/metrics: engine unreachable: %s", exc)
        self.collector.engine_up = 1.0 if engine else 0.0
        return engine + generate_latest(self.registry)


def routes(exposition: MetricsExposition) -> list[Route]:
    """``GET /metrics`` (what SageMaker's detailed observability scrapes)."""

    async def metrics(request: Request) -> Response:
        return Response(await exposition.render(), media_type=CONTENT_TYPE)

    return [Route("/metrics", metrics, methods=["GET"])]
