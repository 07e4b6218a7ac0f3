"""The scaling construct and the guardrail builder on their own, for the paths the app's
default config does not take (concurrency tracking that scales in, no KV-cache tracking, LINEAR,
no rollback, no steps)."""

import aws_cdk as cdk
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk.assertions import Template

from app_config.rollout import RolloutConfig
from app_config.scaling_policies import KvCacheTrackingConfig, StepScalingConfig, TargetTrackingConfig
from cdk_constructs.endpoint.deployment_guardrails import deployment_config
from cdk_constructs.scaling.variant_autoscaling import VariantAutoscaling, scaling_resource_id


def _endpoint(rollout: RolloutConfig, alarm_names: tuple[str, ...]) -> Template:
    stack = cdk.Stack(cdk.App(), "Probe")
    sagemaker.CfnEndpoint(
        stack, "Endpoint", endpoint_config_name="cfg", deployment_config=deployment_config(rollout, alarm_names)
    )
    return Template.from_stack(stack)


def test_concurrency_tracking_that_scales_in_without_steps_kv_cache_tracking_or_schedule() -> None:
    stack = cdk.Stack(cdk.App(), "Probe")
    endpoint = sagemaker.CfnEndpoint(stack, "Endpoint", endpoint_config_name="cfg")
    scaling = VariantAutoscaling(
        stack,
        "Scaling",
        endpoint=endpoint,
        endpoint_name="ep",
        variant_name="primary",
        min_capacity=2,
        max_capacity=8,
        target_tracking=TargetTrackingConfig(
            metric="concurrent_requests_high_resolution",
            concurrent_requests_target=24,
            scale_out_cooldown_s=60,
            scale_in_cooldown_s=300,
            disable_scale_in=False,
        ),
        step_scaling=StepScalingConfig(enabled=False),
        kv_cache_tracking=KvCacheTrackingConfig(enabled=False),
        schedule=(),
        timezone="Asia/Tokyo",
        metrics_namespace="Probe/NS",
    )
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": {
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"
                },
                "TargetValue": 24,
                "ScaleOutCooldown": 60,
                "ScaleInCooldown": 300,
                "DisableScaleIn": False,
            },
        },
    )
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalingPolicy", 1)
    template.resource_count_is("AWS::CloudWatch::Alarm", 0)
    assert scaling.scale_out_alarm is None and scaling.scale_in_action is None
    assert scaling.kv_cache_policy is None
    assert scaling_resource_id("ep", "primary") == "endpoint/ep/variant/primary"


def test_linear_shifting_uses_the_step_size() -> None:
    rollout = RolloutConfig(traffic_routing="LINEAR", linear_step_percent=25, wait_interval_s=300)
    _endpoint(rollout, ("a", "b")).has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {
            "DeploymentConfig": {
                "BlueGreenUpdatePolicy": {
                    "TrafficRoutingConfiguration": {
                        "Type": "LINEAR",
                        "LinearStepSize": {"Type": "CAPACITY_PERCENT", "Value": 25},
                        "WaitIntervalInSeconds": 300,
                    },
                    "TerminationWaitInSeconds": 120,
                    "MaximumExecutionTimeoutInSeconds": 3600,
                },
                "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "a"}, {"AlarmName": "b"}]},
            }
        },
    )


def test_rollback_can_be_turned_off_and_guardrails_disabled() -> None:
    endpoint = _endpoint(RolloutConfig(auto_rollback=False), ("a",)).find_resources("AWS::SageMaker::Endpoint")
    config = next(iter(endpoint.values()))["Properties"]["DeploymentConfig"]
    assert "AutoRollbackConfiguration" not in config
    assert deployment_config(RolloutConfig(enabled=False), ("a",)) is None
