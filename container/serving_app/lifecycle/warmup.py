"""Startup: wait for vLLM's ``/health``, then warm every adapter before reporting ready.

The first requests after load pay for lazy allocator and kernel initialisation (seeds/003
section 5: 3-5x slower), and a LoRA adapter is only loaded onto the GPU by its first
request; warming each adapter also proves that every adapter in LORA_ADAPTERS loads.

Short chats do not reach prefill-sized batches: vLLM compiles its LoRA Triton kernels for
those lazily (its shrink kernel's config changes at 128 tokens, vllm/lora/ops/triton_ops/
utils.py, and batches above the CUDA-graph sizes are not captured at start), and logged
"Triton kernel JIT compilation during inference: _lora_shrink_kernel" on the first long
prompt after ``/ping`` went green (issue 35). So each model name then gets prefill-sized
prompts (:func:`prefill_sizes`), one at a time, so each runs as its own batch of exactly
that many tokens.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from serving_app.settings import WARMUP_PREFILL_MAX_TOKENS
from serving_app.upstream import UpstreamError, UpstreamPool

log = logging.getLogger("serving_app.warmup")

WARMUP_MAX_TOKENS = 16
"""Tokens generated per warmup request: enough to run decode steps, cheap at startup."""

PREFILL_TOKEN_IDS = range(16, 1000)
"""Prompt token ids of the prefill warm-up: past the special tokens of Llama-3's tokenizer and
the synthetic test tokenizers (1,024 tokens, benchmarks/synthetic_model.py), inside every
vocabulary the image serves."""

TRITON_INT_DIVISOR = 16
"""Triton specialises an integer kernel argument on whether it is divisible by 16 (and on 1), so
a token count of each kind compiles its own kernel binary."""

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


def prefill_sizes(tokens: int) -> tuple[int, ...]:
    """Prompt lengths of the prefill warm-up for ``WARMUP_PREFILL_TOKENS=tokens``: the largest
    multiple of 16 at most ``tokens``, then one token fewer; () when ``tokens`` is 0 (off).

    >>> prefill_sizes(2048), prefill_sizes(2040), prefill_sizes(0)
    ((2048, 2047), (2032, 2031), ())
    """
    if tokens <= 0:
        return ()
    even = tokens - tokens % TRITON_INT_DIVISOR
    return (even, even - 1)


def prefill_prompt(name_index: int, size_index: int, size: int) -> list[int]:
    """``size`` token ids that share no prefix with any other warm-up prompt (a prefix-cache hit
    would shorten the batch): each prompt starts at its own offset and steps through
    :data:`PREFILL_TOKEN_IDS`."""
    ids = PREFILL_TOKEN_IDS
    start = 97 * (2 * name_index + size_index)
    return [ids[(start + 7 * i) % len(ids)] for i in range(size)]


def prefill_body(model: str, prompt: list[int]) -> dict[str, object]:
    """A completion of the token-id ``prompt`` (vLLM's ``/v1/completions`` takes token ids)."""
    return {"model": model, "prompt": prompt, "max_tokens": WARMUP_PREFILL_MAX_TOKENS, "temperature": 0.0}


async def run_prefill_warmup(
    pool: UpstreamPool, model_names: Sequence[str], prefill_tokens: int, deadline: float
) -> None:
    """Send every prompt of :func:`prefill_sizes` through every name, strictly one at a time."""
    for name_index, name in enumerate(model_names):
        for size_index, size in enumerate(prefill_sizes(prefill_tokens)):
            body = prefill_body(name, prefill_prompt(name_index, size_index, size))
            await _post_warmup(pool, "/v1/completions", name, body, deadline)
        if prefill_tokens:
            log.info("warmup: %s prefill done (%s tokens)", name, ", ".join(map(str, prefill_sizes(prefill_tokens))))


async def _post_warmup(pool: UpstreamPool, path: str, name: str, body: dict[str, object], deadline: float) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise StartupError("warmup did not finish within STARTUP_TIMEOUT_S")
    try:
        response = await pool.request("POST", path, json.dumps(body).encode(), timeout_s=remaining)
        content = await response.read()
    except UpstreamError as exc:
        raise StartupError(f"warmup request to {name!r} failed: {exc}") from None
    if response.status_code != 200:
        text = content.decode("utf-8", "replace")
        raise StartupError(f"warmup request to {name!r} answered {response.status_code}: {text[:200]!r}")


async def run_warmup(
    pool: UpstreamPool,
    model_names: Sequence[str],
    num_requests: int,
    deadline: float,
    on_done: Callable[[str], Awaitable[None] | None] | None = None,
    *,
    prefill_tokens: int = 0,
) -> None:
    """Send the warmup plan sequentially per name, names in parallel, then the prefill warm-up
    (:func:`run_prefill_warmup`, ``prefill_tokens`` = ``WARMUP_PREFILL_TOKENS``; 0: none);
    raise :class:`StartupError` on any failure. ``on_done`` is called per name once all is done.

    Sequential per name keeps warmup from competing with itself for KV cache; parallel
    across names loads the adapters concurrently.
    """
    plan = warmup_plan(model_names, num_requests)
    per_name: dict[str, int] = {}
    for name in plan:
        per_name[name] = per_name.get(name, 0) + 1

    async def warm(name: str, count: int) -> None:
        for index in range(count):
            await _post_warmup(pool, "/v1/chat/completions", name, warmup_body(name, index), deadline)
        log.info("warmup: %s done (%d requests)", name, count)

    await asyncio.gather(*(warm(name, count) for name, count in per_name.items()))
    await run_prefill_warmup(pool, list(per_name), prefill_tokens, deadline)
    if on_done is not None:
        for name in per_name:
            result = on_done(name)
            if result is not None:
                await result
