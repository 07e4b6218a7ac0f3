"""Scrape vLLM's Prometheus ``/metrics`` and republish engine figures as EMF.

vLLM 0.22.0 names (``vllm/v1/metrics/loggers.py``, CONVENTIONS.md): gauges
``vllm:num_requests_waiting``, ``vllm:num_requests_running``, ``vllm:kv_cache_usage_perc``
(fraction 0-1); counters exposed with ``_total``: ``vllm:prefix_cache_queries_total``,
``vllm:prefix_cache_hits_total``, ``vllm:num_preemptions_total``,
``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total``. Every sample carries the
labels ``model_name`` and ``engine``; values are summed across them (one instance = one
number). The histogram ``vllm:request_queue_time_seconds`` (time in WAITING, cumulative
``_bucket{le=...}`` samples; vLLM 0.22.0 buckets 0.3, 0.5, 0.8, 1, ... 7680 s) becomes
``QueueWaitP95``: the 95th percentile of the requests observed during one scrape interval.

Resolution caveat: vLLM's lowest queue-time bucket is ``le="0.3"`` (300 ms), and linear
interpolation inside it (as Prometheus' ``histogram_quantile`` does) puts the p95 of an
interval whose requests all waited < 300 ms at 0.95 x 300 = 285 ms. The figure is an upper
estimate; it cannot show a value below 285 ms once any request was observed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from prometheus_client.parser import text_string_to_metric_families

from serving_contract.metrics import EngineMetric

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
COUNTERS: Final = (PREFIX_QUERIES, PREFIX_HITS, PREEMPTIONS, PROMPT_TOKENS, GENERATION_TOKENS)
QUEUE_TIME_BUCKET: Final = "vllm:request_queue_time_seconds_bucket"
WANTED: Final = frozenset({*GAUGES, KV_CACHE_USAGE, *COUNTERS, QUEUE_TIME_BUCKET})
QUEUE_WAIT_QUANTILE: Final = 0.95
"""Seed 002 SLO: "queue wait p95 < 100 ms" (1-hour rolling)."""

_PREFIXES: Final = tuple(sorted(WANTED))
_BUCKET_KEY: Final = QUEUE_TIME_BUCKET + '{le="'


def bucket_key(le: str) -> str:
    """Key of one summed histogram bucket in :func:`parse_samples`' result."""
    return f'{_BUCKET_KEY}{le}"}}'


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """Quantile ``q`` of cumulative ``buckets`` (upper bound -> count, ``inf`` included), as
    Prometheus' ``histogram_quantile``: linear interpolation inside the bucket holding rank
    ``q * total``, lower bound 0 for the first bucket, the highest finite bound when the rank
    falls in the ``+Inf`` bucket. None when there are no observations (or no ``+Inf``)."""
    bounds = sorted(buckets)
    if not bounds or not math.isinf(bounds[-1]):
        return None
    total = buckets[bounds[-1]]
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for upper in bounds:
        count = max(buckets[upper], below)  # cumulative counts never decrease
        if count >= rank:
            if math.isinf(upper):
                return lower
            if count == below:
                return upper
            return lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    return lower


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
            if sample.name == QUEUE_TIME_BUCKET:
                key = bucket_key(sample.labels.get("le", "+Inf"))
                totals[key] = totals.get(key, 0.0) + float(sample.value)
            elif sample.name in WANTED:
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
    _last_buckets: dict[float, float] | None = None

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
            p95 = self._queue_wait_p95(totals)
            if p95 is not None:
                out[EngineMetric.QUEUE_WAIT_P95] = round(p95 * 1000.0, 3)
        self._last = {name: totals[name] for name in COUNTERS if name in totals}
        self._last_buckets = _buckets(totals)
        self._last_t = now_s
        return out

    def _queue_wait_p95(self, totals: Mapping[str, float]) -> float | None:
        """p95 (seconds) of the queue times observed since the last scrape; None when none."""
        current, previous = _buckets(totals), self._last_buckets
        if not current or previous is None:
            return None
        if any(current.get(le, 0.0) < count for le, count in previous.items()):
            delta = current  # engine restarted: its histogram starts again from zero
        else:
            delta = {le: count - previous.get(le, 0.0) for le, count in current.items()}
        return histogram_quantile(QUEUE_WAIT_QUANTILE, delta)

    def _delta(self, name: str, totals: Mapping[str, float]) -> float:
        current = totals[name]
        previous = self._last.get(name)
        if previous is None or current < previous:
            return current if previous is not None else 0.0
        return current - previous


def _buckets(totals: Mapping[str, float]) -> dict[float, float]:
    """Queue-time histogram buckets of one scrape: upper bound (s) -> cumulative count."""
    out: dict[float, float] = {}
    for key, value in totals.items():
        if key.startswith(_BUCKET_KEY):
            try:
                out[float(key[len(_BUCKET_KEY) : -2])] = value
            except ValueError:
                continue
    return out
