"""In-flight request tracking and the SIGTERM drain.

SageMaker sends SIGKILL 30 s after SIGTERM (docs/sources.md, "Container contract"). The gateway stops taking new
work at once (``/ping`` and ``/invocations`` answer 503), waits up to DRAIN_TIMEOUT_S
(<= 25 s) for requests it is serving, streams included, and only then stops vLLM.
"""

from __future__ import annotations

import asyncio


class InflightTracker:
    """Counts requests being served; ``wait_idle`` resolves when the count reaches zero."""

    def __init__(self) -> None:
        self.count = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def enter(self) -> None:
        self.count += 1
        self._idle.clear()

    def exit(self) -> None:
        self.count -= 1
        if self.count <= 0:
            self.count = 0
            self._idle.set()

    async def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no request is in flight; False if ``timeout_s`` ran out first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout=max(timeout_s, 0.0))
        except TimeoutError:
            return False
        return True
