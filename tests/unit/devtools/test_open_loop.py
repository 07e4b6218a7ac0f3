"""The open-loop schedule (cli_support/open_loop.py, issue 45): conversations arrive on their own
clock, users pause between turns, each request belongs to the step it was sent in, and a step's
summary and the ramp's verdict say what the runs' JSON says."""

import asyncio
import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli_support.open_loop import (
    OpenLoopRun,
    RateStep,
    TurnRecord,
    backdated_conversations,
    kept_up,
    ramp,
    run_open_loop,
    summarise_step,
    verdict,
)

RUN = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "h200-2026-11-27-open-loop" / "ramp-think4.json"


@dataclass
class Chat:
    number: int
    turns: int = 3
    sent: int = 0


def test_a_ramp_must_increase_and_every_step_be_positive() -> None:
    assert [s.requests_per_min for s in ramp([60, 120], settle_s=1, measure_s=2)] == [60, 120]
    with pytest.raises(ValueError, match=r"rates: \[120, 60\] must increase"):
        ramp([120, 60], settle_s=1, measure_s=2)
    with pytest.raises(ValueError, match="rates: at least one request rate is needed"):
        ramp([], settle_s=1, measure_s=2)
    with pytest.raises(ValueError, match=r"measure_s: 0 must be a finite number > 0"):
        RateStep(60, 1, 0)
    with pytest.raises(ValueError, match=r"settle_s: nan must be a finite number >= 0"):
        RateStep(60, float("nan"), 1)


def _run(steps: list[RateStep], think_s: float, **kwargs: object) -> tuple[OpenLoopRun, dict[int, Chat]]:
    chats: dict[int, Chat] = {}
    answered: dict[int, float] = {}

    def new(number: int) -> Chat:
        chats[number] = Chat(number)
        return chats[number]

    async def send(chat: Chat, record: TurnRecord) -> bool:
        assert record.turn == chat.sent  # turns go out in order, one at a time
        if chat.number in answered:  # the user's pause comes after the previous answer
            assert record.sent_s >= answered[chat.number]
        chat.sent += 1
        await asyncio.sleep(0.01)
        record.status, record.ttft_s, record.latency_s = 200, 0.005, 0.01
        record.prompt_tokens, record.cached_tokens, record.output_tokens = 100, 10 if record.turn == 0 else 90, 5
        answered[chat.number] = record.sent_s + 0.01
        return True

    run = asyncio.run(
        run_open_loop(steps, think_s=think_s, mean_turns=3, new_conversation=new, send_turn=send, seed=7, **kwargs)  # type: ignore[arg-type]
    )
    return run, chats


def test_conversations_send_their_turns_in_order_and_every_request_belongs_to_one_step() -> None:
    run, chats = _run(ramp([600, 1200], settle_s=0.2, measure_s=0.4), think_s=0.05, drain_s=2)
    assert run.steps_run == 2 and not run.stopped_early
    assert chats and run.records
    assert {r.step for r in run.records} <= {None, 0, 1}
    # Measured requests exist in both steps; settling ones belong to none.
    assert {r.step for r in run.records if r.step is not None} == {0, 1}
    # The drain let every request in flight finish: none is left unanswered.
    assert all(r.latency_s is not None for r in run.records)
    summary = summarise_step(run, 1, warm_min_cached_fraction=0.5)
    assert summary.requests == sum(1 for r in run.records if r.step == 1)
    assert summary.unfinished == 0 and summary.errors == 0
    # First turns hit 10 % of their prompt (cold), follow-ups 90 % (warm), as the gateway classifies.
    firsts = sum(1 for r in run.records if r.step == 1 and r.turn == 0)
    assert summary.classes["cold"].requests == firsts


def test_should_stop_ends_the_ramp_after_the_step_that_asked() -> None:
    seen: list[int] = []

    def stop(run: OpenLoopRun, index: int) -> bool:
        seen.append(index)
        return True

    run, _ = _run(ramp([600, 1200, 2400], settle_s=0.1, measure_s=0.2), think_s=0.05, should_stop=stop, drain_s=2)
    assert seen == [0] and run.steps_run == 1 and run.stopped_early
    assert {r.step for r in run.records} <= {None, 0}


def test_a_negative_pause_is_refused() -> None:
    with pytest.raises(ValueError) as info:
        _run(ramp([60], settle_s=0, measure_s=1), think_s=-1)
    assert str(info.value) == "think_s: -1 must be a finite number of seconds >= 0"


@pytest.fixture(scope="module")
def measured() -> tuple[OpenLoopRun, list, dict]:  # type: ignore[type-arg]
    data = json.loads(RUN.read_text())
    run = OpenLoopRun.from_json(data)
    summaries = [summarise_step(run, i, warm_min_cached_fraction=0.5) for i in range(run.steps_run)]
    return run, summaries, data


def test_a_committed_run_round_trips_through_its_json(measured: tuple) -> None:  # type: ignore[type-arg]
    run, _, data = measured
    again = OpenLoopRun.from_json(run.to_json())
    assert again.records == run.records and again.steps == run.steps and again.think_s == data["think_s"]


def test_the_verdict_of_the_think_4_run_holds_to_660_and_collapses_at_740(measured: tuple) -> None:  # type: ignore[type-arg]
    _, summaries, _ = measured
    found = verdict(summaries, {"cold": 500.0, "warm": 500.0})
    by_rate = {s.requests_per_min: s for s in summaries}
    # 600 completed 494/min of 550 arrived, but 516 were due in its window (sent one answer earlier):
    # it kept up. Its arrivals fell short of the offered 600 by the arrivals' own noise: the paced
    # count (what these users would have sent at light-load answer times) was 583.
    assert by_rate[600].completed_per_min < 0.9 * by_rate[600].arrived_per_min
    assert by_rate[600].due_per_min is not None and by_rate[600].completed_per_min >= 0.9 * by_rate[600].due_per_min
    assert kept_up(by_rate[600]) and kept_up(by_rate[660]) and not kept_up(by_rate[740])
    assert found.holds_per_min == {"cold": 660.0, "warm": 660.0, "both": 660.0}
    # What it says it held is the rate that arrived, and the first failed step's brackets it.
    assert found.holds_achieved_per_min["both"] == by_rate[660].arrived_per_min
    assert found.fails_achieved_per_min == by_rate[740].arrived_per_min and found.steps_held == 6
    assert found.cliff_per_min == 740.0
    # The cliff is the prefix cache lost: nearly every request cold.
    assert by_rate[740].cold_share is not None and by_rate[740].cold_share > 0.95


def _two_turn_run(slow: range, slow_latency_s: float) -> OpenLoopRun:
    """20 conversations starting 3 s apart, 2 turns each, a 10 s pause; first answers take 1 s, or
    ``slow_latency_s`` for the conversations in ``slow``."""
    run = OpenLoopRun(steps=ramp([60, 61], settle_s=0, measure_s=60), think_s=10, mean_turns=2)
    for conversation in range(20):
        start = conversation * 3.0
        latency = slow_latency_s if conversation in slow else 1.0
        for turn, sent in ((0, start), (1, start + latency + 10)):
            step = 0 if sent < 60 else 1
            run.records.append(TurnRecord(conversation, turn, step, sent, 200, 0.1, latency if turn == 0 else 1.0))
    run.steps_run = 2
    return run


def test_the_paced_count_is_what_the_users_sent_had_answers_come_at_light_load_speed() -> None:
    """Rule 4 compares what arrived with what the sample path offered: slow answers that push users'
    next turns out of the window show; the arrivals' own noise (the same in both counts) does not."""
    fast = summarise_step(_two_turn_run(range(0), 1.0), 0, warm_min_cached_fraction=0.5)
    # 20 first turns, and the second turns of conversations starting before 49 s (start + 11 < 60).
    assert fast.achieved_per_min == fast.paced_per_min == 37
    slow = summarise_step(_two_turn_run(range(3, 10), 45.0), 0, warm_min_cached_fraction=0.5)
    # Seven first answers took 44 s longer: their second turns (sent at 64-82 s) left the window.
    assert slow.achieved_per_min == 30 and slow.paced_per_min == 37
    assert kept_up(fast) and not kept_up(slow)


def test_a_warm_start_leaves_alive_what_a_steady_past_would_and_measures_no_resumed_first_turn() -> None:
    # Little's law: 600 req/min over 3-turn conversations is 200 conversations/min; each lives two
    # pauses of 30 s and three answers of 3 s (69 s), so about 230 are alive at any moment.
    alive = backdated_conversations(
        random.Random(1), requests_per_min=600, think_s=30, turns_of=lambda _: 3, answer_s=3, mean_turns=3
    )
    assert 200 <= len(alive) <= 260
    # Each is mid-way (turn 0 was sent in the past) and sends its next turn within the coming pauses.
    assert all(1 <= b.turn <= 2 and b.delay_s >= 0 for b in alive)
    assert sum(b.delay_s for b in alive) / len(alive) == pytest.approx(33, rel=0.2)  # a pause and an answer
    with pytest.raises(ValueError, match=r"requests_per_min 0 must be > 0"):
        backdated_conversations(random.Random(1), requests_per_min=0, think_s=1, turns_of=abs, answer_s=1, mean_turns=3)

    resumed: list[tuple[int, int]] = []

    def resume(chat: Chat, turn: int) -> None:
        chat.sent = turn
        resumed.append((chat.number, turn))

    run, _ = _run(
        ramp([6000], settle_s=0.0, measure_s=0.3),
        think_s=0.2,
        drain_s=2,
        warm_start=True,
        resume=resume,
        turns_of=lambda _: 3,
        answer_s=0.01,
    )
    assert resumed, "a warm start resumes conversations"
    sent = [(number, turn) for number, turn in resumed if any(r.conversation == number for r in run.records)]
    assert sent, "resumed conversations whose pause ended before the ramp did sent their turn"
    first_sent = {number: min(r.turn for r in run.records if r.conversation == number) for number, _ in sent}
    for number, turn in sent:
        assert first_sent[number] == turn > 0
        # The resumed turn found nothing cached (never sent before): load, but in no step.
        [record] = [r for r in run.records if r.conversation == number and r.turn == turn]
        assert record.step is None
    # A warm start without a way to resume is refused.
    with pytest.raises(ValueError, match=r"warm_start: needs resume\(conversation, turn\) and turns_of\(number\)"):
        _run(ramp([600], settle_s=0, measure_s=0.1), think_s=0.1, warm_start=True)
