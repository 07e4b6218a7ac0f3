"""Template assertions for autoscaling, scheduled actions and deployment guardrails."""

import datetime
import json
from typing import Any

import pytest
from aws_cdk.assertions import Match

from app_config import dated_events
from devtools.fleet_notes import fleet_replacement_notes
from planning import cost_plan
from planning.make_plan import load_plan
from planning.planner import Planner
from planning.weekly_plan import bounds_at, effective_bounds
from serving_contract import alarms
from serving_contract.metrics import EngineMetric
from tests.conftest import SCALING_OVERRIDE
from tests.synth_helpers import Synth, synthesize

ENDPOINT = "mangaassist-vllm-prod"

BUSY_WEEK = {"traffic.peak_requests_per_minute": "1500"}
"""A busier week than the default traffic's. At the default peak the plan derives every weekly floor at
the primary's ``min_capacity``; at this one it derives release floors above business hours' (make
plan), so the tests of what an earlier lift or a higher floor does still see floors that differ."""


def _targets(synth: Synth) -> dict[str, dict[str, Any]]:
    found = synth.template("Serving").find_resources("AWS::ApplicationAutoScaling::ScalableTarget")
    return {t["Properties"]["ResourceId"]: dict(t) for t in found.values()}


def _logical_id(synth: Synth, resource_id: str) -> str:
    found = synth.template("Serving").find_resources(
        "AWS::ApplicationAutoScaling::ScalableTarget", {"Properties": {"ResourceId": resource_id}}
    )
    assert len(found) == 1
    return next(iter(found))


def _policies(synth: Synth, resource_id: str, policy_type: str) -> list[dict[str, Any]]:
    target = _logical_id(synth, resource_id)
    found = synth.template("Serving").find_resources(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {"Properties": {"PolicyType": policy_type, "ScalingTargetId": {"Ref": target}}},
    )
    return [p["Properties"] for p in found.values()]


def test_each_variant_has_a_scalable_target_with_its_hard_bounds(default_synth: Synth) -> None:
    targets = _targets(default_synth)
    serving = default_synth.config.serving
    assert set(targets) == {f"endpoint/{ENDPOINT}/variant/primary", f"endpoint/{ENDPOINT}/variant/canary"}
    for variant in serving.variants:
        target = targets[f"endpoint/{ENDPOINT}/variant/{variant.variant_name}"]
        props = target["Properties"]
        assert props["ServiceNamespace"] == "sagemaker"
        assert props["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
        assert (props["MinCapacity"], props["MaxCapacity"]) == (variant.min_capacity, variant.max_capacity)
        # The variant exists only after the endpoint does.
        endpoint_id = next(iter(default_synth.template("Serving").find_resources("AWS::SageMaker::Endpoint")))
        assert endpoint_id in target["DependsOn"]
        # Application Auto Scaling's service-linked role for SageMaker, not a role of our own.
        assert "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint" in str(props["RoleARN"])
    # No scaling role of our own: the stack's roles are the execution role, the two Lambda
    # roles of the scheduled-capacity keeper, the one of CDK's LogRetention provider, the two of the
    # log-group-key provider (the endpoint log group's KMS key), the compile cache's
    # (serving.compile_cache): its processing job's and four Lambda roles, the two Lambda
    # roles of the deploy's approval check (release.deploy_approval) and the capacity job's.
    principals = sorted(
        (
            role_id.startswith(("CompileCache", "ApprovedPins", "CapacityJob")),
            role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]["Service"],
        )
        for role_id, role in default_synth.template("Serving").find_resources("AWS::IAM::Role").items()
    )
    assert [service for cache, service in principals if not cache] == ["lambda.amazonaws.com"] * 5 + [
        "sagemaker.amazonaws.com"
    ]


def _tracking(synth: Synth, variant: str) -> dict[str, dict[str, Any]]:
    """The variant's target-tracking policies by metric: ``concurrency`` (predefined) and ``kv_cache`` (customized)."""
    policies = _policies(synth, f"endpoint/{ENDPOINT}/variant/{variant}", "TargetTrackingScaling")
    by_metric = {
        "kv_cache" if "CustomizedMetricSpecification" in config else "concurrency": config
        for config in (p["TargetTrackingScalingPolicyConfiguration"] for p in policies)
    }
    assert len(by_metric) == len(policies) == 2
    return by_metric


def test_target_tracking_holds_the_capacity_at_the_slo_and_waits_out_a_launch(
    default_synth: Synth,
) -> None:
    planner = Planner.of(default_synth.config)
    for variant in default_synth.plan.variants():
        tracking = variant.scaling.target_tracking
        # The variant's instance type's concurrency at the TTFT SLOs (planning/throughput_at_slo.py), not what
        # the KV cache fits.
        assert tracking.target_value == planner.throughput(variant.serving.instance_type).concurrency
        assert _tracking(default_synth, variant.name)["concurrency"] == {
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"
            },
            "TargetValue": tracking.target_value,
            # A new instance serves ~11 min after a scale-out (LAUNCH_TIME_S): no compounding meanwhile.
            "ScaleOutCooldown": 660,
            "ScaleInCooldown": 600,
            # Scale-out only: a proportional scale-in from a quiet fleet lands past the rate each instance
            # holds; the low-load step removes one instance at a time instead (docs/scaling.md).
            "DisableScaleIn": True,
        }


def test_kv_cache_usage_tracking_scales_out_before_the_cliff(default_synth: Synth) -> None:
    """Issue 45 item 5: TTFT turns only after the prefix-cache cliff, so a second target-tracking policy
    scales out on the container's KV-cache usage, the leading signal, and never scales in."""
    config = default_synth.config
    for variant in default_synth.plan.variants():
        kv_cache = variant.scaling.kv_cache_tracking
        assert _tracking(default_synth, variant.name)["kv_cache"] == {
            "CustomizedMetricSpecification": {
                "Namespace": config.observability.metrics_namespace,
                "MetricName": EngineMetric.KV_CACHE_USAGE.value,
                "Dimensions": [
                    {"Name": "EndpointName", "Value": ENDPOINT},
                    {"Name": "VariantName", "Value": variant.name},
                ],
                "Statistic": "Average",
            },
            # The KV cache's share in use at the rate the instance type is sized for (planning/resolved_plan.py).
            "TargetValue": kv_cache.target_value,
            "ScaleOutCooldown": kv_cache.scale_out_cooldown_s,
            # Concurrency tracking and the low-load step decide scale-in: this policy never holds a quiet fleet up.
            "DisableScaleIn": True,
        }
        # It acts before the KV-cache pressure alarm would warn.
        assert 0 < kv_cache.target_value < config.monitoring.kv_cache_pressure.threshold


def test_step_scaling_on_queue_depth_with_the_seed_steps(default_synth: Synth) -> None:
    policies = _policies(default_synth, f"endpoint/{ENDPOINT}/variant/primary", "StepScaling")
    by_cooldown = {
        p["StepScalingPolicyConfiguration"]["Cooldown"]: p["StepScalingPolicyConfiguration"] for p in policies
    }
    scale_out, scale_in = by_cooldown[660], by_cooldown[600]
    # Alarm at 50 queued requests; steps 50-100 +2, 100-200 +4, 200+ +8 as offsets from 50.
    assert scale_out["StepAdjustments"] == [
        {"MetricIntervalLowerBound": 0, "MetricIntervalUpperBound": 50, "ScalingAdjustment": 2},
        {"MetricIntervalLowerBound": 50, "MetricIntervalUpperBound": 150, "ScalingAdjustment": 4},
        {"MetricIntervalLowerBound": 150, "ScalingAdjustment": 8},
    ]
    assert scale_out["AdjustmentType"] == "ChangeInCapacity"
    assert scale_in["StepAdjustments"] == [{"MetricIntervalUpperBound": 0, "ScalingAdjustment": -1}]


def test_queue_depth_alarms_drive_the_step_policies(default_synth: Synth) -> None:
    template = default_synth.template("Serving")
    dimensions = [{"Name": "EndpointName", "Value": ENDPOINT}, {"Name": "VariantName", "Value": "primary"}]
    common = {
        "Namespace": default_synth.config.observability.metrics_namespace,
        "MetricName": EngineMetric.QUEUE_DEPTH.value,
        "Dimensions": dimensions,
        "Statistic": "Average",
        "Period": 60,
        "TreatMissingData": "notBreaching",
    }
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            **common,
            "Threshold": 50,
            "EvaluationPeriods": 1,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "AlarmActions": [{"Ref": Match.string_like_regexp("PrimaryScalingQueueDepthScaleOut")}],
        },
    )
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            **common,
            # Low load, not a short queue: a healthy vLLM keeps the queue near 0 under moderate load.
            "MetricName": EngineMetric.RUNNING_REQUESTS.value,
            "Statistic": "Average",
            # A quarter of the concurrency target the variant tracks (issue 37 item 3).
            "Threshold": default_synth.plan.scaling.primary.target_tracking.target_value / 4,
            "EvaluationPeriods": 5,
            "Period": 60,
            "ComparisonOperator": "LessThanThreshold",
            "TreatMissingData": "notBreaching",
            "AlarmActions": [{"Ref": Match.string_like_regexp("PrimaryScalingLowLoadScaleIn")}],
        },
    )
    # One scale-out and one scale-in alarm per variant; the canary rollback alarms belong to the observability stack.
    queue_depth_alarms = template.find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"MetricName": EngineMetric.QUEUE_DEPTH.value}}
    )
    assert len(queue_depth_alarms) == 2
    low_load_alarms = template.find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"MetricName": EngineMetric.RUNNING_REQUESTS.value}}
    )
    assert len(low_load_alarms) == 2
    # No queue-depth alarm scales in.
    for alarm in queue_depth_alarms.values():
        assert alarm["Properties"]["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_every_scheduled_action_is_in_the_template_with_its_timezone(default_synth: Synth) -> None:
    target = _targets(default_synth)[f"endpoint/{ENDPOINT}/variant/primary"]["Properties"]
    actions = {a["ScheduledActionName"]: a for a in target["ScheduledActions"]}
    # The floors are the plan's (planning/resolved_plan.py, tests/unit/config/test_scaling_config.py); the times
    # the seeds'.
    floor = {a.name: a.min_capacity for a in default_synth.plan.scaling.primary.resolved_schedule}
    # Every ceiling is serving.primary.max_capacity (issue 21, finding 3): an unforeseen surge at
    # night can still scale to the hard max.
    ceiling = default_synth.config.serving.primary.max_capacity
    expected = {
        "off-peak": ("cron(0 1 * * ? *)", floor["off-peak"], ceiling),
        "business-hours": ("cron(0 8 * * ? *)", floor["business-hours"], ceiling),
        "jp-evening-peak": ("cron(45 17 ? * TUE,THU,SAT,SUN *)", floor["jp-evening-peak"], ceiling),
        "jp-evening-end": ("cron(0 23 * * ? *)", floor["jp-evening-end"], ceiling),
        "shonen-jump-prescale": ("cron(0 16 ? * MON *)", floor["shonen-jump-prescale"], ceiling),
        "shonen-magazine-prescale": ("cron(0 16 ? * WED *)", floor["shonen-magazine-prescale"], ceiling),
        "friday-release-prescale": ("cron(0 16 ? * FRI *)", floor["friday-release-prescale"], ceiling),
    }
    assert set(actions) == set(expected)
    for name, (schedule, low, high) in expected.items():
        assert actions[name] == {
            "ScheduledActionName": name,
            "Schedule": schedule,
            "Timezone": "Asia/Tokyo",
            "ScalableTargetAction": {"MinCapacity": low, "MaxCapacity": high},
        }
    canary = _targets(default_synth)[f"endpoint/{ENDPOINT}/variant/canary"]["Properties"]
    assert "ScheduledActions" not in canary


def test_endpoint_rolls_back_on_every_variants_alarms_by_name(default_synth: Synth) -> None:
    """Issue 21, finding 2: a blue/green update replaces both variants, so a primary-only image or
    engine change must roll back on the primary's alarms too, not only the canary's."""
    default_synth.template("Serving").has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {
            "DeploymentConfig": {
                "BlueGreenUpdatePolicy": {
                    "TrafficRoutingConfiguration": {
                        "Type": "CANARY",
                        "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 10},
                        "WaitIntervalInSeconds": 600,
                    },
                    "TerminationWaitInSeconds": 120,
                    "MaximumExecutionTimeoutInSeconds": 3600,
                },
                "AutoRollbackConfiguration": {
                    "Alarms": [
                        {"AlarmName": name}
                        for variant in ("primary", "canary")
                        for name in alarms.rollback_alarm_names(ENDPOINT, variant)
                    ]
                },
            },
            "RetainDeploymentConfig": False,
        },
    )


def test_single_variant_endpoint_rolls_back_on_the_primary_alarms(vpc_single_variant_synth: Synth) -> None:
    template = vpc_single_variant_synth.template("Serving")
    endpoint_name = vpc_single_variant_synth.config.endpoint_name  # a dev stage: a prebuilt image (issue 53)
    endpoint = next(iter(template.find_resources("AWS::SageMaker::Endpoint").values()))["Properties"]
    assert endpoint["DeploymentConfig"]["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]["Type"] == "CANARY"
    assert endpoint["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"] == [
        {"AlarmName": f"{endpoint_name}-primary-5xx-rate"},
        {"AlarmName": f"{endpoint_name}-primary-ttft-p95-cold"},
        {"AlarmName": f"{endpoint_name}-primary-ttft-p95-warm"},
        {"AlarmName": f"{endpoint_name}-primary-model-latency-p99"},
        {"AlarmName": f"{endpoint_name}-primary-4xx-rate"},
    ]
    assert list(_targets(vpc_single_variant_synth)) == [f"endpoint/{endpoint_name}/variant/primary"]


def test_dev_stage_scales_without_a_schedule(dev_synth: Synth) -> None:
    targets = _targets(dev_synth)
    primary = targets["endpoint/mangaassist-vllm-dev/variant/primary"]["Properties"]
    assert (primary["MinCapacity"], primary["MaxCapacity"]) == (1, 2)
    assert "ScheduledActions" not in primary


def test_one_scaling_override_reaches_the_template_and_the_plan(scaling_override_synth: Synth) -> None:
    ((key, value),) = SCALING_OVERRIDE.items()
    assert key == "scaling.primary.release_lead_time_min" and value == "180"
    target = _targets(scaling_override_synth)[f"endpoint/{ENDPOINT}/variant/primary"]["Properties"]
    schedules = {a["ScheduledActionName"]: a["Schedule"] for a in target["ScheduledActions"]}
    # 18:00 release - 3 h lead = 15:00.
    assert schedules["shonen-jump-prescale"] == "cron(0 15 ? * MON *)"
    assert schedules["friday-release-prescale"] == "cron(0 15 ? * FRI *)"

    # On a week whose release floors are above business hours' (BUSY_WEEK): at the default traffic every
    # floor is the primary's min_capacity, and an earlier lift would cost nothing.
    busy = [f"{k}={v}" for k, v in BUSY_WEEK.items()]
    base_config, base_plan = load_plan(busy)
    baseline = cost_plan.plan(base_config, base_plan)[0]
    changed = cost_plan.plan(*load_plan([*busy, f"{key}={value}"]))[0]
    # One more hour at each event's floor instead of business hours', on MON, WED and FRI.
    floor = {a.name: a.min_capacity for a in base_plan.scaling.primary.resolved_schedule}
    releases = ("shonen-jump-prescale", "shonen-magazine-prescale", "friday-release-prescale")
    extra = sum(floor[name] - floor["business-hours"] for name in releases)
    assert extra > 0
    assert changed.floor_hours_per_week - baseline.floor_hours_per_week == extra * 1
    ceiling = base_config.serving.primary.max_capacity
    assert changed.hourly[0][15] == (floor["shonen-jump-prescale"], ceiling)
    assert baseline.hourly[0][15] == (floor["business-hours"], ceiling)


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _diff(a.get(k), b.get(k), f"{path}/{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _diff(x, y, f"{path}/{i}")]
    return [] if a == b else [path]


def test_a_deploy_keeps_the_live_weights_and_instance_counts(default_synth: Synth) -> None:
    # promote/rollback own DesiredWeight as Application Auto Scaling owns DesiredInstanceCount:
    # no retained property is excluded, so a deploy never moves either back to the config's.
    endpoint = next(iter(default_synth.template("Serving").find_resources("AWS::SageMaker::Endpoint").values()))
    assert endpoint["Properties"]["RetainAllVariantProperties"] is True
    assert "ExcludeRetainedVariantProperties" not in endpoint["Properties"]


def test_a_weight_change_in_config_only_touches_the_creation_weights(
    default_synth: Synth, weight_change_synth: Synth
) -> None:
    before = default_synth.template_json("Serving")
    after = weight_change_synth.template_json("Serving")
    changed = _diff(before["Resources"], after["Resources"])
    config_id = next(iter(default_synth.template("Serving").find_resources("AWS::SageMaker::EndpointConfig")))
    assert changed == [
        f"/{config_id}/Properties/ProductionVariants/0/InitialVariantWeight",
        f"/{config_id}/Properties/ProductionVariants/1/InitialVariantWeight",
    ]
    # ...of a new endpoint config (a new fleet on UpdateEndpoint), which `make diff` points out.
    assert fleet_replacement_notes(before, after) == [
        f"{config_id}: only InitialVariantWeight changed. The endpoint keeps its live weights (DesiredWeight is "
        "retained), so this deploy replaces every instance and moves no traffic; shift traffic with "
        "`ops promote`/`ops rollback` and revert the weight change."
    ]


def _scheduled_capacity(synth: Synth) -> dict[str, dict[str, Any]]:
    template = synth.template_json("Serving")
    return {k: v for k, v in template["Resources"].items() if v["Type"] == "Custom::ScheduledCapacity"}


def test_a_deploy_re_registers_the_scheduled_bounds_after_the_target(
    default_synth: Synth, scaling_override_synth: Synth
) -> None:
    # A scalable target's create/update registers its hard bounds (serving.primary's min..max) and would
    # drop a release floor set by a scheduled action: Custom::ScheduledCapacity puts the bounds in force back.
    resources = _scheduled_capacity(default_synth)
    (primary,) = resources.values()  # the canary has no schedule
    props = primary["Properties"]
    assert props["ResourceId"] == f"endpoint/{ENDPOINT}/variant/primary"
    assert props["Timezone"] == "Asia/Tokyo"
    serving = default_synth.config.serving.primary
    assert props["HardBounds"] == [serving.min_capacity, serving.max_capacity]
    timeline = effective_bounds(
        default_synth.plan.scaling.primary.resolved_schedule, serving.min_capacity, serving.max_capacity
    )
    assert props["Timeline"] == [
        {"Start": b.start, "MinCapacity": b.min_capacity, "MaxCapacity": b.max_capacity, "SetBy": b.set_by}
        for b in timeline
    ]
    target_id = _logical_id(default_synth, f"endpoint/{ENDPOINT}/variant/primary")
    assert target_id in primary["DependsOn"]
    # A schedule change updates the target, and changes the resource too, so the handler runs again.
    changed = _scheduled_capacity(scaling_override_synth)
    (changed_props,) = (r["Properties"] for r in changed.values())
    assert changed_props["Timeline"] != props["Timeline"]


def test_raised_max_capacity_reaches_every_scheduled_action(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Issue 21, finding 3: the README's -c serving.primary.max_capacity=24 used to stay capped at the
    old hard max by every scheduled action and by Custom::ScheduledCapacity after each deploy."""
    synth = synthesize(tmp_path_factory.mktemp("cdk-out-max-24"), {"serving.primary.max_capacity": "24"})
    target = _targets(synth)[f"endpoint/{ENDPOINT}/variant/primary"]["Properties"]
    assert target["MaxCapacity"] == 24
    assert {a["ScalableTargetAction"]["MaxCapacity"] for a in target["ScheduledActions"]} == {24}
    (keeper,) = _scheduled_capacity(synth).values()
    assert {entry["MaxCapacity"] for entry in keeper["Properties"]["Timeline"]} == {24}


def test_a_dated_event_becomes_one_off_scheduled_actions_in_the_timezone(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40 item 8: seed 001's April 1 season as at(...) actions on the primary's target, its floor
    re-applied by Custom::ScheduledCapacity when a deploy runs during it."""
    monkeypatch.setattr(dated_events, "clock", lambda _timezone: datetime.datetime(2027, 1, 1))
    event = {"name": "spring-anime", "date": "2027-04-01", "demand_multiplier": 2.5}
    # A busier week (BUSY_WEEK) on a fleet allowed 20 instances: the event's derived floor is above every
    # weekly floor, so the weekly actions inside its window would lower it (at the default traffic all are 2).
    synth = synthesize(
        tmp_path_factory.mktemp("cdk-out-dated-event"),
        {**BUSY_WEEK, "serving.primary.max_capacity": "20", "scaling.primary.dated_events": json.dumps([event])},
    )
    scaling, ceiling = synth.plan.scaling.primary, synth.config.serving.primary.max_capacity
    floor = scaling.dated_events[0].min_capacity
    assert floor is not None and floor > max(a.min_capacity for a in scaling.resolved_schedule)
    target = _targets(synth)[f"endpoint/{ENDPOINT}/variant/primary"]["Properties"]
    actions = {a["ScheduledActionName"]: a for a in target["ScheduledActions"]}
    assert actions["spring-anime-lift"] == {
        "ScheduledActionName": "spring-anime-lift",
        "Schedule": "at(2027-03-31T22:00:00)",
        "Timezone": "Asia/Tokyo",
        "ScalableTargetAction": {"MinCapacity": floor, "MaxCapacity": ceiling},
    }
    assert actions["spring-anime-end"]["Schedule"] == "at(2027-04-02T00:00:00)"
    # At the end, the weekly floor in force then (Friday 00:00 JST) returns.
    weekly = effective_bounds(scaling.resolved_schedule, synth.config.serving.primary.min_capacity, ceiling)
    in_force = bounds_at(weekly, 4 * 24 * 60)
    assert actions["spring-anime-end"]["ScalableTargetAction"] == {
        "MinCapacity": in_force.min_capacity,
        "MaxCapacity": in_force.max_capacity,
    }
    assert actions["spring-anime-hold-3"]["Schedule"] == "at(2027-04-01T08:00:00)"  # business-hours' minute
    assert len([name for name in actions if name.startswith("spring-anime-hold-")]) == 5
    # The weekly actions that would lower the floor inside the window pause around it (UTC times).
    assert actions["business-hours"]["EndTime"] == "2027-03-31T13:00:00Z"
    assert "StartTime" not in actions["business-hours"]
    assert actions["business-hours-after-spring-anime"]["StartTime"] == "2027-04-01T15:00:00Z"
    assert actions["business-hours-after-spring-anime"]["Schedule"] == actions["business-hours"]["Schedule"]
    assert "EndTime" not in actions["shonen-jump-prescale"]
    assert len(actions) == 7 + 4 + 7  # the weekly seven, four resumed after the event, the event's seven
    (keeper,) = _scheduled_capacity(synth).values()
    assert keeper["Properties"]["DatedEvents"] == [
        {"Name": "spring-anime", "Lift": "2027-03-31T22:00", "End": "2027-04-02T00:00", "MinCapacity": floor}
    ]
