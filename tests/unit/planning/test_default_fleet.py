"""The default config is a fleet that holds its own SLOs, the one the planner recommends (issues 33, 34).

The TTFT alarms and rollback guardrails read ``slo``; a default fleet that cannot hold them would page
all day and roll back every update. These tests tie the defaults to ``make plan``'s answer, so a
change to the traffic, the prices or the projection that moves the answer fails here until the
defaults (or the reasons) follow.
"""

import pytest

from app_config import AppConfig, ConfigError, load_config
from app_config.planning import memory_report
from app_config.planning.slo_holds import class_holds
from app_config.planning.throughput_at_slo import throughput_at_slo
from devtools.fleet_planner import cheapest, plan_fleets, scheduled_floors
from tests.synth_helpers import SEEDS_G5, cdk_json_context


def _recommended(config: AppConfig):
    best = cheapest(plan_fleets(config, config.slo.cold.ttft_p95_ms, config.slo.warm.ttft_p95_ms))
    assert best is not None
    return best


def test_the_default_fleet_is_the_planners_recommendation() -> None:
    config = AppConfig()
    best = _recommended(config)
    assert (config.serving.primary.instance_type, config.capacity.routing) == (best.instance_type, best.routing)
    assert config.serving.canary.instance_type == config.serving.primary.instance_type  # a comparable canary


def test_every_variant_holds_both_class_slos() -> None:
    holds = class_holds(AppConfig())
    assert holds and all(hold.holds for hold in holds), [hold.line for hold in holds]


def test_every_scheduled_floor_is_at_least_what_the_week_needs() -> None:
    config = AppConfig()
    short = [row for row in scheduled_floors(config, _recommended(config)) if row[1] < row[2]]
    assert short == []


def test_an_override_that_makes_a_guardrail_unholdable_stops_synth() -> None:
    with pytest.raises(ConfigError) as info:
        load_config({**cdk_json_context(), "serving.primary.instance_type": "ml.g5.xlarge"})
    message = str(info.value)
    assert message.count("\n") == 0
    projected = throughput_at_slo("ml.g5.xlarge", 500, AppConfig().capacity, curve="fresh").ttft_p95_ms
    assert message.startswith(
        "config error: slo.cold.ttft_p95_ms = 500 ms: variant primary (ml.g5.xlarge) cannot hold it, projected TTFT "
        f"p95 {projected:.0f} ms at 1 concurrent request"
    )
    assert message.endswith("(slo.require_holdable: a guardrail that always fires is an outage trap)")


def test_the_seeds_g5_fleet_holds_the_cold_slo_it_is_documented_with() -> None:
    config = load_config({**cdk_json_context(), **SEEDS_G5})
    assert all(hold.holds for hold in class_holds(config))


def test_a_canary_on_another_gpu_than_the_primary_is_warned() -> None:
    # Issue 40 item 6: -c serving.primary.instance_type=... left the canary on the old type, unnoted.
    config = load_config({**cdk_json_context(), "serving.primary.instance_type": "ml.g6e.xlarge"})
    lines = [line for line in memory_report.render(memory_report.build(config)) if "WARNING: serving.canary" in line]
    assert lines == [
        "    WARNING: serving.canary.instance_type = ml.g6.xlarge differs from serving.primary.instance_type = "
        "ml.g6e.xlarge: the canary's TTFT, errors and guardrails would measure another GPU than the fleet it "
        "stands in for; set both to the same type"
    ]
    assert not [line for line in memory_report.render(memory_report.build(AppConfig())) if "serving.canary." in line]


def test_both_serving_modes_size_from_the_same_capacity_figure() -> None:
    # Issue 40 item 1: inference_components mode tracked 32 per copy while variants mode derived 1.
    config = load_config({**cdk_json_context(), "serving.mode": "inference_components"})
    capacity = config.throughput_of(config.serving.primary.instance_type)
    assert config.plan.inference_components.scaling.target_value == capacity.concurrency
    assert config.plan.scaling.primary.target_tracking.target_value == capacity.concurrency
