"""The default config is a fleet that holds its own SLOs, the one the planner recommends (issues 33, 34, 45).

The TTFT alarms and rollback guardrails read ``slo``; a default fleet that cannot hold them would page
all day and roll back every update. These tests tie the defaults to ``make plan``'s answer, so a
change to the traffic, the prices or the engine model that moves the answer fails here until the
defaults (or the reasons) follow.
"""

import pytest

from app_config import AppConfig, ConfigError, load_config
from planning import memory_report
from planning.fleet_planner import recommend, scheduled_floors
from planning.make_plan import make_plan
from planning.planner import Planner
from planning.slo_holds import class_holds
from serving_contract.request_classes import RequestClass
from tests.synth_helpers import SEEDS_G5, cdk_json_context


def test_the_default_fleet_is_the_planners_recommendation() -> None:
    config = AppConfig()
    best = recommend(config, Planner.of(config))
    assert best is not None
    assert (config.serving.primary.instance_type, config.throughput.routing) == (best.instance_type, best.routing)
    assert config.serving.canary.instance_type == config.serving.primary.instance_type  # a comparable canary
    # Its counts are the plan's: the warm floor, and a ceiling above what the week's peak needs three times over.
    assert config.serving.primary.min_capacity == best.warm_floor
    assert config.serving.primary.max_capacity >= 3 * best.count_at_peak


def test_every_variant_holds_both_class_slos_with_the_projections_margin() -> None:
    config = AppConfig()
    holds = class_holds(config, make_plan(config))
    assert holds and all(hold.holds for hold in holds), [hold.line for hold in holds]
    for hold in holds:
        capacity = hold.capacity
        assert capacity.ttft_p95_ms is not None
        assert capacity.ttft_p95_ms * (1 + capacity.margin) <= hold.slo_ms, hold.line


def test_every_scheduled_floor_is_what_the_week_needs() -> None:
    config = AppConfig()
    plan = make_plan(config)
    best = recommend(config, plan.planner)
    assert best is not None
    rows = scheduled_floors(config, plan, best)
    assert rows and all(configured == needed for _, configured, needed in rows), rows


def test_an_override_that_makes_a_guardrail_unholdable_stops_synth() -> None:
    config = load_config({**cdk_json_context(), "serving.primary.instance_type": "ml.g5.xlarge"})
    with pytest.raises(ConfigError) as info:
        make_plan(config)
    message = str(info.value)
    assert message.count("\n") == 0
    lightest = Planner.of(config).throughput("ml.g5.xlarge", RequestClass.COLD).lightest_ttft_p95_ms
    assert message.startswith(
        "config error: slo.cold.ttft_p95_ms = 500 ms: variant primary (ml.g5.xlarge) cannot hold it at any load: "
        f"TTFT p95 {lightest:,.0f} ms at one request a minute (projected, margin "
    )
    assert message.endswith("(slo.require_holdable: a guardrail that always fires is an outage trap)")


def test_the_seeds_g5_fleet_holds_the_cold_slo_it_is_documented_with() -> None:
    config = load_config({**cdk_json_context(), **SEEDS_G5})
    assert all(hold.holds for hold in class_holds(config, make_plan(config)))


def test_a_canary_on_another_gpu_than_the_primary_is_warned() -> None:
    # Issue 40 item 6: -c serving.primary.instance_type=... left the canary on the old type, unnoted.
    config = load_config({**cdk_json_context(), "serving.primary.instance_type": "ml.p5e.48xlarge"})
    report = memory_report.render(memory_report.build(config, make_plan(config)))
    lines = [line for line in report if "WARNING: serving.canary" in line]
    assert lines == [
        "    WARNING: serving.canary.instance_type = ml.g6e.xlarge differs from serving.primary.instance_type = "
        "ml.p5e.48xlarge: the canary's TTFT, errors and guardrails would measure another GPU than the fleet it "
        "stands in for; set both to the same type"
    ]
    default = AppConfig()
    assert not [
        line
        for line in memory_report.render(memory_report.build(default, make_plan(default)))
        if "serving.canary." in line
    ]


def test_both_serving_modes_size_from_the_same_capacity_figure() -> None:
    # Issue 40 item 1: inference_components mode tracked 32 per copy while variants mode derived 1.
    config = load_config({**cdk_json_context(), "serving.mode": "inference_components"})
    capacity = Planner.of(config).throughput(config.serving.primary.instance_type)
    assert make_plan(config).inference_components.scaling.target_value == capacity.concurrency
    assert make_plan(config).scaling.primary.target_tracking.target_value == capacity.concurrency
