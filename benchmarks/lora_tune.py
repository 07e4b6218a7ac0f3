"""Tune vLLM's LoRA shrink/expand Triton kernels for MangaAssist's shapes on this GPU (issue 35).

A thin CLI over the serving image's own tuner (``container/serving_app/lora_tuning``), the code
the compile-cache job runs on the serving instance type: shapes, search space, timing and the
files written (``<gpu>_SHRINK.json``, ``<gpu>_EXPAND_TRUE.json``, which vLLM reads from
``VLLM_TUNED_CONFIG_FOLDER``) are documented there.

Usage (GPU, vLLM 0.26 importable, repository root)::

    python benchmarks/lora_tune.py --out-dir /root/lora-configs [--max-loras 3] [--quick] \
        [--report lora-tune.json] [--budget-s 240]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "container"))

from serving_app.lora_tuning.cli import main

if __name__ == "__main__":
    raise SystemExit(main(prog="lora_tune.py"))
