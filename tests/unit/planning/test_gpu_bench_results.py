"""The committed GPU results (docs/performance.md) against the current code: the memory plan
must stay within 10 % of every KV-cache size vLLM reported there (issue 14's target)."""

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
# The serving benchmark's results (gpu_serving.py); the capacity, sessions and matrix runs
# (gpu_capacity.py, gpu_startup.py) have no "levels" and are checked in test_capacity_model.py.
RESULTS = sorted(
    p
    for p in (REPO / "benchmarks" / "results").glob("*/*.json")
    if isinstance(data := json.loads(p.read_text()), dict) and "levels" in data
)
sys.path.insert(0, str(REPO / "benchmarks"))

from gpu_report import plan_of, report  # noqa: E402


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_memory_plan_is_within_10_percent_of_vllm(path: Path) -> None:
    result = json.loads(path.read_text())
    reported = result["vllm"]["kv_cache_tokens"]
    planned = plan_of(result)
    assert planned is not None
    assert abs(planned / reported - 1) <= 0.10, (planned, reported)


def test_report_of_the_committed_results_prints_every_table() -> None:
    text = report([json.loads(p.read_text()) for p in RESULTS])
    assert "gateway-ab:gateway vs gateway-ab:direct" in text
    assert "gateway-ab-4cpu:gateway vs gateway-ab-4cpu:direct" in text
    assert "| bare | miss |" in text and "| bare-readonly-cache | hit |" in text


def test_the_request_class_figures_the_docs_cite_are_the_committed_run() -> None:
    """docs/performance.md and docs/observability.md, "Request classes" (issue 33)."""
    run = json.loads((REPO / "benchmarks/results/h100-2026-11-26-sessions/sessions-3engines.json").read_text())
    follow_up = {
        route: [round(level["follow_up_ttft_p95_ms"]) for level in run[route]]
        for route in ("affinity", "least_outstanding")
    }
    assert follow_up == {"affinity": [121, 162, 150], "least_outstanding": [284, 335, 453]}
    all_turns = [level["ttft_p95_ms"] for route in ("affinity", "least_outstanding") for level in run[route]]
    assert (round(min(all_turns) / 1000, 2), round(max(all_turns) / 1000, 2)) == (1.26, 3.75)
    assert [level["concurrency"] // run["engines"] for level in run["affinity"]] == [8, 16, 24]


def test_a_start_reads_the_jobs_lora_tuning_and_the_configs_vllm_used(tmp_path: Path) -> None:
    """gpu_startup.py's gateway-make-lora / gateway-made-hit-lora levers: what a start records."""
    from types import SimpleNamespace

    from gpu_startup import read_start

    log = tmp_path / "server.log"
    log.write_text(
        "2026 INFO serving_app.lora_tuning: lora tuning: started, at most 600 s: python -m serving_app.lora_tuning\n"
        "2026 INFO serving_app.lora_tuning: lora tuning: | shrink qkv m=256: default 18.4 us, tuned 14.6 us\n"
        "2026 INFO serving_app.lora_tuning: lora tuning: tuned: NVIDIA_A10G_EXPAND_TRUE.json, "
        "NVIDIA_A10G_SHRINK.json in 212.3 s\n"
        "2026 WARNING serving_app.lora_tuning: lora tuning: failed: the tuner exited with 1: RuntimeError: no GPU; "
        "the compile cache is published without tuned configs\n"
        "(EngineCore pid=7) INFO 11-26 08:00:00 [utils.py:180] Using tuned LoRA kernel configs from "
        "/opt/ml/model/lora-configs/NVIDIA_A10G_SHRINK.json.\n"
    )
    start = read_start(SimpleNamespace(log_path=log, figures={"kv_tokens": 1}))  # type: ignore[arg-type]
    assert start["lora_tuning"] == "tuned: NVIDIA_A10G_EXPAND_TRUE.json, NVIDIA_A10G_SHRINK.json in 212.3 s"
    log.write_text(log.read_text().replace("lora tuning: tuned:", "lora tuning: | tuned:"))
    start = read_start(SimpleNamespace(log_path=log, figures={"kv_tokens": 1}))  # type: ignore[arg-type]
    assert start["lora_tuning"] == "failed: the tuner exited with 1: RuntimeError: no GPU"
    assert start["lora_kernel_configs"] == (
        "tuned LoRA kernel configs from /opt/ml/model/lora-configs/NVIDIA_A10G_SHRINK.json"
    )


def test_the_start_figures_name_the_awq_kernel_of_either_vllm(tmp_path: Path) -> None:
    """The kernel line of vLLM 0.26 (auto_awq.py; benchmarks/results/h200-2026-11-26-defaults,
    capacity-v026-logs.tgz) and of 0.22 (awq_marlin.py), as each logs it."""
    from servers_under_test import read_figures

    log = tmp_path / "engine.log"
    for line, kernel in (
        (
            "(EngineCore pid=2786) INFO 11-26 08:00:08 [auto_awq.py:473] Using MacheteLinearKernel for "
            "AutoAWQMarlinLinearMethod",
            "Using MacheteLinearKernel for AutoAWQMarlinLinearMethod",
        ),
        (
            "INFO [awq_marlin.py:120] Using MarlinLinearKernel for AWQMarlinLinearMethod",
            "Using MarlinLinearKernel for AWQMarlinLinearMethod",
        ),
    ):
        log.write_text(f"INFO GPU KV cache size: 113,296 tokens\n{line}\n")
        assert read_figures(log) == {"kv_cache_tokens": 113296.0, "kernel": kernel}
