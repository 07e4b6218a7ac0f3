"""``GET /metrics``: the engine's Prometheus text with the gateway's own series after it.

SageMaker scrapes Prometheus text from ``/metrics`` on port 8080 when the endpoint config's
``MetricsConfig.EnableDetailedObservability`` is on (the default for new endpoint configs since
2026-06; botocore's SageMaker model, ``MetricsConfig``/``ContainerMetricsConfig``). vLLM serves
its ``/metrics`` on loopback only (the engine port), so the gateway relays it: the engine's
text unchanged (``vllm:`` series with ``model_name``/``engine`` labels), then the gateway's
gauges rendered by prometheus_client (already the scraper's dependency). The gateway's
gauges are read when scraped (a custom collector), so nothing is added to the request path.
Per request class (``cold``/``warm``, serving_contract.request_classes) the gateway also keeps
TTFT and latency histograms, observed once per request (:class:`RequestClassHistograms`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Final

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from serving_app.upstream import UpstreamError, UpstreamPool
from serving_contract.request_classes import RequestClass

log = logging.getLogger("serving_app.metrics")

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
"""Prometheus text exposition format 0.0.4 (what vLLM and prometheus_client serve)."""

ENGINE_SCRAPE_TIMEOUT_S: Final = 2.0
"""Bound on relaying the engine's ``/metrics``: vLLM renders it in milliseconds; a stuck engine
must not hold SageMaker's scrape (the gateway's own series are still answered)."""

LIVE_SESSIONS: Final = "mangaassist_gateway_live_sessions"
INFLIGHT_REQUESTS: Final = "mangaassist_gateway_inflight_requests"
ENGINE_METRICS_UP: Final = "mangaassist_gateway_engine_metrics_up"
TIME_TO_FIRST_TOKEN: Final = "mangaassist_gateway_time_to_first_token_seconds"
REQUEST_LATENCY: Final = "mangaassist_gateway_request_latency_seconds"
REQUEST_CLASS_LABEL: Final = "request_class"

TTFT_BUCKETS_S: Final = (0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0)
"""Edges at the default SLO (slo.*.ttft_p50_ms 200 ms, ttft_p95_ms 500 ms: seed 002) and around the
measured follow-up p95s (121-453 ms) and first-turn TTFTs (1-4 s), docs/performance.md."""
LATENCY_BUCKETS_S: Final = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0)
"""Up to SageMaker's 60 s invocation limit; 2 s is seed 002's p99 latency SLO."""


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


class RequestClassHistograms:
    """TTFT (streams only) and latency, seconds, per request class, on the gateway's ``/metrics``.

    Both classes' series exist from the start (zero counts), so a PromQL rate over either is
    defined before the first request of that class.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = (REQUEST_CLASS_LABEL,)
        self.ttft = Histogram(
            TIME_TO_FIRST_TOKEN,
            "Time to first token of streamed /invocations, by request class (cold/warm)",
            labels,
            registry=registry,
            buckets=TTFT_BUCKETS_S,
        )
        self.latency = Histogram(
            REQUEST_LATENCY,
            "Latency of /invocations answered 200, by request class (cold/warm)",
            labels,
            registry=registry,
            buckets=LATENCY_BUCKETS_S,
        )
        for klass in RequestClass:
            self.ttft.labels(klass.value)
            self.latency.labels(klass.value)

    def observe(self, klass: RequestClass, *, ttft_ms: float | None, latency_ms: float) -> None:
        """Record one request of ``klass``; ``ttft_ms`` None (not a stream) records latency only."""
        if ttft_ms is not None:
            self.ttft.labels(klass.value).observe(ttft_ms / 1000.0)
        self.latency.labels(klass.value).observe(latency_ms / 1000.0)


class MetricsExposition:
    """Builds the ``/metrics`` answer: engine text + gateway text, always 200."""

    def __init__(self, pool: UpstreamPool, collector: GatewayCollector) -> None:
        self.pool = pool
        self.collector = collector
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self.histograms = RequestClassHistograms(self.registry)

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
