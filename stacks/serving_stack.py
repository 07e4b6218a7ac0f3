"""Deployment unit: the SageMaker endpoint with its primary and canary variants."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from constructs import Construct

from app_config import AppConfig
from cdk_constructs.container_environment import container_environment
from cdk_constructs.deployment_guardrail_alarms import DeploymentGuardrailAlarms
from cdk_constructs.deployment_guardrails import deployment_config
from cdk_constructs.endpoint_metrics import EndpointMetrics
from cdk_constructs.inference_execution_role import InferenceExecutionRole
from cdk_constructs.serving_endpoint import ServingEndpoint, VariantDeployment
from cdk_constructs.variant_autoscaling import VariantAutoscaling
from serving_contract import outputs
from serving_contract.alarms import rollback_alarm_names
from stacks.log_retention import retention_days


@dataclass(frozen=True)
class VariantImages:
    """The image each variant runs, however it was produced (composition decides).

    Attributes:
        primary: image URI of the primary variant.
        canary: image URI of the canary variant (the primary's when it runs the same image).
        repositories: ECR repositories the execution role must pull from.
    """

    primary: str
    canary: str
    repositories: Sequence[ecr.IRepository]


class ServingStack(cdk.Stack):
    """The serving system: execution role, endpoint log group, models, endpoint config, endpoint.

    Attributes:
        endpoint: the :class:`ServingEndpoint` construct (endpoint name, variants, log group).
        guardrail_alarms: the alarms deployment guardrails roll back on (named by
            ``serving_contract.alarms.rollback_alarm_names``).
        autoscaling: variant name to its :class:`VariantAutoscaling` (variants with scaling enabled).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        images: VariantImages,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        serving = config.serving
        execution_role = InferenceExecutionRole(
            self,
            "ExecutionRole",
            metrics_namespace=config.observability.metrics_namespace,
            vpc_placement=serving.vpc is not None,
        )
        variants = [VariantDeployment(config=serving.primary, image_uri=images.primary)]
        if serving.canary.enabled:
            variants.append(
                VariantDeployment(
                    config=serving.canary,
                    image_uri=images.canary,
                )
            )
        self.endpoint = ServingEndpoint(
            self,
            "Endpoint",
            endpoint_name=config.endpoint_name,
            variants=variants,
            role=execution_role.role,
            environment=container_environment(config),
            startup_health_check_timeout_s=serving.container_startup_health_check_timeout_s,
            routing_strategy=serving.routing_strategy,
            inference_ami_version=serving.inference_ami_version,
            network_isolation=serving.network_isolation,
            vpc=serving.vpc,
            log_retention=retention_days(config.observability.log_retention_days),
            log_removal_policy=(
                cdk.RemovalPolicy.RETAIN if config.observability.retain_logs_on_delete else cdk.RemovalPolicy.DESTROY
            ),
            # Wired by name (serving_contract.alarms) to the guardrail alarms created below:
            # the canary's, or the primary's on a single-variant endpoint.
            deployment_config=deployment_config(
                config.scaling.rollout,
                rollback_alarm_names(
                    config.endpoint_name,
                    (serving.canary if serving.canary.enabled else serving.primary).variant_name,
                ),
            ),
            retain_deployment_config=config.scaling.rollout.retain_deployment_config,
        )
        # The guardrail alarms sit here, not in the observability stack: the endpoint's
        # AutoRollbackConfiguration names them, and they must exist before any endpoint
        # update starts. Every variant gets a pair, so whichever variant a deployment
        # watches (the canary, or the primary when the canary is off) has its alarms.
        self.guardrail_alarms = DeploymentGuardrailAlarms(
            self,
            "GuardrailAlarms",
            metrics=EndpointMetrics(
                endpoint_name=config.endpoint_name,
                variant_names=self.endpoint.variant_names,
                namespace=config.observability.metrics_namespace,
            ),
            variant_names=self.endpoint.variant_names,
            error_rate=config.monitoring.canary_error_rate,
            ttft_p95=config.monitoring.canary_ttft_p95,
        )
        self.endpoint.endpoint.node.add_dependency(self.guardrail_alarms)
        self.autoscaling: dict[str, VariantAutoscaling] = {}
        for variant, scaling in ((serving.primary, config.scaling.primary), (serving.canary, config.scaling.canary)):
            if variant not in serving.variants or not scaling.enabled:
                continue
            self.autoscaling[variant.variant_name] = VariantAutoscaling(
                self,
                "PrimaryScaling" if variant is serving.primary else "CanaryScaling",
                endpoint=self.endpoint.endpoint,
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
        for repository in images.repositories:
            repository.grant_pull(execution_role.role)
        self.endpoint.log_group.grant_write(execution_role.role)
        self.endpoint.log_group.grant(execution_role.role, "logs:DescribeLogStreams")

        cdk.CfnOutput(self, outputs.ENDPOINT_NAME, value=config.endpoint_name)
        cdk.CfnOutput(self, outputs.PRIMARY_VARIANT_NAME, value=serving.primary.variant_name)
        if serving.canary.enabled:
            cdk.CfnOutput(self, outputs.CANARY_VARIANT_NAME, value=serving.canary.variant_name)
        cdk.CfnOutput(self, outputs.EXECUTION_ROLE_ARN, value=execution_role.role.role_arn)
        cdk.CfnOutput(self, outputs.LOG_GROUP_NAME, value=self.endpoint.log_group.log_group_name)
        for key, value in config.tags.items():
            cdk.Tags.of(self).add(key, value)
