"""The resolved plan (issue 37): derived values sit beside the validated config, which stays as given."""

import dataclasses

import pytest

from app_config import load_config
from app_config.planning.resolved_plan import ResolvedPlan, resolve
from tests.synth_helpers import cdk_json_context

EVENT = "scaling.primary.dated_events=" + '[{"name":"spring","date":"2099-04-01","demand_multiplier":2.5}]'


def test_the_validated_sections_keep_what_was_configured() -> None:
    config = load_config({**cdk_json_context(), "scaling.primary.dated_events": EVENT.split("=", 1)[1]})
    assert config.scaling.primary.target_tracking.concurrent_requests_target is None
    assert config.scaling.primary.step_scaling.scale_in_running_requests is None
    assert config.scaling.primary.dated_events[0].min_capacity is None
    assert config.serving.inference_components.scaling.concurrent_requests_per_copy_target is None
    plan = config.plan
    concurrency = config.throughput_of(config.serving.primary.instance_type).concurrency
    assert plan.scaling.primary.target_tracking.target_value == concurrency
    assert plan.scaling.primary.step_scaling.scale_in_threshold == concurrency / 4
    assert plan.scaling.primary.dated_events[0].min_capacity is not None
    assert plan.inference_components.scaling.target_value >= 1
    assert config.variant("primary").scaling is plan.scaling.primary


def test_a_set_value_is_the_plan_s_value() -> None:
    config = load_config({**cdk_json_context(), "scaling.primary.target_tracking.concurrent_requests_target": "12"})
    assert config.plan.scaling.primary.target_tracking.target_value == 12
    assert config.plan.scaling.primary.step_scaling.scale_in_threshold == 3


def test_the_plan_is_frozen_and_computed_once() -> None:
    config = load_config(cdk_json_context())
    assert config.plan is config.plan
    assert config.plan == resolve(config)
    assert isinstance(config.plan, ResolvedPlan)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.plan.scaling = config.scaling  # type: ignore[misc]


def test_reading_a_derived_value_from_the_config_says_where_it_is() -> None:
    config = load_config(cdk_json_context())
    with pytest.raises(ValueError, match=r"^concurrent_requests_target is unset: read the derived one from AppConfig"):
        _ = config.scaling.primary.target_tracking.target_value
