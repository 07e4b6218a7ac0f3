"""One instance type's throughput at the TTFT SLOs from what was measured on it (``throughput.measured``).

Two forms (app_config/throughput_config.py):

* the capacity job's curve (``python -m ops throughput measure``, issue 46): TTFT per request class at
  each offered rate of an open-loop sweep on the instance type itself. It is judged here against the
  config's SLOs as the sweep judges its own steps (:func:`cli_support.open_loop.verdict`): the highest
  offered rate up to which every step kept up, erred no more than ``slo.max_error_rate`` and held
  each judged class's TTFT p95. A change of SLO re-judges the same measurement;
* ``python -m ops load``'s one figure (concurrency, requests a minute, TTFT p50 at one request): kept
  for measurements made before the job existed. It says nothing of the cliff or the classes.

Either is labelled ``measured`` and names its date and source: ``measured 2026-11-27
(capacity-mangaassist-vllm-prod-g6e-xlarge-20261127-101500)`` or ``measured (ops load)``.
"""

from __future__ import annotations

import math

from app_config.throughput_config import MeasuredCurve, MeasuredStep, MeasuredThroughput
from cli_support.open_loop import ClassFigures, StepSummary, verdict
from planning.throughput_figure import ThroughputAtSlo


def source_of(measured: MeasuredCurve | MeasuredThroughput) -> str:
    """``measured <date> (<job>)``, ``measured <date> (ops load)`` or ``measured (ops load)``."""
    if isinstance(measured, MeasuredCurve):
        return f"measured {measured.date.isoformat()} ({measured.job})"
    return f"measured {measured.date.isoformat()} (ops load)" if measured.date else "measured (ops load)"


def _summary(step: MeasuredStep) -> StepSummary:
    """A curve's step in the sweep's own shape, for :func:`cli_support.open_loop.verdict`."""
    return StepSummary(
        requests_per_min=step.requests_per_minute,
        served_per_min=step.served_per_minute,
        completed_per_min=step.completed_per_minute,
        requests=step.requests,
        errors=step.errors,
        unfinished=0,
        ttft_p50_ms=None,
        ttft_p95_ms=None,
        classes={
            klass: ClassFigures(figures.requests, figures.ttft_p50_ms, figures.ttft_p95_ms)
            for klass, figures in (("cold", step.cold), ("warm", step.warm))
        },
        cold_share=None,
        itl_mean_ms=None,
        e2e_p50_ms=None,
        live_conversations_mean=None,
        in_flight_mean=None,
    )


def from_measurement(
    instance_type: str,
    measured: MeasuredCurve | MeasuredThroughput,
    slo_ms: dict[str, float],
    *,
    max_error_rate: float,
    judged: tuple[str, ...],
) -> ThroughputAtSlo:
    """One instance of ``instance_type`` at the SLOs ``slo_ms`` (class -> TTFT p95 ms) of the
    ``judged`` classes, from its measurement (module docstring)."""
    source = source_of(measured)
    if isinstance(measured, MeasuredThroughput):
        return ThroughputAtSlo(
            instance_type=instance_type,
            requests_per_minute=measured.requests_per_minute,
            concurrency=measured.concurrency,
            base_ttft_ms=measured.ttft_p50_ms,
            holds_slo=measured.ttft_p50_ms <= min(slo_ms[klass] for klass in judged),
            source=source,
            measured=True,
            margin=0.0,
            ttft_p95_ms=None,
            cliff_per_minute=math.inf,
            kv_cache_usage=None,
            cold_share=None,
            lightest_ttft_p95_ms=None,
        )
    holds = verdict([_summary(step) for step in measured.steps], slo_ms, max_error_rate=max_error_rate).holds_per_min
    rates = [holds[klass] for klass in judged]
    rate = None if any(r is None for r in rates) else min(r for r in rates if r is not None)
    steps = {step.requests_per_minute: step for step in measured.steps}
    lightest = measured.steps[0]
    at = steps[rate] if rate is not None else lightest

    def p95(step: MeasuredStep) -> float | None:
        values = [v for klass in judged if (v := getattr(step, klass).ttft_p95_ms) is not None]
        return max(values) if values else None

    cold = [s.cold.requests for s in measured.steps if s.cold.requests]
    total = [s.cold.requests + s.warm.requests for s in measured.steps if s.cold.requests + s.warm.requests]
    return ThroughputAtSlo(
        instance_type=instance_type,
        requests_per_minute=rate or 0.0,
        concurrency=max(1, math.ceil(at.running_mean or 0.0)),
        base_ttft_ms=lightest.cold.ttft_p50_ms or lightest.warm.ttft_p50_ms or 0.0,
        holds_slo=rate is not None,
        source=source,
        measured=True,
        margin=0.0,
        ttft_p95_ms=p95(at),
        cliff_per_minute=measured.cliff_per_minute or math.inf,
        kv_cache_usage=at.kv_cache_usage_mean,
        cold_share=(at.cold.requests / (at.cold.requests + at.warm.requests))
        if at.cold.requests + at.warm.requests
        else (sum(cold) / sum(total) if total else None),
        lightest_ttft_p95_ms=p95(lightest),
    )
