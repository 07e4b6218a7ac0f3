"""Live SageMaker stateful sessions: ids, expiry and a bound on how many exist.

A session here carries no state of its own: what a conversation gains from it is SageMaker
routing every request with the id to this instance, where vLLM's prefix cache still holds the
conversation's earlier turns. The store only answers "is this id one we issued and still
live?" and refuses new sessions past ``max_live``.

Why not model-hosting-container-standards' ``SessionManager`` (``sagemaker/sessions/manager.py``,
0.1.16, what vLLM 0.26's own ``/invocations`` uses): it keeps a directory per session on
``/dev/shm`` and writes a file on every create under a thread lock (the gateway stores nothing
per session), has no bound on live sessions, is built around FastAPI's ``Request`` and
``HTTPException`` with one process-global manager read from ``SAGEMAKER_*`` variables at import,
and would bring fastapi, jmespath and supervisor into the gateway's environment. Its wire
contract is kept exactly: uuid4 ids, ``Expires`` as ``%Y-%m-%dT%H:%M:%SZ`` (UTC), 1200 s default
lifetime, an unknown id is an error, an expired one is forgotten and the request still served.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

EXPIRES_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"
"""How the ``Expires`` part of ``X-Amzn-SageMaker-New-Session-Id`` is written
(model_hosting_container_standards ``sagemaker/sessions/handlers.py``, ``create_session``)."""

MAX_ID_CHARS: Final = 256
"""Longest id accepted in a header; ours are 36-character uuid4 strings."""


class SessionLimitError(Exception):
    """``max_live`` sessions are live; no new one until one closes or expires."""


class UnknownSessionError(Exception):
    """The id was never issued by this instance, or it was closed."""


@dataclass(frozen=True, slots=True)
class Session:
    """One live session: ``expires_at`` is a Unix timestamp in seconds (UTC)."""

    session_id: str
    expires_at: float

    def header_value(self) -> str:
        """``<id>; Expires=<UTC timestamp>`` for ``X-Amzn-SageMaker-New-Session-Id``."""
        expires = datetime.fromtimestamp(self.expires_at, tz=UTC).strftime(EXPIRES_FORMAT)
        return f"{self.session_id}; Expires={expires}"


class SessionStore:
    """In-memory registry of live sessions (one event loop: no locks needed).

    Args:
        max_live: most sessions live at once (config ``container.sessions_max``); creating one
            more raises :class:`SessionLimitError`.
        ttl_s: a session's lifetime from creation, seconds.
        clock: Unix time in seconds (tests pass a fake one).
    """

    def __init__(self, *, max_live: int, ttl_s: float, clock: Callable[[], float] = time.time) -> None:
        if max_live < 1:
            raise ValueError(f"max_live={max_live} must be >= 1")
        if ttl_s <= 0:
            raise ValueError(f"ttl_s={ttl_s} must be > 0")
        self.max_live = max_live
        self.ttl_s = ttl_s
        self._clock = clock
        self._live: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._live)

    def create(self) -> Session:
        """A new session expiring ``ttl_s`` from now.

        Raises:
            SessionLimitError: ``max_live`` sessions are live after dropping the expired ones.
        """
        now = self._clock()
        if len(self._live) >= self.max_live:
            self._sweep(now)  # O(n), only when full: expired sessions are dropped lazily otherwise
            if len(self._live) >= self.max_live:
                raise SessionLimitError(f"{self.max_live} sessions are live")
        session = Session(str(uuid.uuid4()), now + self.ttl_s)
        self._live[session.session_id] = session.expires_at
        return session

    def touch(self, session_id: str) -> bool:
        """Check an id a request carries: True when live, False when it just expired (it is
        forgotten; the request is still served, as in the library).

        Raises:
            UnknownSessionError: never issued, already closed or expired earlier.
        """
        expires_at = self._live.get(session_id)
        if expires_at is None:
            raise UnknownSessionError(session_id)
        if self._clock() > expires_at:
            del self._live[session_id]
            return False
        return True

    def close(self, session_id: str) -> None:
        """End a session.

        Raises:
            UnknownSessionError: not live (never issued, closed, or expired).
        """
        expires_at = self._live.pop(session_id, None)
        if expires_at is None or self._clock() > expires_at:
            raise UnknownSessionError(session_id)

    def _sweep(self, now: float) -> None:
        for session_id in [sid for sid, expires_at in self._live.items() if now > expires_at]:
            del self._live[session_id]
