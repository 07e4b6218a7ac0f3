"""The endpoint's ``DeploymentConfig``: blue/green traffic shifting with alarm rollback."""

from collections.abc import Sequence

from aws_cdk import aws_sagemaker as sagemaker

from app_config.rollout import RolloutConfig


def deployment_config(
    rollout: RolloutConfig, rollback_alarm_names: Sequence[str]
) -> sagemaker.CfnEndpoint.DeploymentConfigProperty | None:
    """Build ``AWS::SageMaker::Endpoint.DeploymentConfig`` from config, or None when disabled.

    Blue/green (not rolling: rolling updates exclude multi-variant endpoints, docs/sources.md, "Deployment guardrails").
    CANARY shifts ``canary_size_percent`` of capacity, bakes ``wait_interval_s``, then shifts
    the rest; LINEAR shifts ``linear_step_percent`` per ``wait_interval_s``. Any alarm in
    ``rollback_alarm_names`` in ALARM during the shift or the bake rolls the update back.
    The alarms are found by name (serving_contract.alarms); they are created elsewhere.

    Args:
        rollout: limits validated in config (canary <= 50 %, linear 10-50 %, wait 0-3600 s,
            maximum execution 600-28800 s).
        rollback_alarm_names: CloudWatch alarm names; empty leaves out AutoRollbackConfiguration.
    """
    if not rollout.enabled:
        return None
    routing = sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
        type=rollout.traffic_routing,
        wait_interval_in_seconds=rollout.wait_interval_s,
        canary_size=(
            sagemaker.CfnEndpoint.CapacitySizeProperty(type="CAPACITY_PERCENT", value=rollout.canary_size_percent)
            if rollout.traffic_routing == "CANARY"
            else None
        ),
        linear_step_size=(
            sagemaker.CfnEndpoint.CapacitySizeProperty(type="CAPACITY_PERCENT", value=rollout.linear_step_percent)
            if rollout.traffic_routing == "LINEAR"
            else None
        ),
    )
    rollback = (
        sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
            alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=name) for name in rollback_alarm_names]
        )
        if rollout.auto_rollback and rollback_alarm_names
        else None
    )
    return sagemaker.CfnEndpoint.DeploymentConfigProperty(
        blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
            traffic_routing_configuration=routing,
            termination_wait_in_seconds=rollout.termination_wait_s,
            maximum_execution_timeout_in_seconds=rollout.maximum_execution_timeout_s,
        ),
        auto_rollback_configuration=rollback,
    )
