"""Deployment unit: the SageMaker endpoint with its primary and canary variants."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from constructs import Construct

from app_config import AppConfig
from cdk_constructs.container_environment import container_environment
from cdk_constructs.inference_execution_role import InferenceExecutionRole
from cdk_constructs.serving_endpoint import ServingEndpoint, VariantDeployment
from serving_contract import outputs
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
            volume_size_gb=serving.volume_size_gb,
            network_isolation=serving.network_isolation,
            vpc=serving.vpc,
            log_retention=retention_days(config.observability.log_retention_days),
            log_removal_policy=(
                cdk.RemovalPolicy.RETAIN if config.observability.retain_logs_on_delete else cdk.RemovalPolicy.DESTROY
            ),
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
