"""A stand-in for ``python -m serving_app.lora_tuning`` (the real one needs a CUDA GPU and Triton).

Takes the tuner's arguments (``--out-dir``, ``--max-loras``, ``--budget-s``, ``--report``) and
writes the real tuner's H200 output (``benchmarks/results/h200-2026-11-26-lora-levers/``), so
vLLM's own lookup can read what the job published. Scripting by environment:

- ``FAKE_TUNER=fail``: print a line and exit 1 (a tuner that cannot run: no GPU);
- ``FAKE_TUNER=hang``: never finish (the job's budget must stop it);
- ``FAKE_TUNER=wrong-gpu``: name the files for another GPU than the H200;
- ``FAKE_TUNER=no-expand``: write no ``EXPAND_TRUE`` file;
- ``FAKE_TUNER_ARGS``: write the arguments it got there (JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

TUNER_OUTPUT = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "h200-2026-11-26-lora-levers"

parser = argparse.ArgumentParser()
parser.add_argument("--out-dir", required=True)
parser.add_argument("--max-loras", type=int, required=True)
parser.add_argument("--budget-s", type=float, required=True)
parser.add_argument("--report")
args = parser.parse_args()
if os.environ.get("FAKE_TUNER_ARGS"):
    Path(os.environ["FAKE_TUNER_ARGS"]).write_text(json.dumps(vars(args)))
mode = os.environ.get("FAKE_TUNER", "")
if mode == "fail":
    print("RuntimeError: Found no NVIDIA driver on your system.", flush=True)
    sys.exit(1)
if mode == "hang":
    print("shrink qkv m=256: default 18.4 us, tuned 14.6 us", flush=True)
    while True:
        time.sleep(1)
out = Path(args.out_dir)
out.mkdir(parents=True, exist_ok=True)
prefix = "NVIDIA_A10G" if mode == "wrong-gpu" else "NVIDIA_H200"
for stem in ("SHRINK",) if mode == "no-expand" else ("SHRINK", "EXPAND_TRUE"):
    shutil.copyfile(TUNER_OUTPUT / f"NVIDIA_H200_{stem}.json", out / f"{prefix}_{stem}.json")
if args.report:
    shutil.copyfile(TUNER_OUTPUT / "lora-tune.json", args.report)
print(f"wrote {prefix}_SHRINK.json, {prefix}_EXPAND_TRUE.json to {out} in 0.1 s", flush=True)
