"""Carry a GPU measurement of one engine at MangaAssist's request shape to every instance type.

Only Hopper GPUs are measurable from this project (the device machines have an H100 or an
H200); the config accepts g4dn, g5, g6, g6e, p4d, p5. This module states the model that carries
the measured load curve (TTFT p50/p95 and requests/s against concurrency, ``bash
benchmarks/gpu_session.sh capacity``) to another GPU, checks the half it can check on two
measured GPUs, and writes the projected curves to ``app_config/planning/instance_capacity.json``, which
the config reads for the concurrency target, the simulation and the plan. It runs at
development time only (``make capacity``), never at synth.

The model, per concurrency level ``c`` of the reference curve (one engine, TP = 1):

* **TTFT has a fixed part and a part that scales with tensor throughput** (devtools/ttft_model.py,
  fitted from the H100 runs of 2026-11-26): at one request TTFT_1 = F + (L + C x F_ref / F_X) x
  uncached tokens, with F (~17 ms: launches, scheduling, HTTP) and L (the LoRA path) fixed and C
  (the base model's prefill) scaled by F, the GPU's dense FP16 tensor throughput from the
  vendor's datasheet; under load, the extra TTFT over one request (others' prefill and LoRA work
  on the GPU) scales whole: TTFT_X(c) = TTFT_1,X + (TTFT_ref(c) - TTFT_1,ref) x F_ref / F_X. Each
  row carries the classes apart: first turns (cold, ~1,440 uncached tokens) and follow-ups
  (warm, ~220 with the history cached; in the fresh curve a follow-up lands on an engine without
  its history and is as uncached as any request).
* **Decode is a fixed step latency plus memory traffic.** ITL_X(c) = o(c) + (ITL_ref(c) - o(c))
  x B_ref / B_X, with B the datasheet memory bandwidth. ``o(c) = o0 + o1 x c`` is the part of a
  decode step that does not move with bandwidth (kernel latencies, sampling, the scheduler on 4
  CPUs); it is fitted from the decode probes of the H100 and the H200, which share their compute
  and differ only in bandwidth (3.35 vs 4.8 TB/s).
* **Closed loop.** e2e_X(c) = TTFT_X(c) + (output_tokens - 1) x ITL_X(c) and, by Little's law,
  requests/s = c / e2e_X(c).

``check()`` projects the H200's curve to the H100 and compares it with the H100's measurement
(the bandwidth half of the model). The compute half cannot be checked on Hopper alone: one
A10G run of ``gpu_session.sh capacity`` settles whether an A10G's prefill scales with its 70
dense TFLOPS (then it cannot hold a 500 ms p95 for a fresh ~2,400-token prompt at any
concurrency) or does better.

Usage::

    python -m devtools.capacity_model            # print the projections and the check
    python -m devtools.capacity_model --write    # regenerate app_config/planning/instance_capacity.json
"""

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app_config.errors import ConfigError
from app_config.planning.gpu_instances import H100_80GB, H200, INSTANCE_GPUS, Gpu
from app_config.planning.throughput_at_slo import CURVE_CLASSES
from cli_support.argtypes import positive_float
from devtools import ttft_model, weekly_plan
from devtools.ttft_model import TtftFit

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
REFERENCE = ttft_model.REFERENCE
"""The reference curve: the H200 run with the default engine (issue 35's LoRA options), whose raw
JSON and logs are in the repository."""
CHECK = RESULTS / "h100-2026-11-24" / "capacity-summary.json"
"""The second GPU of the same command: the H100 run (figures transcribed, see its note)."""
CHECK_PAIR_REFERENCE = RESULTS / "h200-2026-11-25" / "capacity.json"
"""The H200 run made with the same engine options as ``CHECK`` (the LoRA options before issue 35):
the step floor is fitted from this pair, and the bandwidth half is checked on it. A pair whose
GPUs ran different engine options would read the options' effect on the decode step as bandwidth
(the defaults' H200 probes with the 2026-11-24 H100's move o0 from 4.9 to 2.6 ms)."""
TABLE = REPO / "app_config" / "planning" / "instance_capacity.json"
MODES = ("fresh", "conversations")
DEFAULT_SHAPE = {"shared_prefix_tokens": 600, "conversation_tokens": 1400, "turn_tokens": 40, "output_tokens": 180}
"""The measured request shape (benchmarks/conversations.py RequestShape), for a file that lacks it."""


@dataclass(frozen=True)
class Measurement:
    """One ``gpu_session.sh capacity`` result: the GPU, its decode probes and its two curves."""

    gpu: Gpu
    output_tokens: int
    decode_steps_ms: dict[tuple[int, int], float]
    curves: dict[str, list[dict[str, float]]]
    shape: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_SHAPE))
    mean_prompt_tokens: float = 2396.0

    @classmethod
    def load(cls, path: Path, gpu: Gpu, output_tokens: int = 180) -> "Measurement":
        """Read a capacity JSON (or the H100's transcribed summary).

        Raises:
            ValueError: a curve or a decode probe is missing.
        """
        data = json.loads(path.read_text())
        steps = {
            (int(p["batch"]), int(p["prompt_tokens"])): float(p["decode_step_ms"])
            for p in data["probes"]
            if p["kind"] == "decode"
        }
        if not steps or any(not data.get(mode) for mode in MODES):
            raise ValueError(f"{path}: needs decode probes and the {' and '.join(MODES)} curves")
        shape = {**DEFAULT_SHAPE, **data.get("shape", {})}
        tokens = int(shape.get("output_tokens", output_tokens))
        mean_prompt = float(data.get("mean_prompt_tokens", 2396.0))
        return cls(gpu, tokens, steps, {mode: list(data[mode]) for mode in MODES}, shape, mean_prompt)


def fit_step_floor(fast: Measurement, slow: Measurement) -> tuple[float, float]:
    """``(o0, o1)`` of the bandwidth-independent decode step part ``o(b) = o0 + o1 x b``, ms.

    For each decode probe both GPUs ran, step = o + m / B on each, so
    o = (s_slow B_slow - s_fast B_fast) / (B_slow - B_fast); a least-squares line through the
    per-probe o against the batch gives (o0, o1).

    Raises:
        ValueError: the GPUs share their bandwidth or share no probe.
    """
    b_fast, b_slow = fast.gpu.memory_bandwidth_gbs, slow.gpu.memory_bandwidth_gbs
    if b_fast == b_slow:
        raise ValueError("the two GPUs have the same bandwidth: the step floor cannot be separated")
    points = [
        (float(batch), (slow.decode_steps_ms[key] * b_slow - fast.decode_steps_ms[key] * b_fast) / (b_slow - b_fast))
        for key in fast.decode_steps_ms.keys() & slow.decode_steps_ms.keys()
        for batch in (key[0],)
    ]
    if not points:
        raise ValueError("no decode probe shared by both measurements")
    mean_b = sum(b for b, _ in points) / len(points)
    mean_o = sum(o for _, o in points) / len(points)
    spread = sum((b - mean_b) ** 2 for b, _ in points)
    slope = sum((b - mean_b) * (o - mean_o) for b, o in points) / spread if spread else 0.0
    return mean_o - slope * mean_b, slope


def shift_step_floor(floor: tuple[float, float], pair: Measurement, reference: Measurement) -> tuple[float, float]:
    """The step floor of ``reference``, an engine configuration run on the same GPU as ``pair``.

    Engine options (issue 35's LoRA kernels: specialised grids, tuned configs) change how long a
    decode step's kernels take, not the bytes it moves: the weights and the KV cache read are the
    same. So the difference between the two runs' decode probes on one GPU is taken out of the
    bandwidth-independent part, as a constant over the batch (the mean over the shared probes),
    and nothing of it is scaled by another GPU's bandwidth. Read as memory traffic instead, the
    0.5-0.8 ms the levers saved per H200 step would become 8-13 ms per step on an L4 (16x less
    bandwidth) and double its projected requests per minute.

    Raises:
        ValueError: the two runs are on different GPUs or share no decode probe.
    """
    if pair.gpu != reference.gpu:
        raise ValueError(f"{pair.gpu.name} and {reference.gpu.name}: the step floor moves only between runs of one GPU")
    shared = pair.decode_steps_ms.keys() & reference.decode_steps_ms.keys()
    if not shared:
        raise ValueError("no decode probe shared by both measurements")
    shift = sum(pair.decode_steps_ms[key] - reference.decode_steps_ms[key] for key in shared) / len(shared)
    return floor[0] - shift, floor[1]


def project(
    reference: Measurement, gpu: Gpu, floor: tuple[float, float], mode: str, ttft: TtftFit | None = None
) -> list[dict[str, float]]:
    """The reference's ``mode`` curve carried to ``gpu``: one row per measured concurrency.

    Rows: ``concurrency``, ``ttft_p50_ms``, ``ttft_p95_ms`` (all requests), ``cold_ttft_p95_ms``
    (first turns), ``warm_ttft_p95_ms`` (follow-up turns), ``itl_ms``, ``requests_per_minute``.
    TTFT: the one-request figure of :mod:`devtools.ttft_model` on ``gpu`` plus the reference's
    extra TTFT under load scaled by the tensor-throughput ratio; in the ``fresh`` curve a follow-up
    finds no history on its engine, so it is as uncached as the level's mean request.
    """
    model = ttft if ttft is not None else ttft_model.default_fit()
    compute = reference.gpu.dense_fp16_tflops / gpu.dense_fp16_tflops
    bandwidth = reference.gpu.memory_bandwidth_gbs / gpu.memory_bandwidth_gbs
    shape = reference.shape
    cold_tokens = float(shape["conversation_tokens"] + shape["turn_tokens"])  # the system prefix is cached
    warm_tokens = float(shape["output_tokens"] + shape["turn_tokens"])  # the history is cached

    def carried(measured_ms: float, tokens: float) -> float:
        at_one_here = model.one_request_ms(gpu, "awq", True, tokens)
        at_one_there = model.one_request_ms(reference.gpu, "awq", True, tokens)
        return at_one_here + max(measured_ms - at_one_there, 0.0) * compute

    rows = []
    for level in reference.curves[mode]:
        c = float(level["concurrency"])
        floor_ms = floor[0] + floor[1] * c
        itl = _reference_itl(reference, level)
        itl_x = floor_ms + max(itl - floor_ms, 0.0) * bandwidth
        mean_tokens = float(level.get("prompt_tokens_mean", reference.mean_prompt_tokens)) * (
            1 - float(level.get("prefix_cache_hit_rate", 0.0))
        )
        follow_tokens = warm_tokens if mode == "conversations" else mean_tokens
        first_turn_p95 = float(level.get("first_turn_ttft_p95_ms", level["ttft_p95_ms"]))
        if mode == "conversations" and c == 1 and (alone := _fresh_level_at_one(reference)) is not None:
            # With one request in flight a first turn meets no other work: it is a fresh request.
            # The conversation level holds 4 first turns (its p95 is their maximum, 97 vs 83 ms on
            # the defaults' H200), the fresh level 15-16; an L4 multiplies the difference by 8.
            first_turn_p95 = float(alone.get("first_turn_ttft_p95_ms", alone["ttft_p95_ms"]))
        ttft50 = carried(float(level["ttft_p50_ms"]), mean_tokens)
        e2e_s = (ttft50 + (reference.output_tokens - 1) * itl_x) / 1000
        rows.append(
            {
                "concurrency": int(c),
                "ttft_p50_ms": round(ttft50, 1),
                "ttft_p95_ms": round(carried(float(level["ttft_p95_ms"]), mean_tokens), 1),
                "cold_ttft_p95_ms": round(carried(first_turn_p95, cold_tokens), 1),
                "warm_ttft_p95_ms": round(
                    carried(float(level.get("follow_up_ttft_p95_ms", level["ttft_p95_ms"])), follow_tokens), 1
                ),
                "itl_ms": round(itl_x, 2),
                "requests_per_minute": round(60 * c / e2e_s, 1),
            }
        )
    return rows


def _fresh_level_at_one(reference: Measurement) -> dict[str, Any] | None:
    """The fresh curve's one-request level, if it was measured."""
    return next((level for level in reference.curves["fresh"] if int(level["concurrency"]) == 1), None)


def _reference_itl(reference: Measurement, level: dict[str, Any]) -> float:
    """The level's mean inter-token latency, or (the H100 summary has none) the e2e it implies."""
    if "itl_mean_ms" in level:
        return float(level["itl_mean_ms"])
    e2e_ms = 1000 * float(level["concurrency"]) / float(level["requests_per_s"])
    return (e2e_ms - float(level["ttft_p50_ms"])) / (reference.output_tokens - 1)


def at_slo(rows: Sequence[dict[str, float]], slo_ms: float) -> dict[str, float] | None:
    """The highest-concurrency row whose TTFT p95 holds ``slo_ms``; None when none does."""
    holding = [row for row in rows if row["ttft_p95_ms"] <= slo_ms]
    return max(holding, key=lambda row: row["concurrency"]) if holding else None


def check(reference: Measurement, other: Measurement, floor: tuple[float, float]) -> list[str]:
    """Lines comparing ``other``'s measured curves with the reference projected to its GPU."""
    lines = [f"check: {reference.gpu.name} projected to {other.gpu.name} vs measured"]
    for mode in MODES:
        projected = {row["concurrency"]: row for row in project(reference, other.gpu, floor, mode)}
        for level in other.curves[mode]:
            row = projected.get(int(level["concurrency"]))
            if row is None:
                continue
            measured_rpm = 60 * float(level["requests_per_s"])
            lines.append(
                f"  {mode:<13} c={row['concurrency']:<3} req/min {row['requests_per_minute']:7.1f} vs "
                f"{measured_rpm:7.1f}"
                f" ({row['requests_per_minute'] / measured_rpm - 1:+.0%})   TTFT p95 {row['ttft_p95_ms']:7.1f} vs "
                f"{float(level['ttft_p95_ms']):7.1f} ms ({row['ttft_p95_ms'] / float(level['ttft_p95_ms']) - 1:+.0%})"
            )
    return lines


def table(reference: Measurement, floor: tuple[float, float]) -> dict[str, Any]:
    """The projected curves of every GPU the config's instance types carry, and how they were made."""
    gpus = {instance.gpu.name: instance.gpu for instance in INSTANCE_GPUS.values()}
    fit = ttft_model.default_fit()
    return {
        "generated_by": "python -m devtools.capacity_model --write",
        "model": "TTFT = TTFT_1(gpu) + (TTFT_ref(c) - TTFT_1(ref)) x dense FP16 TFLOPS ratio, TTFT_1 = F + (L + C x "
        "TFLOPS ratio) x uncached tokens (devtools/ttft_model.py); ITL = o(c) + (ITL_ref - o(c)) x bandwidth ratio; "
        "req/min = 60 c / (TTFT p50 + (output - 1) x ITL)",
        "ttft_fit": {
            "fixed_ms": round(fit.fixed_ms, 2),
            "lora_us_per_token": round(fit.lora_ms_per_token * 1000, 2),
            "awq_us_per_token_on_reference": round(fit.compute_ms_per_token["awq"] * 1000, 2),
        },
        "reference": f"{REFERENCE.relative_to(REPO)} ({reference.gpu.name})",
        "step_floor_ms": {"o0": round(floor[0], 3), "o1_per_sequence": round(floor[1], 4)},
        "output_tokens": reference.output_tokens,
        "gpus": {
            name: {mode: project(reference, gpu, floor, mode, fit) for mode in MODES}
            for name, gpu in sorted(gpus.items())
        },
    }


def load_measurements() -> tuple[Measurement, Measurement, Measurement, tuple[float, float]]:
    """The H200 reference, the H200 and H100 pair of one engine configuration, and the reference's
    step floor: fitted from that pair, then shifted to the reference's engine options
    (:func:`shift_step_floor`)."""
    reference = Measurement.load(REFERENCE, H200)
    pair_h200 = Measurement.load(CHECK_PAIR_REFERENCE, H200)
    other = Measurement.load(CHECK, H100_80GB)
    return reference, pair_h200, other, shift_step_floor(fit_step_floor(pair_h200, other), pair_h200, reference)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="capacity_model", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"regenerate {TABLE.relative_to(REPO)}")
    parser.add_argument(
        "--slo-ms",
        type=positive_float,
        default=None,
        help="TTFT p95 SLO for the summary, ms (default: the config's slo.<class>.ttft_p95_ms, fresh = cold, "
        "conversations = warm)",
    )
    parser.add_argument(
        "-c", "--context", action="append", default=[], metavar="KEY=VALUE", help="context override (as cdk synth -c)"
    )
    args = parser.parse_args(argv)
    try:
        slo = weekly_plan.load(args.context).slo  # cdk.json's context, as synth reads it
    except ConfigError as error:
        print(error, file=sys.stderr)
        return 2
    reference, pair_h200, other, floor = load_measurements()
    print("\n".join(ttft_model.report(ttft_model.default_fit(), ttft_model.load_runs())) + "\n")
    pair_floor = fit_step_floor(pair_h200, other)
    print(
        f"decode step floor o(c) = {pair_floor[0]:.2f} + {pair_floor[1]:.4f} x c ms (fitted from the probes of "
        f"{CHECK_PAIR_REFERENCE.relative_to(REPO)} and {CHECK.relative_to(REPO)}); with the reference's engine "
        f"options {floor[0]:.2f} + {floor[1]:.4f} x c ms (the H200 probes' difference, not scaled by bandwidth)"
    )
    print("\n".join(check(pair_h200, other, pair_floor)))
    generated = table(reference, floor)
    slo_ms = {mode: args.slo_ms or slo.of(CURVE_CLASSES[mode]).ttft_p95_ms for mode in MODES}
    at = ", ".join(f"{mode} {ms:g} ms" for mode, ms in slo_ms.items())
    print(f"\nper GPU at TTFT p95 <= the SLO ({at}; one engine, TP = 1):")
    for name, curves in generated["gpus"].items():
        cells = []
        for mode in MODES:
            row = at_slo(curves[mode], slo_ms[mode])
            cells.append(
                f"{mode} " + (f"c={row['concurrency']} {row['requests_per_minute']:.0f}/min" if row else "none")
            )
        print(f"  {name:<16} " + "   ".join(cells))
    if args.write:
        TABLE.write_text(json.dumps(generated, indent=1) + "\n")
        print(f"\nwrote {TABLE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
