"""The client: one call shape over the configured backends, with retries, fallback, circuits, sessions,
shadow, canary and the migration's ramp.

The rules (seed 002's OOM containment ends in "fall back to Bedrock"; errors module for the sorting):

* throttling, and a 503 that says when to come back, are retried on the same backend while the wait fits
  the call's deadline (at most ``retry.max_attempts`` tries);
* a 5xx, a timeout, a throttled backend out of tries or an open circuit sends the call to the next backend;
* a 4xx is the caller's: raised as :class:`~mangaassist_client.errors.CallerError`, never sent elsewhere;
* a backend whose model lacks the request's adapter (a foundation model through Converse) answers only when
  the caller allows a substitute (``allow_substitute`` on the call or in the config); otherwise it is
  skipped with a reason that says how to allow it (issue 53, finding 6), and every result names the model
  and adapter that answered (:class:`~mangaassist_client.model.Origin`), a stream's before its first piece;
* a stream that fails after its first token raises :class:`~mangaassist_client.errors.StreamInterruptedError`
  with the text so far: it is not restarted elsewhere, silently or otherwise;
* every call writes one metrics line: requests, retries, fallbacks, circuits opened, streams interrupted,
  calls no backend answered (metrics module), which the Observability stack's client-fallback-rate and
  client-unanswered-rate alarms read;
* with a mirror in ``shadow`` mode, a sampled share of calls is copied asynchronously to the backend that did
  not answer and each answer and its copy are stored as a pair (mirror module); with its ``ramp``, the
  mirror backend answers the share the ramp's state names (docs/migration.md).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from mangaassist_client.backends import Backend, BackendStream
from mangaassist_client.config import ClientConfig, MirrorConfig
from mangaassist_client.errors import (
    BackendUnavailableError,
    CallerError,
    Failure,
    FailureKind,
    StreamInterruptedError,
    classify,
)
from mangaassist_client.factory import (
    ClientFactory,
    attempt_read_timeout,
    backend_name,
    default_factory,
    make_backend,
)
from mangaassist_client.metrics import ClientMetric, EmfSink, MetricsSink
from mangaassist_client.mirror import Answered, Mirror, Pair
from mangaassist_client.model import (
    OPTIONAL_FIELDS,
    REQUIRED_FIELDS,
    ChatRequest,
    ChatResult,
    Completion,
    Origin,
    chat_request,
    check_flag,
)
from mangaassist_client.pairs import PairStore, S3PairStore
from mangaassist_client.ramp import RampShare
from mangaassist_client.resilience import Admission, Circuit
from mangaassist_client.sagemaker import SageMakerBackend
from mangaassist_client.session import Session
from mangaassist_client.stream import ChatStream

T = TypeVar("T")
log = logging.getLogger("mangaassist_client")


class _BackendGaveUpError(Exception):
    """One backend gave up on a call (after its retries): the next one is tried."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(str(failure))
        self.failure = failure


@dataclass(frozen=True, slots=True)
class _Turn:
    """One backend's turn at a call: its circuit admission, the call's deadline (monotonic seconds) and
    whether another backend follows it in the chain."""

    backend: Backend
    origin: Origin
    admission: Admission
    deadline: float
    fallback_follows: bool


@dataclass
class _Tally:
    """What happened during one call: its metrics line."""

    stream: bool
    retries: int = 0
    fallback: bool = False
    circuits_opened: int = 0
    interrupted: bool = False
    canary: bool = False
    backend: str | None = None
    outcome: str = "unavailable"
    failures: list[Failure] = field(default_factory=list)
    error: str | None = None
    """An error the client does not sort (``errors.classify``), raised to the caller as it is."""

    @property
    def unanswered(self) -> bool:
        """No backend answered: every one failed or was skipped, or an error ended the call."""
        return self.outcome in ("unavailable", "error")


def _why(tally: _Tally) -> str | None:
    """Why the call ended without an answer (None when it answered): its outcome and failures, one line."""
    if tally.outcome == "ok":
        return None
    reasons = [str(f) for f in tally.failures] + ([tally.error] if tally.error else [])
    return f"{tally.outcome}: {'; '.join(reasons)}"[:1000] if reasons else tally.outcome


class MangaAssistClient:
    """Chat with MangaAssist's endpoint, with Bedrock behind it (module docstring for the rules).

    Args:
        config: backends and policies (``config_from_outputs_file`` / ``config_from_stacks`` read the stacks').
        metrics: where the counts go; default an :class:`~mangaassist_client.metrics.EmfSink` on stdout.
        client_factory: ``(service, region) -> boto3 client``; default one boto3 session's clients with
            :func:`botocore_config`. Each client gets a ``before-call`` handler that sets a call's read
            timeout from its deadline (``factory.bound_read_timeouts``); keep botocore's retries off in yours.
        on_pair: receives each shadow :class:`~mangaassist_client.mirror.Pair` (on a mirror worker thread).
        pair_store: where the mirror's pairs go, in place of the S3 store ``MirrorConfig.store`` describes
            (e.g. a :class:`~mangaassist_client.pairs.DirectoryPairStore`).
        clock, sleep, rand: monotonic seconds, sleeping, uniform [0, 1) (tests replace them).

    A config without fallbacks is logged as a warning (logger ``mangaassist_client``): such a client raises
    :class:`~mangaassist_client.errors.BackendUnavailableError` whenever the endpoint cannot answer.
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        metrics: MetricsSink | None = None,
        client_factory: ClientFactory | None = None,
        on_pair: Callable[[Pair], object] | None = None,
        pair_store: PairStore | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.config = config
        self.metrics = (
            metrics
            if metrics is not None
            else EmfSink(endpoint_name=config.endpoint_dimension, namespace=config.metrics_namespace)
        )
        if not config.fallbacks:  # issue 53, finding 3: a client without one looked fine until the first outage
            log.warning(
                "mangaassist_client: no fallback: when %s cannot answer, calls raise BackendUnavailableError "
                "(counted as ClientUnanswered). Deploy the BedrockImport stack with bedrock.models[].adapter set "
                "(config_from_outputs_file reads it), or give ClientConfig(fallbacks=...) or foundation_model=...",
                backend_name(config.primary),
            )
        factory = client_factory or default_factory(config.attempt_timeout)
        self.backends: list[Backend] = [make_backend(spec, factory) for spec in (config.primary, *config.fallbacks)]
        self._circuits = {b.name: Circuit(config.circuit, clock) for b in self.backends}
        self._clock, self._sleep, self._rand = clock, sleep, rand
        mirror = config.mirror
        self._mirror_backend = make_backend(mirror.backend, factory) if mirror else None
        if self._mirror_backend is not None:
            self._circuits.setdefault(self._mirror_backend.name, Circuit(config.circuit, clock))
        self._mirror: Mirror | None = None
        self._ramp: RampShare | None = None
        if mirror is not None and mirror.mode == "shadow":
            self._mirror = self._make_mirror(mirror, factory, pair_store, on_pair)
        if mirror is not None and mirror.ramp is not None:
            ssm = factory("ssm", mirror.ramp.region)
            self._ramp = RampShare(ssm, mirror.ramp.parameter_name, refresh_s=mirror.ramp.refresh_s, clock=clock)

    def _make_mirror(
        self,
        mirror: MirrorConfig,
        factory: ClientFactory,
        store: PairStore | None,
        on_pair: Callable[[Pair], object] | None,
    ) -> Mirror:
        """The copies' workers and, unless the caller gave one, the S3 store ``mirror.store`` describes."""
        if store is None and mirror.store is not None:
            settings = mirror.store
            store = S3PairStore(
                factory("s3", settings.region),
                bucket=settings.bucket,
                kms_key_arn=settings.kms_key_arn,
                sink=self.metrics,
                batch_size=settings.batch_size,
                flush_interval_s=settings.flush_interval_s,
            )
        return Mirror(
            workers=mirror.max_in_flight,
            queue_size=mirror.queue_size,
            deadline_s=mirror.deadline_s,
            sink=self.metrics,
            clock=self._clock,
            store=store,
            on_pair=on_pair,
            store_prompts=bool(mirror.store and mirror.store.store_prompts),
        )

    def circuit(self, backend: str) -> Circuit:
        """The circuit of the backend named ``backend``."""
        return self._circuits[backend]

    # -- the public calls ------------------------------------------------------------------------------

    def chat(
        self,
        *,
        deadline_s: float | None = None,
        session_id: str | None = None,
        allow_substitute: bool | None = None,
        **fields: Any,
    ) -> ChatResult:
        """One whole answer. ``fields`` are :func:`~mangaassist_client.model.chat_request`'s (``adapter``,
        ``messages``, ``max_tokens``, ``temperature``, ``top_p``, ``context_budget``, ``prefix_aware_id``).

        Args:
            deadline_s: seconds the whole call may take, retries and fallback included (None: the config's).
            session_id: the SageMaker stateful session (:meth:`open_session` sets it).
            allow_substitute: whether a model without the requested adapter may answer (a foundation model
                through Converse); None: ``ClientConfig.allow_substitute``.

        Raises:
            ValueError: a bad field (one line).
            CallerError: a 4xx from the backend that took the call.
            BackendUnavailableError: no backend answered within the deadline (or the only ones left lack the
                adapter and no substitute was allowed: its message says how to allow one).
        """
        request = self._request(fields, session_id, allow_substitute)
        deadline = self._deadline(deadline_s)
        tally = _Tally(stream=False)
        chain = self._chain(tally)
        copy = self._copy_for(request, chain, stream=False)
        started, result = self._clock(), None
        try:
            for turn in self._usable(chain, request, tally, deadline):
                with turn.admission:  # whatever ends the call ends a probe it started (issue 53, finding 1)
                    completion = self._on(turn, tally, partial(self._attempts, turn, request, tally))
                    if completion is not None:
                        turn.admission.success()
                        result = self._answered(turn, completion, tally)
                        return result
            raise BackendUnavailableError(tuple(tally.failures))
        finally:
            self._finish(request, tally, copy, Answered(result, self._clock() - started, error=_why(tally)))

    def chat_stream(
        self,
        *,
        deadline_s: float | None = None,
        session_id: str | None = None,
        allow_substitute: bool | None = None,
        **fields: Any,
    ) -> ChatStream:
        """A streamed answer (arguments as :meth:`chat`). Validation errors raise here; the call starts at
        :meth:`ChatStream.start` (which returns the :class:`~mangaassist_client.model.Origin` of the answer
        before its first piece is taken) or the first ``next()``, and either raises what :meth:`chat` raises;
        iterating raises :class:`~mangaassist_client.errors.StreamInterruptedError` after the first piece."""
        request = self._request(fields, session_id, allow_substitute)
        deadline = self._deadline(deadline_s)
        return ChatStream(lambda handle: self._stream(request, deadline, handle))

    def open_session(self) -> Session:
        """A SageMaker stateful session on the first SageMaker backend (docs/sessions.md). When it cannot be
        opened (or no backend is SageMaker) the session works without one: calls still answer, only
        without the instance affinity; :attr:`Session.open_failure` says why."""
        backend = next((b for b in self.backends if isinstance(b, SageMakerBackend)), None)
        session = Session(self, backend)
        session.open()
        return session

    def close(self) -> None:
        """Let queued and running shadow copies finish, write the pairs left, then close the metrics sink."""
        if self._mirror is not None:
            self._mirror.close()
        self.metrics.close()

    def __enter__(self) -> MangaAssistClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one call --------------------------------------------------------------------------------------

    def _request(self, fields: Mapping[str, Any], session_id: str | None, allow_substitute: bool | None) -> ChatRequest:
        unknown = sorted(set(fields) - {*REQUIRED_FIELDS, *OPTIONAL_FIELDS})
        if unknown:
            raise ValueError(
                f"{', '.join(unknown)}: unknown field; allowed {', '.join(REQUIRED_FIELDS + OPTIONAL_FIELDS)}"
            )
        missing = [name for name in REQUIRED_FIELDS if name not in fields]
        if missing:
            raise ValueError(f"{', '.join(missing)}: required")
        allow = (
            self.config.allow_substitute
            if allow_substitute is None
            else check_flag("allow_substitute", allow_substitute)
        )
        return dataclasses.replace(
            chat_request(**fields), session_id=session_id, allow_substitute=allow, request_id=uuid.uuid4().hex
        )

    def _deadline(self, deadline_s: float | None) -> float:
        seconds = self.config.deadline_s if deadline_s is None else deadline_s
        if not 0 < seconds <= 3600:
            raise ValueError(f"deadline_s = {seconds}: must be above 0 and at most 3600")
        return self._clock() + seconds

    def _canary_share(self) -> float:
        """The share of calls the mirror backend answers: the ramp's, the canary's, or none."""
        mirror = self.config.mirror
        if self._ramp is not None:
            return self._ramp.share()
        return mirror.share if mirror is not None and mirror.mode == "canary" else 0.0

    def _chain(self, tally: _Tally) -> Sequence[Backend]:
        share = self._canary_share()
        if self._mirror_backend is not None and share > 0 and self._rand() < share:
            tally.canary = True
            canary = self._mirror_backend
            return [canary, *(backend for backend in self.backends if backend.name != canary.name)]
        return self.backends

    def _copy_for(self, request: ChatRequest, chain: Sequence[Backend], *, stream: bool) -> Future[Answered] | None:
        """Queue a sampled call's copy, to the backend that is not first in ``chain`` (the mirror backend, or
        during the ramp the primary when the mirror backend answers)."""
        mirror = self.config.mirror
        if self._mirror is None or self._mirror_backend is None or mirror is None or self._rand() >= mirror.share:
            return None
        other = self.backends[0] if chain[0] is self._mirror_backend else self._mirror_backend
        return self._mirror.start(request, other, stream=stream)

    def _usable(
        self, chain: Sequence[Backend], request: ChatRequest, tally: _Tally, deadline: float
    ) -> Iterator[_Turn]:
        """The backends of ``chain`` that may take the call now, in order, each as a :class:`_Turn` whose
        admission the caller must end; the others' reasons go to the tally."""
        for index, backend in enumerate(chain):
            if self._clock() >= deadline:
                tally.failures.append(Failure(backend.name, FailureKind.TIMEOUT, None, "Deadline", "deadline passed"))
                return
            origin = backend.origin(request.adapter)
            refusal = self._refusal(origin, request)
            if origin is None or refusal:
                tally.failures.append(Failure(backend.name, FailureKind.NOT_SERVED, None, "NotServed", refusal))
                continue
            admission = self._circuits[backend.name].allow()
            if admission is None:
                tally.failures.append(Failure(backend.name, FailureKind.CIRCUIT_OPEN, None, "CircuitOpen", "open"))
                continue
            tally.fallback = tally.fallback or index > 0
            yield _Turn(backend, origin, admission, deadline, fallback_follows=index < len(chain) - 1)

    @staticmethod
    def _refusal(origin: Origin | None, request: ChatRequest) -> str:
        """Why a backend may not answer ``request`` ("" when it may): it has no model for the adapter, or its
        model lacks the adapter and the caller allowed no substitute (issue 53, finding 6)."""
        if origin is None:
            return f"no model for adapter {request.adapter!r}"
        if origin.adapter is None and not request.allow_substitute:
            return (
                f"{origin.model} has no adapter {request.adapter!r}; let it answer without the adapter with "
                "allow_substitute=True on the call, or ClientConfig(allow_substitute=True)"
            )
        return ""

    def _on(self, turn: _Turn, tally: _Tally, call: Callable[[], T]) -> T | None:
        """``call()`` on the turn's backend: its value, or None when the backend gave up (the circuit and tally
        told). A caller error is raised; it closes the circuit too (the backend answered). Any other error
        is raised as it is, leaving the admission to the caller's ``with`` block, which releases it."""
        try:
            return call()
        except CallerError:
            turn.admission.success()
            tally.backend, tally.outcome = turn.backend.name, "caller_error"
            raise
        except _BackendGaveUpError as failed:
            tally.failures.append(failed.failure)
            if failed.failure.kind is FailureKind.DRAINING:  # an instance leaving, not the endpoint failing
                turn.admission.release()
            else:
                tally.circuits_opened += turn.admission.failure()
            return None
        except Exception as error:  # no backend's failure (NoCredentialsError, a bug): the caller's to see
            tally.backend, tally.outcome = turn.backend.name, "error"
            tally.error = f"{turn.backend.name}: {type(error).__name__}: {str(error)[:300]}"
            raise

    def _attempts(self, turn: _Turn, request: ChatRequest, tally: _Tally) -> Completion:
        return self._retrying(turn, partial(turn.backend.complete, request), tally)

    def _share_s(self, turn: _Turn) -> float:
        """Seconds the turn's backend may take from now, its tries and waits together: what remains of the
        deadline, half of it when a fallback follows (so a hung backend leaves the fallback the other half;
        issue 53, finding 2)."""
        remaining = turn.deadline - self._clock()
        return remaining / 2 if turn.fallback_follows else remaining

    def _read_timeout_s(self, turn: _Turn) -> float:
        """botocore's read timeout of the turn's next try: its :meth:`_share_s`, at most
        ``ClientConfig.attempt_timeout_s`` when set."""
        cap = self.config.attempt_timeout_s
        share = self._share_s(turn)
        return share if cap is None else min(share, cap)

    def _retrying(self, turn: _Turn, call: Callable[[], T], tally: _Tally) -> T:
        """``call()`` with retries (module docstring), each try's read timeout its :meth:`_read_timeout_s`;
        raises :class:`CallerError` or :class:`_BackendGaveUpError`."""
        retry = 0
        while True:
            try:
                with attempt_read_timeout(self._read_timeout_s(turn)):
                    return call()
            except Exception as error:
                failure = classify(error, turn.backend.name)
                if failure is None:
                    raise
                if failure.kind is FailureKind.CALLER:
                    raise CallerError(failure) from error
            wait = self._retry_wait(failure, retry, turn)
            if wait is None:
                raise _BackendGaveUpError(failure)
            tally.retries += 1
            retry += 1
            self._sleep(wait)

    def _retry_wait(self, failure: Failure, retry: int, turn: _Turn) -> float | None:
        """Seconds before the next try, or None: no retry (wrong kind, out of tries, or a wait that would not
        end within the turn's :meth:`_share_s`, which keeps the fallback's share of the deadline).

        Throttling without advice waits botocore's full-jitter backoff. A wait the backend asked for
        (``Retry-After``, a drain's 1 s) is that long plus full jitter of up to as many seconds again, cut at
        the turn's budget: callers that met the same 503 come back spread out, never before they were asked
        to (issue 53, finding 5)."""
        policy = self.config.retry
        if retry + 1 >= policy.max_attempts:
            return None
        budget = self._share_s(turn)
        asked = failure.retry_after_s
        if failure.kind is FailureKind.THROTTLED:
            wait = policy.backoff_s(retry, self._rand())
            if asked is not None:
                wait = max(wait, self._jittered(asked, budget))
        elif failure.kind in (FailureKind.RETRY_AFTER, FailureKind.DRAINING) and asked is not None:
            wait = self._jittered(asked, budget)
        else:
            return None
        return wait if wait < budget else None

    def _jittered(self, asked_s: float, budget_s: float) -> float:
        """``asked_s`` plus a uniform share of the span up to ``2 x asked_s`` or ``budget_s``, whichever is less
        (``asked_s`` itself when it does not fit: the caller then gives up)."""
        return asked_s + self._rand() * max(0.0, min(2 * asked_s, budget_s) - asked_s)

    def _answered(self, turn: _Turn, completion: Completion, tally: _Tally) -> ChatResult:
        tally.backend, tally.outcome = turn.backend.name, "ok"
        return ChatResult.of(completion, turn.origin, tuple(str(f) for f in tally.failures))

    def _finish(self, request: ChatRequest, tally: _Tally, copy: Future[Answered] | None, answer: Answered) -> None:
        counts = {
            ClientMetric.REQUESTS: 1,
            ClientMetric.RETRIES: tally.retries,
            ClientMetric.FALLBACKS: int(tally.fallback),
            ClientMetric.CIRCUIT_OPENED: tally.circuits_opened,
            ClientMetric.STREAMS_INTERRUPTED: int(tally.interrupted),
            ClientMetric.CANARY_REQUESTS: int(tally.canary),
            ClientMetric.UNANSWERED: int(tally.unanswered),
        }
        properties = {
            "Backend": tally.backend,
            "Adapter": request.adapter,
            "Outcome": tally.outcome,
            "Stream": tally.stream,
            "Failures": [str(f) for f in tally.failures] + ([tally.error] if tally.error else []),
        }
        self.metrics.record(counts, properties)
        if copy is not None:
            copy.set_result(answer)

    # -- streams ---------------------------------------------------------------------------------------

    def _first_piece(self, backend: Backend, request: ChatRequest) -> tuple[BackendStream, str]:
        """Start a stream and read to its first text piece ("" when it ends first): failures up to here
        are retried and fall back like any call's."""
        stream = backend.stream(request)
        try:
            return stream, next(iter(stream), "")
        except BaseException:
            stream.close()
            raise

    def _stream(self, request: ChatRequest, deadline: float, handle: ChatStream) -> Generator[str, None, None]:
        tally = _Tally(stream=True)
        chain = self._chain(tally)
        copy = self._copy_for(request, chain, stream=True)
        started = self._clock()
        first_at: float | None = None
        try:
            for turn in self._usable(chain, request, tally, deadline):
                with turn.admission:
                    first_piece = partial(self._first_piece, turn.backend, request)
                    opened = self._on(turn, tally, partial(self._retrying, turn, first_piece, tally))
                    if opened is not None:
                        # The backend answered (a first piece, or a stream that ended before one): the circuit's
                        # verdict is given now, so a caller that stops reading leaves no probe running (issue 53,
                        # finding 1); a failure after this is counted on its own (_relay).
                        turn.admission.success()
                if opened is not None:
                    first_at = self._clock()
                    handle.origin = turn.origin  # before the first piece reaches the caller
                    yield from self._relay(turn, *opened, tally, handle)
                    return
            raise BackendUnavailableError(tuple(tally.failures))
        except GeneratorExit:
            tally.outcome = "closed"
            raise
        finally:
            ttft = None if first_at is None else first_at - started
            answered = Answered(handle.result, self._clock() - started, ttft, _why(tally))
            self._finish(request, tally, copy, answered)

    def _relay(
        self, turn: _Turn, stream: BackendStream, first: str, tally: _Tally, handle: ChatStream
    ) -> Generator[str, None, None]:
        """The committed stream's pieces; a failure now is the caller's to know about, never a fallback."""
        backend = turn.backend
        parts = [first] if first else []
        try:
            if first:
                yield first
            for piece in stream:
                parts.append(piece)
                yield piece
        except GeneratorExit:
            stream.close()
            raise
        except Exception as error:
            failure = classify(error, backend.name) or Failure(
                backend.name, FailureKind.SERVER, None, type(error).__name__, str(error)[:300]
            )
            tally.failures.append(failure)
            tally.circuits_opened += self._circuits[backend.name].failure()
            tally.backend, tally.outcome, tally.interrupted = backend.name, "interrupted", True
            raise StreamInterruptedError("".join(parts), failure) from error
        completion = Completion(
            text="".join(parts),
            usage=stream.usage,
            version=stream.version,
            finish_reason=stream.finish_reason,
            served=stream.served,
            context_budget=stream.context_budget,
            variant=stream.variant,
        )
        handle.result = self._answered(turn, completion, tally)
