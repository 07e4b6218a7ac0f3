"""Deployment unit: the SageMaker endpoint, as production variants or as inference components."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from app_config import AppConfig, ConfigError
from app_config.capacity_timeline import effective_bounds
from app_config.gpu_instances import instance_gpus
from app_config.image_build import pin_version
from app_config.inference_components import unpinned_adapter_problems
from app_config.topology import ServingTopology, serving_topology
from cdk_constructs.artifacts.model_artifacts_bucket import grant_archive_read
from cdk_constructs.common.fixed_name_log_group import finish_log_retention_provider
from cdk_constructs.common.log_retention import log_removal_policy, retention_days
from cdk_constructs.common.nag import acknowledge, log_group_arn_placeholder
from cdk_constructs.endpoint.container_environment import container_environment
from cdk_constructs.endpoint.deployment_guardrail_alarms import DeploymentGuardrailAlarms
from cdk_constructs.endpoint.deployment_guardrails import deployment_config
from cdk_constructs.endpoint.inference_component_endpoint import InferenceComponentEndpoint
from cdk_constructs.endpoint.inference_execution_role import InferenceExecutionRole
from cdk_constructs.endpoint.serving_endpoint import ServingEndpoint, VariantDeployment
from cdk_constructs.endpoint.serving_model import EndpointHosting, endpoint_log_group
from cdk_constructs.observability.endpoint_metrics import EndpointMetrics
from cdk_constructs.scaling.component_autoscaling import ComponentAutoscaling
from cdk_constructs.scaling.scheduled_capacity import ScheduledCapacityKeeper
from cdk_constructs.scaling.variant_autoscaling import VariantAutoscaling, scaling_resource_id
from serving_contract import outputs
from serving_contract.alarms import rollback_alarm_names
from serving_contract.components import BASE_SUFFIX, adapter_component_name, base_component_name
from serving_contract.model_artifacts import ADAPTER_ARCHIVE  # the file an adapter component loads


@dataclass(frozen=True)
class VariantImages:
    """The image each variant runs, however it was produced (composition decides).

    Attributes:
        primary: image URI of the primary variant (and of the base component).
        canary: image URI of the canary variant (the primary's when it runs the same image).
        repositories: ECR repositories the execution role must pull from.
    """

    primary: str
    canary: str
    repositories: Sequence[ecr.IRepository]


@dataclass(frozen=True)
class AdapterArtifacts:
    """Where the adapter components' artifacts live (inference_components mode).

    Attributes:
        bucket: the model-artifacts bucket.
        prefix: key prefix of adapters (``image.build.adapters_prefix``).
    """

    bucket: s3.IBucket
    prefix: str

    def key(self, adapter: str, pin: str) -> str:
        """``<prefix>/<adapter>/<version>/adapter.tar.gz`` of a pinned version."""
        return f"{self.prefix}/{adapter}/{pin_version(pin)}/{ADAPTER_ARCHIVE}"

    def url(self, adapter: str, pin: str) -> str:
        """``s3://<bucket>/<key>``: the adapter component's ArtifactUrl."""
        return f"s3://{self.bucket.bucket_name}/{self.key(adapter, pin)}"


class ServingStack(cdk.Stack):
    """The serving system: execution role, log group, the endpoint and its scaling, the guardrails.

    ``serving.mode`` picks the topology: :class:`ServingEndpoint` (a SageMaker model per
    production variant, blue/green deployments) or :class:`InferenceComponentEndpoint` (one variant
    hosting a base component and one component per adapter, rolling updates). Both expose the
    same face (endpoint, log group, variant names); the role, guardrail alarms and outputs are
    shared.

    Attributes:
        endpoint: the endpoint construct (either kind).
        topology: what monitoring and scaling name in this mode.
        guardrail_alarms: the alarms deployments roll back on (``serving_contract.alarms``).
        autoscaling: variant name to its :class:`VariantAutoscaling` (variants mode).
        component_autoscaling: the base component's :class:`ComponentAutoscaling`, or None.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        images: VariantImages,
        adapter_artifacts: AdapterArtifacts | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        serving = config.serving
        self.topology = serving_topology(config)
        execution_role = InferenceExecutionRole(
            self,
            "ExecutionRole",
            vpc_placement=serving.vpc is not None,
        )
        if serving.vpc is not None and serving.network_isolation:
            # SageMaker developer guide, "Run containers with no internet access": an isolated
            # container makes no outbound call at all, so the subnets reach nothing from it.
            cdk.Annotations.of(self).add_warning_v2(
                "Serving:VpcWithNetworkIsolation",
                "serving.vpc is set while serving.network_isolation = true: the container makes no network calls, "
                "so VPC placement gives it nothing (SageMaker still creates its network interfaces in the subnets); "
                "drop serving.vpc, or set serving.network_isolation = false if the container must reach the VPC",
            )
        # Before the models: each waits for the role's DefaultPolicy (CreateModel checks the
        # role can pull the image), and the ECR grant is what creates that policy.
        for repository in images.repositories:
            repository.grant_pull(execution_role.role)
        if serving.mode == "variants":
            self._warn_idle_gpus(config)
        self.autoscaling: dict[str, VariantAutoscaling] = {}
        self.component_autoscaling: ComponentAutoscaling | None = None
        self.endpoint: ServingEndpoint | InferenceComponentEndpoint
        # Here, not in the mode's construct: one logical id whichever mode is deployed.
        self._hosting = _hosting(config)  # both topologies and the log group take the same settings
        self.endpoint_log_group = endpoint_log_group(self, "EndpointLogGroup", config.endpoint_name, self._hosting)
        if serving.mode == "inference_components":
            if adapter_artifacts is None:
                raise ValueError("inference_components mode needs the adapter artifacts' bucket (composition)")
            self.endpoint = self._components(config, images, execution_role.role, adapter_artifacts)
        else:
            self.endpoint = self._variants(config, images, execution_role.role)
        # The guardrail alarms sit here, not in the observability stack: the deployment's
        # AutoRollbackConfiguration names them, and they must exist before any update starts.
        # Every variant (or the base component) gets a pair, so whichever one a deployment
        # watches has its alarms.
        self.guardrail_alarms = DeploymentGuardrailAlarms(
            self,
            "GuardrailAlarms",
            metrics=EndpointMetrics(
                endpoint_name=config.endpoint_name,
                variant_names=self.topology.variant_names,
                namespace=config.observability.metrics_namespace,
                components=self.topology.components,
            ),
            variant_names=self.topology.variant_names,
            labels=self.topology.guardrail_labels,
            error_rate=config.monitoring.canary_error_rate,
            ttft_p95=config.monitoring.canary_ttft_p95,
            model_latency_p99=config.monitoring.canary_model_latency_p99,
        )
        guarded = (
            self.endpoint.base_component
            if isinstance(self.endpoint, InferenceComponentEndpoint)
            else self.endpoint.endpoint
        )
        guarded.node.add_dependency(self.guardrail_alarms)
        log_groups = [self.endpoint.log_group]
        if isinstance(self.endpoint, InferenceComponentEndpoint):
            log_groups.append(self.endpoint.component_log_group)
        for log_group in log_groups:
            log_group.grant_write(execution_role.role)
            log_group.grant(execution_role.role, "logs:DescribeLogStreams")
            acknowledge(
                execution_role.role,
                f"AwsSolutions-IAM5[Resource::{log_group_arn_placeholder(self, log_group.log_group_name)}]",
                "Every log stream of the endpoint's own log group: SageMaker names a stream per instance and "
                "container as it starts them, so no stream name is known at deploy time.",
            )
        self._outputs(config, self.topology, execution_role.role)
        finish_log_retention_provider(self)

    def _variants(self, config: AppConfig, images: VariantImages, role: iam.Role) -> ServingEndpoint:
        serving = config.serving
        variants = [VariantDeployment(config=serving.primary, image_uri=images.primary)]
        if serving.canary.enabled:
            variants.append(VariantDeployment(config=serving.canary, image_uri=images.canary))
        endpoint = ServingEndpoint(
            self,
            "Endpoint",
            endpoint_name=config.endpoint_name,
            variants=variants,
            role=role,
            environment=container_environment(config),
            hosting=self._hosting,
            log_group=self.endpoint_log_group,
            # Wired by name (serving_contract.alarms) to the guardrail alarms of EVERY variant: a
            # blue/green update replaces the whole fleet, so a primary-only image or engine change
            # must roll back on the primary's alarms too (issue 21, finding 2). 2 variants x 3
            # alarms = 6, within AutoRollbackConfig.Alarms' 1-10 (botocore sagemaker AlarmList).
            deployment_config=deployment_config(
                config.scaling.rollout,
                [
                    name
                    for variant in serving.variants
                    for name in rollback_alarm_names(config.endpoint_name, variant.variant_name)
                ],
            ),
            retain_deployment_config=config.scaling.rollout.retain_deployment_config,
        )
        keeper: ScheduledCapacityKeeper | None = None
        for variant, scaling in ((serving.primary, config.scaling.primary), (serving.canary, config.scaling.canary)):
            if variant not in serving.variants or not scaling.enabled:
                continue
            self.autoscaling[variant.variant_name] = VariantAutoscaling(
                self,
                "PrimaryScaling" if variant is serving.primary else "CanaryScaling",
                endpoint=endpoint.endpoint,
                endpoint_name=config.endpoint_name,
                variant_name=variant.variant_name,
                min_capacity=variant.min_capacity,
                max_capacity=variant.max_capacity,
                target_tracking=scaling.target_tracking,
                step_scaling=scaling.step_scaling,
                schedule=scaling.resolved_schedule,
                timezone=config.scaling.timezone,
                metrics_namespace=config.observability.metrics_namespace,
            )
            if scaling.resolved_schedule:
                # One handler for the stack, made with the first variant that has a schedule.
                keeper = keeper or ScheduledCapacityKeeper(
                    self,
                    "ScheduledCapacity",
                    endpoint_name=config.endpoint_name,
                    log_retention=retention_days(config.observability.log_retention_days),
                    log_removal_policy=log_removal_policy(config.observability.retain_logs_on_delete),
                )
                keeper.keep(
                    self,
                    "PrimaryScheduledCapacity" if variant is serving.primary else "CanaryScheduledCapacity",
                    target=self.autoscaling[variant.variant_name].scalable_target,
                    resource_id=scaling_resource_id(config.endpoint_name, variant.variant_name),
                    timeline=effective_bounds(scaling.resolved_schedule, variant.min_capacity, variant.max_capacity),
                    timezone=config.scaling.timezone,
                    hard_bounds=(variant.min_capacity, variant.max_capacity),
                )
        return endpoint

    def _warn_idle_gpus(self, config: AppConfig) -> None:
        """One engine runs per instance in variants mode: GPUs beyond its tensor_parallel_size are
        paid for and idle (inference_components mode packs copies onto them instead)."""
        tp = config.engine.tensor_parallel_size
        for variant in config.serving.variants:
            gpus = instance_gpus(variant.instance_type).count
            if gpus > tp:
                cdk.Annotations.of(self).add_warning_v2(
                    f"Serving:IdleGpus:{variant.variant_name}",
                    f"serving.{'primary' if variant is config.serving.primary else 'canary'}.instance_type = "
                    f"{variant.instance_type} has {gpus} GPUs and engine.tensor_parallel_size = {tp}: one engine per "
                    f"instance leaves {gpus - tp} GPU(s) idle; raise tensor_parallel_size, pick a {tp}-GPU "
                    "instance, or use serving.mode = inference_components to run one copy per GPU",
                )

    def _components(
        self, config: AppConfig, images: VariantImages, role: iam.Role, artifacts: AdapterArtifacts
    ) -> InferenceComponentEndpoint:
        serving, components = config.serving, config.serving.inference_components
        unpinned = unpinned_adapter_problems(components)
        if unpinned:
            raise ConfigError(unpinned)
        endpoint = InferenceComponentEndpoint(
            self,
            "ComponentEndpoint",
            endpoint_name=config.endpoint_name,
            variant_name=serving.primary.variant_name,
            instance_type=serving.primary.instance_type,
            image_uri=images.primary,
            role=role,
            environment=container_environment(config),
            components=components,
            accelerators_per_copy=config.engine.tensor_parallel_size,
            adapter_artifact_urls={
                adapter.name: artifacts.url(adapter.name, components.adapter_artifacts[adapter.name])
                for adapter in config.model.adapters
            },
            rollback_alarm_names=rollback_alarm_names(config.endpoint_name, BASE_SUFFIX),
            hosting=self._hosting,
            log_group=self.endpoint_log_group,
        )
        # SageMaker downloads each adapter component's ArtifactUrl with the execution role: read
        # access to exactly those archives; listing limited to their keys.
        grant_archive_read(
            artifacts.bucket,
            role,
            [
                artifacts.key(adapter.name, components.adapter_artifacts[adapter.name])
                for adapter in config.model.adapters
            ],
        )
        self.component_autoscaling = ComponentAutoscaling(
            self,
            "BaseComponentScaling",
            component=endpoint.base_component,
            component_name=base_component_name(config.endpoint_name),
            min_copies=components.min_copy_count,
            max_copies=components.max_copy_count,
            scaling=components.scaling,
            scale_to_zero=components.scale_to_zero,
        )
        return endpoint

    def _outputs(self, config: AppConfig, topology: ServingTopology, role: iam.Role) -> None:
        serving = config.serving
        cdk.CfnOutput(self, outputs.ENDPOINT_NAME, value=config.endpoint_name)
        cdk.CfnOutput(self, outputs.SERVING_MODE, value=serving.mode)
        cdk.CfnOutput(self, outputs.PRIMARY_VARIANT_NAME, value=serving.primary.variant_name)
        if topology.mode == "variants" and serving.canary.enabled:
            cdk.CfnOutput(self, outputs.CANARY_VARIANT_NAME, value=serving.canary.variant_name)
        if topology.mode == "inference_components":
            cdk.CfnOutput(self, outputs.BASE_COMPONENT_NAME, value=base_component_name(config.endpoint_name))
            for adapter in config.model.adapters:
                cdk.CfnOutput(
                    self,
                    outputs.adapter_component_output(adapter.name),
                    value=adapter_component_name(config.endpoint_name, adapter.name),
                )
        cdk.CfnOutput(self, outputs.EXECUTION_ROLE_ARN, value=role.role_arn)
        cdk.CfnOutput(self, outputs.LOG_GROUP_NAME, value=self.endpoint.log_group.log_group_name)


def _hosting(config: AppConfig) -> EndpointHosting:
    """What both topologies take alike from ``serving.*`` and ``observability.*``."""
    serving, observability = config.serving, config.observability
    return EndpointHosting(
        startup_health_check_timeout_s=serving.container_startup_health_check_timeout_s,
        routing_strategy=serving.routing_strategy,
        inference_ami_version=serving.inference_ami_version,
        network_isolation=serving.network_isolation,
        vpc=serving.vpc,
        log_retention=retention_days(observability.log_retention_days),
        log_removal_policy=log_removal_policy(observability.retain_logs_on_delete),
        detailed_observability=observability.detailed_observability,
        metric_publish_frequency_s=observability.metric_publish_frequency_s,
    )
