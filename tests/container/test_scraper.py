"""The ``/metrics`` scraper: every ``EngineMetric`` from a realistic vLLM 0.22 exposition,
and the queue-wait p95 from the ``vllm:request_queue_time_seconds`` histogram."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from serving_app.scraper import EngineMetricsCalculator, histogram_quantile, parse_samples
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
    assert EngineMetric.QUEUE_WAIT_P95 not in first  # no interval yet
    counters = {"prompt": 70, "generation": 30, "queries": 70, "hits": 30, "preemptions": 1}
    second_state = scrape_state(counters=counters, queue_times=[0.01, 0.02, 0.4], streams_open=2)
    second = calculator.update(parse_samples(metrics_text(second_state)), 110.0)
    assert set(second) == set(EngineMetric)
    assert second[EngineMetric.PROMPT_TOKENS_PER_SECOND] == 7.0  # 70 tokens / 10 s
    assert second[EngineMetric.PREFIX_CACHE_HIT_RATE] == pytest.approx(100 * 30 / 70, abs=1e-3)
    assert second[EngineMetric.RUNNING_REQUESTS] == 2.0
    # 3 waits: rank 2.85 lies in (0.3, 0.5] holding the third: 0.3 + 0.2 x 0.85 = 0.47 s.
    assert second[EngineMetric.QUEUE_WAIT_P95] == pytest.approx(470.0)


def queue_exposition(*engines: dict[str, float]) -> str:
    """``vllm:request_queue_time_seconds`` buckets for several ``engine`` label sets."""
    lines = ["# TYPE vllm:request_queue_time_seconds histogram"]
    for index, buckets in enumerate(engines):
        for le, count in buckets.items():
            labels = f'engine="{index}",le="{le}",model_name="base"'
            lines.append(f"vllm:request_queue_time_seconds_bucket{{{labels}}} {count}")
        total = buckets["+Inf"]
        lines.append(f'vllm:request_queue_time_seconds_count{{engine="{index}",model_name="base"}} {total}')
    return "\n".join(lines) + "\n"


def test_queue_wait_p95_is_the_interval_delta_summed_across_label_sets() -> None:
    calculator = EngineMetricsCalculator()
    calculator.update(parse_samples(queue_exposition({"0.3": 100, "0.5": 100, "+Inf": 100})), 0.0)
    # This interval: engine 0 saw 10 waits in (0.3, 0.5], engine 1 (new) 10 in (0, 0.3].
    text = queue_exposition({"0.3": 100, "0.5": 110, "+Inf": 110}, {"0.3": 10, "0.5": 10, "+Inf": 10})
    out = calculator.update(parse_samples(text), 10.0)
    # 20 waits, rank 19 in (0.3, 0.5] holding 10 of them: 0.3 + 0.2 x (19 - 10) / 10 = 0.48 s.
    assert out[EngineMetric.QUEUE_WAIT_P95] == pytest.approx(480.0)
    idle = calculator.update(parse_samples(text), 20.0)  # no request in this interval
    assert EngineMetric.QUEUE_WAIT_P95 not in idle
    restarted = calculator.update(parse_samples(queue_exposition({"0.3": 4, "0.5": 4, "+Inf": 4})), 30.0)
    assert restarted[EngineMetric.QUEUE_WAIT_P95] == pytest.approx(285.0)  # counts restart from 0


@pytest.mark.parametrize(
    ("buckets", "expected"),
    [
        ({0.3: 10, 0.5: 10, math.inf: 10}, 0.285),  # all in the first bucket: lower bound 0
        ({0.3: 0, 0.5: 4, math.inf: 5}, 0.5),  # rank in +Inf: the highest finite bound
        ({0.3: 0, 0.5: 0, math.inf: 0}, None),  # no observations
        ({0.3: 1, 0.5: 1}, None),  # no +Inf bucket: not a histogram
    ],
)
def test_histogram_quantile_follows_prometheus(buckets: dict[float, float], expected: float | None) -> None:
    result = histogram_quantile(0.95, buckets)
    assert result == (pytest.approx(expected) if expected is not None else None)
