"""The scaling simulation models the prefix-cache cliff (issue 45): a minute whose demand per instance
reaches the engine's cliff counts, and the policies (the KV-cache leading signal among them) keep
the fleet off it through seed 001's release surge (3x in 15 minutes)."""

import pytest

from planning.make_plan import load_plan
from planning.scaling_sim import __main__ as sim
from planning.scaling_sim import engine, report
from planning.scaling_sim.curve import engine_curve
from planning.scaling_sim.fleet import EngineCurve, Fleet, ServiceModel

SEED_001_SCALE = ("-c", "traffic.peak_requests_per_minute=3000", "-c", "serving.primary.max_capacity=40")
"""A week where the fleet has to move: seed 001's release evenings at 3,000 requests a minute at peak."""


def _run(*args: str) -> tuple[report.Summary, list[engine.MinuteRecord]]:
    parsed = sim.parse_args(list(args))
    config, plan = load_plan(parsed.context)
    summary, records, _ = sim.simulate(sim.build_scenario(parsed, config, plan), "test")
    return summary, records


@pytest.fixture(scope="module")
def busy_week() -> tuple[report.Summary, list[engine.MinuteRecord]]:
    return _run(*SEED_001_SCALE)


def test_the_release_evenings_never_reach_the_cliff(
    busy_week: tuple[report.Summary, list[engine.MinuteRecord]],
) -> None:
    summary, records = busy_week
    assert summary.releases and all(w.slo_minutes == 0 for w in summary.releases), summary.releases
    assert summary.cliff_minutes == 0
    # The fleet moved: the derived floors follow the week, and the leading signal read a live KV cache.
    assert summary.peak_in_service > records[0].in_service
    assert max(r.kv_cache_usage for r in records) > 0


def test_the_default_week_never_reaches_the_cliff() -> None:
    summary, _ = _run()
    assert summary.cliff_minutes == 0 and summary.slo_minutes == 0


def test_a_minute_past_the_cliff_is_counted_and_its_ttft_is_a_collapse() -> None:
    parsed = sim.parse_args([])
    config, plan = load_plan(parsed.context)
    curve = engine_curve(config, plan, config.serving.primary.instance_type)
    assert isinstance(curve, EngineCurve)
    fleet = Fleet(ServiceModel(19, 252.0, 150.0, 55.0, curve), launch_delay_min=10, in_service=2)
    under = fleet.serve(1.5 * curve.cliff_per_minute)  # 0.75 of the cliff on each of two instances
    assert not under.past_cliff and under.ttft_ms < curve.collapsed_ttft_ms
    over = fleet.serve(2.5 * curve.cliff_per_minute)
    assert over.past_cliff and over.ttft_ms >= curve.collapsed_ttft_ms
    # KV usage is read off the curve at the minute's rate per instance: more load, more of the cache in use.
    assert over.kv_cache_usage >= under.kv_cache_usage > 0


def test_a_measured_capacity_has_no_curve_to_read() -> None:
    measured = '{"ml.g6e.xlarge": {"concurrency": 10, "requests_per_minute": 200, "ttft_p50_ms": 150}}'
    parsed = sim.parse_args(["-c", f"throughput.measured={measured}"])
    config, plan = load_plan(parsed.context)
    assert engine_curve(config, plan, "ml.g6e.xlarge") is None
