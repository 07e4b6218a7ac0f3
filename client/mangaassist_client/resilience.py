"""Retries within a deadline and a circuit per backend.

Why our own loop and not botocore's retry modes: the client must stop retrying at a deadline the caller
sets (botocore counts attempts, never time), wait what a 503 asked for (behind SageMaker the container's
``Retry-After`` arrives only in the ``ModelError`` body, which botocore's retry handler does not read),
count every retry where the alarms see it, and hand the failure to the next backend instead of raising
it. So the clients this package makes have botocore's retries off (``total_max_attempts`` 1) and the
backoff below is botocore's standard mode's, with its numbers.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

Clock = Callable[[], float]

MAX_ATTEMPTS_DEFAULT: Final = 3
"""Tries of one backend, the first included: botocore's standard retry mode's default (``DEFAULT_MAX_ATTEMPTS``
in botocore/retries/standard.py)."""
BASE_DELAY_S_DEFAULT: Final = 1.0
MAX_DELAY_S_DEFAULT: Final = 20.0
"""Backoff before retry i after throttling: rand(0, 1) x min(1 s x 2^i, 20 s), botocore's standard mode
(``ExponentialBackoff`` in botocore/retries/standard.py: ``throttling_base_scale`` 1, growth 2,
``_MAX_BACKOFF`` 20)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How one backend is retried after ``throttled`` and ``retry_after`` failures (errors module).

    Attributes:
        max_attempts: tries of one backend, the first included (1 to 10).
        base_delay_s, max_delay_s: the backoff after throttling (:meth:`backoff_s`).
    """

    max_attempts: int = MAX_ATTEMPTS_DEFAULT
    base_delay_s: float = BASE_DELAY_S_DEFAULT
    max_delay_s: float = MAX_DELAY_S_DEFAULT

    def __post_init__(self) -> None:
        if not 1 <= self.max_attempts <= 10:
            raise ValueError(f"retry.max_attempts = {self.max_attempts}: must be from 1 to 10")
        if not 0 < self.base_delay_s <= self.max_delay_s <= 300:
            raise ValueError(
                f"retry.base_delay_s = {self.base_delay_s}, max_delay_s = {self.max_delay_s}: need "
                "0 < base_delay_s <= max_delay_s <= 300"
            )

    def backoff_s(self, retry: int, rand: float) -> float:
        """Seconds before retry ``retry`` (0 for the first) after throttling, full jitter: ``rand`` in [0, 1)."""
        return rand * min(self.max_delay_s, self.base_delay_s * 2.0**retry)


@dataclass(frozen=True, slots=True)
class CircuitPolicy:
    """When a backend's circuit opens and when it is tried again.

    The circuit opens at ``failures`` failed calls (each after its own retries) within ``window_s``;
    while open, calls go straight to the next backend; after ``open_s`` one call probes the backend
    again (half open): its success closes the circuit, its failure opens it for another ``open_s``.

    Defaults: 5 failures within 30 s, open 30 s. A SageMaker instance whose engine dies answers 503
    within a second and leaves rotation after its health checks fail (docs/sessions.md, "Out-of-memory
    containment"); five failed calls in 30 s means more than one instance failing or the endpoint
    unreachable, and one probe every 30 s costs one call's delay, not an outage, while a replacement
    instance starts (minutes).
    """

    failures: int = 5
    window_s: float = 30.0
    open_s: float = 30.0

    def __post_init__(self) -> None:
        if not 1 <= self.failures <= 1000:
            raise ValueError(f"circuit.failures = {self.failures}: must be from 1 to 1000")
        if not 0 < self.window_s <= 3600 or not 0 < self.open_s <= 3600:
            raise ValueError(
                f"circuit.window_s = {self.window_s}, open_s = {self.open_s}: each must be above 0 and at most 3600"
            )


class Admission:
    """One call's pass through a :class:`Circuit`, from :meth:`Circuit.allow` to its verdict.

    End it with :meth:`success` (the backend answered, a 4xx included), :meth:`failure` (it failed after its
    retries) or :meth:`release` (no verdict: the call ended for a reason that says nothing about the backend,
    such as an error the client does not sort or a caller that stopped reading). Used as a context manager,
    leaving the block without a verdict releases it, so every path that starts a half-open probe ends it
    (issue 53, finding 1: a probe left running kept the circuit open for the life of the process).
    Only the first verdict counts.

    Attributes:
        probe: True when this call is the circuit's half-open probe.
    """

    def __init__(self, circuit: Circuit, *, probe: bool) -> None:
        self._circuit = circuit
        self.probe = probe
        self._ended = False

    def success(self) -> bool:
        """The backend answered. Returns True when this closed the circuit."""
        if self._ended:
            return False
        self._ended = True
        return self._circuit.success(self)

    def failure(self) -> bool:
        """The call failed after its retries. Returns True when this opened the circuit (again)."""
        if self._ended:
            return False
        self._ended = True
        return self._circuit.failure(self)

    def release(self) -> None:
        """End without a verdict: a probe's slot is freed, so the next call may probe; the circuit stays as it was."""
        if not self._ended:
            self._ended = True
            self._circuit.release(self)

    def __enter__(self) -> Admission:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Circuit:
    """One backend's circuit (:class:`CircuitPolicy`); safe to share between threads."""

    def __init__(self, policy: CircuitPolicy, clock: Clock) -> None:
        self._policy = policy
        self._clock = clock
        self._lock = threading.Lock()
        self._failures: deque[float] = deque()
        self._opened_at: float | None = None
        self._probe: Admission | None = None

    @property
    def is_open(self) -> bool:
        """Open or half open (a probe may be allowed): not closed."""
        with self._lock:
            return self._opened_at is not None

    @property
    def state(self) -> str:
        """``closed``; ``open`` (calls skip the backend); ``half_open`` (the next call probes it); or
        ``probing`` (one call is probing it now)."""
        with self._lock:
            if self._opened_at is None:
                return "closed"
            if self._probe is not None:
                return "probing"
            return "half_open" if self._clock() - self._opened_at >= self._policy.open_s else "open"

    def allow(self) -> Admission | None:
        """May a call go to this backend now? Closed: yes. Open: no (None), except one probe once ``open_s``
        passed. The :class:`Admission` must be ended (use it as a context manager)."""
        with self._lock:
            if self._opened_at is None:
                return Admission(self, probe=False)
            if self._probe is not None or self._clock() - self._opened_at < self._policy.open_s:
                return None
            self._probe = Admission(self, probe=True)
            return self._probe

    def success(self, admission: Admission | None = None) -> bool:
        """The backend answered (a 4xx is an answer too). Returns True when this closed the circuit."""
        with self._lock:
            was_open = self._opened_at is not None
            self._failures.clear()
            self._opened_at, self._probe = None, None
            return was_open

    def failure(self, admission: Admission | None = None) -> bool:
        """A call failed after its retries (``admission``: the call's, None for a failure after an answer began,
        such as a stream cut after its first piece). Returns True when this opened the circuit (again)."""
        with self._lock:
            now = self._clock()
            if admission is not None and admission is self._probe:  # the probe failed: open for another open_s
                self._probe = None
                self._opened_at = now
                return True
            if self._opened_at is not None:  # a call let in before the circuit opened: it is open already
                return False
            self._failures.append(now)
            while self._failures and now - self._failures[0] > self._policy.window_s:
                self._failures.popleft()
            if len(self._failures) >= self._policy.failures:
                self._failures.clear()
                self._opened_at = now
                return True
            return False

    def release(self, admission: Admission) -> None:
        """``admission`` ended without a verdict: if it was the probe, the next call may probe."""
        with self._lock:
            if admission is self._probe:
                self._probe = None
