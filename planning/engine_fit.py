"""The engine model's parts, fitted on the committed GPU runs, and its error against each run.

Runs (``benchmarks/results/h200-2026-11-27-open-loop``, README there; made with
``bash benchmarks/gpu_session.sh ol-serve | ol-probes | ol-ramp``): one bare engine with the
container's argv for the default config on an H200, 4 CPUs (an ``xlarge``'s vCPUs), the KV cache
fixed at the memory plan's for an ml.g5.xlarge (110,592 tokens) and then an ml.g6e.xlarge's
(280,176); conversations of MangaAssist's shape arriving at random, users pausing 4 s or 12 s.

What each part is fitted on (:func:`fit`):

* ``fixed_ms`` and the prefill per token: TTFT p50 of one request at a time against its uncached
  tokens (``probes.json``: 64, 2,048 and 3,072 tokens; 512 and 1,024 sit 10-17 ms above the line
  and are reported, not fitted: the prefill warm-up compiles 2,048 and 2,047, not them);
* the host's part of a prefilled token, ``host_step_ms`` (``k0 + k1 x running``): least squares
  of the ramps' ITL against the running requests (vLLM's gauge), the host's prefill share
  scanned for the best fit; the GPU's part of a prefilled token is the rest of the one-request
  slope;
* ``gpu_step_ms``: the decode probes at 1, 8 and 32 requests (2,048-token context);
* ``host_wait_ms``: the TTFT p95 per class of every ramp step before its collapse, given that
  step's measured running requests, ITL and follow-up misses.

:func:`check` then solves the whole model (nothing measured fed in but the arrival rate) and
compares the highest rate at which each ramp held both SLOs, and its collapse, with the
measurement (``cli_support.open_loop.verdict``: a step counts only if it also kept up).

Usage::

    python -m planning.engine_fit            # the fit and its error against every run
    python -m planning.engine_fit --write    # regenerate planning/engine_fit.json (synth reads it)
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cli_support.open_loop import OpenLoopRun, StepSummary, summarise_step, verdict
from planning.engine_model import ConversationShape, EngineParts, _mix, _ttft, capacity

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "benchmarks" / "results" / "h200-2026-11-27-open-loop"
FIT_FILE = Path(__file__).with_name("engine_fit.json")
RAMPS = ("ramp-think4.json", "ramp-think12.json", "ramp-think4-l40s-kv.json")
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
_SLO_MS = {"cold": 500.0, "warm": 500.0}
"""The runs' objective (seed 002: TTFT p95 <= 500 ms, both classes)."""
_HOST_PREFILL_GRID = tuple(x * 0.0005 for x in range(25))
_WAIT_GRID = tuple(itertools.product(range(50, 500, 10), (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0)))


@dataclass(frozen=True)
class StepPoint:
    """One measured ramp step, as the fit and the check read it."""

    run: str
    kv_cache_tokens: int
    think_s: float
    offered_per_min: float
    arrived_per_min: float
    follow_up_miss: float
    running: float
    itl_ms: float
    kv_in_use: float
    ttft_p95_ms: dict[str, float | None]
    collapsed: bool


@dataclass(frozen=True)
class Fit:
    """The reference GPU's parts (:class:`EngineParts` without a KV cache) and what they rest on."""

    gpu: str
    fixed_ms: float
    gpu_prefill_ms_per_token: float
    host_prefill_ms_per_token: float
    gpu_step_ms: tuple[float, float]
    host_step_ms: tuple[float, float]
    host_wait_ms: tuple[float, float]
    step_floor_ms: tuple[float, float]
    """``(o0, o1)``: the GPU step less its memory traffic at the reference bandwidth, what
    ``planning/gpu_projection.py`` keeps when it scales the traffic to another GPU's bandwidth."""
    model_error: float
    """The largest relative error of the held rate over the runs (:func:`check`)."""
    runs: tuple[str, ...]

    def parts(self, kv_cache_tokens: int, *, max_num_seqs: int = 128) -> EngineParts:
        """The reference GPU's engine with ``kv_cache_tokens`` of KV cache."""
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
            measured=True,
        )

    def to_json(self) -> dict[str, Any]:
        return {"generated_by": "python -m planning.engine_fit --write", **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fit:
        fields = {k: v for k, v in data.items() if k != "generated_by"}
        for key in ("gpu_step_ms", "host_step_ms", "host_wait_ms", "step_floor_ms", "runs"):
            fields[key] = tuple(fields[key])
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


RunData = tuple[OpenLoopRun, list[StepSummary], dict[str, Any]]
"""A committed ramp: the run, its step summaries and its raw JSON."""


def load_steps(folder: Path = RUNS) -> tuple[list[StepPoint], dict[str, RunData]]:
    """Every ramp step of the committed runs, and each run with its summaries."""
    points: list[StepPoint] = []
    runs: dict[str, RunData] = {}
    for name in RAMPS:
        data = json.loads((folder / name).read_text())
        run = OpenLoopRun.from_json(data)
        fraction = float(data["warm_min_cached_fraction"])
        summaries = [
            summarise_step(
                run, index, warm_min_cached_fraction=fraction, gauges=("kv_cache_usage", "running"), counters=()
            )
            for index in range(run.steps_run)
        ]
        runs[name] = (run, summaries, data)
        kv = int(data["engine"]["kv_cache_tokens"])
        for index, summary in enumerate(summaries):
            answered = [r for r in run.records if r.step == index and r.ok]
            follow = [r for r in answered if r.turn > 0]
            missed = sum(1 for r in follow if r.request_class(fraction) == "cold")
            p95 = {klass: summary.classes[klass].ttft_p95_ms for klass in ("cold", "warm")}
            points.append(
                StepPoint(
                    run=name,
                    kv_cache_tokens=kv,
                    think_s=run.think_s,
                    offered_per_min=summary.requests_per_min,
                    arrived_per_min=summary.served_per_min,
                    follow_up_miss=missed / len(follow) if follow else 0.0,
                    running=float(summary.engine["running_mean"] or 0.0),
                    itl_ms=float(summary.itl_mean_ms or 0.0),
                    kv_in_use=float(summary.engine["kv_cache_usage_mean"] or 0.0),
                    ttft_p95_ms=p95,
                    collapsed=(summary.ttft_p95_ms or 0.0) >= 2 * max(_SLO_MS.values()),
                )
            )
    return points, runs


def _shape(think_s: float) -> ConversationShape:
    return ConversationShape(think_s=think_s)


def fit(folder: Path = RUNS) -> Fit:
    """Fit every part (module docstring) on the runs in ``folder``."""
    probes = json.loads((folder / "probes.json").read_text())
    by_size: dict[int, list[float]] = {}
    for row in probes["one_request"]:
        by_size.setdefault(int(row["prompt_tokens"]), []).append(float(row["ttft_ms"]))
    fixed, per_token = _line([(n, statistics.median(by_size[n])) for n in PROBE_SIZES_FITTED])
    a0, a1 = _line([(p["batch"], p["decode_step_ms"]) for p in probes["probes"] if p["kind"] == "decode"])
    points, _ = load_steps(folder)
    steady = [p for p in points if not p.collapsed]

    def host_fit(host_prefill: float) -> tuple[float, float, float]:
        rows = []
        for p in steady:
            uncached = _mix(_shape(p.think_s), p.follow_up_miss, 1.0).uncached_mean
            rows.append((p.running, p.itl_ms * (1 - p.arrived_per_min / 60 * uncached * host_prefill / 1000), uncached))
        k0, k1 = _line([(r[0], r[1]) for r in rows])
        error = sum(
            ((k0 + k1 * running) / (1 - p.arrived_per_min / 60 * uncached * host_prefill / 1000) - p.itl_ms) ** 2
            for (running, _, uncached), p in zip(rows, steady, strict=True)
        )
        return error, k0, k1

    host_prefill = min(_HOST_PREFILL_GRID, key=lambda h: host_fit(h)[0])
    _, k0, k1 = host_fit(host_prefill)
    gpu_prefill = per_token - host_prefill

    def wait_error(wait: tuple[int, float]) -> float:
        parts = EngineParts(
            REFERENCE_GPU, 0, fixed, gpu_prefill, host_prefill, (a0, a1), (k0, k1), (float(wait[0]), wait[1])
        )
        error = 0.0
        for p in steady:
            mix = _mix(_shape(p.think_s), p.follow_up_miss, 1.0)
            busy = p.arrived_per_min / 60 * mix.uncached_mean * gpu_prefill / 1000
            _, p95 = _ttft(parts, mix, p.running, p.itl_ms, busy)
            error += sum(math.log(p95[k] / m) ** 2 for k, m in p.ttft_p95_ms.items() if m)
        return error

    w, exponent = min(_WAIT_GRID, key=wait_error)
    bandwidth_ms = WEIGHTS_BYTES / (REFERENCE_BANDWIDTH_GBS * 1e6)
    per_request_ms = PROBE_CONTEXT_TOKENS * KV_BYTES_PER_TOKEN / (REFERENCE_BANDWIDTH_GBS * 1e6)
    provisional = Fit(
        gpu=REFERENCE_GPU,
        fixed_ms=round(fixed, 3),
        gpu_prefill_ms_per_token=round(gpu_prefill, 6),
        host_prefill_ms_per_token=round(host_prefill, 6),
        gpu_step_ms=(round(a0, 4), round(a1, 5)),
        host_step_ms=(round(k0, 4), round(k1, 5)),
        host_wait_ms=(float(w), exponent),
        step_floor_ms=(round(a0 - bandwidth_ms, 4), round(a1 - per_request_ms, 5)),
        model_error=0.0,
        runs=tuple(str((folder / name).relative_to(REPO)) for name in ("probes.json", *RAMPS)),
    )
    rows = check(provisional, folder)
    error = max(abs(row.error) for row in rows)
    return Fit(**{**asdict(provisional), "model_error": round(error, 4)})


@dataclass(frozen=True)
class RunCheck:
    """One run: the measured and the modelled rate at which both classes hold, and the collapse."""

    run: str
    think_s: float
    kv_cache_tokens: int
    measured_holds_per_min: float
    model_holds_per_min: float
    measured_cliff_per_min: float | None
    model_cliff_per_min: float

    @property
    def error(self) -> float:
        """Model over measurement, less one."""
        return self.model_holds_per_min / self.measured_holds_per_min - 1


def check(model: Fit, folder: Path = RUNS) -> list[RunCheck]:
    """The model solved at each run's KV cache and pause against the run's verdict."""
    _, runs = load_steps(folder)
    rows = []
    for name, (run, summaries, data) in runs.items():
        kv = int(data["engine"]["kv_cache_tokens"])
        measured = verdict(summaries, {k: float(v) for k, v in data["slo_ms"].items()})
        modelled = capacity(model.parts(kv), _shape(run.think_s), _SLO_MS)
        rows.append(
            RunCheck(
                run=name,
                think_s=run.think_s,
                kv_cache_tokens=kv,
                measured_holds_per_min=float(measured.holds_per_min["both"] or 0.0),
                model_holds_per_min=modelled.holds_per_min["both"],
                measured_cliff_per_min=measured.cliff_per_min,
                model_cliff_per_min=modelled.cliff_per_min,
            )
        )
    return rows


def report(model: Fit, folder: Path = RUNS) -> list[str]:
    """The fitted parts and the error against every run, for the terminal and docs/performance.md."""
    gpu_us, host_us = 1000 * model.gpu_prefill_ms_per_token, 1000 * model.host_prefill_ms_per_token
    wait, exponent = model.host_wait_ms
    lines = [
        f"fixed part {model.fixed_ms:.1f} ms; prefill {gpu_us + host_us:.1f} us per uncached token "
        f"({gpu_us:.1f} GPU + {host_us:.1f} host)",
        f"decode step on the GPU {model.gpu_step_ms[0]:.2f} + {model.gpu_step_ms[1]:.3f} ms per running request; "
        f"host step {model.host_step_ms[0]:.2f} + {model.host_step_ms[1]:.3f} ms per running request (4 CPUs)",
        f"host TTFT tail at p95 {wait:.0f} ms x (host share on running requests)^{exponent:g}",
        "held rate, both classes at TTFT p95 <= 500 ms (measured: the ramp's last step that held and kept up):",
    ]
    for row in check(model, folder):
        cliff = "-" if row.measured_cliff_per_min is None else f"{row.measured_cliff_per_min:.0f}"
        lines.append(
            f"  {row.run:<28} think {row.think_s:>4g} s, KV {row.kv_cache_tokens:>7,} tokens: measured "
            f"{row.measured_holds_per_min:>4.0f}/min, model {row.model_holds_per_min:>4.0f}/min ({row.error:+.0%}); "
            f"collapse measured {cliff}, model {row.model_cliff_per_min:.0f}"
        )
    lines.append(f"model error (largest over the runs): {model.model_error:.0%}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m planning.engine_fit", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"regenerate {FIT_FILE.relative_to(REPO)}")
    args = parser.parse_args(argv)
    model = fit()
    print("\n".join(report(model)))
    if args.write:
        FIT_FILE.write_text(json.dumps(model.to_json(), indent=1) + "\n")
        print(f"wrote {FIT_FILE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
