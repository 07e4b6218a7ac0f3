"""Application Auto Scaling for one inference component: copy-count target tracking, and the
wake-up from zero copies."""

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from constructs import Construct

from app_config.inference_components import ComponentScalingConfig
from cdk_constructs.scaling.sagemaker_scaling_role import sagemaker_scaling_role
from serving_contract.metrics import SAGEMAKER_NAMESPACE, Dimension, SageMakerMetric

WAKE_PERIOD_S = 60
"""The wake alarm's period: the developer guide's example uses 60 s (the notebook 30 s, which
needs a high-resolution metric); 60 s works either way."""


def component_resource_id(component_name: str) -> str:
    """``inference-component/<name>``: the ResourceId of a component's scalable target."""
    return f"inference-component/{component_name}"


class ComponentAutoscaling(Construct):
    """Scalable target on ``sagemaker:inference-component:DesiredCopyCount`` with target tracking
    on ``SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution``.

    With ``scale_to_zero`` the floor is 0 copies, and because target tracking has no metric to
    act on at zero copies, an alarm on ``NoCapacityInvocationFailures`` (a request found no copy)
    drives a step policy that adds one copy. The alarm fires on ``>= 1`` failure (``Maximum``) in
    a minute, as AWS's scale-to-zero notebook does; the developer guide's example ("Scale down to
    zero") uses ``Sum > 1``, which needs two failed requests in a minute and can leave a quiet dev
    endpoint asleep. Calls fail ("Inference Component has no capacity to process this request")
    until the copy is InService; SageMaker's managed instance scaling adds the instance first.

    Attributes:
        scalable_target: the ``AWS::ApplicationAutoScaling::ScalableTarget``.
        target_tracking_policy: the target-tracking policy.
        wake_alarm / wake_action: the scale-from-zero alarm and step policy, or None.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        component: cdk.CfnResource,
        component_name: str,
        min_copies: int,
        max_copies: int,
        scaling: ComponentScalingConfig,
        scale_to_zero: bool,
    ) -> None:
        """
        Args:
            component: the ``AWS::SageMaker::InferenceComponent``; the target is registered after it.
            component_name: its name (the ResourceId needs it at synth).
            min_copies / max_copies: bounds of the copy count (0 only with ``scale_to_zero``).
            scaling: target value and cooldowns.
            scale_to_zero: add the wake-up alarm and policy.
        """
        super().__init__(scope, construct_id)
        self.scalable_target = appscaling.ScalableTarget(
            self,
            "Target",
            service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=component_resource_id(component_name),
            scalable_dimension="sagemaker:inference-component:DesiredCopyCount",
            min_capacity=min_copies,
            max_capacity=max_copies,
            role=sagemaker_scaling_role(self),
        )
        self.scalable_target.node.add_dependency(component)
        self.target_tracking_policy = self.scalable_target.scale_to_track_metric(
            "ConcurrencyPerCopy",
            target_value=scaling.target_value,
            predefined_metric=(
                appscaling.PredefinedMetric.SAGEMAKER_INFERENCE_COMPONENT_CONCURRENT_REQUESTS_PER_COPY_HIGH_RESOLUTION
            ),
            scale_out_cooldown=cdk.Duration.seconds(scaling.scale_out_cooldown_s),
            scale_in_cooldown=cdk.Duration.seconds(scaling.scale_in_cooldown_s),
        )
        self.wake_alarm: cloudwatch.Alarm | None = None
        self.wake_action: appscaling.StepScalingAction | None = None
        if not scale_to_zero:
            return
        self.wake_action = appscaling.StepScalingAction(
            self,
            "WakeFromZero",
            scaling_target=self.scalable_target,
            adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
            cooldown=cdk.Duration.seconds(scaling.scale_out_cooldown_s),
            metric_aggregation_type=appscaling.MetricAggregationType.MAXIMUM,
        )
        self.wake_action.add_adjustment(adjustment=1, lower_bound=0)
        self.wake_alarm = cloudwatch.Alarm(
            self,
            "NoCapacityAlarm",
            alarm_description=(
                f"A request to {component_name} found no copy (scaled to zero): add one. Calls fail until it is up."
            ),
            metric=cloudwatch.Metric(
                namespace=SAGEMAKER_NAMESPACE,
                metric_name=SageMakerMetric.NO_CAPACITY_INVOCATION_FAILURES.value,
                dimensions_map={Dimension.COMPONENT.value: component_name},
                statistic="Maximum",
                period=cdk.Duration.seconds(WAKE_PERIOD_S),
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.wake_alarm.add_alarm_action(cloudwatch_actions.ApplicationScalingAction(self.wake_action))
