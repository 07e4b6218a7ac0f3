"""benchmarks/gpu_serving.py --smoke: the GPU benchmark's own code on vLLM's CPU build, so it
cannot rot between GPU runs (issue 14), and the start-up harness (gpu_startup.py) with the
container's compile-cache path (issue 25). Seconds of load, four engine starts in all."""

from __future__ import annotations

import json

import pytest

from tests.engine.conftest import SmokeRun

pytestmark = pytest.mark.real_engine


def test_smoke_run_measures_the_gateway_against_its_own_vllm_side_by_side(serving_smoke_run: SmokeRun) -> None:
    """``--setups gateway-ab``, the side-by-side setup the relay figures come from: one engine
    start, the load alternating between vLLM's own route and the gateway's ``/invocations``
    (one engine instead of the default bare-then-gateway pair keeps CI's time down). Run from
    collection on (tests/engine/conftest.py)."""
    assert serving_smoke_run.returncode == 0, serving_smoke_run.log[-6000:]
    run = json.loads((serving_smoke_run.out_dir / "gateway-ab.json").read_text())
    assert run["ready_s"] > 0
    assert run["vllm"]["kv_cache_tokens"] > 0  # parsed from vLLM's own start-up log
    levels = {(lv["target"], lv["concurrency"], lv["stream"]): lv for lv in run["levels"]}
    assert set(levels) == {(t, c, s) for t in ("direct", "gateway") for c in (1, 4) for s in (False, True)}
    for level in levels.values():
        assert level["errors"] == 0, level
        assert level["requests"] >= 4 and level["requests_per_s"] > 0
        # Every request got the smoke profile's 16 output tokens: ignore_eos reached the engine.
        assert (level["output_tokens_min"], level["output_tokens_max"]) == (16, 16), level
    assert all(levels[(t, c, True)]["ttft_p50_ms"] > 0 for t in ("direct", "gateway") for c in (1, 4))
    # The gateway also reports its own start-up: vLLM healthy, then warmed through every model name.
    assert run["gateway"]["ready_s"] >= run["gateway"]["engine_healthy_s"]
    assert "gateway-ab:gateway vs gateway-ab:direct: throughput ratio and TTFT p50 difference" in serving_smoke_run.log


def test_capacity_smoke_run_measures_both_request_mixes(capacity_smoke_run: SmokeRun) -> None:
    """benchmarks/gpu_capacity.py capacity --smoke: the harness behind the fleet's capacity figure
    (docs/performance.md) on vLLM's CPU build, so it cannot rot between GPU runs. Run from collection on."""
    assert capacity_smoke_run.returncode == 0, capacity_smoke_run.log[-6000:]
    run = json.loads((capacity_smoke_run.out_dir / "capacity.json").read_text())
    assert run["vllm"]["kv_cache_tokens"] > 0
    for mode in ("fresh", "conversations"):
        assert run[mode], mode
        for level in run[mode]:
            assert level["errors"] == 0, (mode, level)
            assert level["requests"] > 0 and level["ttft_p95_ms"] >= level["ttft_p50_ms"] > 0
            assert level["prefix_cache_hit_rate"] is not None
    # Conversations reuse their own earlier turns: more of each prompt comes from the prefix cache.
    fresh = max(lv["prefix_cache_hit_rate"] for lv in run["fresh"])
    conversations = max(lv["prefix_cache_hit_rate"] for lv in run["conversations"])
    assert conversations > fresh
    # Every request is classified from the usage the engine reports (the container's argv asks for
    # cached tokens), and the capacity at each class's objective is reported (issue 33).
    for mode in ("fresh", "conversations"):
        for level in run[mode]:
            assert level["cold_requests"] + level["warm_requests"] == level["requests"], (mode, level)
        assert set(run[f"{mode}_at_class_slo"]) == {"cold", "warm"}
    assert sum(lv["warm_requests"] for lv in run["conversations"]) >= sum(lv["warm_requests"] for lv in run["fresh"])


def test_startup_smoke_makes_a_compile_cache_and_starts_from_it_with_a_hit(startup_smoke_run: SmokeRun) -> None:
    """benchmarks/gpu_startup.py startup --smoke with the levers a SageMaker instance takes (issue
    25): the container's ``make-compile-cache`` (the cache-making job's command) on the real CPU
    engine, compiling (not eager), then ``serve`` from that cache alone, read-only, with an empty
    ``VLLM_CACHE_ROOT``. Started at collection (tests/engine/conftest.py)."""
    assert startup_smoke_run.returncode == 0, startup_smoke_run.log[-3000:]
    tmp_path = startup_smoke_run.out_dir
    make, hit = json.loads((tmp_path / "startup.json").read_text())
    assert make["start"]["compile_cache"] == "made" and make["made_s"] > 0, make
    manifest = json.loads((tmp_path / "made-default" / "manifest.json").read_text())
    assert manifest["status"] == "ready" and manifest["files"] > 0
    # The container's verdict: vLLM wrote no file into the copied cache while starting from it (on
    # the GPU vLLM also logs "Directly load the compiled graph"; its CPU build logs no such line).
    assert hit["start"]["compile_cache"] == "hit", hit
    assert hit["load"]["errors"] == 0 and hit["load"]["requests"] > 0
