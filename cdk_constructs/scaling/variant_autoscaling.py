"""Application Auto Scaling for one SageMaker production variant."""

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from constructs import Construct

from app_config.scaling_policies import KvCacheTrackingConfig, StepScalingConfig, TargetTrackingConfig
from cdk_constructs.scaling.sagemaker_scaling_role import sagemaker_scaling_role
from planning.dated_schedule import OneOffAction, WeeklySegment
from serving_contract.metrics import Dimension, EngineMetric

_PREDEFINED = {
    "invocations_per_instance": appscaling.PredefinedMetric.SAGEMAKER_VARIANT_INVOCATIONS_PER_INSTANCE,
    "concurrent_requests_high_resolution": (
        appscaling.PredefinedMetric.SAGEMAKER_VARIANT_CONCURRENT_REQUESTS_PER_MODEL_HIGH_RESOLUTION
    ),
}


def scaling_resource_id(endpoint_name: str, variant_name: str) -> str:
    """``endpoint/<endpoint>/variant/<variant>``: the ResourceId of a variant's scalable target."""
    return f"endpoint/{endpoint_name}/variant/{variant_name}"


class VariantAutoscaling(Construct):
    """Scalable target, target tracking, queue-depth step scaling and scheduled actions.

    Policies (all optional through config):

    * target tracking on ``SageMakerVariantInvocationsPerInstance`` (invocations per minute
      per instance) or ``SageMakerVariantConcurrentRequestsPerModelHighResolution``;
    * step scaling on the container's ``QueueDepth`` EMF metric (``EndpointName``,
      ``VariantName``): one scale-out alarm at the first step's lower bound with the steps
      as offsets from it;
    * a slow low-load scale-in step on the container's ``RunningRequests`` EMF metric
      (Average per instance below ``scale_in_running_requests`` for
      ``scale_in_evaluation_periods`` periods). Not on a short queue: vLLM keeps QueueDepth
      near 0 under ordinary load, so a queue-based scale-in would fire under moderate load and
      flap against target tracking;
    * recurring scheduled actions with a ``Timezone``.

    When several policies fire together, Application Auto Scaling applies the one that gives
    the largest capacity (PutScalingPolicy API reference). Policies that fire at different
    times each act alone, so the scale-in signal must itself mean low load: that is what keeps
    the scale-in step from undoing target tracking's last scale-out.

    Attributes:
        scalable_target: the ``AWS::ApplicationAutoScaling::ScalableTarget`` (depends on the endpoint).
        target_tracking_policy: the target-tracking policy, or None.
        scale_out_action / scale_in_action: the step-scaling policies, or None.
        scale_out_alarm / scale_in_alarm: their CloudWatch alarms, or None.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: cdk.CfnResource,
        endpoint_name: str,
        variant_name: str,
        min_capacity: int,
        max_capacity: int,
        target_tracking: TargetTrackingConfig,
        step_scaling: StepScalingConfig,
        kv_cache_tracking: KvCacheTrackingConfig,
        schedule: Sequence[WeeklySegment],
        timezone: str,
        metrics_namespace: str,
        one_off: Sequence[OneOffAction] = (),
    ) -> None:
        """
        Args:
            endpoint: the ``AWS::SageMaker::Endpoint``; the target is registered after it exists.
            endpoint_name: endpoint name (the ResourceId needs it at synth).
            variant_name: production variant name.
            min_capacity / max_capacity: hard bounds of the target, instances (serving.<variant>).
            target_tracking: target-tracking settings (``enabled=False`` skips the policy).
            step_scaling: queue-depth steps (``enabled=False`` skips both policies and alarms).
            kv_cache_tracking: scale-out on the container's KvCacheUsagePercent, the leading signal
                of the prefix-cache cliff (``enabled=False`` skips it); its target resolved.
            schedule: the weekly scheduled actions, cron in ``timezone`` (validated in config), each with the
                StartTime/EndTime that pause it during a dated event (``dated_schedule.weekly_segments``).
            timezone: IANA name, e.g. ``Asia/Tokyo``.
            metrics_namespace: namespace of the container's EMF metrics.
            one_off: the dated events' one-time ``at(...)`` actions in ``timezone``
                (``weekly_plan.one_off_actions``, validated in config).
        """
        super().__init__(scope, construct_id)
        service_linked_role = sagemaker_scaling_role(self)
        self.scalable_target = appscaling.ScalableTarget(
            self,
            "Target",
            service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=scaling_resource_id(endpoint_name, variant_name),
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=min_capacity,
            max_capacity=max_capacity,
            role=service_linked_role,
        )
        # The variant exists only once the endpoint is InService.
        self.scalable_target.node.add_dependency(endpoint)

        self.target_tracking_policy: appscaling.TargetTrackingScalingPolicy | None = None
        if target_tracking.enabled:
            self.target_tracking_policy = self.scalable_target.scale_to_track_metric(
                "TargetTracking",
                target_value=target_tracking.target_value,
                predefined_metric=_PREDEFINED[target_tracking.metric],
                scale_out_cooldown=cdk.Duration.seconds(target_tracking.scale_out_cooldown_s),
                scale_in_cooldown=cdk.Duration.seconds(target_tracking.scale_in_cooldown_s),
                disable_scale_in=target_tracking.disable_scale_in,
            )

        self.kv_cache_policy: appscaling.TargetTrackingScalingPolicy | None = None
        if kv_cache_tracking.enabled:
            # A second target-tracking policy on a customized metric: Application Auto Scaling scales
            # out when any policy asks and, with scale-in disabled here, scales in by the others alone
            # (user guide, "Multiple scaling policies"; TargetTrackingScalingPolicyConfiguration.DisableScaleIn).
            self.kv_cache_policy = self.scalable_target.scale_to_track_metric(
                "KvCacheTracking",
                target_value=kv_cache_tracking.target_value,
                custom_metric=self._engine_metric(
                    EngineMetric.KV_CACHE_USAGE,
                    statistic="Average",
                    namespace=metrics_namespace,
                    endpoint=endpoint_name,
                    variant=variant_name,
                    period_s=60,
                ),
                disable_scale_in=True,
                scale_out_cooldown=cdk.Duration.seconds(kv_cache_tracking.scale_out_cooldown_s),
            )

        self.scale_out_action: appscaling.StepScalingAction | None = None
        self.scale_in_action: appscaling.StepScalingAction | None = None
        self.scale_out_alarm: cloudwatch.Alarm | None = None
        self.scale_in_alarm: cloudwatch.Alarm | None = None
        if step_scaling.enabled:
            self._step_scaling(step_scaling, endpoint_name, variant_name, metrics_namespace)

        for segment in schedule:
            action = segment.action
            self.scalable_target.scale_on_schedule(
                segment.name,
                schedule=appscaling.Schedule.expression(action.schedule),
                time_zone=cdk.TimeZone.of(timezone),
                min_capacity=action.min_capacity,
                # An action without its own ceiling sets the hard max, so a scheduled action never
                # holds the fleet below serving.<variant>.max_capacity (issue 21, finding 3).
                max_capacity=action.ceiling(max_capacity),
                start_time=segment.utc(segment.start, timezone),
                end_time=segment.utc(segment.end, timezone),
            )
        for one in one_off:
            # at(yyyy-mm-ddThh:mm:ss) in the action's Timezone: fires once (Application Auto Scaling
            # user guide, "Create a one-time scheduled action that specifies a time zone").
            self.scalable_target.scale_on_schedule(
                one.name,
                schedule=appscaling.Schedule.expression(one.schedule),
                time_zone=cdk.TimeZone.of(timezone),
                min_capacity=one.min_capacity,
                max_capacity=one.max_capacity,
            )

    @staticmethod
    def _engine_metric(
        metric: EngineMetric, *, statistic: str, namespace: str, endpoint: str, variant: str, period_s: int
    ) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=namespace,
            metric_name=metric,
            dimensions_map={Dimension.ENDPOINT: endpoint, Dimension.VARIANT: variant},
            statistic=statistic,
            period=cdk.Duration.seconds(period_s),
        )

    def _step_scaling(self, config: StepScalingConfig, endpoint: str, variant: str, namespace: str) -> None:
        threshold = config.scale_out_threshold
        self.scale_out_action = appscaling.StepScalingAction(
            self,
            "QueueDepthScaleOut",
            scaling_target=self.scalable_target,
            adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
            cooldown=cdk.Duration.seconds(config.scale_out_cooldown_s),
            metric_aggregation_type=appscaling.MetricAggregationType.AVERAGE,
        )
        for step in config.scale_out_steps:
            # Step bounds are offsets from the alarm threshold (PutScalingPolicy StepAdjustment).
            self.scale_out_action.add_adjustment(
                adjustment=step.adjustment,
                lower_bound=step.lower - threshold,
                upper_bound=None if step.upper is None else step.upper - threshold,
            )
        self.scale_out_alarm = cloudwatch.Alarm(
            self,
            "QueueDepthHighAlarm",
            metric=self._engine_metric(
                EngineMetric.QUEUE_DEPTH,
                statistic=config.statistic,
                namespace=namespace,
                endpoint=endpoint,
                variant=variant,
                period_s=config.scale_out_period_s,
            ),
            threshold=threshold,
            evaluation_periods=config.scale_out_evaluation_periods,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            # No datapoints means no traffic or no metrics: never a reason to add GPUs.
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{variant}: queued requests per instance >= {threshold:g}; step scale-out",
        )
        self.scale_out_alarm.add_alarm_action(cloudwatch_actions.ApplicationScalingAction(self.scale_out_action))

        self.scale_in_action = appscaling.StepScalingAction(
            self,
            "LowLoadScaleIn",
            scaling_target=self.scalable_target,
            adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
            cooldown=cdk.Duration.seconds(config.scale_in_cooldown_s),
            metric_aggregation_type=appscaling.MetricAggregationType.AVERAGE,
        )
        self.scale_in_action.add_adjustment(adjustment=config.scale_in_adjustment, upper_bound=0)
        self.scale_in_alarm = cloudwatch.Alarm(
            self,
            "LowLoadAlarm",
            # Average per instance: sequences each GPU is actually decoding.
            metric=self._engine_metric(
                EngineMetric.RUNNING_REQUESTS,
                statistic="Average",
                namespace=namespace,
                endpoint=endpoint,
                variant=variant,
                period_s=config.scale_in_period_s,
            ),
            threshold=config.scale_in_threshold,
            evaluation_periods=config.scale_in_evaluation_periods,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            # A broken metrics pipeline must not shrink the fleet.
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                f"{variant}: running requests per instance < {config.scale_in_threshold:g} for "
                f"{config.scale_in_evaluation_periods} x {config.scale_in_period_s} s (low load); slow step scale-in"
            ),
        )
        self.scale_in_alarm.add_alarm_action(cloudwatch_actions.ApplicationScalingAction(self.scale_in_action))
