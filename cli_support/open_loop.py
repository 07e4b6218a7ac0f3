"""Open-loop conversation load: conversations arrive at random, users pause between turns.

Closed-loop sweeps (``c`` workers, each sending its next request the moment the last one is
answered) never let the offered load exceed what the engine serves, and keep exactly ``c``
conversations alive. Users do neither: conversations start as a Poisson process whatever the
engine is doing, and between two turns a user reads the answer and types the next message. How
many conversations are alive then follows from the arrival rate and the pauses (Little's law),
and with it how much of the prefix cache their histories need (docs/planning.md, "The open-loop
model"). This module is the load's one schedule, shared by the GPU benchmark
(``benchmarks/open_loop.py``, vLLM's own routes) and ``ops load --open-loop`` (a deployed
endpoint): the transport is the caller's ``send_turn`` coroutine.

The schedule is a ramp of :class:`RateStep`: at each step's request rate, conversations arrive
with exponential gaps of mean ``60 / (requests_per_min / mean_turns)`` seconds; each sends its
turns in order, pausing an exponential time of mean ``think_s`` after each answer. Every step
first runs ``settle_s`` unmeasured seconds (the conversations alive at the new rate build up),
then ``measure_s`` measured ones: a request belongs to the step in whose measured window it was
sent. Standard library only (the benchmarks import it from vLLM's environment).

A ramp from an empty engine needs a whole conversation's life (about ``mean_turns x think_s``)
before the conversations alive reach what the first rate keeps alive: 2-4 minutes at 30-60 s
pauses, most of a GPU session's budget. ``warm_start`` skips it: the conversations a steady past at
the first rate would have left alive are started at once, each at the turn and with the remaining
pause that past gives it (:func:`backdated_conversations`). Their histories were never sent, so each
one's first request finds nothing cached: it is sent, but measured in no step.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from cli_support.percentiles import percentile

CLASSES = ("cold", "warm")
"""Request classes by prefix-cache hits (serving_contract.request_classes; kept as strings here
so the module needs nothing beyond the standard library)."""


@dataclass(frozen=True)
class RateStep:
    """One step of the ramp: the offered request rate and how long it runs, seconds."""

    requests_per_min: float
    settle_s: float
    measure_s: float

    def __post_init__(self) -> None:
        for name in ("requests_per_min", "measure_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name}: {value!r} must be a finite number > 0")
        if not math.isfinite(self.settle_s) or self.settle_s < 0:
            raise ValueError(f"settle_s: {self.settle_s!r} must be a finite number >= 0")


def ramp(
    rates_per_min: Sequence[float], *, settle_s: float, measure_s: float, first_settle_s: float | None = None
) -> list[RateStep]:
    """Steps at ``rates_per_min`` (requests per minute, increasing), each ``settle_s`` + ``measure_s``;
    the first settles ``first_settle_s`` instead when given (the cache fills from nothing there).

    Raises:
        ValueError: no rate, or the rates do not increase (a ramp runs past the cliff once).
    """
    if not rates_per_min:
        raise ValueError("rates: at least one request rate is needed")
    if any(b <= a for a, b in itertools.pairwise(rates_per_min)):
        raise ValueError(f"rates: {list(rates_per_min)} must increase")
    steps = [RateStep(rate, settle_s, measure_s) for rate in rates_per_min]
    if first_settle_s is not None:
        steps[0] = RateStep(rates_per_min[0], first_settle_s, measure_s)
    return steps


@dataclass
class TurnRecord:
    """One request as the client saw it. ``step`` is None for requests sent while a step settled."""

    conversation: int
    turn: int
    step: int | None
    sent_s: float
    status: int = 0
    ttft_s: float | None = None
    latency_s: float | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Answered (200) with a first token."""
        return self.status == 200 and self.ttft_s is not None

    def request_class(self, warm_min_cached_fraction: float) -> str | None:
        """``warm`` when at least that share of the prompt came from the prefix cache, else ``cold``
        (serving_contract.request_classes' rule); None without a prompt count."""
        if not self.prompt_tokens:
            return None
        return "warm" if self.cached_tokens >= warm_min_cached_fraction * self.prompt_tokens else "cold"


class Conversation(Protocol):
    """What the schedule needs of the caller's conversation: how many turns it has."""

    @property
    def turns(self) -> int: ...


@dataclass(frozen=True)
class Backdated:
    """A conversation a steady past would have left alive at the ramp's start: its next turn
    (0-based) and the seconds until the user sends it."""

    turn: int
    delay_s: float


def backdated_conversations(
    rng: random.Random,
    *,
    requests_per_min: float,
    think_s: float,
    turns_of: Callable[[int], int],
    answer_s: float,
    mean_turns: float,
) -> list[Backdated]:
    """Where each conversation alive at time 0 after a steady past at ``requests_per_min`` stands,
    in the order they are to be started (conversation numbers 0, 1, ...).

    Conversations arrived as a Poisson process over the past (a turn answered ``answer_s`` seconds
    after it was sent, exponential pauses of mean ``think_s``); the ones with a turn still to send
    at time 0 are returned. Each arrival is played with the turns of the next conversation to be
    started (``turns_of(number)``), so a conversation goes on with as many turns as it was played
    with. The horizon is long enough that a conversation older than it has surely ended (10 pauses).

    Raises:
        ValueError: a rate <= 0, or ``think_s`` / ``answer_s`` negative.
    """
    if requests_per_min <= 0 or think_s < 0 or answer_s < 0:
        raise ValueError(
            f"requests_per_min {requests_per_min!r} must be > 0, think_s {think_s!r} and answer_s {answer_s!r} >= 0"
        )
    rate = requests_per_min / 60 / mean_turns  # conversations per second
    horizon = 10 * think_s + 10 * answer_s + 1.0
    arrivals: list[float] = []
    at = -horizon
    while True:
        at += rng.expovariate(rate)
        if at >= 0:
            break
        arrivals.append(at)
    alive: list[Backdated] = []
    for start in arrivals:
        sent = start
        for turn in range(turns_of(len(alive))):
            if turn:
                sent += answer_s + (rng.expovariate(1 / think_s) if think_s else 0.0)
            if sent >= 0:
                alive.append(Backdated(turn, sent))
                break
    return alive


ConversationT = TypeVar("ConversationT", bound=Conversation)


@dataclass
class Sample:
    """A reading taken every ``sample_every_s``: the conversations alive and the caller's figures."""

    at_s: float
    step: int | None
    live_conversations: int
    in_flight: int
    figures: dict[str, float] = field(default_factory=dict)


@dataclass
class OpenLoopRun:
    """Everything one ramp produced: requests, readings, and the steps actually run."""

    steps: list[RateStep]
    think_s: float
    mean_turns: float
    records: list[TurnRecord] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    steps_run: int = 0
    stopped_early: bool = False

    RECORD_FIELDS = (
        "conversation",
        "turn",
        "step",
        "sent_s",
        "status",
        "ttft_ms",
        "latency_ms",
        "prompt_tokens",
        "cached_tokens",
        "output_tokens",
    )
    """Columns of a record in :meth:`to_json` (times in ms, rounded to 0.1)."""

    def to_json(self) -> dict[str, Any]:
        """The raw run, compact: records as rows of :data:`RECORD_FIELDS`, readings as rows."""

        def ms(value: float | None) -> float | None:
            return None if value is None else round(value * 1000, 1)

        return {
            "steps": [asdict(step) for step in self.steps],
            "think_s": self.think_s,
            "mean_turns": self.mean_turns,
            "steps_run": self.steps_run,
            "stopped_early": self.stopped_early,
            "record_fields": list(self.RECORD_FIELDS),
            "records": [
                [
                    r.conversation,
                    r.turn,
                    r.step,
                    round(r.sent_s, 3),
                    r.status,
                    ms(r.ttft_s),
                    ms(r.latency_s),
                    r.prompt_tokens,
                    r.cached_tokens,
                    r.output_tokens,
                ]
                for r in self.records
            ],
            "samples": [[s.at_s, s.step, s.live_conversations, s.in_flight, s.figures] for s in self.samples],
            "errors": sorted({r.error for r in self.records if r.error})[:10],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OpenLoopRun:
        """A run written by :meth:`to_json` (or by benchmarks/open_loop.py), to summarise again."""

        def seconds(value: float | None) -> float | None:
            return None if value is None else value / 1000

        run = cls(
            steps=[RateStep(**step) for step in data["steps"]],
            think_s=float(data["think_s"]),
            mean_turns=float(data["mean_turns"]),
            steps_run=int(data.get("steps_run") or len({row[2] for row in data["records"] if row[2] is not None})),
            stopped_early=bool(data.get("stopped_early")),
        )
        for row in data["records"]:
            conversation, turn, step, sent, status, ttft, latency, prompt, cached, output = row
            record = TurnRecord(
                conversation, turn, step, sent, status, seconds(ttft), seconds(latency), prompt, cached, output
            )
            if latency is not None and not record.ok:
                record.error = f"status {status}"
            run.records.append(record)
        run.samples = [
            Sample(at, step, live, flight, dict(figures)) for at, step, live, flight, figures in data["samples"]
        ]
        return run


class _Schedule(Generic[ConversationT]):
    """State of one run: the clock, the step in force and the live conversations."""

    def __init__(
        self,
        run: OpenLoopRun,
        rng: random.Random,
        new_conversation: Callable[[int], ConversationT],
        send_turn: Callable[[ConversationT, TurnRecord], Awaitable[bool]],
        clock: Callable[[], float],
        *,
        resume: Callable[[ConversationT, int], None] | None = None,
    ) -> None:
        self.run = run
        self.resume = resume
        self.rng = rng
        self.new_conversation = new_conversation
        self.send_turn = send_turn
        self.clock = clock
        self.started = clock()
        self.step_index = 0
        self.measuring = False
        self.live = 0
        self.in_flight = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.next_number = 0
        self.closed = False

    def now(self) -> float:
        return self.clock() - self.started

    async def conversation(self, think_rng: random.Random, backdated: Backdated | None = None) -> None:
        number = self.next_number
        self.next_number += 1
        conversation = self.new_conversation(number)
        first = 0
        if backdated is not None:
            assert self.resume is not None  # run_open_loop checks it
            first = min(backdated.turn, conversation.turns - 1)
            self.resume(conversation, first)
        self.live += 1
        try:
            if backdated is not None:
                await asyncio.sleep(backdated.delay_s)
            for turn in range(first, conversation.turns):
                if self.closed:
                    return
                # A resumed conversation's first turn finds no history in the cache (it was never
                # sent): load, but no step's measurement.
                measured = self.measuring and not (backdated is not None and turn == first and first > 0)
                record = TurnRecord(number, turn, self.step_index if measured else None, self.now())
                self.run.records.append(record)
                self.in_flight += 1
                try:
                    carry_on = await self.send_turn(conversation, record)
                finally:
                    self.in_flight -= 1
                if not carry_on or turn == conversation.turns - 1:
                    return
                await asyncio.sleep(think_rng.expovariate(1 / self.run.think_s) if self.run.think_s else 0.0)
        finally:
            self.live -= 1

    def spawn(self, backdated: Backdated | None = None) -> None:
        # Each conversation's pauses come from its own generator, seeded from the run's: the same
        # seed replays the same pauses whatever order the answers arrive in.
        task = asyncio.ensure_future(self.conversation(random.Random(self.rng.getrandbits(64)), backdated))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def arrivals_until(self, end_s: float, per_min: float) -> None:
        """Poisson conversation arrivals at ``per_min`` requests per minute until ``end_s``."""
        rate = per_min / 60 / self.run.mean_turns  # conversations per second
        while True:
            gap = self.rng.expovariate(rate)
            if self.now() + gap >= end_s:
                await asyncio.sleep(max(end_s - self.now(), 0.0))
                return
            await asyncio.sleep(gap)
            self.spawn()


async def run_open_loop(
    steps: Sequence[RateStep],
    *,
    think_s: float,
    mean_turns: float,
    new_conversation: Callable[[int], ConversationT],
    send_turn: Callable[[ConversationT, TurnRecord], Awaitable[bool]],
    seed: int = 0,
    sample: Callable[[], Awaitable[Mapping[str, float]]] | None = None,
    sample_every_s: float = 1.0,
    should_stop: Callable[[OpenLoopRun, int], bool] | None = None,
    drain_s: float = 30.0,
    clock: Callable[[], float] = time.monotonic,
    warm_start: bool = False,
    resume: Callable[[ConversationT, int], None] | None = None,
    turns_of: Callable[[int], int] | None = None,
    answer_s: float = 3.0,
) -> OpenLoopRun:
    """Run the ramp; return every request and reading.

    ``send_turn(conversation, record)`` sends the conversation's next turn, fills ``record``
    (status, TTFT, latency in seconds, prompt/cached/output tokens, error) and returns whether the
    conversation goes on (False after an error). It sets ``latency_s`` on errors too: a record
    without it is a request that never came back. ``sample()`` returns the caller's figures at that
    moment (engine gauges and counters), read every ``sample_every_s`` seconds.
    ``should_stop(run, step)`` is asked after each step; True ends the ramp there (past the cliff,
    more load only measures a queue). At the end, requests still in flight get ``drain_s`` seconds
    to finish (no new turn is sent); the rest are cancelled and stay unanswered (``latency_s`` None).
    ``warm_start`` starts the conversations a steady past at the first step's rate leaves alive
    (module docstring); ``resume(conversation, turn)`` readies one to go on from ``turn`` (its
    history of the earlier turns), ``turns_of(number)`` is how many turns conversation ``number``
    will have, and ``answer_s`` is the seconds an answer takes in that past.

    Raises:
        ValueError: ``think_s`` negative or not finite, ``mean_turns`` < 1, no step, ``warm_start``
            without ``resume`` and ``turns_of``.
    """
    if not math.isfinite(think_s) or think_s < 0:
        raise ValueError(f"think_s: {think_s!r} must be a finite number of seconds >= 0")
    if not math.isfinite(mean_turns) or mean_turns < 1:
        raise ValueError(f"mean_turns: {mean_turns!r} must be >= 1")
    if not steps:
        raise ValueError("steps: at least one rate step is needed")
    if warm_start and (resume is None or turns_of is None):
        raise ValueError(
            "warm_start: needs resume(conversation, turn) and turns_of(number) to start conversations mid-way"
        )
    run = OpenLoopRun(steps=list(steps), think_s=think_s, mean_turns=mean_turns)
    schedule = _Schedule(run, random.Random(seed), new_conversation, send_turn, clock, resume=resume)
    if warm_start:
        assert turns_of is not None  # checked above
        past = backdated_conversations(
            random.Random(seed + 1),
            requests_per_min=steps[0].requests_per_min,
            think_s=think_s,
            turns_of=turns_of,
            answer_s=answer_s,
            mean_turns=mean_turns,
        )
        for backdated in past:
            schedule.spawn(backdated)

    async def readings() -> None:
        while True:
            figures = dict(await sample()) if sample else {}
            run.samples.append(
                Sample(
                    round(schedule.now(), 3),
                    schedule.step_index if schedule.measuring else None,
                    schedule.live,
                    schedule.in_flight,
                    figures,
                )
            )
            await asyncio.sleep(sample_every_s)

    reader = asyncio.ensure_future(readings())
    try:
        end = 0.0
        for index, step in enumerate(run.steps):
            schedule.step_index, schedule.measuring = index, False
            end += step.settle_s
            await schedule.arrivals_until(end, step.requests_per_min)
            schedule.measuring = True
            end += step.measure_s
            await schedule.arrivals_until(end, step.requests_per_min)
            run.steps_run = index + 1
            if should_stop and index < len(run.steps) - 1 and should_stop(run, index):
                run.stopped_early = True
                break
        await _drain(schedule, drain_s)
    finally:
        reader.cancel()
        for task in list(schedule.tasks):
            task.cancel()
        await asyncio.gather(reader, *schedule.tasks, return_exceptions=True)
    return run


async def _drain(schedule: _Schedule[Any], drain_s: float) -> None:
    """No new turn from here on; the requests in flight get up to ``drain_s`` seconds to finish."""
    schedule.closed = True
    deadline = schedule.clock() + drain_s
    while schedule.in_flight and schedule.clock() < deadline:
        await asyncio.sleep(0.1)


# ----------------------------------------------------------------------------- summary
@dataclass
class ClassFigures:
    """One request class in one step: how many, and its TTFT p50/p95, ms."""

    requests: int
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None


@dataclass
class StepSummary:
    """One measured step: offered vs served rate, TTFT per class, and what the engine reported."""

    requests_per_min: float
    served_per_min: float
    """Requests sent in the measured window and answered, per minute: the arrival rate reached."""
    completed_per_min: float
    """Answers that finished inside the measured window, per minute: what the engine kept up with."""
    requests: int
    errors: int
    unfinished: int
    """Sent in the window and not answered when summarised (in flight, or cut at the end of the ramp)."""
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    classes: dict[str, ClassFigures]
    cold_share: float | None
    itl_mean_ms: float | None
    e2e_p50_ms: float | None
    live_conversations_mean: float | None
    in_flight_mean: float | None
    engine: dict[str, float | None] = field(default_factory=dict)
    """Means of the caller's gauges over the measured window (``<name>_mean``, ``<name>_max``)
    and the growth of its counters (``<name>_delta``), as :func:`summarise` was told."""
    achieved_per_min: float | None = None
    """Every request sent in the measured window, per minute, measured or not (a warm start's
    resumed turns too): the arrival rate the engine had. None where the run does not say (a
    measured curve of an older capacity job): :attr:`arrived_per_min` falls back to
    ``served_per_min``."""
    paced_per_min: float | None = None
    """The requests this run's own arrivals and pauses would have sent in the window had every
    answer come as fast as in its lightest step (:func:`paced_requests`), per minute: what the
    engine was offered on this sample path, free of the arrivals' noise. None for a ramp's last step
    (turns it would have sent after the ramp ended are missing)."""

    due_per_min: float | None = None
    """Requests sent one median answer time before the window, per minute: what an engine that keeps
    up completes in it (rule 3 of :class:`Verdict`; without it, ``arrived_per_min``)."""

    @property
    def arrived_per_min(self) -> float:
        """The achieved arrival rate (``achieved_per_min``, else ``served_per_min``)."""
        return self.served_per_min if self.achieved_per_min is None else self.achieved_per_min

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _ms(values: list[float], q: int) -> float | None:
    value = percentile(values, q)
    return None if value is None else round(value * 1000, 1)


def summarise_step(
    run: OpenLoopRun,
    index: int,
    *,
    warm_min_cached_fraction: float,
    gauges: Sequence[str] = (),
    counters: Sequence[str] = (),
) -> StepSummary:
    """The measured window of step ``index``: requests sent in it, readings taken in it."""
    step = run.steps[index]
    records = [r for r in run.records if r.step == index]
    # A request still in flight (no answer yet, no error) is neither served nor an error: when
    # ``should_stop`` asks mid-run the step's slowest requests may not be back.
    done = [r for r in records if r.latency_s is not None or r.error is not None]
    ok = [r for r in done if r.ok]
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    by_class: dict[str, list[float]] = {klass: [] for klass in CLASSES}
    for record in ok:
        klass = record.request_class(warm_min_cached_fraction)
        if klass is not None and record.ttft_s is not None:
            by_class[klass].append(record.ttft_s)
    classified = sum(len(v) for v in by_class.values())
    itl = [
        (r.latency_s - r.ttft_s) * 1000 / (r.output_tokens - 1)
        for r in ok
        if r.latency_s is not None and r.ttft_s is not None and r.output_tokens > 1
    ]
    readings = [s for s in run.samples if s.step == index]
    window_start = sum(s.settle_s + s.measure_s for s in run.steps[:index]) + step.settle_s
    window_end = window_start + step.measure_s
    completed = sum(
        1
        for r in run.records
        if r.ok and r.latency_s is not None and window_start <= r.sent_s + r.latency_s < window_end
    )
    achieved = sum(1 for r in run.records if window_start <= r.sent_s < window_end)
    # What was due to finish in the window: the requests sent one median answer time earlier.
    lag = statistics.median(r.latency_s for r in ok if r.latency_s is not None) if ok else 0.0
    due = sum(1 for r in run.records if window_start - lag <= r.sent_s < window_end - lag)
    # The last step's later turns were never sent (the ramp ended): its paced count would miss them.
    paced = paced_requests(run, window_start, window_end) if index < run.steps_run - 1 else None
    engine: dict[str, float | None] = {}
    for name in gauges:
        values = [s.figures[name] for s in readings if name in s.figures]
        engine[f"{name}_mean"] = round(statistics.fmean(values), 4) if values else None
        engine[f"{name}_max"] = round(max(values), 4) if values else None
    for name in counters:
        values = [s.figures[name] for s in readings if name in s.figures]
        engine[f"{name}_delta"] = round(values[-1] - values[0], 1) if len(values) > 1 else None
    return StepSummary(
        requests_per_min=step.requests_per_min,
        served_per_min=round(60 * len(ok) / step.measure_s, 1),
        completed_per_min=round(60 * completed / step.measure_s, 1),
        requests=len(records),
        errors=len(done) - len(ok),
        unfinished=len(records) - len(done),
        ttft_p50_ms=_ms(ttft, 50),
        ttft_p95_ms=_ms(ttft, 95),
        classes={
            klass: ClassFigures(len(values), _ms(values, 50), _ms(values, 95)) for klass, values in by_class.items()
        },
        cold_share=round(len(by_class["cold"]) / classified, 4) if classified else None,
        itl_mean_ms=round(statistics.fmean(itl), 3) if itl else None,
        e2e_p50_ms=_ms([r.latency_s for r in ok if r.latency_s is not None], 50),
        live_conversations_mean=round(statistics.fmean(s.live_conversations for s in readings), 1)
        if readings
        else None,
        in_flight_mean=round(statistics.fmean(s.in_flight for s in readings), 2) if readings else None,
        engine=engine,
        achieved_per_min=round(60 * achieved / step.measure_s, 1),
        paced_per_min=None if paced is None else round(60 * paced / step.measure_s, 1),
        due_per_min=round(60 * due / step.measure_s, 1),
    )


def _nominal_e2e_s(run: OpenLoopRun) -> float | None:
    """The median answer time of the run's first measured step (its lightest load), seconds."""
    first = [r.latency_s for r in run.records if r.step == 0 and r.ok and r.latency_s is not None]
    return statistics.median(first) if first else None


def paced_requests(run: OpenLoopRun, window_start: float, window_end: float) -> int | None:
    """How many requests this run's arrivals and pauses would have sent in ``[window_start,
    window_end)`` had every answer taken the run's lightest-load answer time.

    A conversation sends its next turn a pause after its previous answer, so an engine that answers
    slowly delays every later turn: the requests it gets fall behind what the same users would have
    sent (open loop at the conversation level, closed within one). Each turn's send time is moved
    earlier by how much longer its conversation's earlier answers took than the nominal one; the
    count of turns that lands in the window is what the sample path offered. Comparing the
    requests that arrived with it separates an engine that falls behind from the arrivals' own
    noise (two ramps with one seed share their arrivals: benchmarks/results/h200-2026-11-29-open-loop).
    None without a measured first step.
    """
    nominal = _nominal_e2e_s(run)
    if nominal is None:
        return None
    turns: dict[int, list[TurnRecord]] = {}
    for record in run.records:
        turns.setdefault(record.conversation, []).append(record)
    count = 0
    for records in turns.values():
        stretch = 0.0
        for record in sorted(records, key=lambda r: r.turn):
            if window_start <= record.sent_s - stretch < window_end:
                count += 1
            if record.latency_s is not None:
                stretch += max(record.latency_s - nominal, 0.0)
    return count


@dataclass
class Verdict:
    """Where a ramp held each class's SLO, and where it fell off the cliff (requests per minute).

    The rule (docs/planning.md, "When a step holds"), written before any model was fitted to it: a
    step holds a class when

    1. the class's TTFT p95 is within its objective;
    2. no more than ``max_error_rate`` of its requests failed;
    3. the engine finished what arrived: answers completed in the window >= :data:`KEPT_UP_COMPLETED`
       x the requests due in it (sent one median answer time before it: :attr:`StepSummary.due_per_min`);
    4. the load reached the engine: requests that arrived >= :data:`KEPT_UP_PACED` x what the run's
       own arrivals and pauses offered on that sample path (:func:`paced_requests`); where a run
       cannot say (no measured first step), >= :data:`KEPT_UP_ARRIVED` x the offered rate.

    The first step that fails ends the search: a lucky step further up does not count.
    """

    holds_per_min: dict[str, float | None]
    """Per class, and ``both``: the offered rate of the last step before the first that failed the
    rule; None when the first step failed."""
    cliff_per_min: float | None
    """The first offered rate whose TTFT p95 (all turns) reached ``cliff_factor`` x the highest
    SLO: the collapse, not the first miss. None when the ramp never reached it."""
    holds_achieved_per_min: dict[str, float | None] = field(default_factory=dict)
    """The same steps' achieved rates (:attr:`StepSummary.arrived_per_min`): what a run says it
    held, and what the engine model is checked against."""
    fails_achieved_per_min: float | None = None
    """The achieved rate of the first step that failed the rule for both classes (None: none
    failed): with ``holds_achieved_per_min['both']`` the bracket the true holding rate lies in."""
    steps_held: int = 0
    """How many steps, from the first, held both classes."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


KEPT_UP_COMPLETED = 0.9
"""Rule 3: answers completed in a step's window over the requests due in it. An engine that keeps
up completes what is due, up to the noise of a window's few hundred requests; one that falls
behind piles up running requests and completes less and less of it."""
KEPT_UP_PACED = 0.9
"""Rule 4: requests that arrived over what the sample path offered. Free of the arrivals' noise,
this ratio moves only when answers take longer than at light load, and 10 % fewer requests is an
answer time grown by more than a third of a 30 s pause."""
KEPT_UP_ARRIVED = 0.75
"""Rule 4 without a paced count (a measured curve from an older capacity job): arrived over offered,
which carries the window's Poisson noise (steady steps of the 2026-11-27 runs: 0.79-1.07)."""


def kept_up(summary: StepSummary) -> bool:
    """Rules 3 and 4 of :class:`Verdict`: the engine finished what arrived, and what arrived is what
    the users sent."""
    arrived = summary.arrived_per_min
    due = arrived if summary.due_per_min is None else summary.due_per_min
    if summary.completed_per_min < KEPT_UP_COMPLETED * due:
        return False
    if summary.paced_per_min:
        return arrived >= KEPT_UP_PACED * summary.paced_per_min
    return arrived >= KEPT_UP_ARRIVED * summary.requests_per_min


def verdict(
    summaries: Sequence[StepSummary],
    slo_ms: Mapping[str, float],
    *,
    max_error_rate: float = 0.01,
    cliff_factor: float = 2.0,
) -> Verdict:
    """Each class's SLO-holding rate and the cliff, from steps in increasing rate.

    A step without requests of a class does not limit it; the first step that misses, or that did
    not keep up, ends the search (a lucky step further up does not count).
    """
    holds: dict[str, float | None] = {}
    achieved: dict[str, float | None] = {}
    first_failure: dict[str, int] = {}
    for klass in CLASSES:
        best: StepSummary | None = None
        for index, summary in enumerate(summaries):
            p95 = summary.classes[klass].ttft_p95_ms
            erred = summary.requests and summary.errors / summary.requests > max_error_rate
            if erred or not kept_up(summary) or (p95 is not None and p95 > slo_ms[klass]):
                first_failure[klass] = index
                break
            best = summary
        holds[klass] = None if best is None else best.requests_per_min
        achieved[klass] = None if best is None else best.arrived_per_min
    for table in (holds, achieved):
        values = [table[klass] for klass in CLASSES]
        table["both"] = None if any(v is None for v in values) else min(v for v in values if v is not None)
    failed = min(first_failure.values()) if first_failure else None
    limit = cliff_factor * max(slo_ms[klass] for klass in CLASSES)
    cliff = next(
        (s.requests_per_min for s in summaries if s.ttft_p95_ms is not None and s.ttft_p95_ms >= limit),
        None,
    )
    return Verdict(
        holds,
        cliff,
        achieved,
        None if failed is None else summaries[failed].arrived_per_min,
        len(summaries) if failed is None else failed,
    )


def format_step(summary: StepSummary) -> str:
    """One line per step, for the log."""

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    classes = " ".join(
        f"{klass} n={figures.requests} p50/p95 {ms(figures.ttft_p50_ms)}/{ms(figures.ttft_p95_ms)}"
        for klass, figures in summary.classes.items()
    )
    engine = " ".join(f"{k} {v:g}" for k, v in summary.engine.items() if v is not None)
    cold = "-" if summary.cold_share is None else f"{summary.cold_share:.0%}"
    return (
        f"{summary.requests_per_min:7.1f}/min offered {summary.arrived_per_min:7.1f} arrived "
        f"({'-' if summary.paced_per_min is None else f'{summary.paced_per_min:.1f}'} paced) "
        f"{summary.completed_per_min:7.1f} completed "
        f"TTFT p50/p95 {ms(summary.ttft_p50_ms)}/{ms(summary.ttft_p95_ms)} ms {classes} cold {cold} "
        f"ITL {summary.itl_mean_ms} ms live {summary.live_conversations_mean} in flight {summary.in_flight_mean} "
        f"errors {summary.errors} {engine}"
    )
