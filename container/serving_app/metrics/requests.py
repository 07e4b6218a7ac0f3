"""The EMF line of one ``/invocations`` call: latency, TTFT, tokens, status, adapter and class.

A request whose usage vLLM reported also gets a request class (``cold`` or ``warm``,
serving_contract.request_classes): its EMF line carries the ``RequestClass`` dimension, and its
TTFT and latency go to the per-class histograms of ``GET /metrics`` (serving_app.metrics.exposition).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from serving_app.metrics.emf import EmfWriter
from serving_app.metrics.exposition import RequestClassHistograms
from serving_contract.metrics import Dimension, RequestMetric
from serving_contract.request_classes import (
    WARM_MIN_CACHED_FRACTION_DEFAULT,
    RequestClass,
    cached_prompt_tokens,
    request_class,
)


@dataclass(slots=True)
class RequestRecord:
    """What one ``/invocations`` call reports; filled in along the request path."""

    adapter: str = "none"
    version: str | None = None  # ModelVersion dimension (serving_app/versions.py); None: not a served model
    status: int = 0
    stream: bool = False
    ttft_ms: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    engine_error: bool = False
    stream_error: bool = False  # a 200 stream that ended with an error event (StreamErrors)
    oom: bool = False
    disconnected: bool = False
    emitted: bool = False

    def read_usage(self, usage: Mapping[str, Any]) -> None:
        """Token counts and cached prompt tokens from vLLM's ``usage`` object."""
        self.input_tokens = usage.get("prompt_tokens")
        self.output_tokens = usage.get("completion_tokens")
        self.cached_tokens = cached_prompt_tokens(usage)

    def request_class(self, warm_min_cached_fraction: float) -> RequestClass | None:
        """``cold`` or ``warm`` from the usage vLLM reported; None without one (an error, a refusal)."""
        prompt = self.input_tokens
        if not isinstance(prompt, int) or isinstance(prompt, bool) or self.cached_tokens is None:
            return None
        return request_class(prompt, self.cached_tokens, warm_min_cached_fraction)


class RequestMetrics:
    """Writes one EMF line per request, with fleet-wide, per-adapter and per-class dimension sets.

    Args:
        emf: the writer of the lines.
        histograms: per-class TTFT and latency on ``/metrics``; None records none (tests).
        warm_min_cached_fraction: the class threshold (``REQUEST_CLASS_WARM_MIN_CACHED_FRACTION``).
    """

    def __init__(
        self,
        emf: EmfWriter,
        histograms: RequestClassHistograms | None = None,
        warm_min_cached_fraction: float = WARM_MIN_CACHED_FRACTION_DEFAULT,
    ) -> None:
        self._emf = emf
        self._histograms = histograms
        self._threshold = warm_min_cached_fraction
        self._dimension_sets = emf.request_dimension_sets
        self._class_sets = [*self._dimension_sets, [*self._dimension_sets[0], Dimension.REQUEST_CLASS]]

    def emit(self, record: RequestRecord, started: float) -> None:
        """Emit ``record`` once (``started`` is the request's ``perf_counter`` start)."""
        record.emitted = True
        status = record.status
        latency_ms = round((time.perf_counter() - started) * 1000.0, 3)
        metrics: dict[str, float | int] = {
            RequestMetric.REQUESTS: 1,
            RequestMetric.REQUEST_LATENCY: latency_ms,
            RequestMetric.CLIENT_ERRORS: int(400 <= status < 500),
            RequestMetric.SERVER_ERRORS: int(status >= 500),
            RequestMetric.STREAM_ERRORS: int(record.stream_error),
            RequestMetric.ENGINE_ERRORS: int(record.engine_error),
            RequestMetric.OUT_OF_MEMORY_ERRORS: int(record.oom),
        }
        if record.ttft_ms is not None:
            metrics[RequestMetric.TIME_TO_FIRST_TOKEN] = round(record.ttft_ms, 3)
        if isinstance(record.input_tokens, int):
            metrics[RequestMetric.INPUT_TOKENS] = record.input_tokens
        if isinstance(record.output_tokens, int):
            metrics[RequestMetric.OUTPUT_TOKENS] = record.output_tokens
        dimensions: dict[str, str] = {Dimension.ADAPTER: record.adapter}
        dimension_sets = self._dimension_sets
        klass = record.request_class(self._threshold) if status == 200 else None
        if klass is not None:
            dimensions[Dimension.REQUEST_CLASS] = klass.value
            dimension_sets = self._class_sets
            if self._histograms is not None:
                self._histograms.observe(klass, ttft_ms=record.ttft_ms, latency_ms=latency_ms)
        if record.version is not None:  # which versions answered, beside the sets alarms read (issue 36)
            dimension_sets = [*dimension_sets, [*self._dimension_sets[-1], Dimension.MODEL_VERSION]]
            dimensions[Dimension.MODEL_VERSION] = record.version
        # stdout closed or a non-finite value: drop the line, never the request.
        with contextlib.suppress(OSError, ValueError):
            self._emf.emit(
                metrics,
                dimension_sets=dimension_sets,
                dimensions=dimensions,
                properties={"StatusCode": status, "Stream": record.stream},
            )
