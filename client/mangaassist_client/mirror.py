"""Asynchronous copies of sampled calls to a second backend, stored as pairs for the migration's scoring
(seed 002, scenario 6: "100% traffic to Bedrock, 10% shadow-copied to vLLM. Compared latency, output quality,
guardrail pass rate"; issue 54).

The copy is never in the caller's latency path: the call puts it on a bounded queue (``queue_size``) and goes
on; ``workers`` threads take copies off it. A copy that finds the queue full is dropped and counted
(``ClientShadowDropped``, ``Reason`` ``queue_full``), never waited for. Each copy has a deadline of its own
(``deadline_s`` from the moment it was queued): one still queued past it is dropped (``Reason`` ``expired``);
a running one gets what remains as its read timeout, and a streamed copy is cut when it passes. A copy is
one call: no retries, no fallback; it never carries the caller's stateful session (its id would be unknown to
the other backend). When the copy has ended, the worker waits for the caller's answer (handed over with one
``Future.set_result`` when the call ends, however it ends), builds the :class:`Pair` and gives it to the store
(pairs module) and to ``on_pair``.

What is compared is not decided here: the pair keeps both answers, who answered, the adapter and language,
latencies (time to first token where streamed), tokens and the versions served, and ``ops migrate report``
scores them (docs/migration.md). No prompt is kept unless ``store_prompts``: a pair holds the prompt's SHA-256.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import queue
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Final

from mangaassist_client.backends import Backend
from mangaassist_client.errors import classify
from mangaassist_client.factory import attempt_read_timeout
from mangaassist_client.metrics import ClientMetric, MetricsSink
from mangaassist_client.model import UNDETERMINED_LANGUAGE, ChatRequest, ChatResult, Completion, Usage
from mangaassist_client.pairs import PairStore

PAIR_SCHEMA: Final = 1
ANSWER_WAIT_S: Final = 3600.0
"""Most a worker waits for the caller's answer after its copy ended (the caller hands it over when its call
ends; this bounds a stream the caller never finishes reading)."""


@dataclass(frozen=True, slots=True)
class Answered:
    """What the caller hands over when its call ends: its result (None: no backend answered), the call's
    seconds, seconds to its first piece (streams only) and why it failed (None: it answered)."""

    result: ChatResult | None
    latency_s: float | None
    ttft_s: float | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a pair (``serving_contract.migration.SIDE_FIELDS``): times in milliseconds."""

    backend: str
    model: str | None
    version: str | None
    served: Mapping[str, str | None] | None
    variant: str | None
    text: str
    error: str | None
    latency_ms: float | None
    ttft_ms: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None

    @classmethod
    def of(
        cls,
        backend: str,
        model: str | None,
        done: Completion | ChatResult | None,
        *,
        seconds: tuple[float | None, float | None],
        error: str | None,
    ) -> Side:
        """A side from what answered (``done``; None when nothing did), its ``(latency, ttft)`` seconds and error."""
        latency_s, ttft_s = seconds
        served = done.served if done is not None else None
        usage = done.usage if done is not None else Usage()
        return cls(
            backend=backend,
            model=model,
            version=done.version if done is not None else None,
            served={"base_model": served.base_model, "adapter": served.adapter} if served is not None else None,
            variant=done.variant if done is not None else None,
            text=done.text if done is not None else "",
            error=error,
            latency_ms=None if latency_s is None or done is None else round(latency_s * 1000, 3),
            ttft_ms=None if ttft_s is None or done is None else round(ttft_s * 1000, 3),
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            finish_reason=done.finish_reason if done is not None else None,
        )


@dataclass(frozen=True, slots=True)
class Pair:
    """One call's answer and its copy (``serving_contract/migration.py`` has the record's schema).

    Attributes:
        request_id: the call's id (SageMaker's ``InferenceId`` too).
        at: when the call was made, ISO 8601 UTC with milliseconds.
        adapter, language: the request's (``und`` when the caller named no language).
        stream: whether the caller streamed (then both sides have a TTFT).
        prompt_sha256: SHA-256 of the messages as JSON (sorted keys, UTF-8).
        answer, copy: the two :class:`Side`.
        messages: the prompt, only with ``store_prompts``.
    """

    request_id: str
    at: str
    adapter: str
    language: str
    stream: bool
    prompt_sha256: str
    answer: Side
    copy: Side
    messages: tuple[Mapping[str, str], ...] | None = None

    def record(self) -> dict[str, Any]:
        """The JSON-ready object the store writes."""
        record: dict[str, Any] = {
            "schema": PAIR_SCHEMA,
            "request_id": self.request_id,
            "at": self.at,
            "adapter": self.adapter,
            "language": self.language,
            "stream": self.stream,
            "prompt_sha256": self.prompt_sha256,
            "answer": dataclasses.asdict(self.answer),
            "copy": dataclasses.asdict(self.copy),
        }
        if self.messages is not None:
            record["messages"] = [dict(m) for m in self.messages]
        return record


def prompt_sha256(request: ChatRequest) -> str:
    """SHA-256 (hex) of the request's messages as JSON: equal prompts, equal digests, no text kept."""
    text = json.dumps([dict(m) for m in request.messages], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class _Copy:
    request: ChatRequest
    backend: Backend
    stream: bool
    answer: Future[Answered]
    queued_at: float
    at: str


def _safely(what: str, consumer: Callable[[Any], object], value: Any) -> None:
    """``consumer(value)``; its error is printed, never raised into a worker."""
    try:
        consumer(value)
    except Exception as error:
        print(f"mangaassist_client: {what} failed: {error!r}", file=sys.stderr)


def _describe(failure: Exception, backend: str) -> str:
    return str(classify(failure, backend) or f"{type(failure).__name__}: {str(failure)[:300]}")


class Mirror:
    """Copies sampled calls asynchronously (module docstring).

    Args:
        workers: copies running at once (``MirrorConfig.max_in_flight``).
        queue_size: copies waiting at most; one more is dropped and counted.
        deadline_s: each copy's seconds from being queued to its end.
        sink: where the counts go.
        clock: monotonic seconds.
        now: the wall clock (a pair's ``at``).
        store: where pairs go, or None (``on_pair`` only).
        on_pair: called on the worker thread with each :class:`Pair`; its errors are printed, not raised.
        store_prompts: keep the messages in each pair.
    """

    def __init__(
        self,
        *,
        workers: int,
        queue_size: int,
        deadline_s: float,
        sink: MetricsSink,
        clock: Callable[[], float],
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        store: PairStore | None = None,
        on_pair: Callable[[Pair], object] | None = None,
        store_prompts: bool = False,
    ) -> None:
        self._sink, self._clock, self._now = sink, clock, now
        self._deadline_s = deadline_s
        self.store, self._on_pair, self._store_prompts = store, on_pair, store_prompts
        self._queue: queue.Queue[_Copy | None] = queue.Queue(maxsize=queue_size)
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, daemon=True, name=f"mangaassist-mirror-{n}") for n in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def start(self, request: ChatRequest, backend: Backend, *, stream: bool) -> Future[Answered] | None:
        """Queue a copy of ``request`` to ``backend``; returns the future the caller sets with its
        :class:`Answered`, or None when the copy was dropped (queue full, or the mirror closed)."""
        answer: Future[Answered] = Future()
        moment = self._now().astimezone(dt.UTC)
        at = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
        copy = _Copy(dataclasses.replace(request, session_id=None), backend, stream, answer, self._clock(), at)
        if self._closed:
            self._dropped(backend, "closed")
            return None
        try:
            self._queue.put_nowait(copy)
        except queue.Full:
            self._dropped(backend, "queue_full")
            return None
        return answer

    def _dropped(self, backend: Backend, reason: str) -> None:
        self._sink.record({ClientMetric.SHADOW_DROPPED: 1}, {"Backend": backend.name, "Reason": reason})

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                self._run(item)
            except Exception as error:  # a bug here must not end the worker
                print(f"mangaassist_client: mirror copy failed: {error!r}", file=sys.stderr)

    def _run(self, item: _Copy) -> None:
        remaining = self._deadline_s - (self._clock() - item.queued_at)
        if remaining <= 0:
            self._dropped(item.backend, "expired")
            return
        copy = self._copy(item, remaining)
        try:
            answered = item.answer.result(timeout=ANSWER_WAIT_S)
        except FutureTimeout:
            answered = Answered(None, None, error=f"the caller's answer was not handed over in {ANSWER_WAIT_S:g} s")
        result = answered.result
        answer = Side.of(
            result.backend if result else "none",
            result.model if result else None,
            result,
            seconds=(answered.latency_s, answered.ttft_s),
            error=answered.error,
        )
        request = item.request
        pair = Pair(
            request_id=request.request_id or "",
            at=item.at,
            adapter=request.adapter,
            language=request.language or UNDETERMINED_LANGUAGE,
            stream=item.stream,
            prompt_sha256=prompt_sha256(request),
            answer=answer,
            copy=copy,
            messages=request.messages if self._store_prompts else None,
        )
        self._record(pair)

    def _copy(self, item: _Copy, remaining_s: float) -> Side:
        """Make the copy's one call within ``remaining_s``; its :class:`Side`, failed or not."""
        backend, request = item.backend, item.request
        origin = backend.origin(request.adapter)
        model = origin.model if origin is not None else None
        started = self._clock()
        done: Completion | None = None
        ttft: float | None = None
        error: str | None = None
        try:
            if origin is None:
                raise LookupError(f"{backend.name} has no model for adapter {request.adapter!r}")
            with attempt_read_timeout(remaining_s):
                if item.stream:
                    done, ttft = self._streamed(backend, request, started + remaining_s)
                else:
                    done = backend.complete(request)
        except Exception as failure:  # the copy's failure is counted and stored, never raised to anyone
            done, error = None, _describe(failure, backend.name)
        seconds = (self._clock() - started, None if ttft is None else ttft - started)
        return Side.of(backend.name, model, done, seconds=seconds, error=error)

    def _streamed(self, backend: Backend, request: ChatRequest, deadline: float) -> tuple[Completion, float | None]:
        """A streamed copy read to its end (or cut at ``deadline``): its completion and first piece's time."""
        stream = backend.stream(request)
        parts: list[str] = []
        first: float | None = None
        try:
            for piece in stream:
                if first is None:
                    first = self._clock()
                parts.append(piece)
                if self._clock() > deadline:
                    raise TimeoutError(f"copy deadline passed after {len(parts)} piece(s)")
        finally:
            stream.close()
        completion = Completion(
            text="".join(parts),
            usage=stream.usage,
            version=stream.version,
            finish_reason=stream.finish_reason,
            served=stream.served,
            context_budget=stream.context_budget,
            variant=stream.variant,
        )
        return completion, first

    def _record(self, pair: Pair) -> None:
        counts = {ClientMetric.SHADOW_REQUESTS: 1, ClientMetric.SHADOW_ERRORS: int(pair.copy.error is not None)}
        properties = {
            "Backend": pair.copy.backend,
            "AnsweredBy": pair.answer.backend,
            "Adapter": pair.adapter,
            "Language": pair.language,
            "RequestId": pair.request_id,
            "AnswerLatencyMs": pair.answer.latency_ms,
            "ShadowLatencyMs": pair.copy.latency_ms,
            "ShadowTtftMs": pair.copy.ttft_ms,
            "ShadowError": pair.copy.error,
        }
        self._sink.record(counts, properties)
        if self.store is not None:
            _safely("the pair store", self.store.put, pair.record())
        if self._on_pair is not None:
            _safely("on_pair", self._on_pair, pair)

    def close(self) -> None:
        """Stop taking copies, let the queued and running ones finish, then close the store."""
        self._closed = True
        for _ in self._threads:
            self._queue.put(None)  # after the queued copies: each worker ends once the queue is empty
        for thread in self._threads:
            thread.join()
        if self.store is not None:
            self.store.close()
