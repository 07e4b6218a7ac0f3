"""``serving.mode = variants``: a SageMaker model per production variant, each variant scaled on
its own, with scheduled capacity kept through deploys and blue/green deployments."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from app_config.rollout import RolloutConfig
from app_config.scaling_policies import KvCacheTrackingConfig, StepScalingConfig, TargetTrackingConfig
from app_config.serving import ShadowVariantConfig
from app_config.variants import Variant
from cdk_constructs.common.fixed_name_log_group import FixedNameLogGroup
from cdk_constructs.endpoint.deployment_guardrails import deployment_config
from cdk_constructs.endpoint.serving_endpoint import ServingEndpoint, VariantDeployment
from cdk_constructs.endpoint.serving_mode import VariantImages
from cdk_constructs.endpoint.serving_model import EndpointHosting
from cdk_constructs.scaling.scheduled_capacity import ScheduledCapacityKeeper
from cdk_constructs.scaling.variant_autoscaling import VariantAutoscaling, scaling_resource_id
from planning.dated_schedule import one_off_actions, weekly_segments
from planning.hardware import Hardware, HardwareKey
from planning.weekly_plan import effective_bounds
from serving_contract import outputs
from serving_contract.alarms import rollback_alarm_names
from serving_contract.outputs import pascal_case


@dataclass(frozen=True)
class ShadowPlan:
    """The shadow variant's part of the endpoint (``serving.shadow``, issue 47).

    Attributes:
        config: ``serving.shadow`` (enabled).
        primary_weight: the primary's ``initial_weight``; the shadow's weight is its share of it.
        scaling_enabled / target_tracking: ``scaling.shadow`` (the concurrency target derived:
            ``app_config.shadow.shadow_target_tracking``).
        data_capture: the endpoint config's ``DataCaptureConfig`` (``DataCapture.property``).
        versions_environment: ``MODEL_VERSIONS`` of the pins its image bakes.
    """

    config: ShadowVariantConfig
    primary_weight: float
    scaling_enabled: bool
    target_tracking: TargetTrackingConfig
    data_capture: sagemaker.CfnEndpointConfig.DataCaptureConfigProperty
    versions_environment: Mapping[str, str]


class VariantsServing(Construct):
    """The endpoint of production variants (primary, optional canary) and each variant's scaling.

    Implements :class:`~cdk_constructs.endpoint.serving_mode.ServingModeConstruct`. The stack adds it
    as ``Default``, so the construct ids below are the ones the stack's own children had: they make
    the logical ids.

    Attributes:
        endpoint_construct: the :class:`ServingEndpoint` (models, endpoint config, endpoint).
        endpoint, endpoint_name, variant_names, log_groups, rollout_target, pinned_resources, scalable_targets,
            outputs: the :class:`ServingModeConstruct` face.
        autoscaling: variant name to its :class:`VariantAutoscaling` (variants with scaling on).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        variants: Sequence[Variant],
        hardware: Mapping[HardwareKey, Hardware],
        environment: Mapping[str, str],
        versions_environments: Mapping[str, Mapping[str, str]],
        rollout: RolloutConfig,
        timezone: str,
        metrics_namespace: str,
        log_retention: logs.RetentionDays,
        log_removal_policy: cdk.RemovalPolicy,
        images: VariantImages,
        role: iam.Role,
        hosting: EndpointHosting,
        log_group: FixedNameLogGroup,
        shadow: ShadowPlan | None = None,
    ) -> None:
        """
        Args:
            endpoint_name: the endpoint's name (``endpoint_name``).
            variants: the production variants, primary first, each with its ``serving`` and ``scaling``
                sections (``AppConfig.variants()``).
            hardware: each variant's instance types with the engines each runs, by variant key (the shadow's
                under ``shadow``): ``Plan.hardware``.
            environment: the container environment every variant shares (``container_environment``).
            versions_environments: per variant key, the pins its image bakes in (``model_versions_environment``).
            rollout: the blue/green deployment guardrails (``scaling.rollout``).
            timezone: of the scheduled actions (``scaling.timezone``).
            metrics_namespace: where the container's metrics are (``observability.metrics_namespace``).
            log_retention / log_removal_policy: of the scheduled-capacity handler's logs.
            images: the image of each variant.
            role: the execution role, already granted its ECR pull (CreateModel checks it).
            hosting: health check, routing, AMI, placement and log settings of the models.
            log_group: the endpoint's log group (the stack's, the same in both modes).
            shadow: the shadow variant, its scaling and the data capture, or None.
        """
        super().__init__(scope, construct_id)
        deployments = [
            VariantDeployment(
                config=v.serving,
                weight=v.serving.initial_weight,
                image_uri=images.uri(v.key),
                # One engine per GPU group (vLLM data parallel in the container), per instance type.
                hardware=hardware[v.key],
                versions_environment=dict(versions_environments[v.key]),
            )
            for v in variants
        ]
        self.endpoint_construct = ServingEndpoint(
            self,
            "Endpoint",
            endpoint_name=endpoint_name,
            variants=deployments,
            role=role,
            environment=dict(environment),
            hosting=hosting,
            log_group=log_group,
            # Wired by name (serving_contract.alarms) to the guardrail alarms of EVERY variant: a
            # blue/green update replaces the whole fleet, so a primary-only image or engine change
            # must roll back on the primary's alarms too (issue 21, finding 2). 2 variants x 5
            # alarms = 10, AutoRollbackConfig.Alarms' most (botocore sagemaker AlarmList 1-10).
            deployment_config=deployment_config(
                rollout,
                [name for variant in variants for name in rollback_alarm_names(endpoint_name, variant.name)],
            ),
            retain_deployment_config=rollout.retain_deployment_config,
            shadow=(
                VariantDeployment(
                    config=shadow.config,
                    weight=shadow.config.weight(shadow.primary_weight),
                    image_uri=images.uri("shadow"),
                    hardware=hardware["shadow"],
                    versions_environment=dict(shadow.versions_environment),
                )
                if shadow
                else None
            ),
            data_capture=shadow.data_capture if shadow else None,
        )
        self.endpoint = self.endpoint_construct.endpoint
        self.endpoint_name = endpoint_name
        self.variant_names = self.endpoint_construct.variant_names
        self.log_groups = [self.endpoint_construct.log_group]
        self.rollout_target: cdk.CfnResource = self.endpoint
        self.pinned_resources: Sequence[cdk.CfnResource] = [self.endpoint_construct.endpoint_config]
        canary = next((v for v in variants if v.key == "canary"), None)
        self.outputs: Mapping[str, str] = {
            **({outputs.CANARY_VARIANT_NAME: canary.name} if canary else {}),
            **({outputs.SHADOW_VARIANT_NAME: shadow.config.variant_name} if shadow else {}),
        }
        self.autoscaling: dict[str, VariantAutoscaling] = {}
        self._scaling(
            variants,
            timezone=timezone,
            metrics_namespace=metrics_namespace,
            log_retention=log_retention,
            log_removal_policy=log_removal_policy,
        )
        if shadow is not None and shadow.scaling_enabled:
            self._shadow_scaling(shadow, metrics_namespace=metrics_namespace, timezone=timezone)
        self.scalable_targets: Mapping[str, appscaling.ScalableTarget] = {
            name: scaling.scalable_target for name, scaling in self.autoscaling.items()
        }

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` invoke the endpoint, sync and streaming, whichever variant answers."""
        return self.endpoint_construct.grant_invoke(grantee)

    def _shadow_scaling(self, shadow: ShadowPlan, *, metrics_namespace: str, timezone: str) -> None:
        """The shadow's own target and target tracking: no queue steps, no schedule (``ShadowScalingConfig``)."""
        self.autoscaling[shadow.config.variant_name] = VariantAutoscaling(
            self,
            "ShadowScaling",
            endpoint=self.endpoint,
            endpoint_name=self.endpoint_name,
            variant_name=shadow.config.variant_name,
            min_capacity=shadow.config.min_capacity,
            max_capacity=shadow.config.max_capacity,
            target_tracking=shadow.target_tracking,
            step_scaling=StepScalingConfig(enabled=False),
            # No leading signal: the shadow answers nobody, so its TTFT past the cliff costs no user.
            kv_cache_tracking=KvCacheTrackingConfig(enabled=False),
            schedule=(),
            timezone=timezone,
            metrics_namespace=metrics_namespace,
        )

    def _scaling(
        self,
        variants: Sequence[Variant],
        *,
        timezone: str,
        metrics_namespace: str,
        log_retention: logs.RetentionDays,
        log_removal_policy: cdk.RemovalPolicy,
    ) -> None:
        """Each variant's target and policies, and the scheduled bounds re-registered after a deploy."""
        keeper: ScheduledCapacityKeeper | None = None
        endpoint_name = self.endpoint_name
        for variant in variants:
            bounds, scaling = variant.serving, variant.scaling
            if not scaling.enabled:
                continue
            self.autoscaling[variant.name] = VariantAutoscaling(
                self,
                f"{pascal_case(variant.key)}Scaling",
                endpoint=self.endpoint,
                endpoint_name=endpoint_name,
                variant_name=variant.name,
                min_capacity=bounds.min_capacity,
                max_capacity=bounds.max_capacity,
                target_tracking=scaling.target_tracking,
                step_scaling=scaling.step_scaling,
                kv_cache_tracking=scaling.kv_cache_tracking,
                schedule=weekly_segments(scaling, bounds.min_capacity),
                timezone=timezone,
                metrics_namespace=metrics_namespace,
                one_off=one_off_actions(scaling, bounds.min_capacity, bounds.max_capacity),
            )
            if scaling.resolved_schedule or scaling.dated_events:
                # One handler for the stack, made with the first variant that has a schedule.
                keeper = keeper or ScheduledCapacityKeeper(
                    self,
                    "ScheduledCapacity",
                    endpoint_name=endpoint_name,
                    log_retention=log_retention,
                    log_removal_policy=log_removal_policy,
                )
                keeper.keep(
                    self,
                    f"{pascal_case(variant.key)}ScheduledCapacity",
                    target=self.autoscaling[variant.name].scalable_target,
                    resource_id=scaling_resource_id(endpoint_name, variant.name),
                    timeline=effective_bounds(scaling.resolved_schedule, bounds.min_capacity, bounds.max_capacity),
                    timezone=timezone,
                    hard_bounds=(bounds.min_capacity, bounds.max_capacity),
                    dated_events=scaling.dated_events,
                    lead_time_min=scaling.release_lead_time_min,
                )
