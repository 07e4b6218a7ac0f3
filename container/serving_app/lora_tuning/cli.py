"""``python -m serving_app.lora_tuning --out-dir DIR``: tune and write vLLM's LoRA kernel config files.

Writes ``<gpu>_SHRINK.json`` and ``<gpu>_EXPAND_TRUE.json`` (:mod:`.shapes` has the layout) to
``--out-dir``, the folder ``VLLM_TUNED_CONFIG_FOLDER`` will name, and with ``--report`` each
shape's default and tuned microseconds. Exit 0 when both files are written; any error (no GPU,
no vLLM) is a traceback and a non-zero exit, which the compile-cache job logs and survives.

Usage (GPU, vLLM 0.26 importable)::

    python -m serving_app.lora_tuning --out-dir /root/lora-configs [--max-loras 3] [--quick]
    python benchmarks/lora_tune.py ...   (the same CLI)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

DEFAULT_BUDGET_S = 240.0
"""The CLI's default tuning budget, seconds: the full search took 127.6 s with a cold Triton cache
on an H200 (benchmarks/results/h200-2026-11-26-lora-levers/lora-tune-first-stale-pointers.json)."""


def main(argv: list[str] | None = None, prog: str = "serving_app.lora_tuning") -> int:
    """Parse ``argv``, tune on this GPU, write the files; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Tune vLLM's LoRA shrink/expand kernels for MangaAssist's shapes on this GPU."
    )
    parser.add_argument("--out-dir", required=True, help="the folder VLLM_TUNED_CONFIG_FOLDER will name")
    parser.add_argument("--max-loras", type=int, default=3, help="the engine's --max-loras (default 3)")
    parser.add_argument("--quick", action="store_true", help="a small search space (minutes -> seconds)")
    parser.add_argument("--report", help="write the per-shape timings here (JSON)")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=DEFAULT_BUDGET_S,
        help="stop tuning after this many seconds; shapes and sizes not reached keep vLLM's defaults",
    )
    args = parser.parse_args(argv)
    # GPU imports after parsing: --help and argument errors need no torch.
    from serving_app.lora_tuning.tuner import gpu_file_prefix, tune  # noqa: PLC0415

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
    print(
        f"wrote {', '.join(f'{prefix}_{stem}.json' for stem in tables)} to {out} in {report['seconds']} s", flush=True
    )
    return 0
