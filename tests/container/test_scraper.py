"""The ``/metrics`` scraper: every ``EngineMetric`` from a realistic vLLM 0.22 exposition (0.26 uses the same names),
and the queue-wait mean from the ``vllm:request_queue_time_seconds`` histogram."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from serving_app.metrics.scraper import EngineMetricsCalculator, parse_samples
from serving_contract.metrics import EngineMetric
from tests.container.fake_vllm import STATE, metrics_text


def scrape_state(**changes: Any) -> dict[str, Any]:
    """The fake engine's state (what its ``/metrics`` is written from), with changes."""
    state = copy.deepcopy({**STATE, "requests": []})
    counters = changes.pop("counters", {})
    state["counters"].update(counters)
    state.update(changes)
    return state


def test_two_scrapes_emit_every_engine_metric() -> None:
    calculator = EngineMetricsCalculator()
    first = calculator.update(parse_samples(metrics_text(scrape_state())), 100.0)
    assert EngineMetric.QUEUE_WAIT_AVERAGE not in first  # no interval yet
    counters = {"prompt": 70, "generation": 30, "queries": 70, "hits": 30, "preemptions": 1}
    second_state = scrape_state(counters=counters, queue_times=[0.01, 0.02, 0.4], streams_open=2)
    second = calculator.update(parse_samples(metrics_text(second_state)), 110.0)
    assert set(second) == set(EngineMetric)
    assert second[EngineMetric.PROMPT_TOKENS_PER_SECOND] == 7.0  # 70 tokens / 10 s
    assert second[EngineMetric.PREFIX_CACHE_HIT_RATE] == pytest.approx(100 * 30 / 70, abs=1e-3)
    assert second[EngineMetric.RUNNING_REQUESTS] == 2.0
    # 3 waits of 10, 20 and 400 ms: mean 143.333 ms (a bucket p95 could not go below 285 ms).
    assert second[EngineMetric.QUEUE_WAIT_AVERAGE] == pytest.approx(1000 * (0.01 + 0.02 + 0.4) / 3, abs=1e-3)


def queue_exposition(*engines: tuple[float, float]) -> str:
    """``vllm:request_queue_time_seconds`` _count/_sum (and a bucket) for several ``engine`` label sets."""
    lines = ["# TYPE vllm:request_queue_time_seconds histogram"]
    for index, (count, total_s) in enumerate(engines):
        labels = f'engine="{index}",model_name="base"'
        lines.append(f'vllm:request_queue_time_seconds_bucket{{{labels},le="+Inf"}} {count}')
        lines.append(f"vllm:request_queue_time_seconds_count{{{labels}}} {count}")
        lines.append(f"vllm:request_queue_time_seconds_sum{{{labels}}} {total_s}")
    return "\n".join(lines) + "\n"


def test_queue_wait_is_the_interval_mean_summed_across_label_sets() -> None:
    calculator = EngineMetricsCalculator()
    calculator.update(parse_samples(queue_exposition((100, 30.0))), 0.0)
    # This interval: engine 0 finished 10 more requests that waited 0.5 s in all; engine 1
    # (new) finished 10 that waited 1.5 s in all: 20 requests, 2.0 s, a 100 ms mean.
    text = queue_exposition((110, 30.5), (10, 1.5))
    out = calculator.update(parse_samples(text), 10.0)
    assert out[EngineMetric.QUEUE_WAIT_AVERAGE] == pytest.approx(100.0)
    idle = calculator.update(parse_samples(text), 20.0)  # no request finished in this interval
    assert EngineMetric.QUEUE_WAIT_AVERAGE not in idle
    restarted = calculator.update(parse_samples(queue_exposition((4, 0.2))), 30.0)
    assert restarted[EngineMetric.QUEUE_WAIT_AVERAGE] == pytest.approx(50.0)  # counters restart from 0
