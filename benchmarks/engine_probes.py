"""Two probes that separate an engine's prefill speed from its decode speed, for the GPU model.

* ``prefill``: ``batch`` requests of ``prompt_tokens`` unique tokens each, sent at once, one
  output token each: the engine runs nothing but prefill (chunks of
  ``max_num_batched_tokens``), so prompt tokens / wall time is its prefill rate, which dense
  fp16 tensor throughput bounds.
* ``decode``: ``batch`` requests of a short (or ``prompt_tokens``-long) prompt sent at once,
  ``output_tokens`` each: once every prompt is in, every step decodes ``batch`` sequences, so
  the median gap between a request's tokens (past its first ``skip`` tokens) is the step time
  of a decode batch of that size and context, which memory bandwidth bounds (the weights and
  the KV cache are read once per step).

``devtools/gpu_capacity`` fits its step-time model to these figures and checks the fit against
the conversation load (``conversations.py``). Prompts are unique token ids, so nothing hits the
prefix cache.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp

from cli_support.conversation_workload import TOKEN_ID_RANGE
from cli_support.sse import timed_json_events


@dataclass
class ProbeResult:
    """One probe: what was sent and what the engine did with it."""

    kind: str
    batch: int
    prompt_tokens: int
    output_tokens: int
    wall_s: float
    prefill_tokens_per_s: float | None
    decode_step_ms: float | None
    errors: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


async def _stream(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> list[float]:
    """Arrival times (perf_counter) of every generated token of one streamed completion."""
    times: list[float] = []
    async with session.post(url, json=body) as response:
        if response.status != 200:
            raise RuntimeError(f"{response.status}: {(await response.text())[:200]}")
        async for now, payload in timed_json_events(response.content.iter_any(), time.perf_counter):
            for choice in payload.get("choices") or ():
                times += [now] * len(choice.get("token_ids") or [])
    return times


async def _burst(
    url: str, adapters: list[str], *, batch: int, prompt_tokens: int, output_tokens: int, seed: int
) -> tuple[list[list[float]], float, int]:
    rng = random.Random(seed)
    bodies = [
        {
            "model": adapters[i % len(adapters)],
            "prompt": [rng.randrange(*TOKEN_ID_RANGE) for _ in range(prompt_tokens)],
            "max_tokens": output_tokens,
            "ignore_eos": True,
            "temperature": 0,
            "stream": True,
            "return_token_ids": True,
        }
        for i in range(batch)
    ]
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as session:
        started = time.perf_counter()
        results = await asyncio.gather(*(_stream(session, url, b) for b in bodies), return_exceptions=True)
        wall = time.perf_counter() - started
    streams = [r for r in results if isinstance(r, list)]
    return streams, wall, len(results) - len(streams)


def prefill(url: str, adapters: list[str], *, batch: int = 32, prompt_tokens: int = 2048, seed: int = 1) -> ProbeResult:
    """Prefill rate: ``batch`` x ``prompt_tokens`` unique prompt tokens, one output token each."""
    streams, wall, errors = asyncio.run(
        _burst(url, adapters, batch=batch, prompt_tokens=prompt_tokens, output_tokens=1, seed=seed)
    )
    return ProbeResult(
        "prefill", batch, prompt_tokens, 1, round(wall, 3), round(len(streams) * prompt_tokens / wall, 1), None, errors
    )


def decode(
    url: str,
    adapters: list[str],
    *,
    batch: int,
    prompt_tokens: int = 32,
    output_tokens: int = 256,
    skip: int = 32,
    seed: int = 2,
) -> ProbeResult:
    """Decode step time at ``batch`` sequences: the median gap between tokens after the first ``skip``."""
    streams, wall, errors = asyncio.run(
        _burst(url, adapters, batch=batch, prompt_tokens=prompt_tokens, output_tokens=output_tokens, seed=seed)
    )
    # Several tokens can arrive in one network read and share a timestamp, so the step time is
    # the mean gap over each request's steady part (after ``skip`` tokens), median over requests.
    spans = [(times[-1] - times[skip]) / (len(times) - 1 - skip) for times in streams if len(times) > skip + 1]
    step_ms = statistics.median(spans) * 1000 if spans else None
    return ProbeResult(
        "decode",
        batch,
        prompt_tokens,
        output_tokens,
        round(wall, 3),
        None,
        None if step_ms is None else round(step_ms, 3),
        errors,
    )
