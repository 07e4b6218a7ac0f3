"""``load --open-loop``: conversations arriving at random against a deployed endpoint (issue 45).

The closed-loop ramp of ``load`` (c workers, no pause) measures what a fleet does when every user
sends the next request the moment the last one returns; real users arrive at random and pause
between turns. This mode drives the endpoint the way the capacity job drives one engine
(``cli_support/open_loop.py``'s schedule: Poisson arrivals of conversations at each offered rate of
``--rates``, an exponential pause of mean ``--think-s`` between a turn's answer and the next turn),
through the endpoint's own ``/invocations``: each conversation in a SageMaker stateful session
(``--sessions``, the default) or routed as the endpoint routes single requests.

Per step it prints TTFT p50/p95 per request class (cold/warm by the answer's cached prompt tokens,
as the gateway classifies) and the rate it kept up with; at the end, the highest offered rate at
which each class held its SLO and where TTFT collapsed. The endpoint's instances serve the load
together: the per-instance figure is the rate over ``--instances``.

Requests go out from a pool of :data:`MAX_IN_FLIGHT` threads (boto3 and httpx are synchronous), so
an arrival never waits for a free sender below :data:`MAX_RATE_PER_MIN`; a higher rate is refused
before anything is sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from cli_support.open_loop import (
    OpenLoopRun,
    StepSummary,
    TurnRecord,
    format_step,
    ramp,
    run_open_loop,
    summarise_step,
    verdict,
)
from ops.exit_codes import ExitCode, OpsError
from ops.invoke import Answer, Target
from ops.sessions import conversation_body, follow_up
from serving_contract.request_classes import cached_prompt_tokens

T = TypeVar("T")

MAX_IN_FLIGHT = 1024
"""Threads sending requests at once."""
MAX_RATE_PER_MIN = 4000.0
"""The highest offered rate: its requests in flight at 15 s an answer (a 180-token answer past the
cliff) fill :data:`MAX_IN_FLIGHT`."""
LONG_CONVERSATION_EVERY = 5
"""Every fifth conversation has 5 turns, the others 4: 4.2 on average (seed 002; as
cli_support/conversation_workload.py's)."""


@dataclass(frozen=True)
class OpenLoadPlan:
    """One open-loop run against an endpoint.

    Attributes:
        rates_per_min: offered requests per minute, per step, increasing.
        step_s: seconds per step (a quarter settles, the rest is measured).
        think_s: mean pause between a conversation's turns, s (``traffic.think_s`` by default).
        models: adapters (``model``) the conversations use, round-robin.
        prompt / max_tokens: the first user message and the answer's bound.
        slo_ms: TTFT p95 objective per class, ms.
        warm_min_cached_fraction: a follow-up is warm above this cached share of its prompt.
        sessions: each conversation in a SageMaker stateful session.
        variant: TargetVariant, or None (the endpoint's routing).
        instances: instances serving the load (the per-instance figure's divisor).
        drain_s: seconds in-flight requests get at the end.
    """

    rates_per_min: Sequence[float]
    step_s: float
    think_s: float
    models: Sequence[str]
    prompt: str
    max_tokens: int
    slo_ms: dict[str, float]
    warm_min_cached_fraction: float
    sessions: bool = True
    variant: str | None = None
    instances: int = 1
    drain_s: float = 60.0

    def validate(self) -> None:
        """Raises OpsError (USAGE) naming the flag, the value and what is allowed."""
        if not self.models:
            raise OpsError("--adapter: no adapter configured; name one", ExitCode.USAGE)
        too_fast = [r for r in self.rates_per_min if r > MAX_RATE_PER_MIN]
        if too_fast:
            raise OpsError(
                f"--rates {too_fast[0]:g}: at most {MAX_RATE_PER_MIN:g} requests per minute (its requests in flight "
                f"at 15 s an answer fill the {MAX_IN_FLIGHT} this command sends at once)",
                ExitCode.USAGE,
            )


@dataclass
class _Conversation:
    number: int
    model: str
    turns: int
    history: list[dict[str, str]] = field(default_factory=list)
    turn: int = 0
    session_id: str | None = None


class _Sender:
    """Sends conversations' turns through ``target`` from a thread pool (``run_open_loop``'s ``send_turn``)."""

    def __init__(self, target: Target, plan: OpenLoadPlan, pool: ThreadPoolExecutor) -> None:
        self.target, self.plan, self.pool = target, plan, pool

    async def _call(self, function: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.pool, function)

    def new_conversation(self, number: int) -> _Conversation:
        turns = 5 if number % LONG_CONVERSATION_EVERY == LONG_CONVERSATION_EVERY - 1 else 4
        return _Conversation(number, self.plan.models[number % len(self.plan.models)], turns)

    async def send_turn(self, conversation: _Conversation, record: TurnRecord) -> bool:
        plan = self.plan
        if plan.sessions and conversation.turn == 0:
            opened = await self._call(lambda: self.target.session("NEW_SESSION", variant=plan.variant))
            if not opened.ok:
                record.status, record.error, record.latency_s = 0, f"NEW_SESSION {opened.status}", 0.0
                return False
            conversation.session_id = opened.session_id
        message = follow_up(conversation.turn, plan.prompt)
        history, model = conversation.history, conversation.model
        body = conversation_body(model=model, history=history, turn=message, max_tokens=plan.max_tokens, stream=True)
        session = conversation.session_id
        answer = await self._call(
            lambda: self.target.invoke(body, stream=True, variant=plan.variant, session_id=session)
        )
        _fill(record, answer)
        if not answer.ok:
            return False
        conversation.history += [{"role": "user", "content": message}, {"role": "assistant", "content": answer.content}]
        conversation.turn += 1
        if plan.sessions and conversation.turn >= conversation.turns and session:
            await self._call(lambda: self.target.session("CLOSE", session_id=session, variant=plan.variant))
        return True


def _fill(record: TurnRecord, answer: Answer) -> None:
    """The answer as the schedule records it: status, TTFT, latency, tokens (the class), error."""
    record.latency_s, record.ttft_s = answer.latency_s, answer.ttft_s
    if answer.usage:
        record.prompt_tokens = int(answer.usage.get("prompt_tokens") or 0)
        record.output_tokens = int(answer.usage.get("completion_tokens") or 0)
        record.cached_tokens = cached_prompt_tokens(answer.usage)
    record.status = 200 if answer.ok else 0
    record.error = None if answer.ok else answer.status


def run_open_load(target: Target, plan: OpenLoadPlan, *, out: Callable[[str], None]) -> ExitCode:
    """Run ``plan`` against ``target``; print each step and the verdict. Exit 0 when both classes held
    their SLO at the lowest rate, 1 otherwise.

    Raises:
        OpsError: a bad plan (USAGE), before anything is sent.
    """
    plan.validate()
    steps = ramp(plan.rates_per_min, settle_s=plan.step_s / 4, measure_s=plan.step_s * 3 / 4)
    pool = ThreadPoolExecutor(max_workers=MAX_IN_FLIGHT, thread_name_prefix="open-load")
    sender = _Sender(target, plan, pool)

    def should_stop(run: OpenLoopRun, index: int) -> bool:
        step = summarise_step(run, index, warm_min_cached_fraction=plan.warm_min_cached_fraction)
        out(format_step(step))
        return step.ttft_p95_ms is not None and step.ttft_p95_ms >= 4 * max(plan.slo_ms.values())

    try:
        run = asyncio.run(
            run_open_loop(
                steps,
                think_s=plan.think_s,
                mean_turns=(4 * (LONG_CONVERSATION_EVERY - 1) + 5) / LONG_CONVERSATION_EVERY,
                new_conversation=sender.new_conversation,
                send_turn=sender.send_turn,
                should_stop=should_stop,
                drain_s=plan.drain_s,
            )
        )
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    summaries = [
        summarise_step(run, index, warm_min_cached_fraction=plan.warm_min_cached_fraction)
        for index in range(run.steps_run)
    ]
    _report(summaries, plan, out)
    return ExitCode.OK if verdict(summaries, plan.slo_ms).holds_per_min["both"] is not None else ExitCode.CHECK_FAILED


def _report(summaries: Sequence[StepSummary], plan: OpenLoadPlan, out: Callable[[str], None]) -> None:
    judged = verdict(summaries, plan.slo_ms)
    out(f"open loop: think {plan.think_s:g} s, {len(plan.models)} adapter(s), {plan.instances} instance(s)")
    for summary in summaries:
        out(format_step(summary))
    for klass in ("cold", "warm", "both"):
        rate = judged.holds_per_min[klass]
        held = "no rate" if rate is None else f"{rate:,.0f} req/min ({rate / plan.instances:,.0f} per instance)"
        slo = f"TTFT p95 <= {plan.slo_ms[klass]:g} ms" if klass in plan.slo_ms else "both SLOs"
        out(f"  {klass}: holds {slo} up to {held}")
    cliff = judged.cliff_per_min
    out(f"  cliff: {'not reached' if cliff is None else f'{cliff:,.0f} req/min'}")
