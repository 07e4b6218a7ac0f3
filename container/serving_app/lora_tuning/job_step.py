"""The compile-cache job's last step: tune vLLM's LoRA kernels on the job's GPU, never fail the job.

The job (``make-compile-cache``; :mod:`serving_app.main`) runs on the serving instance type. Once
its engine has made the compile cache and stopped, the GPU is free and this step runs the tuner
(``python -m serving_app.lora_tuning``) in a child process with the engine's ``max_loras``. The
files land in ``<output>/lora-configs/`` (:data:`serving_contract.compile_cache.LORA_CONFIGS_SUBDIR`),
which SageMaker uploads beside ``vllm-cache/``; every model whose cache loads then passes the
folder to vLLM (:func:`serving_app.engine.compile_cache.prepare`).

Bounded: the child gets ``budget_s`` x :data:`SOFT_BUDGET_FRACTION` as its own budget (it keeps
vLLM's defaults for whatever it has not reached) and is killed at ``budget_s``. Tuned configs
are an optimisation: a skipped, failed or timed-out step leaves no ``lora-configs/`` (models use
vLLM's defaults) and says why in one line, which the manifest records.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from serving_app.lora_tuning.shapes import FILE_STEMS, file_names, file_prefix
from serving_contract import compile_cache as contract

log = logging.getLogger("serving_app.lora_tuning")

SOFT_BUDGET_FRACTION: Final = 0.75
"""Share of the budget the tuner plans with: it checks its budget between steps, and the step it
started last (one shape's prefill sweep, or one decode size over seven shapes) must end before
the hard limit kills it with nothing written."""
OUTPUT_LINES_KEPT: Final = 20
"""The tuner's last output lines logged when it is stopped at the budget."""

TUNED: Final = "tuned"
SKIPPED: Final = "skipped"
FAILED: Final = "failed"


def default_command() -> list[str]:
    """``python -m serving_app.lora_tuning`` with this interpreter (the image's, which has vLLM)."""
    return [sys.executable, "-m", "serving_app.lora_tuning"]


@dataclass(frozen=True, slots=True)
class TuningOutcome:
    """What the step did.

    Attributes:
        state: :data:`TUNED`, :data:`SKIPPED` or :data:`FAILED`.
        detail: one line: the files and seconds, or why not.
        files: vLLM config files written to ``lora-configs/`` (0 unless tuned).
    """

    state: str
    detail: str
    files: int = 0

    @property
    def line(self) -> str:
        """``<state>: <detail>``, as the manifest's ``lora_tuning`` field holds it."""
        return f"{self.state}: {self.detail}"


def skip_reason(*, budget_s: int, serves_lora: bool) -> str | None:
    """Why the step does not run, or None when it does."""
    if budget_s <= 0:
        return "off (serving.compile_cache.lora_tuning is false)"
    if not serves_lora:
        return "the engine serves no LoRA adapter (LORA_ADAPTERS empty, no runtime adapters)"
    return None


def run(
    output_dir: Path,
    *,
    budget_s: int,
    serves_lora: bool,
    max_loras: int,
    gpu_name: str = "",
    command: Sequence[str] | None = None,
) -> TuningOutcome:
    """Tune into ``output_dir/lora-configs`` within ``budget_s`` seconds; never raises for a tuner failure.

    Args:
        output_dir: the job's output folder (the compile cache's, uploaded at the job's end).
        budget_s: hard limit in seconds (``serving.compile_cache.lora_tuning_budget_s``); 0: skip.
        serves_lora: whether the engine runs with LoRA (adapters baked in or loaded at runtime).
        max_loras: the engine's ``--max-loras`` (vLLM keys its tables by it + 1).
        gpu_name: the job's GPU as ``nvidia-smi`` names it. The tuner names its files from
            ``torch.cuda.get_device_name()``, as vLLM does, so they are the ones vLLM reads on
            this GPU; a name that differs from ``nvidia-smi``'s is logged as a warning.
        command: the tuner's executable and leading arguments (:func:`default_command`; tests
            point it at a fake).
    """
    reason = skip_reason(budget_s=budget_s, serves_lora=serves_lora)
    if reason is not None:
        return _logged(TuningOutcome(SKIPPED, reason))
    destination = output_dir / contract.LORA_CONFIGS_SUBDIR
    # Staged outside the output folder: SageMaker uploads whatever is there when the job ends,
    # and a tuner stopped half-way must leave nothing a model would read.
    staging = Path(tempfile.mkdtemp(prefix="lora-configs-"))
    try:
        outcome = _tune(staging, budget_s=budget_s, max_loras=max_loras, gpu_name=gpu_name, command=command)
        if outcome.state == TUNED:
            shutil.rmtree(destination, ignore_errors=True)
            shutil.copytree(staging, destination)
    except OSError as exc:  # a full disk or an unwritable output: the cache is published without configs
        outcome = TuningOutcome(FAILED, f"could not write {destination}: {exc}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return _logged(outcome)


def _tune(
    staging: Path, *, budget_s: int, max_loras: int, gpu_name: str, command: Sequence[str] | None
) -> TuningOutcome:
    argv = [
        *(command or default_command()),
        "--out-dir",
        str(staging),
        "--max-loras",
        str(max_loras),
        "--budget-s",
        f"{budget_s * SOFT_BUDGET_FRACTION:g}",
        "--report",
        str(staging / contract.LORA_TUNING_REPORT),
    ]
    log.info("lora tuning: started, at most %d s: %s", budget_s, " ".join(argv))
    started = time.monotonic()
    # Its own process group, so a timeout kills whatever it started too (Triton runs ptxas as a child).
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=budget_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        _log_tail(output)
        return TuningOutcome(
            FAILED, f"stopped at the budget of {budget_s} s (serving.compile_cache.lora_tuning_budget_s)"
        )
    seconds = time.monotonic() - started
    for line in output.splitlines():
        log.info("lora tuning: | %s", line)
    if proc.returncode != 0:
        last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "no output")
        return TuningOutcome(FAILED, f"the tuner exited with {proc.returncode}: {last}")
    written = sorted(p.name for p in staging.glob("*.json") if p.name != contract.LORA_TUNING_REPORT)
    problem = _check_files(staging, written)
    if problem:
        return TuningOutcome(FAILED, problem)
    expected = file_names(file_prefix(gpu_name)) if gpu_name else written
    if not set(expected) <= set(written):
        log.warning(
            "lora tuning: the tuner wrote %s, named by torch as vLLM names them; nvidia-smi calls this GPU %r (%s)",
            ", ".join(written),
            gpu_name,
            ", ".join(expected),
        )
    return TuningOutcome(TUNED, f"{', '.join(written)} in {seconds:.1f} s", files=len(written))


def _check_files(staging: Path, written: list[str]) -> str:
    """Empty when ``written`` are the files vLLM reads (each a JSON object); else why not, one line."""
    wrote = f"the tuner wrote {', '.join(written) or 'no file'}"
    if not all(any(name.endswith(f"_{stem}.json") for name in written) for stem in FILE_STEMS):
        return f"{wrote}; vLLM reads {' and '.join(f'<GPU>_{stem}.json' for stem in FILE_STEMS)}"
    for name in written:
        try:
            table = json.loads((staging / name).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            return f"{name} is not JSON: {exc}"
        if not isinstance(table, dict) or not table:
            return f"{name} is not a table of configs (config[max_loras][num_slices][m][k][n])"
    return ""


def _log_tail(output: str) -> None:
    for line in output.splitlines()[-OUTPUT_LINES_KEPT:]:
        log.info("lora tuning: | %s", line)


def _logged(outcome: TuningOutcome) -> TuningOutcome:
    if outcome.state == FAILED:
        log.warning("lora tuning: %s; the compile cache is published without tuned configs", outcome.line)
    else:
        log.info("lora tuning: %s", outcome.line)
    return outcome
