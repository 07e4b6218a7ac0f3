"""A closed-loop load generator for OpenAI chat endpoints: the client side of gpu_serving.py.

``concurrency`` workers each send one request at a time until ``requests`` have been sent or
``time_limit_s`` has passed (both bounds always apply), to 127.0.0.1 only. Every request asks
for exactly ``output_tokens`` tokens (``ignore_eos``) from the next adapter in round-robin
order. aiohttp: it is in vLLM's environment (the benchmark runs there) and is the gateway's own
client library.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp

from cli_support.percentiles import percentile
from cli_support.sse import timed_json_events

PROMPT = (
    "You are MangaAssist, a manga shopping assistant. Recommend three action manga for a reader who "
    "liked a long-running shonen series, with one sentence on each and its first volume's price."
)
"""The fixed prompt; its token count is what vLLM's ``usage`` reports (printed with the results)."""


@dataclass
class Sample:
    """One request as the client saw it."""

    status: int
    latency_s: float
    ttft_s: float | None = None
    output_tokens: int = 0
    prompt_tokens: int = 0
    last_token_s: float | None = None


@dataclass
class LevelResult:
    """One concurrency level of one mode: throughput, latency, TTFT, inter-token latency."""

    concurrency: int
    stream: bool
    requests: int
    errors: int
    wall_s: float
    requests_per_s: float
    output_tokens_per_s: float
    latency_p50_ms: float | None
    """None (JSON null) when no request of the level succeeded; so are the other percentiles."""
    latency_p99_ms: float | None
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    itl_mean_ms: float | None
    prompt_tokens: int
    output_tokens: int
    """Mean over the successful requests, rounded; the exact spread is in the two fields below."""
    error_samples: list[str] = field(default_factory=list)
    output_tokens_min: int = 0
    output_tokens_max: int = 0

    def to_json(self) -> dict[str, Any]:
        """The level as JSON-ready values (what ``--out-dir/<setup>.json`` stores)."""
        return asdict(self)


def chat_body(model: str, output_tokens: int, stream: bool) -> dict[str, Any]:
    """A chat request for ``model`` that generates exactly ``output_tokens`` (``ignore_eos``, vLLM's extension)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": output_tokens,
        "ignore_eos": True,  # vLLM's extension: exactly max_tokens, whatever the random weights say
        "temperature": 0,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


async def _one(session: aiohttp.ClientSession, url: str, body: dict[str, Any], errors: list[str]) -> Sample:
    started = time.perf_counter()
    try:
        async with session.post(url, json=body) as response:
            if response.status != 200:
                errors.append(f"{response.status}: {(await response.text())[:200]}")
                return Sample(response.status, time.perf_counter() - started)
            if not body["stream"]:
                payload = await response.json()
                usage = payload.get("usage") or {}
                return Sample(
                    200,
                    time.perf_counter() - started,
                    output_tokens=usage.get("completion_tokens", 0),
                    prompt_tokens=usage.get("prompt_tokens", 0),
                )
            sample = Sample(200, 0.0)
            async for arrived, payload in timed_json_events(response.content.iter_any(), time.perf_counter):
                now = arrived - started
                if payload.get("choices"):
                    # vLLM sends its first event (role + first token) when the first token is out.
                    if sample.ttft_s is None:
                        sample.ttft_s = now
                    sample.last_token_s = now
                if payload.get("usage"):
                    sample.output_tokens = payload["usage"]["completion_tokens"]
                    sample.prompt_tokens = payload["usage"]["prompt_tokens"]
            sample.latency_s = time.perf_counter() - started
            return sample
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:  # ValueError: not JSON, not UTF-8
        errors.append(f"{exc.__class__.__name__}: {exc}"[:200])
        return Sample(0, time.perf_counter() - started)


async def _closed_loop(
    session: aiohttp.ClientSession,
    url: str,
    models: Sequence[str],
    *,
    concurrency: int,
    requests: int,
    time_limit_s: float,
    stream: bool,
    output_tokens: int,
    errors: list[str],
) -> tuple[list[Sample], float]:
    """``concurrency`` workers, one request at a time each; returns the samples and the wall time."""
    samples: list[Sample] = []
    next_index = 0
    started = time.perf_counter()
    deadline = started + time_limit_s

    async def worker() -> None:
        nonlocal next_index
        while next_index < requests and time.perf_counter() < deadline:
            index = next_index
            next_index += 1
            body = chat_body(models[index % len(models)], output_tokens, stream)
            samples.append(await _one(session, url, body, errors))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return samples, time.perf_counter() - started


def _session(concurrency: int, time_limit_s: float) -> aiohttp.ClientSession:
    timeout = aiohttp.ClientTimeout(total=max(time_limit_s, 60.0) + 60.0)
    return aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=concurrency))


def _check_local(url: str) -> None:
    if not url.startswith("http://127.0.0.1:"):
        raise ValueError(f"{url}: the benchmark only targets 127.0.0.1")


async def run_level(
    url: str,
    models: Sequence[str],
    *,
    concurrency: int,
    requests: int,
    time_limit_s: float,
    stream: bool,
    output_tokens: int,
    warmup_requests: int = 0,
) -> LevelResult:
    """Drive ``url`` at ``concurrency`` and summarise; ``warmup_requests`` are sent first, unmeasured."""
    _check_local(url)
    async with _session(concurrency, time_limit_s) as session:
        await asyncio.gather(
            *(
                _one(session, url, chat_body(models[i % len(models)], output_tokens, stream), [])
                for i in range(warmup_requests)
            )
        )
        errors: list[str] = []
        samples, wall = await _closed_loop(
            session,
            url,
            models,
            concurrency=concurrency,
            requests=requests,
            time_limit_s=time_limit_s,
            stream=stream,
            output_tokens=output_tokens,
            errors=errors,
        )
    return summarise(samples, wall, concurrency=concurrency, stream=stream, errors=errors)


async def run_ab_level(
    urls: Mapping[str, str],
    models: Sequence[str],
    *,
    rounds: int,
    concurrency: int,
    requests: int,
    time_limit_s: float,
    stream: bool,
    output_tokens: int,
) -> dict[str, LevelResult]:
    """Drive several targets of one engine in alternating rounds (A B, B A, A B, ...), so drift
    in the engine or GPU state falls on both alike; each target's rounds are pooled.

    ``requests`` and ``time_limit_s`` are per target, split over the rounds.
    """
    for url in urls.values():
        _check_local(url)
    names = list(urls)
    pooled: dict[str, tuple[list[Sample], float, list[str]]] = {name: ([], 0.0, []) for name in names}
    async with _session(concurrency, time_limit_s) as session:
        for name in names:  # warm each path once, unmeasured
            await asyncio.gather(
                *(
                    _one(session, urls[name], chat_body(models[i % len(models)], output_tokens, stream), [])
                    for i in range(min(concurrency, 8))
                )
            )
        for round_index in range(rounds):
            for name in names if round_index % 2 == 0 else reversed(names):
                samples, wall, errors = pooled[name]
                new, took = await _closed_loop(
                    session,
                    urls[name],
                    models,
                    concurrency=concurrency,
                    requests=max(1, requests // rounds),
                    time_limit_s=time_limit_s / rounds,
                    stream=stream,
                    output_tokens=output_tokens,
                    errors=errors,
                )
                pooled[name] = (samples + new, wall + took, errors)
    return {
        name: summarise(samples, wall, concurrency=concurrency, stream=stream, errors=errors)
        for name, (samples, wall, errors) in pooled.items()
    }


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def summarise(
    samples: Sequence[Sample], wall: float, *, concurrency: int, stream: bool, errors: list[str]
) -> LevelResult:
    """Throughput over ``wall`` seconds and percentiles over the successful samples."""
    ok = [s for s in samples if s.status == 200]
    latencies = [s.latency_s * 1000 for s in ok]
    ttfts = [s.ttft_s * 1000 for s in ok if s.ttft_s is not None]
    itls = [
        (s.last_token_s - s.ttft_s) * 1000 / (s.output_tokens - 1)
        for s in ok
        if s.ttft_s is not None and s.last_token_s is not None and s.output_tokens > 1
    ]
    return LevelResult(
        concurrency=concurrency,
        stream=stream,
        requests=len(samples),
        errors=len(samples) - len(ok),
        wall_s=round(wall, 3),
        requests_per_s=round(len(ok) / wall, 3) if wall else 0.0,
        output_tokens_per_s=round(sum(s.output_tokens for s in ok) / wall, 1) if wall else 0.0,
        latency_p50_ms=_rounded(percentile(latencies, 50), 1),
        latency_p99_ms=_rounded(percentile(latencies, 99), 1),
        ttft_p50_ms=_rounded(percentile(ttfts, 50), 2),
        ttft_p99_ms=_rounded(percentile(ttfts, 99), 2),
        itl_mean_ms=round(statistics.fmean(itls), 3) if itls else None,
        prompt_tokens=round(statistics.fmean(s.prompt_tokens for s in ok)) if ok else 0,
        output_tokens=round(statistics.fmean(s.output_tokens for s in ok)) if ok else 0,
        error_samples=errors[:5],
        output_tokens_min=min((s.output_tokens for s in ok), default=0),
        output_tokens_max=max((s.output_tokens for s in ok), default=0),
    )
