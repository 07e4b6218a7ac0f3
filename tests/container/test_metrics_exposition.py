"""``GET /metrics`` when the engine does not answer: the gateway's own series, still 200."""

from __future__ import annotations

import asyncio

from prometheus_client.parser import text_string_to_metric_families

from local_gateway import PortReservation
from serving_app.metrics.exposition import REQUEST_LATENCY, TIME_TO_FIRST_TOKEN, GatewayCollector, MetricsExposition
from serving_app.upstream import UpstreamPool


def test_an_unreachable_engine_leaves_the_gateway_series_with_engine_up_zero() -> None:
    async def render(port: int) -> str:
        pool = UpstreamPool("127.0.0.1", port)
        try:
            return (await MetricsExposition(pool, GatewayCollector(lambda: 3, lambda: 2)).render()).decode()
        finally:
            await pool.aclose()

    with PortReservation() as nothing_listens:  # held: no other process can listen there meanwhile
        text = asyncio.run(render(nothing_listens.port))
    families = list(text_string_to_metric_families(text))
    # (prometheus_client writes each histogram's ``_created`` timestamp as a gauge family of its own)
    gauges = {s.name: s.value for f in families if f.type == "gauge" for s in f.samples if "_created" not in s.name}
    assert gauges == {
        "mangaassist_gateway_live_sessions": 3,
        "mangaassist_gateway_inflight_requests": 2,
        "mangaassist_gateway_engine_metrics_up": 0,
    }
    # The per-class histograms exist before any request, both classes at zero.
    counts = {
        (s.name, s.labels["request_class"]): s.value for f in families for s in f.samples if s.name.endswith("_count")
    }
    assert counts == {
        (f"{name}_count", klass): 0.0 for name in (TIME_TO_FIRST_TOKEN, REQUEST_LATENCY) for klass in ("cold", "warm")
    }
    assert "vllm:" not in text
