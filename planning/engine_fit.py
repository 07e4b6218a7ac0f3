"""The engine model's parts fitted on the committed GPU runs, and its error on runs it was not fitted on.

Runs (each folder's README says how they were made; ``bash benchmarks/gpu_session.sh ol-serve |
ol-probes | ol-ramp`` and ``ol-campaign``): one engine with the container's argv for the default
config on an H200, conversations of MangaAssist's shape arriving at random, users pausing
4-30 s, the KV cache fixed at the memory plan's for an ml.g5.xlarge (110,592 tokens) or an
ml.g6e.xlarge's (280,176); bare on 4 dedicated CPUs, or behind the container's gateway on an
ml.g6e.xlarge's 2 cores.

What each part is fitted on (:func:`fit`):

* ``fixed_ms`` and the prefill per token: TTFT p50 of one request at a time against its uncached
  tokens (``probes.json``: 64, 2,048 and 3,072 tokens; 512 and 1,024 sit 10-17 ms above the line
  and are reported, not fitted: the prefill warm-up compiles 2,048 and 2,047, not them);
* ``gpu_step_ms``: the decode probes at 1, 8 and 32 requests (2,048-token context);
* ``host_step_ms``: least squares (coefficients >= 0) of a curve ``k0 + k1 n + k2 n**2`` through
  every steady step's ITL, less the prefill share the host cannot hide (``prefill_interference``), against its running
  requests ``n`` (vLLM's gauge) scaled by the run's ``engine_model.host_scale``. A steady step is
  one that held both classes, or a later one in which the engine queued nothing (mean waiting
  requests below :data:`QUEUEING_WAITING`): those failed their SLO or their throughput, but their
  ITL is still the step time at their running requests, and they are the only steps past ~50
  running requests, where the step bends upward. :func:`gateway_step_ratio` reports how the runs
  behind the gateway on 2 cores compare with the bare ones (the measurement behind
  ``engine_model.GATEWAY_BUSY_THREADS``);
* ``prefill_interference``: chosen from ``INTERFERENCE_GRID`` by cross-validation
  (:func:`select_interference`);
* ``host_wait_ms``: the TTFT p95 per class of the held steps (only they have a TTFT within reach of the
  SLO), given their running requests, ITL and follow-up misses.

:func:`check` then solves the whole model (nothing measured fed in but the arrival rate, the
pause, the KV cache and the host) and compares the highest rate at which it holds both SLOs with
the run's (``cli_support.open_loop.verdict``: the achieved rate of the last step that held, and
of the first that did not). :func:`held_out` does the same with the model refitted without the
run it is checked on: the largest of those errors is the model's error, and the margin a
projection carries (docs/planning.md, "How far to trust the model").

Usage::

    python -m planning.engine_fit            # the fit, and each run's in-sample and held-out error
    python -m planning.engine_fit --write    # regenerate planning/engine_fit.json (synth reads it)
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from cli_support.open_loop import OpenLoopRun, StepSummary, summarise_step, verdict
from planning.engine_model import (
    REFERENCE_HOST_CORES,
    ConversationShape,
    EngineParts,
    _mix,
    _ttft,
    capacity,
    host_scale,
)

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
PROBES = RESULTS / "h200-2026-11-27-open-loop" / "probes.json"
RUN_FILES = (
    "h200-2026-11-27-open-loop/ramp-think4.json",
    "h200-2026-11-27-open-loop/ramp-think12.json",
    "h200-2026-11-27-open-loop/ramp-think4-l40s-kv.json",
    "h200-2026-11-29-open-loop/ramp-think30-a10g-kv.json",
    "h200-2026-11-29-open-loop/ramp-think30-l40s-kv-gateway.json",
    "h200-2026-11-29b-open-loop/ramp-think60-a10g-kv.json",
    "h200-2026-11-29b-open-loop/ramp-think60-l40s-kv-gateway.json",
)
"""Every complete open-loop ramp (under benchmarks/results): each is fitted on, and held out once."""
FIT_FILE = Path(__file__).with_name("engine_fit.json")
PROBE_SIZES_FITTED = (64, 2048, 3072)
REFERENCE_GPU = "H200"
WEIGHTS_BYTES = 5_727_854_592
"""The AWQ-INT4 checkpoint read every decode step (config ``model.shape.weights_gib``'s bytes)."""
KV_BYTES_PER_TOKEN = 32 * 8 * 128 * 2 * 2
"""Llama-3-8B, fp16 KV (CONVENTIONS.md): what a running request's context costs per step."""
PROBE_CONTEXT_TOKENS = 2048 + 64
"""The decode probes' context: a 2,048-token prompt and, on average, half their 128 answer tokens."""
REFERENCE_BANDWIDTH_GBS = 4800.0
"""The H200's datasheet bandwidth (docs/sources.md, "GPU datasheets")."""
RUN_SLO_MS = {"cold": 500.0, "warm": 500.0}
"""The runs' objective (seed 002: TTFT p95 <= 500 ms, both classes)."""
INTERFERENCE_GRID = tuple(round(x * 0.1, 1) for x in range(11))
"""Candidates for ``prefill_interference``, chosen by cross-validation (:func:`select_interference`):
its whole physical range, 0 (the host hides every prefill) to 1 (none)."""
QUEUEING_WAITING = 0.5
"""Mean waiting requests (vLLM's ``num_requests_waiting``) from which a step counts as queueing: its
ITL then measures a full batch and preemptions, not the step time at its running requests."""
GATEWAY_RATIO_GRID = tuple(round(0.8 + 0.05 * i, 2) for i in range(25))
"""Candidates for :func:`gateway_step_ratio`: 0.8-2.0 (1.5 is a whole third busy thread on 2 cores)."""
_WAIT_GRID = tuple(itertools.product(range(50, 500, 10), (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0)))


@dataclass(frozen=True)
class RunData:
    """One committed ramp: its conditions, its steps and its verdict."""

    name: str
    think_s: float
    kv_cache_tokens: int
    host_cores: int
    gateway: bool
    run: OpenLoopRun
    summaries: list[StepSummary]
    warm_min_cached_fraction: float

    @property
    def host_scale(self) -> float:
        """The run's host against the reference (``engine_model.host_scale``)."""
        return host_scale(self.host_cores, gateway=self.gateway)

    @property
    def label(self) -> str:
        return Path(self.name).stem


def _cpu_count(cpus: str | None) -> int:
    """``0-3`` or ``4,5`` -> 4 or 2; the 2026-11-27 runs name none: CPUs 0-3 (gpu_session.sh)."""
    if not cpus:
        return REFERENCE_HOST_CORES
    count = 0
    for part in cpus.split(","):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count


def load_runs(
    files: Sequence[str] = RUN_FILES,
    root: Path = RESULTS,
    *,
    gauges: Sequence[str] = ("kv_cache_usage", "running", "waiting"),
    counters: Sequence[str] = (),
) -> list[RunData]:
    """The committed ramps, summarised step by step as the harness summarises them, with the engine's
    ``gauges`` and ``counters`` (``cli_support.open_loop.summarise_step``; the fit reads three gauges)."""
    runs = []
    for name in files:
        data = json.loads((root / name).read_text())
        run = OpenLoopRun.from_json(data)
        fraction = float(data["warm_min_cached_fraction"])
        summaries = [
            summarise_step(run, index, warm_min_cached_fraction=fraction, gauges=gauges, counters=counters)
            for index in range(run.steps_run)
        ]
        engine = data.get("engine") or {}
        runs.append(
            RunData(
                name=name,
                think_s=run.think_s,
                kv_cache_tokens=int(engine["kv_cache_tokens"]),
                host_cores=_cpu_count(engine.get("server_cpus")),
                gateway=engine.get("kind") == "gateway",
                run=run,
                summaries=summaries,
                warm_min_cached_fraction=fraction,
            )
        )
    return runs


@dataclass(frozen=True)
class StepPoint:
    """One held ramp step, as the fit reads it."""

    run: str
    think_s: float
    host_scale: float
    gateway: bool
    arrived_per_min: float
    follow_up_miss: float
    running: float
    itl_ms: float
    ttft_p95_ms: dict[str, float | None]


def _point(run: RunData, index: int, summary: StepSummary) -> StepPoint:
    answered = [r for r in run.run.records if r.step == index and r.ok]
    follow = [r for r in answered if r.turn > 0]
    missed = sum(1 for r in follow if r.request_class(run.warm_min_cached_fraction) == "cold")
    return StepPoint(
        run=run.name,
        think_s=run.think_s,
        host_scale=run.host_scale,
        gateway=run.gateway,
        arrived_per_min=summary.arrived_per_min,
        follow_up_miss=missed / len(follow) if follow else 0.0,
        running=float(summary.engine["running_mean"] or 0.0),
        itl_ms=float(summary.itl_mean_ms or 0.0),
        ttft_p95_ms={k: summary.classes[k].ttft_p95_ms for k in ("cold", "warm")},
    )


def held_steps(run: RunData) -> list[StepPoint]:
    """The run's steps that held both classes (``verdict``), with what the fit reads of them."""
    judged = verdict(run.summaries, RUN_SLO_MS)
    return [
        _point(run, index, summary)
        for index, summary in enumerate(run.summaries[: judged.steps_held])
        if summary.itl_mean_ms
    ]


def steady_steps(run: RunData) -> list[StepPoint]:
    """The held steps and every later one in which the engine queued nothing (:data:`QUEUEING_WAITING`):
    what the host step is fitted on (module docstring). A step without the waiting or running gauge counts
    as queueing: nothing says it did not."""
    steps_held = verdict(run.summaries, RUN_SLO_MS).steps_held

    def queued_nothing(summary: StepSummary) -> bool:
        waiting, running = summary.engine.get("waiting_mean"), summary.engine.get("running_mean")
        return waiting is not None and running is not None and float(waiting) < QUEUEING_WAITING

    later = [
        _point(run, index, summary)
        for index, summary in enumerate(run.summaries)
        if index >= steps_held and summary.itl_mean_ms and queued_nothing(summary)
    ]
    return held_steps(run) + later


@dataclass(frozen=True)
class RunCheck:
    """One run: the rate at which both classes held, measured and modelled."""

    run: str
    think_s: float
    kv_cache_tokens: int
    host_cores: int
    gateway: bool
    measured_holds_per_min: float
    """The achieved rate of the last step that held both classes."""
    measured_fails_per_min: float | None
    """The achieved rate of the first step that did not (None: none failed)."""
    model_holds_per_min: float
    model_cliff_per_min: float

    @property
    def error(self) -> float:
        """Model over measurement, less one."""
        return self.model_holds_per_min / self.measured_holds_per_min - 1


@dataclass(frozen=True)
class Fit:
    """The reference GPU's parts (:class:`EngineParts` without a KV cache) and what they rest on."""

    gpu: str
    fixed_ms: float
    gpu_prefill_ms_per_token: float
    host_prefill_ms_per_token: float
    gpu_step_ms: tuple[float, float]
    host_step_ms: tuple[float, float, float]
    host_wait_ms: tuple[float, float]
    prefill_interference: float
    step_floor_ms: tuple[float, float]
    """``(o0, o1)``: the GPU step less its memory traffic at the reference bandwidth, what
    ``planning/gpu_projection.py`` keeps when it scales the traffic to another GPU's bandwidth."""
    model_error: float
    """The largest relative error of the held rate on a run the model was not fitted on (:func:`held_out`)."""
    runs: tuple[str, ...]
    checks: tuple[dict[str, Any], ...] = field(default=())
    """Per run: in-sample and held-out modelled rates against the measured one (:func:`report` prints them)."""
    gateway_step_ratio: float = 1.0
    """The gateway runs' host step over the bare runs' (:func:`gateway_step_ratio`), for the report."""

    def parts(
        self, kv_cache_tokens: int, *, max_num_seqs: int = 128, host_scale: float = 1.0, measured: bool = True
    ) -> EngineParts:
        """The reference GPU's engine with ``kv_cache_tokens`` of KV cache on a host ``host_scale``
        times the runs' (``engine_model.host_scale``)."""
        return EngineParts(
            gpu=self.gpu,
            kv_cache_tokens=kv_cache_tokens,
            fixed_ms=self.fixed_ms,
            gpu_prefill_ms_per_token=self.gpu_prefill_ms_per_token,
            host_prefill_ms_per_token=self.host_prefill_ms_per_token,
            gpu_step_ms=self.gpu_step_ms,
            host_step_ms=self.host_step_ms,
            host_wait_ms=self.host_wait_ms,
            max_num_seqs=max_num_seqs,
            measured=measured,
            host_scale=host_scale,
            prefill_interference=self.prefill_interference,
        )

    def to_json(self) -> dict[str, Any]:
        return {"generated_by": "python -m planning.engine_fit --write", **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fit:
        fields = {k: v for k, v in data.items() if k != "generated_by"}
        for key in ("gpu_step_ms", "host_step_ms", "host_wait_ms", "step_floor_ms", "runs", "checks"):
            fields[key] = tuple(fields.get(key, ()))
        return cls(**fields)


def load_fit(path: Path = FIT_FILE) -> Fit:
    """The committed fit (what synth reads)."""
    return Fit.from_json(json.loads(path.read_text()))


def _line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares ``(intercept, slope)``."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def _shape(think_s: float) -> ConversationShape:
    return ConversationShape(think_s=think_s)


def _probe_parts(probes: dict[str, Any]) -> tuple[float, float, float, float]:
    """``(fixed_ms, prefill ms per token, a0, a1)`` from the one-request and decode probes."""
    by_size: dict[int, list[float]] = {}
    for row in probes["one_request"]:
        by_size.setdefault(int(row["prompt_tokens"]), []).append(float(row["ttft_ms"]))
    fixed, per_token = _line([(n, statistics.median(by_size[n])) for n in PROBE_SIZES_FITTED])
    a0, a1 = _line([(p["batch"], p["decode_step_ms"]) for p in probes["probes"] if p["kind"] == "decode"])
    return fixed, per_token, a0, a1


def _prefill_share(point: StepPoint, per_token_ms: float) -> float:
    """The share of GPU time a step's prefill took: its arrivals' uncached tokens at the probes' rate."""
    mix = _mix(_shape(point.think_s), point.follow_up_miss, 1.0)
    return point.arrived_per_min / 60 * mix.uncached_mean * per_token_ms / 1000


def _host_rows(
    points: Sequence[StepPoint], interference: float, per_token_ms: float, gateway_scale: float | None
) -> tuple[list[list[float]], list[float]]:
    """The host curve's design rows ``[1, s n, s n**2]`` and targets ``ITL x (1 - interference x u)``: ``n`` a
    step's running requests, ``s`` its run's host scale (``gateway_scale`` for the gateway runs, when given),
    which multiplies the per-request part as ``EngineParts.host_per_request_ms`` does."""
    rows, targets = [], []
    for point in points:
        scale = gateway_scale if gateway_scale is not None and point.gateway else point.host_scale
        rows.append([1.0, scale * point.running, scale * point.running**2])
        targets.append(point.itl_ms * (1 - interference * _prefill_share(point, per_token_ms)))
    return rows, targets


def _host_curve(
    points: Sequence[StepPoint], interference: float, per_token_ms: float, gateway_scale: float | None = None
) -> tuple[tuple[float, float, float], float]:
    """``(k0, k1, k2)`` of ``ITL x (1 - interference x u) = k0 + s (k1 n + k2 n**2)`` (:func:`_host_rows`) by
    least squares with every coefficient >= 0 (scipy's ``nnls``), and the sum of squared residuals. A step
    costs no less with more running requests, so a negative coefficient is noise: a fold without the steps
    past ~50 running requests would otherwise bend down (``k2 < 0``) and turn the step negative beyond its
    data; ``nnls`` then fits the line (``k2 = 0``)."""
    # Imported here: planning.engines reads the committed fit through this module, and the GPU harnesses import
    # it under the vLLM environment (benchmarks/gpu_capacity.py), which has no scipy; only refitting needs it.
    import scipy.optimize  # noqa: PLC0415

    rows, targets = _host_rows(points, interference, per_token_ms, gateway_scale)
    solution, residual_norm = scipy.optimize.nnls(rows, targets)
    k0, k1, k2 = (float(x) for x in solution)
    return (k0, k1, k2), float(residual_norm) ** 2


def gateway_step_ratio(runs: Sequence[RunData], interference: float, probes_path: Path = PROBES) -> float:
    """How much longer the gateway runs' host step is than the bare runs' at the same running requests:
    the scale on their per-request host work (:data:`GATEWAY_RATIO_GRID`) that leaves the host curve's
    least squares smallest, with the bare runs at 1. The measurement behind
    ``engine_model.GATEWAY_BUSY_THREADS``.
    """
    _, per_token, _, _ = _probe_parts(json.loads(probes_path.read_text()))
    steady = [point for run in runs for point in steady_steps(run)]
    return min(GATEWAY_RATIO_GRID, key=lambda scale: _host_curve(steady, interference, per_token, scale)[1])


def fit(runs: Sequence[RunData], interference: float, probes_path: Path = PROBES) -> Fit:
    """Fit every part (module docstring) on ``runs`` (the probes are one run of their own, always
    used), with ``prefill_interference`` given (:func:`select_interference` chooses it).

    Raises:
        ValueError: fewer than two held steps to fit the host on.
    """
    fixed, per_token, a0, a1 = _probe_parts(json.loads(probes_path.read_text()))
    points = [point for run in runs for point in held_steps(run)]
    steady = [point for run in runs for point in steady_steps(run)]
    if len(points) < 2 or len(steady) < 3:
        raise ValueError(
            f"engine fit: {len(points)} held and {len(steady)} steady step(s) in {[r.label for r in runs]}; "
            "at least 2 and 3 are needed"
        )
    (k0, k1, k2), _ = _host_curve(steady, interference, per_token)
    base = EngineParts(
        REFERENCE_GPU, 0, fixed, per_token, 0.0, (a0, a1), (k0, k1, k2), (0.0, 1.0), prefill_interference=interference
    )
    # Each held step's request mix and prefill share do not depend on the wait tried: once, not per grid point.
    held = [(p, _mix(_shape(p.think_s), p.follow_up_miss, 1.0), _prefill_share(p, per_token)) for p in points]

    def wait_error(wait: tuple[int, float]) -> float:
        parts = replace(base, host_wait_ms=(float(wait[0]), wait[1]))
        error = 0.0
        for p, mix, busy in held:
            _, p95 = _ttft(replace(parts, host_scale=p.host_scale), mix, p.running, p.itl_ms, busy)
            error += sum(math.log(p95[k] / m) ** 2 for k, m in p.ttft_p95_ms.items() if m)
        return error

    w, exponent = min(_WAIT_GRID, key=wait_error)
    bandwidth_ms = WEIGHTS_BYTES / (REFERENCE_BANDWIDTH_GBS * 1e6)
    per_request_ms = PROBE_CONTEXT_TOKENS * KV_BYTES_PER_TOKEN / (REFERENCE_BANDWIDTH_GBS * 1e6)
    return Fit(
        gpu=REFERENCE_GPU,
        fixed_ms=round(fixed, 3),
        gpu_prefill_ms_per_token=round(per_token, 6),
        host_prefill_ms_per_token=0.0,
        gpu_step_ms=(round(a0, 4), round(a1, 5)),
        host_step_ms=(round(k0, 4), round(k1, 5), round(k2, 7)),
        host_wait_ms=(float(w), exponent),
        prefill_interference=round(interference, 3),
        step_floor_ms=(round(a0 - bandwidth_ms, 4), round(a1 - per_request_ms, 5)),
        model_error=0.0,
        runs=tuple(str(path.relative_to(REPO)) for path in (probes_path, *(RESULTS / r.name for r in runs))),
    )


def check_run(model: Fit, run: RunData) -> RunCheck:
    """The model solved at the run's KV cache, pause and host against the run's verdict."""
    measured = verdict(run.summaries, RUN_SLO_MS)
    parts = model.parts(run.kv_cache_tokens, host_scale=run.host_scale)
    modelled = capacity(parts, _shape(run.think_s), RUN_SLO_MS)
    return RunCheck(
        run=run.label,
        think_s=run.think_s,
        kv_cache_tokens=run.kv_cache_tokens,
        host_cores=run.host_cores,
        gateway=run.gateway,
        measured_holds_per_min=float(measured.holds_achieved_per_min["both"] or 0.0),
        measured_fails_per_min=measured.fails_achieved_per_min,
        model_holds_per_min=modelled.holds_per_min["both"],
        model_cliff_per_min=modelled.cliff_per_min,
    )


def held_out(runs: Sequence[RunData], interference: float) -> list[RunCheck]:
    """Each run checked against the model refitted on every other run (leave one run out)."""
    return [check_run(fit([r for r in runs if r is not run], interference), run) for run in runs]


def select_interference(runs: Sequence[RunData], grid: Sequence[float] = INTERFERENCE_GRID) -> float:
    """The ``prefill_interference`` whose held-out errors are smallest (root mean square of their logs).

    Chosen by cross-validation, not by the steps' ITL: fitted on the steps it lets one run's high
    ITL pull it up, and the model then misses the runs it was not fitted on (2026-11-29: fitted per
    fold, 24 % held out; chosen here, 16 %). The held-out errors :func:`fit_and_validate` reports
    use the chosen value, so they are slightly optimistic about it: one number chosen from seven.
    """

    def loss(beta: float) -> float:
        return math.fsum(math.log(1 + row.error) ** 2 for row in held_out(runs, beta))

    return min(grid, key=loss)


def fit_and_validate(runs: Sequence[RunData] | None = None) -> Fit:
    """The fit on every run, its in-sample and held-out checks, and the model error (the largest held-out one)."""
    runs = load_runs() if runs is None else runs
    interference = select_interference(runs)
    model = fit(runs, interference)
    inside = [check_run(model, run) for run in runs]
    outside = held_out(runs, interference)
    checks = tuple(
        {
            "run": a.run,
            "think_s": a.think_s,
            "kv_cache_tokens": a.kv_cache_tokens,
            "host": f"{a.host_cores} cores{' + gateway' if a.gateway else ''}",
            "measured_holds_per_min": a.measured_holds_per_min,
            "measured_fails_per_min": a.measured_fails_per_min,
            "in_sample_per_min": round(a.model_holds_per_min, 1),
            "in_sample_error": round(a.error, 4),
            "held_out_per_min": round(b.model_holds_per_min, 1),
            "held_out_error": round(b.error, 4),
        }
        for a, b in zip(inside, outside, strict=True)
    )
    return replace(
        model,
        model_error=round(max(abs(b.error) for b in outside), 4),
        checks=checks,
        gateway_step_ratio=gateway_step_ratio(runs, interference),
    )


def report(model: Fit) -> list[str]:
    """The fitted parts and every run's in-sample and held-out error, for the terminal and docs."""
    gpu_us = 1000 * model.gpu_prefill_ms_per_token
    wait, exponent = model.host_wait_ms
    lines = [
        f"fixed part {model.fixed_ms:.1f} ms; prefill {gpu_us:.1f} us per uncached token",
        f"decode step on the GPU {model.gpu_step_ms[0]:.2f} + {model.gpu_step_ms[1]:.3f} ms per running request; "
        f"host step {model.host_step_ms[0]:.2f} + {model.host_step_ms[1]:.3f} n + {model.host_step_ms[2]:.5f} n^2 ms"
        f" at n running requests ({REFERENCE_HOST_CORES} dedicated cores, no gateway), / (1 - "
        f"{model.prefill_interference:g} x the GPU's prefill share)",
        f"runs behind the gateway on 2 cores: host step x{model.gateway_step_ratio:.2f} the bare runs' (least squares;"
        f" the model counts x{host_scale(2, gateway=True):.2f})",
        f"host TTFT tail at p95 {wait:.0f} ms x (host share on running requests)^{exponent:g}",
        "held rate, both classes at TTFT p95 <= 500 ms, achieved requests/min (measured: the last step that held,"
        " and the first that did not):",
    ]
    for row in model.checks:
        fails = "-" if row["measured_fails_per_min"] is None else f"{row['measured_fails_per_min']:.0f}"
        lines.append(
            f"  {row['run']:<34} think {row['think_s']:>4g} s, KV {row['kv_cache_tokens']:>7,}, {row['host']:<17}: "
            f"measured {row['measured_holds_per_min']:>4.0f} (fails {fails:>4}); "
            f"in-sample {row['in_sample_per_min']:>4.0f} ({row['in_sample_error']:+.0%}); "
            f"held out {row['held_out_per_min']:>4.0f} ({row['held_out_error']:+.0%})"
        )
    lines.append(f"model error (largest held-out error, the projections' margin): {model.model_error:.0%}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m planning.engine_fit", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"regenerate {FIT_FILE.relative_to(REPO)}")
    args = parser.parse_args(argv)
    model = fit_and_validate()
    print("\n".join(report(model)))
    if args.write:
        FIT_FILE.write_text(json.dumps(model.to_json(), indent=1) + "\n")
        print(f"wrote {FIT_FILE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
