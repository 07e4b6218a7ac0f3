"""What both endpoint topologies create alike: the endpoint's log group and a SageMaker model of
the serving image (shared by :class:`ServingEndpoint` and :class:`InferenceComponentEndpoint`)."""

from collections.abc import Mapping
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from app_config.serving import VpcPlacementConfig
from cdk_constructs.common.fixed_name_log_group import FixedNameLogGroup
from cdk_constructs.compile_cache.compile_cache import CompileCacheMaker
from planning.prefix_routing import PrefixRouting
from serving_contract import env
from serving_contract.log_groups import endpoint_log_group_name
from serving_contract.outputs import pascal_case


@dataclass(frozen=True)
class EndpointHosting:
    """How the serving container is hosted, the same in both topologies (``serving.*`` and the
    log settings of ``observability.*``).

    Attributes:
        startup_health_check_timeout_s: 60-3600, SageMaker's
            ``ContainerStartupHealthCheckTimeoutInSeconds`` (per instance, or per copy).
        routing_strategy: ``LEAST_OUTSTANDING_REQUESTS``, ``RANDOM`` or ``PREFIX_AWARE``.
        prefix_routing: ``PrefixAwareRoutingConfig``'s two fields, with ``PREFIX_AWARE`` only.
        inference_ami_version: host AMI, e.g. ``al2023-ami-sagemaker-inference-gpu-4-1``.
        network_isolation: run the container without network access.
        vpc: optional subnets and security groups for the container.
        log_retention / log_removal_policy: of the endpoint's log groups.
        detailed_observability: ``MetricsConfig.EnableDetailedObservability`` (SageMaker scrapes the
            container's ``GET /metrics`` on port 8080).
        metric_publish_frequency_s: ``MetricsConfig.MetricPublishFrequencyInSeconds`` (10-300).
        compile_cache: makes each model's torch.compile cache (``serving.compile_cache``), or None
            when models start without one.
    """

    startup_health_check_timeout_s: int
    routing_strategy: str
    inference_ami_version: str
    network_isolation: bool
    vpc: VpcPlacementConfig | None
    log_retention: logs.RetentionDays
    log_removal_policy: cdk.RemovalPolicy
    detailed_observability: bool
    metric_publish_frequency_s: int
    compile_cache: CompileCacheMaker | None = None
    prefix_routing: PrefixRouting | None = None

    @property
    def routing_config(self) -> sagemaker.CfnEndpointConfig.RoutingConfigProperty:
        """The production variant's ``RoutingConfig`` (with ``PrefixAwareRoutingConfig`` for ``PREFIX_AWARE``)."""
        prefix = self.prefix_routing
        return sagemaker.CfnEndpointConfig.RoutingConfigProperty(
            routing_strategy=self.routing_strategy,
            prefix_aware_routing_config=sagemaker.CfnEndpointConfig.PrefixAwareRoutingConfigProperty(
                prefix_length=prefix.prefix_length_bytes, concurrency_threshold=prefix.concurrency_threshold
            )
            if prefix is not None
            else None,
        )

    @property
    def metrics_config(self) -> sagemaker.CfnEndpointConfig.MetricsConfigProperty:
        """The endpoint config's ``MetricsConfig``, explicit in both topologies (new endpoint configs
        default detailed observability to on since 2026-06; the template should say what runs)."""
        return sagemaker.CfnEndpointConfig.MetricsConfigProperty(
            enable_detailed_observability=self.detailed_observability,
            metric_publish_frequency_in_seconds=self.metric_publish_frequency_s,
        )


def endpoint_log_group(
    scope: Construct, construct_id: str, endpoint_name: str, hosting: EndpointHosting
) -> FixedNameLogGroup:
    """``/aws/sagemaker/Endpoints/<endpoint>``, where SageMaker writes container output
    (docs/sources.md, "Container contract").

    Made by the serving stack under one construct id in both serving modes, so a mode switch
    keeps the group's logical id rather than creating a second resource of the same name.
    """
    return FixedNameLogGroup(
        scope,
        construct_id,
        log_group_name=endpoint_log_group_name(endpoint_name),
        retention=hosting.log_retention,
        removal_policy=hosting.log_removal_policy,
    )


def serving_model(
    scope: Construct,
    *,
    variant_name: str,
    image_uri: str,
    instance_type: str,
    role: iam.IRole,
    environment: Mapping[str, str],
    hosting: EndpointHosting,
    data_parallel_size: int = 1,
    versions_environment: Mapping[str, str] | None = None,
    model_key: str | None = None,
) -> sagemaker.CfnModel:
    """The ``AWS::SageMaker::Model`` of one variant: the image, its environment plus
    ``VARIANT_NAME`` (the EMF dimension), network isolation and optional VPC placement; with
    ``hosting.compile_cache``, the compile cache made for it on ``instance_type`` as model data.

    ``data_parallel_size`` > 1 sets ``ENGINE_DATA_PARALLEL_SIZE``: that many vLLM engines in the
    container, one per GPU group of a multi-GPU instance (1, vLLM's default, sets nothing).
    ``versions_environment`` (``MODEL_VERSIONS``) is part of the environment the cache job runs with: the image
    that bakes those versions is the one it compiles for.

    ``model_key`` (default ``variant_name``) names the model's construct id and its compile cache's: a variant's
    fallback instance type (``instance_pools``) gets a model of its own under ``<variant>-pool<priority>``."""
    container_environment = {**environment, **(versions_environment or {}), env.VARIANT_NAME: variant_name}
    if data_parallel_size > 1:
        container_environment[env.ENGINE_DATA_PARALLEL_SIZE] = str(data_parallel_size)
    key = model_key or variant_name
    cache = (
        hosting.compile_cache.cache_for(
            scope,
            variant_name=key,
            image_uri=image_uri,
            instance_type=instance_type,
            environment=container_environment,
            execution_role=role,
        )
        if hosting.compile_cache is not None
        else None
    )
    model = sagemaker.CfnModel(
        scope,
        f"{pascal_case(key)}Model",
        execution_role_arn=role.role_arn,
        primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
            image=image_uri,
            mode="SingleModel",
            environment={**container_environment, **(cache.environment if cache else {})},
            model_data_source=cache.model_data_source if cache else None,
        ),
        enable_network_isolation=hosting.network_isolation,
        vpc_config=(
            sagemaker.CfnModel.VpcConfigProperty(
                subnets=list(hosting.vpc.subnet_ids), security_group_ids=list(hosting.vpc.security_group_ids)
            )
            if hosting.vpc
            else None
        ),
    )
    # CreateModel checks the role can pull the image: wait for its inline policy (the role
    # itself is already a dependency through ExecutionRoleArn). InferenceExecutionRole grants ECR
    # pull when it is made, before the models, so the policy exists here; later grants land in it too.
    policy = role.node.try_find_child("DefaultPolicy")
    if policy is None:
        raise ValueError("grant the execution role its ECR pull before making the models (CreateModel checks it)")
    model.node.add_dependency(policy)
    return model
