"""Tune vLLM 0.22's LoRA shrink/expand Triton kernels for MangaAssist's shapes on this GPU (issue 35).

Writes the files vLLM reads from ``VLLM_TUNED_CONFIG_FOLDER``
(``vllm/lora/ops/triton_ops/README_TUNING.md``, ``utils.py``: ``load_lora_op_config``):
``<gpu>_SHRINK.json`` and ``<gpu>_EXPAND_TRUE.json``, each
``config[max_loras][num_slices][m][k][n] = {block_m, ...}`` where vLLM looks ``max_loras`` up as
``lora_ids.size(0)`` (the engine's ``max_loras`` + 1) and every other key by the nearest value.

Shapes: a Llama-3-8B layer with rank-16 adapters on every linear layer (seed 000: q, k, v, o,
gate, up, down). vLLM 0.22 calls the kernels once per wrapped layer
(``vllm/lora/punica_wrapper/punica_gpu.py``): shrink of the hidden state (k = 4096) for qkv
(3 slices), gate_up (2) and o (1), of the MLP state (k = 14336) for down (1); expand to
n = 4096 (qkv: 3 slices of 4096/1024/1024; o, down: 1) and n = 14336 (gate_up: 2 slices).

Batches of up to ``DECODE_MAX_M`` tokens get a config each: they run inside CUDA graphs that vLLM
captures at start (``engine.max_cudagraph_capture_size``), so every config they use is
compiled before ``/ping``. Larger batches (prefill) share one config, the one with the least
total time over ``PREFILL_MS``: every prefill size then runs one compiled kernel, which the
container's warm-up compiles before ``/ping`` (a second config would be a second lazy Triton
compile on the first user's long prompt).

Timing: the real vLLM op (``_lora_shrink``/``_lora_expand``) with the candidate config
patched into the op module, ``triton.testing.do_bench`` median. The winner of each shape is
checked against vLLM's default config's output (relative error < 1e-2; NaN fails).

Usage (GPU, vLLM 0.22 importable)::

    python benchmarks/lora_tune.py --out-dir /root/lora-configs [--max-loras 3] [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HIDDEN = 4096
INTERMEDIATE = 14336
KV = 1024
RANK = 16
ADAPTERS = 3
DECODE_MS = (1, 2, 4, 8, 16, 32, 64)
"""Batch sizes (tokens) tuned one by one: CUDA-graph sizes, compiled at engine start."""
DECODE_MAX_M = DECODE_MS[-1]
PREFILL_MS = (256, 1024, 2048, 4096)
"""Prefill batches the shared prefill config is chosen over; 2,048 is about MangaAssist's first
turn (600 + 1,400 + 40 tokens, benchmarks/conversations.py RequestShape)."""
PREFILL_KEY = 128
"""The table key of the prefill config: vLLM picks the nearest key, so every batch of 96 tokens
or more gets it (vLLM's own default also switches at 128, utils.py get_lora_op_configs)."""


@dataclass(frozen=True)
class Shape:
    """One kernel call: ``op`` (shrink/expand), slices, k and n as vLLM keys them, output widths."""

    op: str
    name: str
    k: int
    n: int
    widths: tuple[int, ...]  # expand: each slice's output width; shrink: rank per slice


SHAPES = (
    Shape("shrink", "qkv", HIDDEN, RANK, (RANK,) * 3),
    Shape("shrink", "gate_up", HIDDEN, RANK, (RANK,) * 2),
    Shape("shrink", "o", HIDDEN, RANK, (RANK,)),
    Shape("shrink", "down", INTERMEDIATE, RANK, (RANK,)),
    Shape("expand", "qkv", RANK, HIDDEN, (HIDDEN, KV, KV)),
    Shape("expand", "gate_up", RANK, INTERMEDIATE, (INTERMEDIATE, INTERMEDIATE)),
    Shape("expand", "o_down", RANK, HIDDEN, (HIDDEN,)),
)


def _shrink(block_m: int, block_k: int, split_k: int, stages: int) -> dict[str, Any]:
    return {
        "block_m": block_m,
        "block_n": 16,
        "block_k": block_k,
        "split_k": split_k,
        "num_warps": 4,
        "num_ctas": 1,
        "group_size_m": 8,
        "num_stages": stages,
        "max_nreg": None,
    }


def _expand(block_m: int, block_n: int, warps: int, stages: int) -> dict[str, Any]:
    return {
        "block_m": block_m,
        "block_n": block_n,
        "block_k": 16,
        "num_warps": warps,
        "num_ctas": 1,
        "num_stages": stages,
        "max_nreg": None,
    }


def space(op: str, phase: str, quick: bool) -> list[dict[str, Any]]:
    """Candidate configs (README_TUNING.md's ranges, trimmed so a sweep fits one device call:
    every distinct config is a Triton compile per slice count, about half a second each)."""
    grid: tuple[tuple[int, ...], ...]
    if op == "shrink":
        if phase == "prefill":
            grid = (
                ((16, 32, 64), (64, 128, 256), (8, 16, 32, 64), (2,)) if not quick else ((32,), (128,), (16, 64), (2,))
            )
        else:
            grid = ((16,), (128, 256), (16, 32, 64), (2,)) if not quick else ((16,), (256,), (64,), (2,))
        return [_shrink(*c) for c in itertools.product(*grid)]
    if phase == "prefill":
        grid = ((16, 32, 64, 128), (64, 128, 256), (4,), (2,)) if not quick else ((64,), (128, 256), (4,), (2,))
    else:
        grid = ((16, 32, 64), (64, 128, 256), (4,), (2,)) if not quick else ((16,), (128,), (4,), (2,))
    return [_expand(*c) for c in itertools.product(*grid)]


def token_mapping(m: int, adapters: int) -> list[int]:
    """Adapter index per token: decode batches spread round-robin over the adapters; a prefill
    batch is one prompt's chunk (adapter 0) plus seven decode tokens (8 concurrent users)."""
    if m <= DECODE_MAX_M:
        return [i % adapters for i in range(m)]
    decodes = [i % adapters for i in range(min(7, m))]
    return [0] * (m - len(decodes)) + decodes


class Bench:
    """Tensors and vLLM kernel metadata for one shape and batch; ``run(config)`` times a config."""

    def __init__(self, shape: Shape, m: int, max_loras: int) -> None:
        import torch  # noqa: PLC0415
        from vllm.lora.ops.triton_ops import (  # noqa: PLC0415
            lora_expand_op,
            lora_shrink_op,
            utils,
        )
        from vllm.lora.ops.triton_ops.lora_kernel_metadata import LoRAKernelMeta  # noqa: PLC0415

        # vLLM caches each weight list's pointers and strides by data_ptr (utils.py, meant for
        # weights allocated once); a tensor freed here and reallocated at the same address with
        # another shape would run on stale strides, so start from an empty cache.
        utils._LORA_A_PTR_DICT.clear()
        utils._LORA_B_PTR_DICT.clear()
        self.torch = torch
        self.shape = shape
        self.m = m
        dev = "cuda"
        meta = LoRAKernelMeta.make(max_loras, max(m, 16), dev)
        meta.prepare_tensors(torch.tensor(token_mapping(m, ADAPTERS), dtype=torch.int32, device=dev))
        self.meta = meta.meta_args(m, False)
        g = torch.Generator(device=dev).manual_seed(m * 31 + shape.k)
        if shape.op == "shrink":
            self.module = lora_shrink_op
            self.x = torch.randn(m, shape.k, dtype=torch.float16, device=dev, generator=g)
            self.weights = [
                torch.randn(max_loras, RANK, shape.k, dtype=torch.float16, device=dev, generator=g) * shape.k**-0.5
                for _ in shape.widths
            ]
            self.out = torch.empty(len(shape.widths), m, RANK, dtype=torch.float32, device=dev)
        else:
            self.module = lora_expand_op
            self.x = torch.randn(len(shape.widths), m, RANK, dtype=torch.float32, device=dev, generator=g)
            self.weights = [
                torch.randn(max_loras, w, RANK, dtype=torch.float16, device=dev, generator=g) * 0.05
                for w in shape.widths
            ]
            self.base = torch.randn(m, sum(shape.widths), dtype=torch.float16, device=dev, generator=g)
            self.out = self.base.clone()

    def call(self, config: dict[str, Any]) -> None:
        """One launch of the vLLM op with ``config`` in place of its table lookup."""
        self.module.get_lora_op_configs = lambda *a, **kw: config
        if self.shape.op == "shrink":
            self.module._lora_shrink(self.x, self.weights, self.out, *self.meta, 1.0)
        else:
            self.module._lora_expand(self.x, self.weights, self.out, *self.meta, offset_start=0, add_inputs=True)

    def output(self, config: dict[str, Any]) -> Any:
        """The op's output under ``config`` (expand: from the same base each time)."""
        if self.shape.op == "expand":
            self.out.copy_(self.base)
        self.call(config)
        self.torch.cuda.synchronize()
        return self.out.clone()

    def time_us(self, config: dict[str, Any]) -> float:
        """Median microseconds of one launch (do_bench: warm-up and repeats in ms)."""
        from triton.testing import do_bench  # noqa: PLC0415

        return float(do_bench(lambda: self.call(config), warmup=3, rep=15, return_mode="median")) * 1000


def default_config(op: str, m: int) -> dict[str, Any]:
    """vLLM 0.22's default config (utils.py get_lora_op_configs, no tuned folder)."""
    if op == "shrink":
        return {
            "block_m": 32,
            "block_n": 16,
            "block_k": 256 if m < 128 else 32,
            "split_k": 64 if m < 128 else 8,
            "num_warps": 4,
            "num_ctas": 1,
            "group_size_m": 8,
            "num_stages": 2,
            "max_nreg": None,
        }
    return {
        "block_m": 64,
        "block_n": 128,
        "block_k": 32,
        "num_warps": 4,
        "num_ctas": 1,
        "num_stages": 2,
        "max_nreg": None,
    }


def sweep(bench: Bench, space: Iterable[dict[str, Any]]) -> list[tuple[float, dict[str, Any]]]:
    """(microseconds, config) for every config that compiles and runs; failures are skipped."""
    timed = []
    for config in space:
        try:
            timed.append((bench.time_us(config), config))
        except Exception as exc:  # a config Triton cannot build for this shape
            print(f"  skip {config}: {exc.__class__.__name__}", flush=True)
    return timed


def check(bench: Bench, config: dict[str, Any]) -> float:
    """Relative error of ``config``'s output against the default config's; raises past 1e-2 or on NaN."""
    ref = bench.output(default_config(bench.shape.op, bench.m)).double()
    got = bench.output(config).double()
    err = float((got - ref).norm() / ref.norm())
    if not err < 1e-2:
        raise RuntimeError(f"{bench.shape} m={bench.m} config {config}: relative error {err}")
    return err


def tune(
    max_loras: int, quick: bool, budget_s: float, log: Callable[[str], None]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return (tables by file stem, report): the tuned tables and every shape's default vs tuned time.

    Prefill first (the TTFT gap of issue 35), then decode sizes one by one while ``budget_s``
    lasts; a size not reached keeps vLLM's default config in the table.
    """
    started = time.monotonic()
    report: dict[str, Any] = {"shapes": [], "decode_sizes_tuned": []}
    per_shape: dict[Shape, dict[int, dict[str, Any]]] = {
        shape: {m: default_config(shape.op, m) for m in DECODE_MS} for shape in SHAPES
    }
    for shape in SHAPES:
        # One config for every prefill size: least total time relative to each size's default.
        benches = [Bench(shape, m, max_loras) for m in PREFILL_MS]
        defaults = [b.time_us(default_config(shape.op, b.m)) for b in benches]
        totals: dict[str, float] = {}
        configs: dict[str, dict[str, Any]] = {}
        for config in space(shape.op, "prefill", quick):
            key = json.dumps(config, sort_keys=True)
            try:
                times = [b.time_us(config) for b in benches]
            except Exception as exc:  # a config Triton cannot build
                print(f"  skip {config}: {exc.__class__.__name__}", flush=True)
                continue
            totals[key] = sum(t / d for t, d in zip(times, defaults, strict=True))
            configs[key] = config
        best_key = min(totals, key=lambda k: totals[k])
        prefill = configs[best_key] if totals[best_key] < len(PREFILL_MS) else default_config(shape.op, PREFILL_KEY)
        for bench, default_us in zip(benches, defaults, strict=True):
            tuned_us = bench.time_us(prefill)
            err = check(bench, prefill)
            report["shapes"].append(_row(shape, bench.m, default_us, tuned_us, config=prefill, err=err))
            log(f"{shape.op} {shape.name} m={bench.m}: default {default_us:.1f} us, tuned {tuned_us:.1f} us")
        per_shape[shape][PREFILL_KEY] = prefill
    for m in sorted(DECODE_MS, key=lambda m: -m):  # the larger decode batches matter most under load
        if time.monotonic() - started > budget_s:
            log(f"budget of {budget_s:g} s spent: decode sizes <= {m} keep vLLM's defaults")
            break
        for shape in SHAPES:
            bench = Bench(shape, m, max_loras)
            default_us = bench.time_us(default_config(shape.op, m))
            timed = sweep(bench, space(shape.op, "decode", quick))
            best_us, best = min(timed, key=lambda t: t[0])
            if default_us <= best_us:
                best, best_us = default_config(shape.op, m), default_us
            err = check(bench, best)
            per_shape[shape][m] = best
            report["shapes"].append(_row(shape, m, default_us, best_us, config=best, err=err))
            log(f"{shape.op} {shape.name} m={m}: default {default_us:.1f} us, tuned {best_us:.1f} us")
        report["decode_sizes_tuned"].append(m)
    tables: dict[str, Any] = {"SHRINK": {}, "EXPAND_TRUE": {}}
    for shape, per_m in per_shape.items():
        table = tables["SHRINK" if shape.op == "shrink" else "EXPAND_TRUE"]
        for slots in sorted({max_loras + 1, 4, 5}):  # vLLM looks up max_loras + 1; serve 3 and 4 slots alike
            slices = table.setdefault(str(slots), {}).setdefault(str(len(shape.widths)), {})
            for m, config in per_m.items():
                slices.setdefault(str(m), {}).setdefault(str(shape.k), {})[str(shape.n)] = config
    return tables, report


def _row(
    shape: Shape, m: int, default_us: float, best_us: float, *, config: dict[str, Any], err: float
) -> dict[str, Any]:
    return {
        "op": shape.op,
        "layer": shape.name,
        "m": m,
        "k": shape.k,
        "n": shape.n,
        "slices": len(shape.widths),
        "default_us": round(default_us, 2),
        "tuned_us": round(best_us, 2),
        "config": config,
        "rel_err_vs_default": err,
    }


def gpu_file_prefix() -> str:
    """vLLM's file-name prefix for this GPU (utils.py: device name, spaces and dashes to '_')."""
    import torch  # noqa: PLC0415

    return str(torch.cuda.get_device_name()).replace(" ", "_").replace("-", "_")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lora_tune.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", required=True, help="the folder VLLM_TUNED_CONFIG_FOLDER will name")
    parser.add_argument("--max-loras", type=int, default=3, help="the engine's --max-loras (default 3)")
    parser.add_argument("--quick", action="store_true", help="a small search space (minutes -> seconds)")
    parser.add_argument("--report", help="write the per-shape timings here (JSON)")
    parser.add_argument("--budget-s", type=float, default=240.0, help="stop tuning decode sizes after this")
    args = parser.parse_args(argv)
    started = time.monotonic()
    tables, report = tune(args.max_loras, args.quick, args.budget_s, lambda line: print(line, flush=True))
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prefix = gpu_file_prefix()
    for stem, table in tables.items():
        (out / f"{prefix}_{stem}.json").write_text(json.dumps(table, indent=1))
    report.update(gpu=prefix, max_loras=args.max_loras, seconds=round(time.monotonic() - started, 1))
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=1))
    print(f"wrote {prefix}_SHRINK.json, {prefix}_EXPAND_TRUE.json to {out} in {report['seconds']} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
