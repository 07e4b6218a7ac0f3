"""``GET /metrics`` on the container in front of the real vLLM 0.26.0 engine: what SageMaker's
detailed observability scrapes on port 8080 (issue 24 item 2)."""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from serving_app.metrics.scraper import WANTED
from tests.engine.real_engine import RealGateway

pytestmark = pytest.mark.real_engine


def samples(text: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[sample.name] = found.get(sample.name, 0.0) + sample.value
    return found


def test_metrics_answers_the_engines_vllm_series_and_the_gateways_own(shared_gateway: RealGateway) -> None:
    opened = httpx.post(shared_gateway.url + "/invocations", json={"requestType": "NEW_SESSION"}, timeout=30)
    session_id = opened.headers["X-Amzn-SageMaker-New-Session-Id"].split(";")[0]
    try:
        # The gateway's pass-through scrape of vLLM gives up after 2 s (ENGINE_SCRAPE_TIMEOUT_S); on a
        # loaded runner one answer may carry engine_metrics_up 0: ask until the engine's series are in.
        deadline = time.monotonic() + 30
        while True:
            response = httpx.get(shared_gateway.url + "/metrics", timeout=10)
            if samples(response.text).get("mangaassist_gateway_engine_metrics_up") == 1:
                break
            assert time.monotonic() < deadline, "the engine's series never arrived through /metrics"
            time.sleep(0.5)
    finally:
        httpx.post(
            shared_gateway.url + "/invocations",
            json={"requestType": "CLOSE"},
            headers={"X-Amzn-SageMaker-Session-Id": session_id},
            timeout=30,
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    found = samples(response.text)  # the whole text parses as one Prometheus exposition
    assert set(found) >= WANTED, sorted(WANTED - set(found))
    assert found["vllm:request_success_total"] >= 1  # the warmup went through this engine
    assert found["mangaassist_gateway_engine_metrics_up"] == 1
    assert found["mangaassist_gateway_live_sessions"] >= 1
    assert "mangaassist_gateway_inflight_requests" in found
