"""What the context budget costs a trimmed request: the same final prompt sent already trimmed and
sent whole (the gateway then takes vLLM's 400, counts with ``/tokenize`` and sends the trimmed
body), through one running gateway, alternating, with ``max_tokens`` 1.

Prints the added latency (p50, p90 over ``--rounds``), the ``/tokenize`` calls per trim (vLLM's
``http_requests_total{handler="/tokenize"}``) and what one ``/tokenize`` of the whole conversation
takes on its own. A request that fits pays nothing: it never reaches ``/tokenize``
(tests/engine/test_real_context_budget.py).

    python benchmarks/context_budget.py --gateway-url http://127.0.0.1:8080 \\
        --engine-url http://127.0.0.1:8081 [--turns 12] [--rounds 20] [--out result.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cli_support.argtypes import int_in  # noqa: E402
from cli_support.percentiles import percentile  # noqa: E402
from serving_contract.context_budget import marker_text  # noqa: E402
from tests.container.conversations import SYSTEM_PROMPT, conversation  # noqa: E402


def tokenize_calls(client: httpx.Client, engine: str) -> float:
    total = 0.0
    for line in client.get(engine + "/metrics").text.splitlines():
        if line.startswith("http_requests_total{") and 'handler="/tokenize"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def count(client: httpx.Client, engine: str, messages: list[dict[str, Any]]) -> int:
    return int(client.post(engine + "/tokenize", json={"messages": messages}).json()["count"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--gateway-url", required=True)
    parser.add_argument("--engine-url", required=True)
    parser.add_argument("--turns", type=int_in(1), default=12)
    parser.add_argument("--rounds", type=int_in(1), default=20)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    client = httpx.Client(timeout=120)
    max_model_len = int(client.post(args.engine_url + "/tokenize", json={"prompt": "x"}).json()["max_model_len"])
    words = 20
    while True:  # a conversation over max_model_len by the engine's own count
        messages = conversation(args.turns, words)
        messages[0] = {"role": "system", "content": " ".join([SYSTEM_PROMPT] * 8)}
        if count(client, args.engine_url, messages) > max_model_len + 200:
            break
        words += 20
    whole = {"messages": messages, "max_tokens": 1, "temperature": 0}
    first = client.post(args.gateway_url + "/invocations", json=whole)
    assert first.status_code == 200, first.text
    attributes = dict(item.split("=", 1) for item in first.headers["x-amzn-sagemaker-custom-attributes"].split(";"))
    dropped = int(attributes["turns"])
    kept = [messages[0], {"role": "system", "content": marker_text(dropped)}, *messages[1 + 2 * dropped :]]
    pre_trimmed = {**whole, "messages": kept}
    direct_tokenize = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        count(client, args.engine_url, messages)
        direct_tokenize.append((time.perf_counter() - started) * 1000)
    added, calls_per_trim = [], []
    for _ in range(args.rounds):
        started = time.perf_counter()
        baseline_response = client.post(args.gateway_url + "/invocations", json=pre_trimmed)
        assert baseline_response.status_code == 200, baseline_response.text[:300]
        baseline = time.perf_counter() - started
        before = tokenize_calls(client, args.engine_url)
        started = time.perf_counter()
        response = client.post(args.gateway_url + "/invocations", json=whole)
        trimmed = time.perf_counter() - started
        assert response.status_code == 200, (response.status_code, response.text[:300])
        assert "turns=" in response.headers["x-amzn-sagemaker-custom-attributes"], response.headers
        calls_per_trim.append(tokenize_calls(client, args.engine_url) - before)
        added.append((trimmed - baseline) * 1000)
    result = {
        "max_model_len": max_model_len,
        "turns": args.turns,
        "prompt_tokens_whole": count(client, args.engine_url, messages),
        "prompt_tokens_trimmed": count(client, args.engine_url, kept),
        "turns_dropped": dropped,
        "rounds": args.rounds,
        "added_ms_p50": round(statistics.median(added), 1),
        "added_ms_p90": round(p90, 1) if (p90 := percentile(added, 90)) is not None else None,
        "tokenize_calls_per_trim": statistics.median(calls_per_trim),
        "tokenize_whole_ms_p50": round(statistics.median(direct_tokenize), 1),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
