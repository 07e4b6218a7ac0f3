"""The vLLM child process: start, watch, stop.

vLLM runs in its own session (process group) so the stop sequence is ours: SIGTERM first
(vLLM then drains for ``--shutdown-timeout`` s), SIGKILL to the whole group when the grace
period ends, so no engine-core worker outlives the container's PID 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Mapping, Sequence

log = logging.getLogger("serving_app.engine")


class EngineProcess:
    """Owns the vLLM subprocess. ``command`` is the full argv (executable first)."""

    def __init__(self, command: Sequence[str], environ: Mapping[str, str]) -> None:
        self.command = list(command)
        self.environ = dict(environ)
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        """Spawn the engine; its stdout/stderr are inherited (they reach CloudWatch too)."""
        self.process = await asyncio.create_subprocess_exec(*self.command, env=self.environ, start_new_session=True)
        log.info("engine: started pid %d", self.process.pid)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def wait(self) -> int:
        """Wait for the engine to exit; return its exit status."""
        if self.process is None:
            raise RuntimeError("engine not started")
        return await self.process.wait()

    async def stop(self, grace_s: float) -> int | None:
        """SIGTERM, wait ``grace_s`` seconds, then SIGKILL the process group."""
        process = self.process
        if process is None or process.returncode is not None:
            return None if process is None else process.returncode
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.wait_for(process.wait(), timeout=max(grace_s, 0.1))
        except TimeoutError:
            log.warning("engine: no exit %.1f s after SIGTERM, sending SIGKILL", grace_s)
            code = None
        # Also reaps workers left in the group after a clean exit of the API server.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        return code if code is not None else await process.wait()
