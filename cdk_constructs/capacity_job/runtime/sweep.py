"""The open-loop sweep against one vLLM engine: transport, engine gauges, and the ramp itself.

Shared by ``benchmarks/open_loop.py`` (GPU sessions, the runs the engine model was fitted on) and
the capacity job (``measure.py`` beside it, in the serving image), so a measured curve and the
model's runs come from the same code. It lives in the job's code asset (this folder) because it
needs aiohttp, which ``cli_support`` (standard library only) may not import. The schedule (Poisson arrivals of
conversations, exponential pauses between turns) is ``cli_support/open_loop.py``; the
conversations are ``cli_support/conversation_workload.py``'s. Turns go to vLLM's
``/v1/completions`` as token ids (the history carried exactly, as a chat client's would); vLLM's
``/metrics`` is read every second for KV-cache usage, requests running and waiting, preemptions
and prefix-cache queries and hits.

aiohttp: vLLM depends on it, so it is in every environment this runs in (vLLM's, the image's).
"""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from cli_support.conversation_workload import Conversation, RequestShape, Workload, completion_body
from cli_support.open_loop import (
    OpenLoopRun,
    StepSummary,
    TurnRecord,
    Verdict,
    format_step,
    ramp,
    run_open_loop,
    summarise_step,
    verdict,
)
from cli_support.sse import timed_json_events
from serving_contract.request_classes import cached_prompt_tokens

GAUGES = ("kv_cache_usage", "running", "waiting")
COUNTERS = (
    "preemptions",
    "prefix_queries",
    "prefix_hits",
    "external_prefix_queries",
    "external_prefix_hits",
    "offload_load_bytes",
    "offload_load_s",
    "prompt_tokens",
    "generation_tokens",
)
_METRICS = {
    "kv_cache_usage": "vllm:kv_cache_usage_perc",
    "running": "vllm:num_requests_running",
    "waiting": "vllm:num_requests_waiting",
    "preemptions": "vllm:num_preemptions_total",
    "prefix_queries": "vllm:prefix_cache_queries_total",
    "prefix_hits": "vllm:prefix_cache_hits_total",
    # KV offloaded to host memory (--kv-offloading-size): what came back from it, and how long the copies
    # took (vLLM 0.26: v1/metrics/loggers.py, kv_connector/v1/offloading/metrics.py); absent without offload.
    "external_prefix_queries": "vllm:external_prefix_cache_queries_total",
    "external_prefix_hits": "vllm:external_prefix_cache_hits_total",
    "offload_load_bytes": "vllm:kv_offload_load_bytes_total",
    "offload_load_s": "vllm:kv_offload_load_time_total",
    "prompt_tokens": "vllm:prompt_tokens_total",
    "generation_tokens": "vllm:generation_tokens_total",
}
_LINE = re.compile(r"^([a-zA-Z_:]+)(?:\{[^}]*\})? ([0-9.eE+-]+)$", re.MULTILINE)


def engine_figures(text: str) -> dict[str, float]:
    """The gauges and counters of :data:`_METRICS` from vLLM's Prometheus text, summed over labels
    (vLLM 0.26 labels each by ``model_name`` and ``engine``; CONVENTIONS.md)."""
    wanted = {metric: name for name, metric in _METRICS.items()}
    figures: dict[str, float] = {}
    for metric, value in _LINE.findall(text):
        if metric in wanted:
            figures[wanted[metric]] = figures.get(wanted[metric], 0.0) + float(value)
    return figures


def read_engine_figures(metrics_url: str) -> dict[str, float]:
    """:func:`engine_figures` of the engine whose Prometheus text is at ``metrics_url`` now (blocking)."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        return engine_figures(response.read().decode())


async def send_turn(
    session: aiohttp.ClientSession, url: str, shape: RequestShape, conversation: Conversation, record: TurnRecord
) -> bool:
    """Stream the conversation's next turn into ``record``; keep the answer's token ids in its history."""
    prompt = conversation.next_prompt(shape)
    started = time.perf_counter()
    answer: list[int] = []
    record.latency_s = None
    try:
        async with session.post(url, json=completion_body(conversation.adapter, prompt, shape.output_tokens)) as resp:
            record.status = resp.status
            if resp.status != 200:
                record.error = f"{resp.status}: {(await resp.text())[:200]}"
                record.latency_s = time.perf_counter() - started
                return False
            async for arrived, payload in timed_json_events(resp.content.iter_any(), time.perf_counter):
                for choice in payload.get("choices") or ():
                    ids = choice.get("token_ids") or []
                    if ids and record.ttft_s is None:
                        record.ttft_s = arrived - started
                    answer += ids
                if payload.get("usage"):
                    record.prompt_tokens = payload["usage"]["prompt_tokens"]
                    record.output_tokens = payload["usage"]["completion_tokens"]
                    record.cached_tokens = cached_prompt_tokens(payload["usage"])
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:  # ValueError: not JSON, not UTF-8
        record.status = 0
        record.error = f"{exc.__class__.__name__}: {exc}"[:200]
        record.latency_s = time.perf_counter() - started
        return False
    record.latency_s = time.perf_counter() - started
    conversation.history += answer
    conversation.turn += 1
    return True


def wait_idle(metrics_url: str, timeout_s: float = 120.0) -> None:
    """Until the engine whose ``/metrics`` is ``metrics_url`` runs and queues nothing (an earlier
    ramp's requests are gone).

    Raises:
        TimeoutError: still busy after ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        figures = read_engine_figures(metrics_url)
        if figures.get("running", 0) == 0 and figures.get("waiting", 0) == 0:
            return
        time.sleep(0.5)
    raise TimeoutError(f"{metrics_url}: still busy after {timeout_s:g} s")


@dataclass(frozen=True)
class Sweep:
    """One ramp's settings.

    Attributes:
        rates_per_min: offered requests per minute, per step, increasing.
        settle_s / measure_s: unmeasured and measured seconds of each step.
        think_s: mean pause between a conversation's turns, seconds.
        slo_ms: TTFT p95 objective per class (``cold``, ``warm``), ms.
        warm_min_cached_fraction: a follow-up is warm above this cached share of its prompt.
        stop_factor: the ramp stops after a step whose TTFT p95 reached this x the highest SLO.
        drain_s: seconds in-flight requests get at the end.
        seed: the conversations' and arrivals' seed.
        warm_start: start with the conversations a steady past at the first rate leaves alive
            (``cli_support.open_loop.backdated_conversations``) instead of none.
        first_settle_s: the first step's unmeasured seconds, when not ``settle_s`` (the prefix
            cache fills from nothing there: about one pause with ``warm_start``).
        invoke_path: where turns go: vLLM's ``/v1/completions``, or a gateway's ``/invocations``
            (the same body; the gateway forwards a token-id ``prompt`` to vLLM's completions).
        metrics_url: vLLM's Prometheus text (default ``<base_url>/metrics``; a gateway's engine
            has its own port).
    """

    rates_per_min: Sequence[float]
    settle_s: float
    measure_s: float
    think_s: float
    slo_ms: Mapping[str, float]
    warm_min_cached_fraction: float
    stop_factor: float = 4.0
    drain_s: float = 20.0
    seed: int = 45
    warm_start: bool = False
    first_settle_s: float | None = None
    invoke_path: str = "/v1/completions"
    metrics_url: str | None = None


@dataclass(frozen=True)
class SweepResult:
    """What one ramp measured: every request, the steps' summaries and the verdict."""

    run: OpenLoopRun
    summaries: list[StepSummary]
    verdict: Verdict
    wall_s: float


def sweep(
    base_url: str,
    shape: RequestShape,
    adapters: Sequence[str],
    settings: Sweep,
    *,
    log: Callable[[str], None] = print,
    on_step: Callable[[list[StepSummary]], None] | None = None,
) -> SweepResult:
    """One open-loop ramp on the engine at ``base_url`` (its ``/v1/completions`` and ``/metrics``),
    conversations of ``shape`` over ``adapters`` round-robin; each step's summary goes to ``log``,
    and the steps so far to ``on_step`` (so a ramp cut off by a device call's end still leaves them).

    Raises:
        TimeoutError: the engine is busy before the ramp (:func:`wait_idle`).
        ValueError: bad rates or seconds (``cli_support.open_loop.ramp``).
    """
    steps = ramp(
        settings.rates_per_min,
        settle_s=settings.settle_s,
        measure_s=settings.measure_s,
        first_settle_s=settings.first_settle_s,
    )
    workload = Workload(shape, adapters, engines=1, route="affinity", seed=settings.seed)
    url = base_url + settings.invoke_path
    metrics_url = settings.metrics_url or base_url + "/metrics"
    wait_idle(metrics_url)

    def summary_of(run: OpenLoopRun, index: int) -> StepSummary:
        return summarise_step(
            run, index, warm_min_cached_fraction=settings.warm_min_cached_fraction, gauges=GAUGES, counters=COUNTERS
        )

    def should_stop(run: OpenLoopRun, index: int) -> bool:
        summary = summary_of(run, index)
        log(format_step(summary))
        if on_step is not None:
            on_step([summary_of(run, done) for done in range(index)] + [summary])
        p95 = summary.ttft_p95_ms
        return bool(
            (p95 is not None and p95 >= settings.stop_factor * max(settings.slo_ms.values()))
            or (summary.requests and summary.errors / summary.requests > 0.1)
        )

    async def go() -> OpenLoopRun:
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as session:

            async def sample() -> dict[str, float]:
                async with session.get(metrics_url) as response:
                    return engine_figures(await response.text())

            return await run_open_loop(
                steps,
                think_s=settings.think_s,
                mean_turns=shape.mean_turns,
                new_conversation=lambda _: workload.new_conversation(),
                send_turn=lambda conversation, record: send_turn(session, url, shape, conversation, record),
                seed=settings.seed,
                sample=sample,
                should_stop=should_stop,
                drain_s=settings.drain_s,
                warm_start=settings.warm_start,
                resume=workload.resume,
                turns_of=shape.turns,
            )

    started = time.monotonic()
    run = asyncio.run(go())
    wall_s = round(time.monotonic() - started, 1)
    # Summarised again now that every request is back: mid-run, a step's slowest were still out.
    summaries = [summary_of(run, index) for index in range(run.steps_run)]
    return SweepResult(run, summaries, verdict(summaries, settings.slo_ms), wall_s)


def result_json(result: SweepResult) -> dict[str, Any]:
    """The raw result: summaries, verdict and every request (``OpenLoopRun.to_json``)."""
    return {
        "wall_s": result.wall_s,
        "summaries": [s.to_json() for s in result.summaries],
        "verdict": result.verdict.to_json(),
        **result.run.to_json(),
    }
