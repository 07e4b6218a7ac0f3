"""Client-side shadow traffic: a sampled share of calls also goes to a second backend, and the two answers
are compared (seed 002, scenario 6: the migration ran "10 % shadow-copied", comparing latency and output).

The copy never delays the caller's answer: it is started on a worker thread before the call (so both see
the same moment's load), and the caller hands its answer over with one ``Future.set_result``; the worker
waits for it, compares, counts and calls ``on_comparison``. At most ``max_in_flight`` copies run; one more
is dropped (and counted) instead of queued. A copy is one call: no retries, no fallback.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final

from mangaassist_client.backends import Backend
from mangaassist_client.errors import classify
from mangaassist_client.metrics import ClientMetric, MetricsSink
from mangaassist_client.model import ChatRequest, ChatResult, Completion

ANSWER_WAIT_S: Final = 3600.0
"""Most a copy waits for the caller's answer (the caller sets it when its call ends, however it ends;
this bounds a stream the caller never finishes reading)."""


@dataclass(frozen=True, slots=True)
class Comparison:
    """The answer and its shadow copy, side by side.

    Attributes:
        adapter: the request's adapter.
        answered_by, shadow: the backends (``answered_by`` None: the call itself failed).
        same_text: the two texts are equal once stripped.
        length_ratio: shadow length / answer length in characters (None: either is missing or empty).
        answer_latency_s, shadow_latency_s: each call's seconds (None: it failed).
        answer_version, shadow_version: what answered on each side.
        shadow_error: why the copy failed, or None.
    """

    adapter: str
    answered_by: str | None
    shadow: str
    same_text: bool
    length_ratio: float | None
    answer_latency_s: float | None
    shadow_latency_s: float | None
    answer_version: str | None
    shadow_version: str | None
    shadow_error: str | None


Answer = tuple[ChatResult | None, float | None]
"""What the caller hands over: its result (None when the call failed) and its seconds."""


def compare(
    request: ChatRequest,
    answer: Answer,
    *,
    shadow: str,
    copy: Completion | None,
    copy_s: float | None,
    error: str | None,
) -> Comparison:
    """The :class:`Comparison` of the caller's ``answer`` and the shadow ``copy``."""
    result, answer_s = answer
    ratio = len(copy.text) / len(result.text) if result and copy and result.text else None
    return Comparison(
        adapter=request.adapter,
        answered_by=result.backend if result else None,
        shadow=shadow,
        same_text=bool(result and copy and result.text.strip() == copy.text.strip()),
        length_ratio=ratio,
        answer_latency_s=answer_s if result else None,
        shadow_latency_s=copy_s,
        answer_version=result.version if result else None,
        shadow_version=copy.version if copy else None,
        shadow_error=error,
    )


class Shadow:
    """Sends shadow copies to ``backend`` (module docstring).

    Args:
        backend: the second backend.
        max_in_flight: copies at once (MirrorConfig.max_in_flight).
        sink: where the counts go.
        clock: seconds, monotonic.
        on_comparison: called on the worker thread with each :class:`Comparison` (e.g. to log it for an
            offline scoring job, as seed 002's shadow comparison ran); its errors are printed, not raised.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        max_in_flight: int,
        sink: MetricsSink,
        clock: Callable[[], float],
        on_comparison: Callable[[Comparison], object] | None = None,
    ) -> None:
        self.backend = backend
        self._sink = sink
        self._clock = clock
        self._on_comparison = on_comparison
        self._slots = threading.BoundedSemaphore(max_in_flight)
        self._executor = ThreadPoolExecutor(max_workers=max_in_flight, thread_name_prefix="mangaassist-shadow")

    def start(self, request: ChatRequest) -> Future[Answer] | None:
        """Start a copy of ``request``; returns the future the caller sets with its :data:`Answer`, or None
        when ``max_in_flight`` copies run already (the copy is dropped and counted)."""
        if not self._slots.acquire(blocking=False):
            self._sink.record({ClientMetric.SHADOW_DROPPED: 1}, {"Backend": self.backend.name})
            return None
        answer: Future[Answer] = Future()
        try:
            self._executor.submit(self._run, request, answer)
        except RuntimeError:  # the client was closed
            self._slots.release()
            return None
        return answer

    def _run(self, request: ChatRequest, answer: Future[Answer]) -> None:
        try:
            started = self._clock()
            copy: Completion | None = None
            error: str | None = None
            try:
                copy = self.backend.complete(request)
            except Exception as failure:  # the copy's failure is counted, never raised to anyone
                error = str(classify(failure, self.backend.name) or f"{type(failure).__name__}: {str(failure)[:300]}")
            copy_s = self._clock() - started if copy is not None else None
            comparison = compare(
                request,
                answer.result(timeout=ANSWER_WAIT_S),
                shadow=self.backend.name,
                copy=copy,
                copy_s=copy_s,
                error=error,
            )
            self._record(comparison)
        finally:
            self._slots.release()

    def _record(self, comparison: Comparison) -> None:
        counts = {
            ClientMetric.SHADOW_REQUESTS: 1,
            ClientMetric.SHADOW_ERRORS: int(comparison.shadow_error is not None),
            ClientMetric.SHADOW_MISMATCHES: int(comparison.shadow_error is None and not comparison.same_text),
        }
        properties = {
            "Backend": comparison.shadow,
            "AnsweredBy": comparison.answered_by,
            "Adapter": comparison.adapter,
            "LengthRatio": comparison.length_ratio,
            "AnswerLatencyMs": None if comparison.answer_latency_s is None else comparison.answer_latency_s * 1000,
            "ShadowLatencyMs": None if comparison.shadow_latency_s is None else comparison.shadow_latency_s * 1000,
            "ShadowError": comparison.shadow_error,
        }
        self._sink.record(counts, properties)
        if self._on_comparison is not None:
            try:
                self._on_comparison(comparison)
            except Exception as error:
                print(f"mangaassist_client: on_comparison failed: {error!r}", file=sys.stderr)

    def close(self, *, wait: bool = True) -> None:
        """Stop taking copies; with ``wait``, let the running ones finish."""
        self._executor.shutdown(wait=wait)
