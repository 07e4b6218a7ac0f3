"""``load``: a bounded load test with a concurrency ramp, and a target-tracking suggestion.

Each concurrency level (default 1, 4, 16, 32) runs until it has sent its request budget or its
time budget is spent, whichever comes first; hard limits cap both so a typo cannot turn a
measurement into an incident. Per level it reports throughput, TTFT and latency percentiles
and the error rate, then picks the highest level that met the SLO and turns its throughput
into a target for the ``SageMakerVariantInvocationsPerInstance`` target-tracking policy:

    sustainable = throughput_rps x 60 / instances      (invocations per instance per minute)
    target      = floor(sustainable / 1.3)              (seed 001: 30 % headroom,
                                                         ``calculate_required_instances`` x 1.3)
"""

import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ops.exit_codes import ExitCode, OpsError
from ops.invoke import Answer, Target, chat_body
from ops.table import format_table, ms

DEFAULT_LEVELS = (1, 4, 16, 32)
MAX_CONCURRENCY = 64  # hard limit per level; ENGINE max_num_seqs is 128 per instance (seed 003)
MAX_TOTAL_REQUESTS = 2000  # hard limit over all levels
MAX_TOTAL_DURATION_S = 900.0  # hard limit over all levels (15 minutes)
HEADROOM = 1.3  # seed 001 calculate_required_instances: "Add 30% headroom buffer"
DEFAULT_TTFT_SLO_MS = 500.0  # seed 000 canary gate: TTFT P95 < 500 ms
DEFAULT_MAX_ERROR_RATE = 0.005  # seed 000 canary gate: error rate < 0.5 %


@dataclass(frozen=True)
class LoadPlan:
    """Levels (concurrent requests), budgets per level and the SLO a level must meet."""

    levels: tuple[int, ...] = DEFAULT_LEVELS
    requests_per_level: int = 64
    level_duration_s: float = 60.0
    stream: bool = True
    adapter: str = ""
    prompt: str = ""
    max_tokens: int = 128
    variant: str | None = None
    ttft_slo_ms: float = DEFAULT_TTFT_SLO_MS
    latency_slo_ms: float | None = None
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    instances: int = 1

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


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation between closest ranks; None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


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

    def ttft(self, q: float) -> float | None:
        """TTFT percentile of successful streamed answers, seconds."""
        return percentile([a.ttft_s for a in self.ok if a.ttft_s is not None], q)

    def latency(self, q: float) -> float | None:
        """Latency percentile of successful answers, seconds."""
        return percentile([a.latency_s for a in self.ok], q)

    def meets(self, plan: LoadPlan) -> tuple[bool, str]:
        """Whether this level met the SLO, and why not."""
        if not self.ok:
            return False, "no successful request"
        if self.error_rate > plan.max_error_rate:
            return False, f"error rate {self.error_rate:.1%} > {plan.max_error_rate:.1%}"
        ttft95 = self.ttft(95)
        if ttft95 is not None and ttft95 * 1000 > plan.ttft_slo_ms:
            return False, f"TTFT p95 {ttft95 * 1000:.0f} ms > {plan.ttft_slo_ms:g} ms"
        lat95 = self.latency(95)
        if plan.latency_slo_ms is not None and lat95 is not None and lat95 * 1000 > plan.latency_slo_ms:
            return False, f"latency p95 {lat95 * 1000:.0f} ms > {plan.latency_slo_ms:g} ms"
        return True, "ok"


def run_level(target: Target, plan: LoadPlan, concurrency: int, *, clock: Callable[[], float]) -> LevelResult:
    """Keep ``concurrency`` requests in flight until the level's request or time budget is spent."""
    body = chat_body(model=plan.adapter, prompt=plan.prompt, max_tokens=plan.max_tokens, stream=plan.stream)
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
                issued += 1
            answer = target.invoke(body, stream=plan.stream, variant=plan.variant)
            with lock:
                answers.append(answer)

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


def suggest(results: Sequence[LevelResult], plan: LoadPlan) -> Suggestion | None:
    """Highest-throughput level that met the SLO -> ``floor(rps x 60 / instances / 1.3)``."""
    good = [r for r in results if r.meets(plan)[0]]
    if not good:
        return None
    best = max(good, key=lambda r: r.throughput_rps)
    per_minute = best.throughput_rps * 60.0 / plan.instances
    return Suggestion(best.concurrency, best.throughput_rps, per_minute, max(1, math.floor(per_minute / HEADROOM)))


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
                "yes" if met else f"no: {why}",
            ]
        )
    headers = ["conc", "sent", "errors", "req/s", "ttft p50", "ttft p95", "ttft p99"]
    headers += ["lat p50", "lat p95", "lat p99", "meets SLO"]
    lines = [format_table(headers, rows)]
    for r in results:
        for status, count in sorted(r.errors_by_status.items()):
            lines.append(f"concurrency {r.concurrency}: {count} x {status}")
    best = suggest(results, plan)
    if best is None:
        lines.append("no level met the SLO: no target-tracking suggestion")
    else:
        lines.append(
            f"suggested target (SageMakerVariantInvocationsPerInstance): {best.target} per instance per minute "
            f"= floor({best.throughput_rps:.2f} req/s x 60 / {plan.instances} instance(s) / {HEADROOM}) "
            f"at concurrency {best.concurrency}"
        )
    return lines


def run_load(target: Target, plan: LoadPlan, *, clock: Callable[[], float], out: Callable[[str], None]) -> ExitCode:
    """Run every level in order, print the report; CHECK_FAILED when no level met the SLO."""
    plan.validate()
    mode = "stream" if plan.stream else "sync"
    out(
        f"load: levels {', '.join(map(str, plan.levels))}; up to {plan.requests_per_level} requests or "
        f"{plan.level_duration_s:g} s per level; adapter {plan.adapter}; {mode}; {plan.instances} instance(s)"
    )
    results = []
    for level in plan.levels:
        result = run_level(target, plan, level, clock=clock)
        out(f"concurrency {level}: {len(result.answers)} sent, {result.throughput_rps:.2f} req/s")
        results.append(result)
    for line in report(results, plan):
        out(line)
    return ExitCode.OK if suggest(results, plan) else ExitCode.CHECK_FAILED
