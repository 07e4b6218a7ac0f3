"""The compile-cache job's LoRA tuning step (``serving_app.lora_tuning``) on CPU.

The real tuner times Triton kernels on a CUDA GPU; here ``fake_lora_tuner.py`` stands in for it
(it writes the real tuner's H200 output), for the step's own cases: run, skipped, failed,
stopped at its budget, and an incomplete output. The table layout the
tuner writes is checked against the files vLLM 0.22 read on the H200 (``test_lora_tuned_configs.py``
has vLLM read them).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from serving_app.lora_tuning import job_step
from serving_app.lora_tuning.shapes import build_tables, default_configs, file_names, file_prefix
from tests.container.conftest import REPO

FAKE_TUNER = [sys.executable, str(Path(__file__).with_name("fake_lora_tuner.py"))]
H200_OUTPUT = REPO / "benchmarks" / "results" / "h200-2026-11-26-lora-levers"


def run_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str = "", **overrides: Any
) -> job_step.TuningOutcome:
    monkeypatch.setenv("FAKE_TUNER", mode)
    monkeypatch.setenv("FAKE_TUNER_ARGS", str(tmp_path / "args.json"))
    arguments: dict[str, Any] = {"budget_s": 60, "serves_lora": True, "max_loras": 3, "command": FAKE_TUNER}
    return job_step.run(tmp_path / "out", **(arguments | overrides))


def test_the_step_tunes_into_lora_configs_with_the_engines_max_loras_and_a_share_of_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome = run_step(tmp_path, monkeypatch, gpu_name="NVIDIA H200")
    assert (outcome.state, outcome.files) == ("tuned", 2)
    assert outcome.line.startswith("tuned: NVIDIA_H200_EXPAND_TRUE.json, NVIDIA_H200_SHRINK.json in ")
    folder = tmp_path / "out" / "lora-configs"
    assert sorted(p.name for p in folder.iterdir()) == [
        "NVIDIA_H200_EXPAND_TRUE.json",
        "NVIDIA_H200_SHRINK.json",
        "lora-tune.json",
    ]
    args = json.loads((tmp_path / "args.json").read_text())
    # The tuner plans with 3/4 of the budget; the step kills it at the whole budget.
    assert (args["max_loras"], args["budget_s"]) == (3, 45.0)
    assert args["report"].endswith("/lora-tune.json")


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        ({"budget_s": 0}, "skipped: off (serving.compile_cache.lora_tuning is false)"),
        (
            {"serves_lora": False},
            "skipped: the engine serves no LoRA adapter (LORA_ADAPTERS empty, no runtime adapters)",
        ),
    ],
)
def test_the_step_is_skipped_when_off_or_without_lora(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overrides: dict[str, Any], line: str
) -> None:
    outcome = run_step(tmp_path, monkeypatch, **overrides)
    assert (outcome.line, outcome.files) == (line, 0)
    assert not (tmp_path / "args.json").exists()  # the tuner never ran
    assert not (tmp_path / "out" / "lora-configs").exists()


@pytest.mark.parametrize(
    ("mode", "overrides", "line"),
    [
        ("fail", {}, "failed: the tuner exited with 1: RuntimeError: Found no NVIDIA driver on your system."),
        (
            "hang",
            {"budget_s": 1},
            "failed: stopped at the budget of 1 s (serving.compile_cache.lora_tuning_budget_s)",
        ),
        (
            "no-expand",
            {},
            "failed: the tuner wrote NVIDIA_H200_SHRINK.json; vLLM reads <GPU>_SHRINK.json and <GPU>_EXPAND_TRUE.json",
        ),
    ],
)
def test_a_failed_or_overlong_tuner_leaves_no_configs_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, overrides: dict[str, Any], line: str
) -> None:
    outcome = run_step(tmp_path, monkeypatch, mode, **overrides)
    assert (outcome.line, outcome.files) == (line, 0)
    assert not (tmp_path / "out" / "lora-configs").exists()


def test_gpu_file_names_follow_vllms_rule() -> None:
    """vllm/lora/ops/triton_ops/utils.py load_lora_op_config: spaces and dashes become underscores."""
    assert file_prefix("NVIDIA A10G") == "NVIDIA_A10G"
    assert file_prefix("NVIDIA H100 80GB HBM3") == "NVIDIA_H100_80GB_HBM3"
    assert file_prefix("NVIDIA L4") == "NVIDIA_L4"
    assert file_names("NVIDIA_L4") == ["NVIDIA_L4_SHRINK.json", "NVIDIA_L4_EXPAND_TRUE.json"]


def _keys(table: Any, depth: int) -> Any:
    """A table's keys down to ``depth`` levels (the configs themselves left out)."""
    if depth == 0 or not isinstance(table, dict):
        return None
    return {key: _keys(value, depth - 1) for key, value in table.items()}


def test_the_tables_have_the_layout_vllm_read_on_the_h200() -> None:
    """config[max_loras + 1][num_slices][m][k][n]: the layout of the files vLLM used in the H200 run."""
    tables = build_tables(default_configs(), max_loras=3)
    for stem in ("SHRINK", "EXPAND_TRUE"):
        measured = json.loads((H200_OUTPUT / f"NVIDIA_H200_{stem}.json").read_text())
        assert _keys(tables[stem], 5) == _keys(measured, 5)


def test_the_benchmark_cli_keeps_its_flags_and_needs_no_gpu_for_help() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "lora_tune.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.startswith("usage: lora_tune.py [-h] --out-dir OUT_DIR [--max-loras MAX_LORAS] [--quick]")
    assert "[--report REPORT] [--budget-s BUDGET_S]" in result.stdout


def test_files_named_unlike_nvidia_smis_gpu_name_are_kept_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The tuner names files from torch.cuda.get_device_name(), exactly as vLLM looks them up; the
    job's nvidia-smi name is only a cross-check."""
    outcome = run_step(tmp_path, monkeypatch, "wrong-gpu", gpu_name="NVIDIA H200")
    assert (outcome.state, outcome.files) == ("tuned", 2)
    assert (
        "lora tuning: the tuner wrote NVIDIA_A10G_EXPAND_TRUE.json, NVIDIA_A10G_SHRINK.json, named by torch as vLLM "
        "names them; nvidia-smi calls this GPU 'NVIDIA H200' (NVIDIA_H200_SHRINK.json, NVIDIA_H200_EXPAND_TRUE.json)"
    ) in caplog.messages


class _Value:
    """The little of a tensor ``tuner.check`` uses: one number standing for an op's output."""

    def __init__(self, value: float) -> None:
        self.value = value

    def double(self) -> _Value:
        return self

    def __sub__(self, other: _Value) -> _Value:
        return _Value(self.value - other.value)

    def norm(self) -> _Value:
        return _Value(abs(self.value))

    def __truediv__(self, other: _Value) -> float:
        return self.value / other.value


class _ScriptedBench:
    """Stands in for ``tuner.Bench`` (which launches vLLM's Triton kernels on a GPU): vLLM's default
    takes 10 us, every other config 5 us, except ``shrink o`` at prefill sizes, whose configs time
    fast once and slow when timed again (what the H200 run's log shows for that shape)."""

    def __init__(self, shape: Any, m: int, max_loras: int) -> None:
        from serving_app.lora_tuning.shapes import PREFILL_MS, default_config

        self.shape, self.m, self.default = shape, m, default_config(shape.op, m)
        self.flaky = shape.op == "shrink" and shape.name == "o" and m in PREFILL_MS
        self.timed: set[str] = set()

    def time_us(self, config: dict[str, Any]) -> float:
        if config == self.default:
            return 10.0
        key = json.dumps(config, sort_keys=True)
        again = key in self.timed
        self.timed.add(key)
        return 50.0 if self.flaky and again else 5.0

    def output(self, config: dict[str, Any]) -> _Value:
        return _Value(1.0)


def test_the_tuner_keeps_the_default_where_its_choice_loses_when_timed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from serving_app.lora_tuning import tuner
    from serving_app.lora_tuning.shapes import PREFILL_KEY, default_config

    monkeypatch.setattr(tuner, "Bench", _ScriptedBench)
    lines: list[str] = []
    tables, report = tuner.tune(max_loras=3, quick=True, budget_s=3600, log=lines.append)
    shrink = tables["SHRINK"]["4"]
    assert shrink["1"][str(PREFILL_KEY)]["4096"]["16"] == default_config("shrink", PREFILL_KEY)  # shrink o
    assert shrink["1"][str(PREFILL_KEY)]["14336"]["16"] != default_config("shrink", PREFILL_KEY)  # shrink down
    assert "shrink o: the chosen prefill config lost to the default when timed again; default kept" in lines
    assert report["decode_sizes_tuned"] == [64, 32, 16, 8, 4, 2, 1]


def test_a_spent_budget_leaves_vllms_defaults_in_every_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shapes and sizes the budget does not reach keep vLLM's defaults, prefill included."""
    from serving_app.lora_tuning import tuner

    monkeypatch.setattr(tuner, "Bench", _ScriptedBench)
    lines: list[str] = []
    tables, report = tuner.tune(max_loras=3, quick=True, budget_s=-1, log=lines.append)
    assert tables == build_tables(default_configs(), max_loras=3)
    assert (report["prefill_shapes_tuned"], report["decode_sizes_tuned"]) == ([], [])
    assert lines[0].startswith("budget of -1 s spent: prefill configs of shrink qkv, shrink gate_up, ")
