"""Per-request limits (issue 22 item 1) in front of the real vLLM 0.26.0 engine.

vLLM itself answers ``n`` up to VLLM_MAX_N_SEQUENCES (16,384); the gateway refuses more than
REQUEST_MAX_SEQUENCES (default 4) before the engine sees the request.
"""

from __future__ import annotations

import httpx
import pytest

from tests.engine.real_engine import BASE_MODEL, RealGateway

pytestmark = pytest.mark.real_engine

BODY = {"messages": [{"role": "user", "content": "recommend a manga"}], "max_tokens": 1, "temperature": 1.0, "seed": 7}


def test_n_over_the_limit_is_refused_by_the_gateway_though_vllm_would_run_it(shared_gateway: RealGateway) -> None:
    direct = httpx.post(
        shared_gateway.engine_url + "/v1/chat/completions", json={**BODY, "model": BASE_MODEL, "n": 5}, timeout=60
    )
    assert direct.status_code == 200, direct.text
    assert len(direct.json()["choices"]) == 5

    refused = httpx.post(shared_gateway.url + "/invocations", json={**BODY, "n": 5}, timeout=60)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == (
        "n = 5 is over the limit: at most 4 sequences per request (REQUEST_MAX_SEQUENCES)"
    )

    allowed = httpx.post(shared_gateway.url + "/invocations", json={**BODY, "n": 4}, timeout=60)
    assert allowed.status_code == 200 and len(allowed.json()["choices"]) == 4
