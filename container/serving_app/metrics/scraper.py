"""Scrape vLLM's Prometheus ``/metrics`` and republish engine figures as EMF.

vLLM 0.26.0 names (``vllm/v1/metrics/loggers.py``, docs/sources.md, "Metrics"): gauges
``vllm:num_requests_waiting``, ``vllm:num_requests_running``, ``vllm:kv_cache_usage_perc``
(fraction 0-1); counters exposed with ``_total``: ``vllm:prefix_cache_queries_total``,
``vllm:prefix_cache_hits_total``, ``vllm:num_preemptions_total``,
``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total``. Every sample carries the
labels ``model_name`` and ``engine``; values are summed across them (one instance = one
number). The histogram ``vllm:request_queue_time_seconds`` (time in WAITING) becomes
``QueueWaitAverage``: the mean queue wait of the requests finished during one scrape
interval, from the deltas of its ``_sum`` and ``_count`` samples.

Why a mean and not the p95 of seed 002's SLO: vLLM 0.26.0's queue-time buckets start at
``le="0.3"`` (300 ms; ``request_latency_buckets`` in ``vllm/v1/metrics/loggers.py``), so any
percentile interpolated from them reads >= 285 ms once a request was observed and cannot
resolve the 100 ms SLO. ``_sum``/``_count`` are exact.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from prometheus_client.parser import text_string_to_metric_families

from serving_app.metrics.emf import EmfWriter
from serving_app.upstream import UpstreamError, UpstreamPool
from serving_contract.metrics import EngineMetric

log = logging.getLogger("serving_app.metrics")

GAUGES: Final[Mapping[str, str]] = {
    "vllm:num_requests_waiting": EngineMetric.QUEUE_DEPTH,
    "vllm:num_requests_running": EngineMetric.RUNNING_REQUESTS,
}
KV_CACHE_USAGE: Final = "vllm:kv_cache_usage_perc"
PREFIX_QUERIES: Final = "vllm:prefix_cache_queries_total"
PREFIX_HITS: Final = "vllm:prefix_cache_hits_total"
PREEMPTIONS: Final = "vllm:num_preemptions_total"
PROMPT_TOKENS: Final = "vllm:prompt_tokens_total"
GENERATION_TOKENS: Final = "vllm:generation_tokens_total"
QUEUE_TIME_SUM: Final = "vllm:request_queue_time_seconds_sum"
QUEUE_TIME_COUNT: Final = "vllm:request_queue_time_seconds_count"
COUNTERS: Final = (
    PREFIX_QUERIES,
    PREFIX_HITS,
    PREEMPTIONS,
    PROMPT_TOKENS,
    GENERATION_TOKENS,
    QUEUE_TIME_SUM,
    QUEUE_TIME_COUNT,
)
WANTED: Final = frozenset({*GAUGES, KV_CACHE_USAGE, *COUNTERS})

_PREFIXES: Final = tuple(sorted(WANTED))


def parse_samples(text: str) -> dict[str, float]:
    """Sum the wanted samples of a Prometheus text exposition across all label sets.

    Only the wanted sample lines are handed to the parser: vLLM's exposition is mostly
    histogram buckets, and parsing all of it would block the event loop (and every request
    it serves) for milliseconds each interval.
    """
    wanted_lines = "\n".join(line for line in text.splitlines() if line.startswith(_PREFIXES))
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(wanted_lines + "\n"):
        for sample in family.samples:
            if sample.name in WANTED:
                totals[sample.name] = totals.get(sample.name, 0.0) + float(sample.value)
    return totals


@dataclass
class EngineMetricsCalculator:
    """Turns successive scrapes into gauges, per-interval deltas and per-second rates.

    The first scrape only yields gauges (no delta yet). A counter that went down (engine
    restarted) restarts from its new value.
    """

    _last: dict[str, float] = field(default_factory=dict)
    _last_t: float | None = None

    def update(self, totals: Mapping[str, float], now_s: float) -> dict[str, float]:
        """Return metric name -> value for one scrape taken at ``now_s`` (monotonic seconds)."""
        out: dict[str, float] = {}
        for source, name in GAUGES.items():
            if source in totals:
                out[name] = totals[source]
        if KV_CACHE_USAGE in totals:
            out[EngineMetric.KV_CACHE_USAGE] = round(totals[KV_CACHE_USAGE] * 100.0, 3)
        if self._last_t is not None and now_s > self._last_t:
            elapsed = now_s - self._last_t
            delta = {name: self._delta(name, totals) for name in COUNTERS if name in totals}
            queries = delta.get(PREFIX_QUERIES)
            if queries and PREFIX_HITS in delta:
                out[EngineMetric.PREFIX_CACHE_HIT_RATE] = round(100.0 * delta[PREFIX_HITS] / queries, 3)
            if PREEMPTIONS in delta:
                out[EngineMetric.PREEMPTIONS] = delta[PREEMPTIONS]
            if PROMPT_TOKENS in delta:
                out[EngineMetric.PROMPT_TOKENS_PER_SECOND] = round(delta[PROMPT_TOKENS] / elapsed, 3)
            if GENERATION_TOKENS in delta:
                out[EngineMetric.GENERATION_TOKENS_PER_SECOND] = round(delta[GENERATION_TOKENS] / elapsed, 3)
            finished = delta.get(QUEUE_TIME_COUNT)
            if finished and QUEUE_TIME_SUM in delta:
                out[EngineMetric.QUEUE_WAIT_AVERAGE] = round(1000.0 * delta[QUEUE_TIME_SUM] / finished, 3)
        self._last = {name: totals[name] for name in COUNTERS if name in totals}
        self._last_t = now_s
        return out

    def _delta(self, name: str, totals: Mapping[str, float]) -> float:
        current = totals[name]
        previous = self._last.get(name)
        if previous is None or current < previous:
            return current if previous is not None else 0.0
        return current - previous


async def scrape_loop(pool: UpstreamPool, emf: EmfWriter, interval_s: float, engine_up: Callable[[], bool]) -> None:
    """Every ``interval_s``: scrape ``/metrics``, emit one EMF line of engine figures.

    Skips intervals while ``engine_up()`` is False (loading, or exited). A failed scrape is
    logged once and never stops the loop.
    """
    calculator = EngineMetricsCalculator()
    warned = False
    while True:
        await asyncio.sleep(interval_s)
        if not engine_up():
            continue
        try:
            status, content = await pool.get("/metrics", timeout_s=min(interval_s, 5.0))
            if status != 200:
                raise UpstreamError(f"/metrics answered {status}")
            totals = parse_samples(content.decode("utf-8", "replace"))
        except Exception as exc:  # a bad scrape must never stop the loop
            if not warned:
                log.warning("metrics: scrape failed: %s", exc.__class__.__name__)
                warned = True
            continue
        values = calculator.update(totals, time.monotonic())
        emf.emit(values, properties={"Source": "vllm_metrics"})
