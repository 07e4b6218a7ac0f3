"""The resolved plan (issue 37): derived values sit in the plan, beside the validated config, which stays as given."""

import dataclasses

import pytest

from app_config import load_config
from planning.make_plan import make_plan
from planning.planner import Planner
from planning.resolved_plan import ResolvedPlan, resolve
from tests.synth_helpers import cdk_json_context

EVENT = "scaling.primary.dated_events=" + '[{"name":"spring","date":"2099-04-01","demand_multiplier":2.5}]'


def test_the_validated_sections_keep_what_was_configured() -> None:
    config = load_config({**cdk_json_context(), "scaling.primary.dated_events": EVENT.split("=", 1)[1]})
    assert config.scaling.primary.target_tracking.concurrent_requests_target is None
    assert config.scaling.primary.step_scaling.scale_in_running_requests is None
    assert config.scaling.primary.kv_cache_tracking.target_percent is None
    assert config.scaling.primary.dated_events[0].min_capacity is None
    assert config.serving.inference_components.scaling.concurrent_requests_per_copy_target is None
    plan = make_plan(config)
    throughput = Planner.of(config).throughput(config.serving.primary.instance_type)
    assert plan.scaling.primary.target_tracking.target_value == throughput.concurrency
    assert plan.scaling.primary.step_scaling.scale_in_threshold == throughput.concurrency / 4
    assert throughput.kv_cache_usage is not None
    assert plan.scaling.primary.kv_cache_tracking.target_percent == min(
        max(-(-throughput.kv_cache_usage * 100 // 1), 1), 100
    )
    assert plan.scaling.primary.dated_events[0].min_capacity is not None
    assert not plan.scaling.primary.floors_unset
    assert plan.inference_components.scaling.target_value >= 1
    assert plan.variant("primary").scaling is plan.scaling.primary


def test_a_set_value_is_the_plan_s_value() -> None:
    config = load_config({**cdk_json_context(), "scaling.primary.target_tracking.concurrent_requests_target": "12"})
    assert make_plan(config).scaling.primary.target_tracking.target_value == 12
    assert make_plan(config).scaling.primary.step_scaling.scale_in_threshold == 3


def test_the_plan_is_frozen_and_the_same_for_the_same_config() -> None:
    config = load_config(cdk_json_context())
    plan = make_plan(config)
    assert plan == make_plan(config)
    resolved = resolve(config, plan.planner, plan.hardware)
    assert isinstance(resolved, ResolvedPlan)
    assert (resolved.scaling, resolved.inference_components) == (plan.scaling, plan.inference_components)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.scaling = config.scaling  # type: ignore[misc]


def test_reading_a_derived_value_from_the_config_says_where_it_is() -> None:
    config = load_config(cdk_json_context())
    with pytest.raises(ValueError) as error:
        _ = config.scaling.primary.target_tracking.target_value
    assert str(error.value) == (
        "concurrent_requests_target is unset: read the derived one from the plan (planning.plan.Plan.scaling, "
        "planning/resolved_plan.py)"
    )
    with pytest.raises(ValueError) as error:
        _ = config.scaling.primary.resolved_schedule
    assert str(error.value) == (
        "a scheduled min_capacity is unset: read the derived one from the plan (planning.plan.Plan.scaling)"
    )
