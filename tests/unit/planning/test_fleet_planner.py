"""The planner: the cheapest fleet that holds both TTFT classes at the configured week."""

import re

import pytest

from app_config import AppConfig
from devtools import measure_doc
from planning import cost_plan, fleet_planner
from planning.gpu_instances import INSTANCE_GPUS
from planning.make_plan import load_plan
from planning.planner import Planner

MEASURED_G5 = '{"ml.g5.xlarge": {"concurrency": 8, "requests_per_minute": 200, "ttft_p50_ms": 90}}'


def test_a_flat_week_on_a_measured_instance_matches_the_hand_calculation() -> None:
    config, plan = load_plan([f"throughput.measured={MEASURED_G5}"])
    fleet = fleet_planner.size_fleet(
        config, plan.planner, "ml.g5.xlarge", "least_outstanding", [100.0] * 10_080, cold_p95_ms=500, warm_p95_ms=500
    )
    # The measured figure is an arrival rate: 100 req/min on instances that each hold 200 is
    # ceil(100 / 200) = 1 at peak; the warm floor is 2 (seed 001).
    assert (fleet.count_at_peak, fleet.warm_floor, fleet.label) == (1, 2, "measured")
    assert fleet.instance_hours_per_week == pytest.approx(2 * 168)
    assert fleet.usd_per_month == pytest.approx(2 * 730 * 1.4084)
    requests_per_month = 100 * 60 * 730
    assert fleet.usd_per_million_requests == pytest.approx(2 * 730 * 1.4084 / requests_per_month * 1e6)


def test_a_peak_above_one_instance_needs_the_rounded_up_share() -> None:
    config, plan = load_plan([f"throughput.measured={MEASURED_G5}"])
    fleet = fleet_planner.size_fleet(
        config,
        plan.planner,
        "ml.g5.xlarge",
        "prefix_aware",
        [100.0] * 10_079 + [601.0],
        cold_p95_ms=500,
        warm_p95_ms=500,
    )
    assert (fleet.count_at_peak, fleet.warm_floor) == (4, 2)  # ceil(601 / 200)


def test_the_plan_recommends_the_cheapest_holding_fleet_and_says_why_the_others_lose() -> None:
    config, plan = load_plan([])
    fleets = fleet_planner.plan_fleets(config, plan.planner, 500, 500)
    assert {f.instance_type for f in fleets} == set(INSTANCE_GPUS)
    best = fleet_planner.cheapest(fleets)
    assert best is not None and best.holds
    assert all(best.usd_per_month <= f.usd_per_month for f in fleets if f.holds)
    other = next(f for f in fleets if f.holds and f != best)
    assert fleet_planner.loses_because(other, best, 500, 500).startswith(
        f"${other.usd_per_month - best.usd_per_month:,.0f}/month more than {best.instance_type}"
    )
    stuck = next(f for f in fleets if not f.holds)
    assert fleet_planner.loses_because(stuck, best, 500, 500).startswith("cannot hold cold p95 500 / warm p95 500 ms")


def test_recommend_is_the_cheapest_of_the_configured_slos() -> None:
    config, plan = load_plan([])
    best = fleet_planner.cheapest(
        fleet_planner.plan_fleets(config, plan.planner, config.slo.cold.ttft_p95_ms, config.slo.warm.ttft_p95_ms)
    )
    assert fleet_planner.recommend(config, plan.planner) == best


def test_make_plan_prints_a_price_and_a_verdict_for_every_instance_type(capsys: pytest.CaptureFixture[str]) -> None:
    assert cost_plan.main([]) == 0
    out = capsys.readouterr().out
    routing = load_plan([])[0].throughput.routing  # prefix_aware by default, make plan's choice
    verdicts = out[out.index(f"Every instance type, routing {routing} (throughput.routing)") :]
    for instance_type in INSTANCE_GPUS:
        (line,) = [row for row in verdicts.splitlines() if row.startswith(f"  {instance_type} ")]
        assert "  holds; " in line or "  cannot hold; " in line, line
    assert "Recommendation: " in out and "Runners-up and why each loses:" in out
    for cold in ("500", "800", "1,200"):
        assert f"cold p95 {cold:>6} ms: " in out


def test_a_looser_cold_slo_never_costs_more() -> None:
    config, plan = load_plan([])
    costs = []
    for cold in fleet_planner.cold_p95_options(config.slo.cold.ttft_p95_ms):
        fleet = fleet_planner.cheapest(
            fleet_planner.plan_fleets(config, plan.planner, cold, config.slo.warm.ttft_p95_ms)
        )
        assert fleet is not None
        costs.append(fleet.usd_per_month)
    assert costs == sorted(costs, reverse=True)


def test_the_fleet_planner_changes_only_the_slos_and_routing() -> None:
    _, plan = load_plan([])
    sized = fleet_planner.fleet_planner(plan.planner, "least_outstanding", 900, 400)
    assert isinstance(sized, Planner)
    assert (sized.slo.cold.ttft_p95_ms, sized.slo.warm.ttft_p95_ms, sized.throughput_config.routing) == (
        900,
        400,
        "least_outstanding",
    )
    assert (sized.traffic, sized.engine, sized.model) == (plan.planner.traffic, plan.planner.engine, plan.planner.model)


def test_the_scheduled_floors_follow_the_week() -> None:
    # Busy enough that the release evening needs more than the warm floor of 2.
    config, plan = load_plan(["traffic.peak_requests_per_minute=3000"])
    best = fleet_planner.cheapest(fleet_planner.plan_fleets(config, plan.planner, 500, 500))
    assert best is not None
    floors = fleet_planner.scheduled_floors(config, plan, best)
    release = [needed for when, _, needed in floors if "shonen-jump-prescale" in when]
    off_peak = [needed for when, _, needed in floors if "off-peak" in when]
    assert release and off_peak and min(release) > max(off_peak)  # the release evening needs more


def test_a_fleet_above_the_hard_max_says_so() -> None:
    config, plan = load_plan(["traffic.peak_requests_per_minute=8000"])
    text = fleet_planner.format_planner(config, plan, 500, 500)
    assert "is above serving.primary.max_capacity" in text and ": raise it" in text
    config, plan = load_plan([])
    assert "NOTE" not in fleet_planner.format_planner(config, plan, 500, 500)


def test_every_row_of_make_plan_says_where_its_figure_comes_from(capsys: pytest.CaptureFixture[str]) -> None:
    assert cost_plan.main([]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("  ml.")]
    assert rows
    source = re.compile(
        r"(; |\d  )(projected from the H200 runs to .+ \(held-out error \d+%.*\)"
        r"|model fitted on this GPU's open-loop runs .+)$"
    )
    for row in rows:
        assert source.search(row), row
    assert "  Measure it before you buy: python -m ops throughput measure --instance-type " in out


def test_a_measured_curve_changes_the_recommendation_and_its_row_says_measured() -> None:
    before = fleet_planner.recommend(*_config_and_planner([]))
    after = fleet_planner.recommend(*_config_and_planner([measure_doc.planted_override()]))
    assert before is not None and after is not None
    # The model projects the L4 cannot hold the 500 ms cold SLO; the planted curve says it holds 300 req/min.
    assert (before.instance_type, after.instance_type) == (
        load_plan([])[0].serving.primary.instance_type,
        "ml.g6.xlarge",
    )
    assert after.usd_per_month < before.usd_per_month
    assert (after.label, after.requests_per_minute) == ("measured", 300)
    config, plan = load_plan([measure_doc.planted_override()])
    text = fleet_planner.format_planner(config, plan, 500, 500)
    row = next(line for line in text.splitlines() if line.startswith("  ml.g6.xlarge "))
    assert row.endswith("measured 2026-11-27 (planted-example-not-a-measurement)"), row
    assert "Measure it before you buy" not in text  # the recommendation rests on a measurement


def _config_and_planner(overrides: list[str]) -> tuple[AppConfig, Planner]:
    config, plan = load_plan(overrides)
    return config, plan.planner


def test_the_planner_weighs_only_instance_types_with_the_gpus_one_engine_needs() -> None:
    config, plan = load_plan(
        [
            "engine.tensor_parallel_size=2",
            "serving.primary.instance_type=ml.g6e.12xlarge",
            "serving.canary.instance_type=ml.g6e.12xlarge",
        ]
    )
    slo = config.slo
    fleets = fleet_planner.plan_fleets(config, plan.planner, slo.cold.ttft_p95_ms, slo.warm.ttft_p95_ms)
    assert fleets and {f.instance_type for f in fleets} == {
        name for name, spec in INSTANCE_GPUS.items() if spec.count >= 2
    }
