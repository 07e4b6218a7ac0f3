"""Startup: wait for vLLM's ``/health``, then warm every adapter before reporting ready.

The first requests after load pay for lazy allocator and kernel initialisation (seeds/003
section 5: 3-5x slower), and a LoRA adapter is only loaded onto the GPU by its first
request; warming each adapter also proves that every adapter in LORA_ADAPTERS loads.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from serving_app.upstream import UpstreamError, UpstreamPool

log = logging.getLogger("serving_app.warmup")

WARMUP_MAX_TOKENS = 16
"""Tokens generated per warmup request: enough to run decode steps, cheap at startup."""

HEALTH_RETRY_INTERVAL_S = 0.2
"""Pause between ``/health`` probes while the engine loads (seeds/003 polled every 2 s)."""


class StartupError(Exception):
    """Startup cannot complete; ``str()`` is one line."""


async def wait_for_engine(pool: UpstreamPool, deadline: float, engine_alive: Callable[[], bool]) -> float:
    """Poll ``GET /health`` until 200; return seconds waited.

    Raises :class:`StartupError` at ``deadline`` (monotonic) or when the engine exits.
    """
    started = time.monotonic()
    while True:
        if not engine_alive():
            raise StartupError("vLLM exited before /health answered 200")
        try:
            status, _ = await pool.get("/health", timeout_s=2.0)
            if status == 200:
                return time.monotonic() - started
        except UpstreamError:
            pass
        if time.monotonic() >= deadline:
            raise StartupError(f"vLLM /health not 200 within STARTUP_TIMEOUT_S ({deadline - started:.0f} s)")
        await asyncio.sleep(HEALTH_RETRY_INTERVAL_S)


def warmup_plan(model_names: Sequence[str], num_requests: int) -> list[str]:
    """Model names to warm, round-robin; every name at least once."""
    total = max(num_requests, len(model_names))
    return [model_names[i % len(model_names)] for i in range(total)]


def warmup_body(model: str, index: int) -> dict[str, object]:
    """A short chat request; the shared system prompt also seeds the prefix cache."""
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": "You are MangaAssist, a manga shopping assistant."},
            {"role": "user", "content": f"Warmup {index}: recommend one action manga."},
        ],
        "max_tokens": WARMUP_MAX_TOKENS,
        "temperature": 0.0,
    }


async def run_warmup(
    pool: UpstreamPool,
    model_names: Sequence[str],
    num_requests: int,
    deadline: float,
    on_done: Callable[[str], Awaitable[None] | None] | None = None,
) -> None:
    """Send the warmup plan sequentially per name, names in parallel; raise on any failure.

    Sequential per name keeps warmup from competing with itself for KV cache; parallel
    across names loads the adapters concurrently.
    """
    plan = warmup_plan(model_names, num_requests)
    per_name: dict[str, int] = {}
    for name in plan:
        per_name[name] = per_name.get(name, 0) + 1

    async def warm(name: str, count: int) -> None:
        for index in range(count):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StartupError("warmup did not finish within STARTUP_TIMEOUT_S")
            try:
                body = json.dumps(warmup_body(name, index)).encode()
                response = await pool.request("POST", "/v1/chat/completions", body, timeout_s=remaining)
                content = await response.read()
            except UpstreamError as exc:
                raise StartupError(f"warmup request to {name!r} failed: {exc}") from None
            if response.status_code != 200:
                text = content.decode("utf-8", "replace")
                raise StartupError(f"warmup request to {name!r} answered {response.status_code}: {text[:200]!r}")
        log.info("warmup: %s done (%d requests)", name, count)
        if on_done is not None:
            result = on_done(name)
            if result is not None:
                await result

    await asyncio.gather(*(warm(name, count) for name, count in per_name.items()))
