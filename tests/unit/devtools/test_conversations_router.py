"""benchmarks/conversations.py's router against three stand-in engines (aiohttp, in this event
loop): affinity keeps every follow-up on its conversation's engine; least outstanding does so
only while follow-ups go out the instant the previous answer ends (the bias docs/performance.md
measured), and stops once users pause between turns. A stand-in, not vLLM: what is under test
is the benchmark's routing, which needs engines of steady latency, not real ones."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

import gpu_capacity
from cli_support.conversation_workload import RequestShape, Route, Workload
from conversations import drive, summarise

SHAPE = RequestShape(shared_prefix_tokens=8, conversation_tokens=8, turn_tokens=4, output_tokens=4)
ENGINES = 3
TOKEN_INTERVAL_S = 0.01


async def completions(request: web.Request) -> web.StreamResponse:
    """A streaming completion of ``max_tokens`` token ids, one every TOKEN_INTERVAL_S."""
    body = await request.json()
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for index in range(body["max_tokens"]):
        await asyncio.sleep(TOKEN_INTERVAL_S)
        await response.write(f"data: {json.dumps({'choices': [{'token_ids': [100 + index]}]})}\n\n".encode())
    usage = {"prompt_tokens": len(body["prompt"]), "completion_tokens": body["max_tokens"]}
    await response.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode())
    return response


async def share_on_previous_engine(route: Route, think_s: float) -> tuple[float | None, int]:
    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app)
    await runner.setup()
    urls = []
    try:
        for _ in range(ENGINES):
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            urls.append(f"http://127.0.0.1:{port}/v1/completions")
        workload = Workload(SHAPE, ["a", "b", "c"], ENGINES, route, seed=1)
        samples, wall = await drive(urls, workload, mode="conversations", concurrency=6, seconds=2.5, think_s=think_s)
    finally:
        await runner.cleanup()
    level = summarise(route, samples, wall, concurrency=6, engines=ENGINES, hit_rate=None)
    return level.follow_ups_on_previous_engine, level.errors


def test_affinity_keeps_every_follow_up_on_its_engine() -> None:
    share, errors = asyncio.run(share_on_previous_engine("affinity", think_s=0.05))
    assert (share, errors) == (1.0, 0)


def test_least_outstanding_follows_the_conversation_only_without_think_time() -> None:
    at_once, errors_at_once = asyncio.run(share_on_previous_engine("least_outstanding", think_s=0.0))
    with_pauses, errors_with_pauses = asyncio.run(share_on_previous_engine("least_outstanding", think_s=0.05))
    assert (errors_at_once, errors_with_pauses) == (0, 0)
    assert at_once is not None and with_pauses is not None
    # Without pauses the engine that just answered has the fewest in flight, so it gets the next
    # turn; with pauses of about a request's latency the next turn goes to whichever is free.
    assert at_once > 0.8, at_once
    assert with_pauses < 0.7, with_pauses


def test_negative_think_time_is_refused_with_the_allowed_values() -> None:
    workload = Workload(SHAPE, ["a"], 1, "affinity", seed=1)
    with pytest.raises(ValueError) as raised:
        asyncio.run(drive(["http://127.0.0.1:9"], workload, mode="conversations", concurrency=1, seconds=1, think_s=-1))
    assert str(raised.value) == "think_s: -1 is negative; allowed: 0 (no pause) or a mean pause in seconds"


@pytest.mark.parametrize(
    ("value", "message"),
    [("-1", "-1 must be >= 0"), ("nan", "'nan' is not a finite number"), ("soon", "'soon' is not a number")],
)
def test_a_bad_think_time_stops_the_sessions_benchmark_with_one_line(
    value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sigterm = signal.getsignal(signal.SIGTERM)  # main() installs its own handler first
    try:
        with pytest.raises(SystemExit) as exited:
            gpu_capacity.main(["sessions", "--smoke", "--think-s", value])
    finally:
        signal.signal(signal.SIGTERM, sigterm)
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (f"gpu_capacity.py: error: argument --think-s: {message}")


def test_the_summary_reports_ttft_per_request_class_from_the_cached_tokens() -> None:
    from conversations import Sample

    def sample(turn: int, ttft_s: float, prompt: int, cached: int) -> Sample:
        return Sample(0, turn, 0, 200, 0.0, ttft_s + 1.0, ttft_s, prompt, 4, cached)

    # First turns hit only the shared prefix (592 of 2,380); follow-ups their history (1,984 of 2,200).
    samples = [sample(0, 1.2, 2380, 592) for _ in range(4)] + [sample(1, 0.15, 2200, 1984) for _ in range(12)]
    level = summarise("x", samples, 10.0, concurrency=4, engines=1, hit_rate=None)
    assert (level.cold_requests, level.cold_ttft_p95_ms) == (4, 1200.0)
    assert (level.warm_requests, level.warm_ttft_p95_ms) == (12, 150.0)
    # The threshold decides: at 0.95 every request is cold.
    strict = summarise("x", samples, 10.0, concurrency=4, engines=1, hit_rate=None, warm_min_cached_fraction=0.95)
    assert (strict.cold_requests, strict.warm_requests, strict.warm_ttft_p95_ms) == (16, 0, None)
    # The capacity at each class's SLO reads that class's p95.
    assert gpu_capacity.at_slo([level], 500.0, "warm")["concurrency"] == 4
    assert gpu_capacity.at_slo([level], 500.0, "cold")["concurrency"] == 0
