"""``load``: a bounded load test with a concurrency ramp, and a target-tracking suggestion.

Each concurrency level (default 1, 4, 16, 32) runs until it has sent its request budget or its
time budget is spent, whichever comes first; hard limits cap both so a typo cannot turn a
measurement into an incident. Requests go round-robin over the plan's routes (adapters, and in
inference_components mode their components). Per level it reports throughput, TTFT and latency
percentiles and the error rate, then picks the highest-throughput level that met the SLO and
turns it into a target-tracking value.

``variants`` mode, for ``SageMakerVariantInvocationsPerInstance`` (counted per minute):

    sustainable = throughput_rps x 60 / instances      (invocations per instance per minute)
    target      = floor(sustainable / 1.3)              (seed 001: 30 % headroom,
                                                         ``calculate_required_instances`` x 1.3)

``inference_components`` mode, for ``SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution``
(requests in flight per copy of the base component):

    in_flight   = throughput_rps x mean_latency_s       (Little's law: the concurrency the
                                                         endpoint actually saw, not the client's)
    target      = floor(in_flight / copies / 1.3)       (same 30 % headroom)
"""

import json
import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pydantic import ValidationError

from app_config.errors import to_config_error
from app_config.slo import SloConfig
from app_config.throughput_config import MeasuredThroughput
from cli_support.percentiles import percentile
from ops.conversation import ConversationPlan, run_conversation
from ops.exit_codes import ExitCode, OpsError
from ops.invoke import Answer, Target, chat_body
from ops.table import format_table, ms
from serving_contract.request_classes import RequestClass, classify_usage

DEFAULT_LEVELS = (1, 4, 16, 32)
MAX_CONCURRENCY = 64  # hard limit per level; ENGINE max_num_seqs is 128 per instance (seed 003)
MAX_TOTAL_REQUESTS = 2000  # hard limit over all levels
MAX_TOTAL_DURATION_S = 900.0  # hard limit over all levels (15 minutes)
HEADROOM = 1.3  # seed 001 calculate_required_instances: "Add 30% headroom buffer"
# Application Auto Scaling predefined metric types (botocore application-autoscaling MetricType).
# The metric the stacks' target tracking follows (scaling.*.target_tracking.metric's default).
INSTANCE_SCALING_METRIC = "SageMakerVariantConcurrentRequestsPerModelHighResolution"
COPY_SCALING_METRIC = "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
_SLO = SloConfig()  # the defaults of the one SLO declaration; the CLI passes the loaded config's
SIGNIFICANT_DIGITS = 3  # of the measured figures ops load prints as config (see significant())
MAX_TURNS = 16  # per conversation; seed 002: MangaAssist conversations average 4.2 turns


@dataclass(frozen=True)
class Route:
    """Where a request goes: its ``model`` (adapter) and, in inference_components mode, its component."""

    adapter: str
    component: str | None = None

    def describe(self) -> str:
        """``adapter`` or ``adapter -> component``."""
        return self.adapter if self.component is None else f"{self.adapter} -> {self.component}"


@dataclass(frozen=True)
class LoadPlan:
    """Levels (concurrent requests), budgets per level, where requests go and the SLO a level must meet.

    The SLO is the config's ``slo`` section (``<class>.ttft_p95_ms``, ``max_error_rate``,
    ``warm_min_cached_fraction``): each answer's class comes from the usage vLLM reports with it
    (serving_contract.request_classes), and each class's TTFT p95 is held to its own objective.

    ``copies`` is set in inference_components mode (copies of the base component): the
    suggestion is then concurrent requests per copy instead of invocations per instance.
    """

    levels: tuple[int, ...] = DEFAULT_LEVELS
    requests_per_level: int = 64
    level_duration_s: float = 60.0
    stream: bool = True
    routes: tuple[Route, ...] = ()
    prompt: str = ""
    max_tokens: int = 128
    variant: str | None = None
    cold_ttft_slo_ms: float = _SLO.cold.ttft_p95_ms
    warm_ttft_slo_ms: float = _SLO.warm.ttft_p95_ms
    latency_slo_ms: float | None = None
    max_error_rate: float = _SLO.max_error_rate
    warm_min_cached_fraction: float = _SLO.warm_min_cached_fraction
    instances: int = 1
    copies: int | None = None
    instance_type: str | None = None
    turns: int = 1

    def validate(self) -> None:
        """Raise OpsError (USAGE) naming the flag, the value and what is allowed."""
        for level in self.levels:
            if not 1 <= level <= MAX_CONCURRENCY:
                raise OpsError(f"--levels: {level} is outside 1..{MAX_CONCURRENCY}", ExitCode.USAGE)
        if not self.levels:
            raise OpsError("--levels: give at least one concurrency level", ExitCode.USAGE)
        total = self.requests_per_level * len(self.levels)
        if self.requests_per_level < 1 or total > MAX_TOTAL_REQUESTS:
            raise OpsError(
                f"--requests-per-level: {self.requests_per_level} x {len(self.levels)} level(s) = {total} requests; "
                f"allowed 1..{MAX_TOTAL_REQUESTS} in total",
                ExitCode.USAGE,
            )
        duration = self.level_duration_s * len(self.levels)
        if self.level_duration_s <= 0 or duration > MAX_TOTAL_DURATION_S:
            raise OpsError(
                f"--level-duration-s: {self.level_duration_s:g} x {len(self.levels)} level(s) = {duration:g} s; "
                f"allowed > 0 and at most {MAX_TOTAL_DURATION_S:g} s in total",
                ExitCode.USAGE,
            )
        if self.instances < 1:
            raise OpsError(f"--instances: {self.instances} must be >= 1", ExitCode.USAGE)
        if self.copies is not None and self.copies < 1:
            raise OpsError(f"--copies: {self.copies} must be >= 1", ExitCode.USAGE)
        if not self.routes:
            raise OpsError("--adapter: no adapter to send requests to; name one", ExitCode.USAGE)
        if not 1 <= self.turns <= MAX_TURNS:
            raise OpsError(f"--turns: {self.turns} is outside 1..{MAX_TURNS}", ExitCode.USAGE)


@dataclass(frozen=True)
class LevelResult:
    """One concurrency level: answers and its wall time in seconds."""

    concurrency: int
    answers: tuple[Answer, ...]
    wall_s: float
    errors_by_status: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> list[Answer]:
        """Answers that passed their check."""
        return [a for a in self.answers if a.ok]

    @property
    def error_rate(self) -> float:
        """Failed / sent (0 when nothing was sent)."""
        return (len(self.answers) - len(self.ok)) / len(self.answers) if self.answers else 0.0

    @property
    def throughput_rps(self) -> float:
        """Successful requests per second of wall time."""
        return len(self.ok) / self.wall_s if self.wall_s > 0 else 0.0

    def ttft(self, q: int) -> float | None:
        """TTFT percentile of successful streamed answers, seconds."""
        return percentile([a.ttft_s for a in self.ok if a.ttft_s is not None], q)

    def class_ttft(self, q: int, request_class: RequestClass | None, fraction: float) -> float | None:
        """TTFT percentile of the successful streamed answers of ``request_class`` (None: those
        without usage), classified at ``fraction`` (``LoadPlan.warm_min_cached_fraction``), seconds."""
        return percentile([a.ttft_s for a in self.of_class(request_class, fraction) if a.ttft_s is not None], q)

    def of_class(self, request_class: RequestClass | None, fraction: float) -> list[Answer]:
        """Successful answers of ``request_class`` (None: those whose answer carried no usage)."""
        return [a for a in self.ok if (a.usage and classify_usage(a.usage, fraction)) == request_class]

    def latency(self, q: int) -> float | None:
        """Latency percentile of successful answers, seconds."""
        return percentile([a.latency_s for a in self.ok], q)

    @property
    def mean_latency_s(self) -> float:
        """Mean latency of successful answers, seconds (0 when none)."""
        ok = self.ok
        return sum(a.latency_s for a in ok) / len(ok) if ok else 0.0

    def meets(self, plan: LoadPlan) -> tuple[bool, str]:
        """Whether this level met the SLO, and why not."""
        if not self.ok:
            return False, "no successful request"
        if self.error_rate > plan.max_error_rate:
            return False, f"error rate {self.error_rate:.1%} > {plan.max_error_rate:.1%}"
        # Answers without usage have no class: held to the stricter objective.
        objectives: tuple[tuple[RequestClass | None, float], ...] = (
            (RequestClass.COLD, plan.cold_ttft_slo_ms),
            (RequestClass.WARM, plan.warm_ttft_slo_ms),
            (None, min(plan.cold_ttft_slo_ms, plan.warm_ttft_slo_ms)),
        )
        for klass, slo_ms in objectives:
            ttft95 = self.class_ttft(95, klass, plan.warm_min_cached_fraction)
            if ttft95 is not None and ttft95 * 1000 > slo_ms:
                name = klass.value if klass else "unclassified"
                return False, f"{name} TTFT p95 {ttft95 * 1000:.0f} ms > {slo_ms:g} ms"
        lat95 = self.latency(95)
        if plan.latency_slo_ms is not None and lat95 is not None and lat95 * 1000 > plan.latency_slo_ms:
            return False, f"latency p95 {lat95 * 1000:.0f} ms > {plan.latency_slo_ms:g} ms"
        return True, "ok"


def run_level(target: Target, plan: LoadPlan, concurrency: int, *, clock: Callable[[], float]) -> LevelResult:
    """Keep ``concurrency`` requests in flight until the level's request or time budget is spent.

    The n-th request of the level goes to ``plan.routes[n % len(plan.routes)]``. With
    ``plan.turns`` > 1 each worker runs whole conversations in stateful sessions instead
    (:func:`ops.conversation.run_conversation`), each taking ``turns`` requests of the budget.
    """
    bodies = [
        chat_body(model=route.adapter, prompt=plan.prompt, max_tokens=plan.max_tokens, stream=plan.stream)
        for route in plan.routes
    ]
    lock = threading.Lock()
    answers: list[Answer] = []
    issued = 0
    started = clock()
    deadline = started + plan.level_duration_s

    def worker() -> None:
        nonlocal issued
        while True:
            with lock:
                if issued >= plan.requests_per_level or clock() >= deadline:
                    return
                index = issued % len(plan.routes)
                issued += plan.turns
            route = plan.routes[index]
            if plan.turns > 1:
                conversation = ConversationPlan(
                    route.adapter, plan.turns, plan.prompt, plan.max_tokens, plan.stream, plan.variant, route.component
                )
                got = run_conversation(target, conversation)
            else:
                got = [
                    target.invoke(bodies[index], stream=plan.stream, variant=plan.variant, component=route.component)
                ]
            with lock:
                answers.extend(got)

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="load") as pool:
        for future in [pool.submit(worker) for _ in range(concurrency)]:
            future.result()
    errors: dict[str, int] = {}
    for answer in answers:
        if not answer.ok:
            errors[answer.status] = errors.get(answer.status, 0) + 1
    return LevelResult(concurrency, tuple(answers), clock() - started, errors)


@dataclass(frozen=True)
class Suggestion:
    """Target-tracking value derived from the best level that met the SLO."""

    concurrency: int
    throughput_rps: float
    per_instance_per_minute: float
    target: int


@dataclass(frozen=True)
class CopySuggestion:
    """Target of concurrent requests per copy, derived from the best level that met the SLO."""

    concurrency: int
    throughput_rps: float
    mean_latency_s: float
    in_flight_per_copy: float
    target: int


def _best(results: Sequence[LevelResult], plan: LoadPlan) -> LevelResult | None:
    good = [r for r in results if r.meets(plan)[0]]
    return max(good, key=lambda r: r.throughput_rps) if good else None


def suggest(results: Sequence[LevelResult], plan: LoadPlan) -> Suggestion | None:
    """Highest-throughput level that met the SLO -> the instance's capacity at the SLO.

    ``target`` = floor(rps x mean latency / instances): the requests in flight per instance
    (Little's law), what ``SageMakerVariantConcurrentRequestsPerModelHighResolution`` counts and
    what ``throughput.measured.<type>.concurrency`` takes (planning/throughput_at_slo.py). No headroom:
    the level already met the TTFT SLO with that many in flight.
    """
    best = _best(results, plan)
    if best is None:
        return None
    per_minute = best.throughput_rps * 60.0 / plan.instances
    in_flight = best.throughput_rps * best.mean_latency_s / plan.instances
    return Suggestion(best.concurrency, best.throughput_rps, per_minute, max(1, math.floor(in_flight)))


def suggest_per_copy(results: Sequence[LevelResult], plan: LoadPlan) -> CopySuggestion | None:
    """Highest-throughput level that met the SLO -> ``floor(rps x mean latency / copies / 1.3)``.

    ``rps x mean latency`` is the mean number of requests in flight (Little's law), which is what
    the per-copy concurrency metric counts; the client's nominal concurrency overstates it by
    the time each client thread spends between requests.
    """
    best = _best(results, plan)
    if best is None:
        return None
    copies = plan.copies or 1
    per_copy = best.throughput_rps * best.mean_latency_s / copies
    target = max(1, math.floor(per_copy / HEADROOM))
    return CopySuggestion(best.concurrency, best.throughput_rps, best.mean_latency_s, per_copy, target)


def _suggestion_line(results: Sequence[LevelResult], plan: LoadPlan) -> str | None:
    if plan.copies is not None:
        per_copy = suggest_per_copy(results, plan)
        if per_copy is None:
            return None
        return (
            f"suggested target ({COPY_SCALING_METRIC}): {per_copy.target} concurrent requests per copy "
            f"= floor({per_copy.throughput_rps:.2f} req/s x {per_copy.mean_latency_s:.3f} s mean latency "
            f"/ {plan.copies} copy(ies) / {HEADROOM}) at concurrency {per_copy.concurrency}"
        )
    best = suggest(results, plan)
    if best is None:
        return None
    # The base TTFT: the p50 of the lowest level (the simulation's TTFT with an empty queue).
    lowest = min(results, key=lambda r: r.concurrency)
    target_line = (
        f"suggested target ({INSTANCE_SCALING_METRIC}): {best.target} concurrent requests per instance "
        f"= floor({best.throughput_rps:.2f} req/s x {suggest_mean_latency(results, best.concurrency):.3f} s mean "
        f"latency / {plan.instances} instance(s)) at concurrency {best.concurrency}"
    )
    return f"{target_line}\n{capacity_override_line(best, lowest.ttft(50), plan.instance_type)}"


def significant(value: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    """``value`` to ``digits`` significant figures; whole numbers at or above ``10**digits`` stay whole.

    ``round(value)`` would print 0 for a TTFT under half a millisecond (a local server answers in
    microseconds) and 0 req/min for a level slower than one request in two minutes; both are
    values ``throughput.measured`` refuses (``gt=0``). Three figures keep every value the config
    compares (against a TTFT SLO in ms, a demand in req/min) far inside its measurement noise.
    """
    if value == 0 or abs(value) >= 10**digits:
        return float(round(value))
    return float(f"{value:.{digits}g}")


def capacity_override_line(best: Suggestion, ttft_p50_s: float | None, instance_type: str | None) -> str:
    """The ``-c 'throughput.measured=...'`` line for ``best``, or one line saying why there is none.

    The override is checked against :class:`app_config.throughput_config.MeasuredThroughput`, the model the
    config loader parses it with, before it is printed: ``ops load`` never prints a value the
    config refuses (a rate above its bound means the target was no instance, e.g. a local stub).
    """
    measured: dict[str, float] = {
        "concurrency": best.target,
        "requests_per_minute": significant(best.per_instance_per_minute),
    }
    if ttft_p50_s is not None:
        measured["ttft_p50_ms"] = significant(ttft_p50_s * 1000)
    try:
        MeasuredThroughput.model_validate(measured)
    except ValidationError as error:
        problems = "; ".join(to_config_error(error, MeasuredThroughput).problems)
        return f"no throughput.measured override: the config would refuse it ({problems})"
    # Instance types hold dots, so the override is one JSON object (the config loader parses it).
    override = json.dumps({instance_type or "<instance type>": measured}, separators=(",", ":"))
    return (
        f"capacity at the SLO for the fleet's sizing (planning/throughput_at_slo.py): "
        f"-c 'throughput.measured={override}'"
    )


def suggest_mean_latency(results: Sequence[LevelResult], concurrency: int) -> float:
    """The mean latency (s) of the level run at ``concurrency``."""
    return next(r.mean_latency_s for r in results if r.concurrency == concurrency)


def report(results: Sequence[LevelResult], plan: LoadPlan) -> list[str]:
    """Lines of the per-level table, the error breakdown and the suggestion."""
    rows = []
    for r in results:
        met, why = r.meets(plan)
        rows.append(
            [
                str(r.concurrency),
                str(len(r.answers)),
                str(len(r.answers) - len(r.ok)),
                f"{r.throughput_rps:.2f}",
                ms(r.ttft(50)),
                ms(r.ttft(95)),
                ms(r.ttft(99)),
                ms(r.latency(50)),
                ms(r.latency(95)),
                ms(r.latency(99)),
                *(
                    cell
                    for klass in RequestClass
                    for cell in (
                        str(len(r.of_class(klass, plan.warm_min_cached_fraction))),
                        ms(r.class_ttft(95, klass, plan.warm_min_cached_fraction)),
                    )
                ),
                "yes" if met else f"no: {why}",
            ]
        )
    headers = ["conc", "sent", "errors", "req/s", "ttft p50", "ttft p95", "ttft p99"]
    headers += ["lat p50", "lat p95", "lat p99"]
    headers += [h for klass in RequestClass for h in (f"{klass.value} n", f"{klass.value} p95")]
    headers += ["meets SLO"]
    lines = [format_table(headers, rows)]
    for r in results:
        for status, count in sorted(r.errors_by_status.items()):
            lines.append(f"concurrency {r.concurrency}: {count} x {status}")
    line = _suggestion_line(results, plan)
    lines.append(line if line is not None else "no level met the SLO: no target-tracking suggestion")
    return lines


def run_load(target: Target, plan: LoadPlan, *, clock: Callable[[], float], out: Callable[[str], None]) -> ExitCode:
    """Run every level in order, print the report; CHECK_FAILED when no level met the SLO."""
    plan.validate()
    mode = "stream" if plan.stream else "sync"
    where = ", ".join(route.describe() for route in plan.routes)
    where = f"adapter {where}" if len(plan.routes) == 1 else f"round-robin over {where}"
    capacity = f"{plan.copies} copy(ies)" if plan.copies is not None else f"{plan.instances} instance(s)"
    turns = f"; conversations of {plan.turns} turns in stateful sessions" if plan.turns > 1 else ""
    out(
        f"load: levels {', '.join(map(str, plan.levels))}; up to {plan.requests_per_level} requests or "
        f"{plan.level_duration_s:g} s per level; {where}; {mode}; {capacity}{turns}"
    )
    results = []
    for level in plan.levels:
        result = run_level(target, plan, level, clock=clock)
        out(f"concurrency {level}: {len(result.answers)} sent, {result.throughput_rps:.2f} req/s")
        results.append(result)
    out(
        f"SLO (config slo): TTFT p95 cold <= {plan.cold_ttft_slo_ms:g} ms, warm <= {plan.warm_ttft_slo_ms:g} ms "
        f"(warm: >= {plan.warm_min_cached_fraction:.0%} of the prompt from the prefix cache, vLLM's usage), "
        f"error rate <= {plan.max_error_rate:.1%}"
    )
    for line in report(results, plan):
        out(line)
    return ExitCode.OK if _best(results, plan) else ExitCode.CHECK_FAILED
