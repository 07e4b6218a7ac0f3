"""MangaAssist-shaped load for vLLM engines: multi-turn conversations, one or several engines.

The request shape (seed 002 §3 and §5, via docs/sources.md; seed 003 for the answer length):

* every prompt starts with the same ``shared_prefix_tokens`` (system prompt 400 + policy block
  200): identical across all conversations, so vLLM's prefix cache holds it once per adapter
  (vLLM keys prefix-cache blocks by LoRA adapter, 0.22 and 0.26);
* then ``conversation_tokens`` of retrieved catalog context, fixed for the conversation;
* then the history: every earlier turn's user message and the answer vLLM actually generated
  (its token ids, ``return_token_ids``), so a follow-up's prompt extends the previous turn's
  prompt and answer exactly, as a chat client's would;
* then the turn's ``turn_tokens`` of user message; the answer is exactly ``output_tokens`` long
  (``ignore_eos``).

Conversations have 4 turns, every fifth has 5: 4.2 turns on average (seed 002). Prompts are
token ids sent to ``/v1/completions`` (exact lengths, no chat template), drawn from the
tokenizer's first 1,000 ids. With the defaults the mean prompt is 2,396 tokens.

Two ways to drive one engine at a fixed concurrency (closed loop, ``concurrency`` workers, one
request in flight each):

* ``fresh``: every request is a turn of a conversation the engine has never seen: only the
  shared prefix can hit the prefix cache. This is what an engine behind
  ``LEAST_OUTSTANDING_REQUESTS`` over many instances sees (a follow-up lands on the instance
  that holds its conversation with probability ~1/N); the turn index cycles through the
  conversations' turns so prompt lengths have the real mix.
* ``conversations``: each worker runs whole conversations, turn after turn, all on one engine:
  the best case for the prefix cache (session affinity, nothing evicted between turns). With
  ``think_s`` a worker waits an exponentially distributed pause of that mean between a turn's
  answer and its next turn, as a user reads and types; the worker is then a user, not a request
  slot, and fewer requests than workers are in flight.

Several engines (``route``): ``least_outstanding`` sends each request to the engine with the
fewest requests in flight (ties broken at random), as SageMaker's routing strategy does;
``affinity`` sends a conversation's first turn the same way and every later turn to the same
engine, as SageMaker stateful sessions do. The router is the benchmark's own, not product code.
Without think time the comparison is biased: the engine that just answered a turn is the one
with the fewest requests in flight when the next turn goes out at once, so least outstanding
sends most follow-ups back to it (measured: both routers at the same prefix-cache hit rate,
docs/performance.md). A pause of about a request's own latency lets other conversations' turns
take that slot, as real users' pauses do.

The request shape, the conversations and the router are ``cli_support/conversation_workload.py``'s
(the capacity job sends the same turns); this module drives them closed loop.

aiohttp: it is in vLLM's environment (the benchmark runs there) and is the gateway's client.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import aiohttp

from cli_support.conversation_workload import (
    TOKEN_ID_RANGE,
    Conversation,
    RequestShape,
    Route,
    Workload,
    completion_body,
)
from cli_support.percentiles import percentile
from cli_support.sse import timed_json_events
from serving_app.lifecycle.warmup import prefill_sizes
from serving_contract import lifecycle
from serving_contract.request_classes import (
    WARM_MIN_CACHED_FRACTION_DEFAULT,
    RequestClass,
    cached_prompt_tokens,
    request_class,
)

Mode = Literal["fresh", "conversations"]


@dataclass
class Sample:
    """One request as the client saw it."""

    conversation: int
    turn: int
    engine: int
    status: int
    started_s: float
    latency_s: float
    ttft_s: float | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    """vLLM's ``usage.prompt_tokens_details.cached_tokens`` (the engines run the container's argv,
    which asks for it): the request class, as the gateway classifies it."""
    error: str | None = None


async def _send(session: aiohttp.ClientSession, url: str, body: dict[str, Any], sample: Sample) -> list[int]:
    """Stream one completion into ``sample``; return the generated token ids."""
    started = time.perf_counter()
    output: list[int] = []
    try:
        async with session.post(url, json=body) as response:
            sample.status = response.status
            if response.status != 200:
                sample.error = f"{response.status}: {(await response.text())[:200]}"
                return output
            async for arrived, payload in timed_json_events(response.content.iter_any(), time.perf_counter):
                now = arrived - started
                for choice in payload.get("choices") or ():
                    ids = choice.get("token_ids") or []
                    if ids and sample.ttft_s is None:
                        sample.ttft_s = now
                    output += ids
                if payload.get("usage"):
                    sample.prompt_tokens = payload["usage"]["prompt_tokens"]
                    sample.output_tokens = payload["usage"]["completion_tokens"]
                    sample.cached_tokens = cached_prompt_tokens(payload["usage"])
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:  # ValueError: not JSON, not UTF-8
        sample.status = 0
        sample.error = f"{exc.__class__.__name__}: {exc}"[:200]
    sample.latency_s = time.perf_counter() - started
    return output


async def drive(
    urls: Sequence[str],
    workload: Workload,
    *,
    mode: Mode,
    concurrency: int,
    seconds: float,
    max_requests: int | None = None,
    think_s: float = 0.0,
) -> tuple[list[Sample], float]:
    """Closed loop: ``concurrency`` workers, one request in flight each, for ``seconds``.

    ``think_s`` (``conversations`` only): mean of the exponential pause between a turn's answer
    and the conversation's next turn, drawn from the conversation's own seeded generator.
    Returns the samples and the wall time. A conversation started before the deadline is cut
    at the deadline (its remaining turns are not sent).
    """
    if think_s < 0:
        raise ValueError(f"think_s: {think_s} is negative; allowed: 0 (no pause) or a mean pause in seconds")
    for url in urls:
        if not url.startswith("http://127.0.0.1:"):
            raise ValueError(f"{url}: the benchmark only targets 127.0.0.1")
    samples: list[Sample] = []
    shape = workload.shape
    started = time.perf_counter()
    deadline = started + seconds
    timeout = aiohttp.ClientTimeout(total=seconds + 300)
    connector = aiohttp.TCPConnector(limit=0)

    def budget_left() -> bool:
        return time.perf_counter() < deadline and (max_requests is None or len(samples) < max_requests)

    async def one(session: aiohttp.ClientSession, conversation: Conversation, prompt: list[int]) -> list[int]:
        engine = workload.pick_engine(conversation)
        sample = Sample(conversation.number, conversation.turn, engine, 0, time.perf_counter() - started, 0.0)
        samples.append(sample)
        workload.in_flight[engine] += 1
        try:
            return await _send(
                session, urls[engine], completion_body(conversation.adapter, prompt, shape.output_tokens), sample
            )
        finally:
            workload.in_flight[engine] -= 1

    async def worker(session: aiohttp.ClientSession) -> None:
        while budget_left():
            if mode == "fresh":
                conversation, prompt = workload.fresh_request()
                await one(session, conversation, prompt)
                continue
            conversation = workload.new_conversation()
            while conversation.turn < conversation.turns and budget_left():
                answer = await one(session, conversation, conversation.next_prompt(shape))
                conversation.history += answer
                conversation.turn += 1
                if think_s and conversation.turn < conversation.turns:
                    await asyncio.sleep(
                        min(conversation.rng.expovariate(1 / think_s), max(deadline - time.perf_counter(), 0))
                    )

    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return samples, time.perf_counter() - started


def warm_up(base_url: str, adapters: Sequence[str]) -> None:
    """One short completion per adapter, so no measured request pays a first LoRA load."""

    async def go() -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
            for adapter in adapters:
                body = {
                    **completion_body(adapter, list(range(TOKEN_ID_RANGE[0], TOKEN_ID_RANGE[0] + 16)), 2),
                    "stream": False,
                }
                body.pop("stream_options")
                async with session.post(base_url + "/v1/completions", json=body) as response:
                    if response.status != 200:
                        raise RuntimeError(
                            f"warm-up of {adapter} on {base_url}: {response.status} {await response.text()}"
                        )

    asyncio.run(go())


PREFILL_WARMUP_TOKENS = prefill_sizes(lifecycle.WARMUP_PREFILL_TOKENS.default)
"""Prompt lengths of the prefill warm-up, as the container computes them for the default
(serving_app.lifecycle.warmup.prefill_sizes: a multiple of 16, then one fewer)."""


def prefill_warm_up(
    base_url: str, models: list[str], sizes: Sequence[int] = PREFILL_WARMUP_TOKENS
) -> list[dict[str, Any]]:
    """A prefill-sized prompt of each length in ``sizes`` through every model, one at a
    time; each prompt starts with its own tokens so no prefix-cache hit shortens it."""
    low, high = TOKEN_ID_RANGE
    sent: list[dict[str, Any]] = []

    async def go() -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
            for index, model in enumerate(models):
                for size_index, size in enumerate(sizes):
                    offset = 97 * (index * len(sizes) + size_index)
                    prompt = [low + (offset + 7 * i) % (high - low) for i in range(size)]
                    body = {"model": model, "prompt": prompt, "max_tokens": 2, "ignore_eos": True, "temperature": 0}
                    started = time.perf_counter()
                    async with session.post(base_url + "/v1/completions", json=body) as response:
                        text = await response.text()
                        if response.status != 200:
                            raise RuntimeError(f"prefill warm-up of {model}: {response.status} {text[:200]}")
                        usage = json.loads(text)["usage"]
                    sent.append(
                        {
                            "model": model,
                            "prompt_tokens": usage["prompt_tokens"],
                            "s": round(time.perf_counter() - started, 3),
                        }
                    )

    asyncio.run(go())
    return sent


# ----------------------------------------------------------------------------- engine metrics
_COUNTER = re.compile(r"^(vllm:prefix_cache_(?:queries|hits)_total)\{[^}]*\} ([0-9.e+]+)$", re.MULTILINE)


def prefix_cache_counters(base_url: str) -> dict[str, float]:
    """vLLM's prefix-cache counters (tokens queried, tokens hit), summed over their labels."""
    with urllib.request.urlopen(base_url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    totals = {"vllm:prefix_cache_queries_total": 0.0, "vllm:prefix_cache_hits_total": 0.0}
    for name, value in _COUNTER.findall(text):
        totals[name] += float(value)
    return totals


# ----------------------------------------------------------------------------- summary
@dataclass
class LevelSummary:
    """One level: throughput, TTFT (all turns, first turns, follow-ups), latency, prefix-cache hits."""

    label: str
    concurrency: int
    requests: int
    errors: int
    wall_s: float
    requests_per_s: float
    requests_per_min: float
    output_tokens_per_s: float
    prompt_tokens_mean: float
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    ttft_p99_ms: float | None
    first_turn_ttft_p95_ms: float | None
    follow_up_ttft_p50_ms: float | None
    follow_up_ttft_p95_ms: float | None
    e2e_p50_ms: float | None
    e2e_p95_ms: float | None
    itl_mean_ms: float | None
    prefix_cache_hit_rate: float | None
    requests_per_engine: list[int]
    error_samples: list[str] = field(default_factory=list)
    follow_ups_on_previous_engine: float | None = None
    """Share of follow-up turns sent to the engine that served the conversation's previous turn
    (1.0 under affinity; about 1/engines for a router that ignores conversations)."""
    cold_requests: int | None = None
    """Requests of each class (serving_contract.request_classes: warm when at least
    ``WARM_MIN_CACHED_FRACTION_DEFAULT`` of the prompt came from the prefix cache, by vLLM's own
    count), and each class's TTFT p50/p95: what the per-class alarms read. None in results written
    before the classes existed."""
    cold_ttft_p50_ms: float | None = None
    cold_ttft_p95_ms: float | None = None
    warm_requests: int | None = None
    warm_ttft_p50_ms: float | None = None
    warm_ttft_p95_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarise(
    label: str,
    samples: Sequence[Sample],
    wall_s: float,
    *,
    concurrency: int,
    engines: int,
    hit_rate: float | None,
    warm_min_cached_fraction: float = WARM_MIN_CACHED_FRACTION_DEFAULT,
) -> LevelSummary:
    """Percentiles over successful requests, also per request class; throughput over ``wall_s``."""
    ok = [s for s in samples if s.status == 200 and s.ttft_s is not None]
    ttft = [s.ttft_s * 1000 for s in ok if s.ttft_s is not None]
    first = [s.ttft_s * 1000 for s in ok if s.ttft_s is not None and s.turn == 0]
    follow = [s.ttft_s * 1000 for s in ok if s.ttft_s is not None and s.turn > 0]
    e2e = [s.latency_s * 1000 for s in ok]
    itl = [
        (s.latency_s - s.ttft_s) * 1000 / (s.output_tokens - 1)
        for s in ok
        if s.ttft_s is not None and s.output_tokens > 1
    ]
    per_engine = [0] * engines
    for s in ok:
        per_engine[s.engine] += 1
    engine_of = {(s.conversation, s.turn): s.engine for s in samples}
    previous = [
        (s.engine, engine_of[(s.conversation, s.turn - 1)])
        for s in samples
        if (s.conversation, s.turn - 1) in engine_of
    ]

    def pct(values: list[float], q: int) -> float | None:
        value = percentile(values, q)
        return None if value is None else round(value, 1)

    by_class: dict[RequestClass, list[float]] = {klass: [] for klass in RequestClass}
    for s in ok:
        if s.ttft_s is not None and s.prompt_tokens:
            klass = request_class(s.prompt_tokens, s.cached_tokens, warm_min_cached_fraction)
            by_class[klass].append(s.ttft_s * 1000)
    cold, warm = by_class[RequestClass.COLD], by_class[RequestClass.WARM]

    return LevelSummary(
        label=label,
        concurrency=concurrency,
        requests=len(samples),
        errors=len(samples) - len(ok),
        wall_s=round(wall_s, 2),
        requests_per_s=round(len(ok) / wall_s, 3),
        requests_per_min=round(60 * len(ok) / wall_s, 1),
        output_tokens_per_s=round(sum(s.output_tokens for s in ok) / wall_s, 1),
        prompt_tokens_mean=round(statistics.fmean(s.prompt_tokens for s in ok), 1) if ok else 0.0,
        ttft_p50_ms=pct(ttft, 50),
        ttft_p95_ms=pct(ttft, 95),
        ttft_p99_ms=pct(ttft, 99),
        first_turn_ttft_p95_ms=pct(first, 95),
        follow_up_ttft_p50_ms=pct(follow, 50),
        follow_up_ttft_p95_ms=pct(follow, 95),
        e2e_p50_ms=pct(e2e, 50),
        e2e_p95_ms=pct(e2e, 95),
        itl_mean_ms=round(statistics.fmean(itl), 3) if itl else None,
        prefix_cache_hit_rate=None if hit_rate is None else round(hit_rate, 4),
        requests_per_engine=per_engine,
        error_samples=[s.error for s in samples if s.error][:5],
        follow_ups_on_previous_engine=round(sum(a == b for a, b in previous) / len(previous), 4) if previous else None,
        cold_requests=len(cold),
        cold_ttft_p50_ms=pct(cold, 50),
        cold_ttft_p95_ms=pct(cold, 95),
        warm_requests=len(warm),
        warm_ttft_p50_ms=pct(warm, 50),
        warm_ttft_p95_ms=pct(warm, 95),
    )


def run_level(
    base_urls: Sequence[str],
    shape: RequestShape,
    adapters: Sequence[str],
    *,
    label: str,
    mode: Mode,
    route: Route,
    concurrency: int,
    seconds: float,
    seed: int,
    warmup_s: float = 0.0,
    think_s: float = 0.0,
) -> LevelSummary:
    """One level on ``base_urls`` (``http://127.0.0.1:<port>`` of bare vLLM engines); ``drive`` has the rest."""
    urls = [u + "/v1/completions" for u in base_urls]
    if warmup_s:
        warm = Workload(shape, adapters, len(urls), route, seed=seed + 10_000)
        asyncio.run(drive(urls, warm, mode=mode, concurrency=concurrency, seconds=warmup_s, think_s=think_s))
    before = [prefix_cache_counters(u) for u in base_urls]
    workload = Workload(shape, adapters, len(urls), route, seed=seed)
    samples, wall = asyncio.run(
        drive(urls, workload, mode=mode, concurrency=concurrency, seconds=seconds, think_s=think_s)
    )
    after = [prefix_cache_counters(u) for u in base_urls]
    queries = sum(
        a["vllm:prefix_cache_queries_total"] - b["vllm:prefix_cache_queries_total"]
        for a, b in zip(after, before, strict=True)
    )
    hits = sum(
        a["vllm:prefix_cache_hits_total"] - b["vllm:prefix_cache_hits_total"]
        for a, b in zip(after, before, strict=True)
    )
    return summarise(
        label, samples, wall, concurrency=concurrency, engines=len(urls), hit_rate=hits / queries if queries else None
    )


def _ms(value: float | None, width: int, digits: int) -> str:
    """A percentile for the log; ``-`` where the level had no sample for it."""
    return f"{'-':>{width}}" if value is None else f"{value:{width}.{digits}f}"


def format_summary(level: LevelSummary) -> str:
    """One line per level, for the log."""
    follow = (
        ""
        if level.follow_up_ttft_p95_ms is None
        else f" follow-up p50/p95 {level.follow_up_ttft_p50_ms:.0f}/{level.follow_up_ttft_p95_ms:.0f}"
    )
    hits = "" if level.prefix_cache_hit_rate is None else f" prefix hits {level.prefix_cache_hit_rate:.1%}"
    same = level.follow_ups_on_previous_engine
    hits += "" if same is None else f" follow-ups on previous engine {same:.0%}"
    for name, count, p95 in (
        ("cold", level.cold_requests, level.cold_ttft_p95_ms),
        ("warm", level.warm_requests, level.warm_ttft_p95_ms),
    ):
        follow += "" if not count else f" {name} n={count} p95 {p95:.0f}"
    return (
        f"{level.label:<28} c={level.concurrency:<4} {level.requests_per_s:7.2f} req/s "
        f"({level.requests_per_min:7.1f}/min) "
        f"TTFT p50/p95 {_ms(level.ttft_p50_ms, 7, 1)}/{_ms(level.ttft_p95_ms, 7, 1)} ms{follow} "
        f"e2e p50 {_ms(level.e2e_p50_ms, 7, 0)} ms "
        f"ITL {level.itl_mean_ms} ms prompt {level.prompt_tokens_mean:.0f}{hits} errors {level.errors}"
        f" per engine {level.requests_per_engine}"
    )
