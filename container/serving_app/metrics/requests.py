"""The EMF line of one ``/invocations`` call: latency, TTFT, tokens, status and adapter."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from serving_app.metrics.emf import EmfWriter
from serving_contract.metrics import Dimension, RequestMetric


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
    engine_error: bool = False
    oom: bool = False
    disconnected: bool = False
    emitted: bool = False


class RequestMetrics:
    """Writes one EMF line per request, with fleet-wide and per-adapter dimension sets."""

    def __init__(self, emf: EmfWriter) -> None:
        self._emf = emf
        self._dimension_sets = emf.request_dimension_sets

    def emit(self, record: RequestRecord, started: float) -> None:
        """Emit ``record`` once (``started`` is the request's ``perf_counter`` start)."""
        record.emitted = True
        status = record.status
        metrics: dict[str, float | int] = {
            RequestMetric.REQUESTS: 1,
            RequestMetric.REQUEST_LATENCY: round((time.perf_counter() - started) * 1000.0, 3),
            RequestMetric.CLIENT_ERRORS: int(400 <= status < 500),
            RequestMetric.SERVER_ERRORS: int(status >= 500),
            RequestMetric.ENGINE_ERRORS: int(record.engine_error),
            RequestMetric.OUT_OF_MEMORY_ERRORS: int(record.oom),
        }
        if record.ttft_ms is not None:
            metrics[RequestMetric.TIME_TO_FIRST_TOKEN] = round(record.ttft_ms, 3)
        if isinstance(record.input_tokens, int):
            metrics[RequestMetric.INPUT_TOKENS] = record.input_tokens
        if isinstance(record.output_tokens, int):
            metrics[RequestMetric.OUTPUT_TOKENS] = record.output_tokens
        dimension_sets = self._dimension_sets
        dimensions: dict[str, str] = {Dimension.ADAPTER: record.adapter}
        if record.version is not None:  # which versions answered, beside the sets alarms read (issue 36)
            dimension_sets = [*dimension_sets, [*dimension_sets[-1], Dimension.MODEL_VERSION]]
            dimensions[Dimension.MODEL_VERSION] = record.version
        # stdout closed or a non-finite value: drop the line, never the request.
        with contextlib.suppress(OSError, ValueError):
            self._emf.emit(
                metrics,
                dimension_sets=dimension_sets,
                dimensions=dimensions,
                properties={"StatusCode": status, "Stream": record.stream},
            )
