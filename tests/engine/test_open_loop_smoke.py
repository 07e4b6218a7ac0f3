"""benchmarks/open_loop.py ramp --smoke: the open-loop harness behind the engine model (issue 45) on
vLLM's CPU build, so it cannot rot between GPU runs. It drives the shared gateway (no engine start
of its own) as the GPU runs with a gateway do: turns through ``/invocations``, the engine's gauges
read from its own port each second, conversations arriving at random and users pausing, the ramp
starting warm (conversations already under way). The result is what planning/engine_fit.py reads."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cli_support.open_loop import OpenLoopRun, summarise_step
from tests.engine.real_engine import REPO, SHIM, VLLM_PYTHON, RealGateway

pytestmark = pytest.mark.real_engine


def test_a_smoke_ramp_measures_each_class_and_the_engines_gauges(shared_gateway: RealGateway, tmp_path: Path) -> None:
    result = subprocess.run(
        [
            str(VLLM_PYTHON),
            str(REPO / "benchmarks" / "open_loop.py"),
            "ramp",
            "--smoke",
            "--base-url",
            shared_gateway.url,
            "--invoke-path",
            "/invocations",
            "--metrics-url",
            shared_gateway.engine_url + "/metrics",
            "--warm-start",
            "--out-dir",
            str(tmp_path),
            "--name",
            "smoke",
        ],
        env={**os.environ, "PYTHONPATH": str(SHIM)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    data = json.loads((tmp_path / "smoke.json").read_text())
    assert data["kind"] == "open_loop" and data["steps_run"] == 2 and data["warm_start"]
    run = OpenLoopRun.from_json(data)
    answered = [r for r in run.records if r.ok]
    # Warm start: conversations under way from the first second, each resumed one's first turn
    # (its history never sent, so nothing cached) sent but measured in no step.
    resumed = [
        r
        for r in run.records
        if r.turn > 0 and not any(o.conversation == r.conversation and o.turn < r.turn for o in run.records)
    ]
    assert resumed and all(r.step is None for r in resumed)
    assert answered and all(r.error is None for r in run.records if r.latency_s is not None)
    # Conversations carry their history: a follow-up's prompt extends its first turn's, and finds it cached.
    follow_ups = [r for r in answered if r.turn > 0]
    assert follow_ups and max(r.cached_tokens / r.prompt_tokens for r in follow_ups) > 0.5
    # Every answered request is classified, per step, as the gateway classifies it.
    for index in range(run.steps_run):
        summary = summarise_step(run, index, warm_min_cached_fraction=data["warm_min_cached_fraction"])
        assert sum(c.requests for c in summary.classes.values()) == summary.requests - summary.errors
    # The engine's own gauges and counters arrived each second (vLLM 0.26's names).
    figures = [s.figures for s in run.samples]
    assert figures and all({"kv_cache_usage", "running", "prefix_queries", "prefix_hits"} <= f.keys() for f in figures)
    assert figures[-1]["prefix_queries"] > figures[0]["prefix_queries"]
    assert set(data["verdict"]["holds_per_min"]) == {"cold", "warm", "both"}
    # Each step but the last (the ramp ends there and writes the whole result) was also kept as it
    # ended, so a ramp cut off mid-way still leaves its finished steps.
    partial = json.loads((tmp_path / "smoke.partial.json").read_text())
    rates = [s["requests_per_min"] for s in data["summaries"]]
    assert [s["requests_per_min"] for s in partial["summaries"]] == rates[:-1]
