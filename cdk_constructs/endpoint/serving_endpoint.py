"""SageMaker models, endpoint config and endpoint for the production variants."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from app_config.serving import VariantShape
from cdk_constructs.common.fixed_name_log_group import FixedNameLogGroup
from cdk_constructs.endpoint.invoke_grant import grant_invoke
from cdk_constructs.endpoint.serving_model import EndpointHosting, serving_model
from planning.hardware import Hardware, Pool


@dataclass(frozen=True)
class VariantDeployment:
    """What one variant (production or shadow) runs: its config, its weight, its own image URI and the
    instance types it runs on.

    Each variant gets its own SageMaker model so a canary or a shadow can run a new image; a fallback
    instance type whose model would differ (its engines, its compile cache) gets one more
    (``InstancePool.ModelNameOverride``).
    """

    config: VariantShape
    weight: float
    """``InitialVariantWeight``: ``serving.<variant>.initial_weight``; a shadow's: the share of the primary's
    requests it gets a copy of (``ShadowVariantConfig.weight``)."""
    image_uri: str
    hardware: Hardware
    """Its instance types in priority order, with the engines each runs (planning/hardware.py)."""
    versions_environment: Mapping[str, str] = field(default_factory=dict)
    """``MODEL_VERSIONS`` of the pins its image bakes in (container_environment.model_versions_environment)."""


class ServingEndpoint(Construct):
    """A real-time endpoint with one SageMaker model per production variant.

    Redeploys keep the runtime state of every variant: the endpoint sets
    ``RetainAllVariantProperties`` with no exclusion, so ``DesiredInstanceCount`` stays with
    Application Auto Scaling and ``DesiredWeight`` with ``ops promote``/``rollback``
    (UpdateEndpointWeightsAndCapacities). A weight in config is the creation-time weight only:
    changing it makes a new endpoint config, and UpdateEndpoint "deploys the EndpointConfig
    specified in the request to a new fleet of instances" (SageMaker API reference), every
    instance replaced for a weight the endpoint then does not apply.

    Attributes:
        endpoint: the ``AWS::SageMaker::Endpoint``.
        endpoint_config: the ``AWS::SageMaker::EndpointConfig`` (replaced on every change).
        models: variant name to its ``AWS::SageMaker::Model`` (the shadow's too).
        pool_models: ``(variant name, instance type)`` to the model of a fallback instance type that needs its
            own (``instance_pools``: other engines, or its own compile cache).
        shadow_variant_name: the shadow variant's name, or None.
        log_group: ``/aws/sagemaker/Endpoints/<endpoint>``, where container stdout (and EMF) lands.
        endpoint_name: the endpoint's name (known at synth).
        variant_names: production variant names in order, primary first.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        variants: Sequence[VariantDeployment],
        role: iam.Role,
        environment: Mapping[str, str],
        hosting: EndpointHosting,
        log_group: FixedNameLogGroup,
        deployment_config: sagemaker.CfnEndpoint.DeploymentConfigProperty | None = None,
        retain_deployment_config: bool = False,
        shadow: VariantDeployment | None = None,
        data_capture: sagemaker.CfnEndpointConfig.DataCaptureConfigProperty | None = None,
    ) -> None:
        """
        Args:
            endpoint_name: the endpoint's name; fixed at synth because the role's log-group
                scope and the scaling ResourceIds need it before the endpoint exists.
            variants: production variants, primary first (1 or 2).
            role: execution role the models run with (already granted ECR pull and logs).
            environment: container environment shared by all variants (``VARIANT_NAME``
                is added per variant).
            hosting: startup health check, routing, AMI, network isolation, VPC and logs.
            log_group: the endpoint's log group (made by the stack, the same in both modes).
            deployment_config: blue/green guardrails for updates (see
                ``cdk_constructs.endpoint.deployment_guardrails``); None = SageMaker's default.
            retain_deployment_config: ``RetainDeploymentConfig``: reuse the previous
                deployment's config instead of ``deployment_config``.
            shadow: the shadow variant (``ShadowProductionVariants``; then ``variants`` holds only the primary).
            data_capture: the endpoint config's ``DataCaptureConfig`` (with the shadow: both variants' requests and
                answers).
        """
        super().__init__(scope, construct_id)
        self.endpoint_name = endpoint_name
        self.variant_names = [variant.config.variant_name for variant in variants]
        self.log_group = log_group.log_group
        self.models: dict[str, sagemaker.CfnModel] = {}
        self.pool_models: dict[tuple[str, str], sagemaker.CfnModel] = {}
        production_variants = [self._production_variant(v, role, environment, hosting) for v in variants]
        shadow_variants = [self._production_variant(shadow, role, environment, hosting)] if shadow else None
        self.shadow_variant_name = shadow.config.variant_name if shadow else None
        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self,
            "EndpointConfig",
            production_variants=production_variants,
            shadow_production_variants=shadow_variants,
            data_capture_config=data_capture,
            metrics_config=hosting.metrics_config,
        )
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            # Application Auto Scaling owns DesiredInstanceCount and ops promote/rollback own
            # DesiredWeight; without this, every stack update resets both to the endpoint
            # config's initial values (docs/sources.md, "Deployment guardrails").
            retain_all_variant_properties=True,
            deployment_config=deployment_config,
            retain_deployment_config=retain_deployment_config if deployment_config is not None else None,
        )
        # The log group must exist (with its retention) before the first container writes.
        self.endpoint.node.add_dependency(log_group)

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` invoke the endpoint, sync and streaming
        (:func:`~cdk_constructs.endpoint.invoke_grant.grant_invoke`)."""
        return grant_invoke(grantee, endpoint=self.endpoint)

    def _production_variant(
        self,
        variant: VariantDeployment,
        role: iam.Role,
        environment: Mapping[str, str],
        hosting: EndpointHosting,
    ) -> sagemaker.CfnEndpointConfig.ProductionVariantProperty:
        """One variant's SageMaker model (kept in :attr:`models`) and its ``ProductionVariant`` (a shadow's too:
        ``ShadowProductionVariants`` takes the same shape). With ``instance_pools`` the variant names its types in
        ``InstancePools`` instead of ``InstanceType`` (SageMaker developer guide, "Deploy to multiple instance types
        with instance pools")."""
        name = variant.config.variant_name
        own = variant.hardware.own
        model = self._model(variant, own, role, environment, hosting)
        self.models[name] = model
        pools = None
        if variant.hardware.is_mixed:
            pools = [self._instance_pool(variant, pool, role, environment, hosting) for pool in variant.hardware.pools]
        return sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=name,
            model_name=model.attr_model_name,
            instance_type=None if pools else own.instance_type,
            instance_pools=pools,
            variant_instance_provision_timeout_in_seconds=(
                variant.config.instance_provision_timeout_s if pools else None
            ),
            capacity_reservation_config=_reservation(variant.config),
            initial_instance_count=variant.config.initial_instance_count,
            initial_variant_weight=variant.weight,
            container_startup_health_check_timeout_in_seconds=hosting.startup_health_check_timeout_s,
            routing_config=hosting.routing_config,
            inference_ami_version=hosting.inference_ami_version,
        )

    def _instance_pool(
        self,
        variant: VariantDeployment,
        pool: Pool,
        role: iam.Role,
        environment: Mapping[str, str],
        hosting: EndpointHosting,
    ) -> sagemaker.CfnEndpointConfig.InstancePoolProperty:
        """One ``InstancePool``: its own model (``ModelNameOverride``) when the variant's would not fit it: other
        engines per instance (the container's ``--data-parallel-size``), or a compile cache made on its type."""
        own = variant.hardware.own
        override = None
        if pool.priority > 1 and (pool.engines != own.engines or hosting.compile_cache is not None):
            model = self._model(variant, pool, role, environment, hosting)
            self.pool_models[(variant.config.variant_name, pool.instance_type)] = model
            override = model.attr_model_name
        return sagemaker.CfnEndpointConfig.InstancePoolProperty(
            instance_type=pool.instance_type, priority=pool.priority, model_name_override=override
        )

    def _model(
        self,
        variant: VariantDeployment,
        pool: Pool,
        role: iam.Role,
        environment: Mapping[str, str],
        hosting: EndpointHosting,
    ) -> sagemaker.CfnModel:
        """The variant's model for ``pool``'s instance type: the variant's own for priority 1, else one named
        ``<variant>-pool<priority>`` (its construct id and compile-cache job names)."""
        name = variant.config.variant_name
        return serving_model(
            self,
            variant_name=name,
            model_key=name if pool.priority == 1 else f"{name}-pool{pool.priority}",
            image_uri=variant.image_uri,
            instance_type=pool.instance_type,
            role=role,
            environment=environment,
            hosting=hosting,
            data_parallel_size=pool.engines,
            versions_environment=variant.versions_environment,
        )


def _reservation(config: VariantShape) -> sagemaker.CfnEndpointConfig.CapacityReservationConfigProperty | None:
    """The variant's ``CapacityReservationConfig`` (``serving.<variant>.capacity_reservation``), or None on demand."""
    reservation = config.capacity_reservation
    if reservation is None:
        return None
    return sagemaker.CfnEndpointConfig.CapacityReservationConfigProperty(
        capacity_reservation_preference=reservation.preference, ml_reservation_arn=reservation.ml_reservation_arn
    )
