"""An endpoint of inference components: one production variant, a base component, one per adapter.

:class:`~cdk_constructs.endpoint.components_serving.ComponentsServing` puts it together with the
base component's scaling; the guardrail alarms, dashboard and scaling read the differences from
the variants mode from :class:`planning.topology.ServingTopology`.

What SageMaker requires of this topology (SageMaker API reference: CreateEndpointConfig,
CreateInferenceComponent): the endpoint config carries ``ExecutionRoleArn`` and its variant no
``ModelName``; ``ManagedInstanceScaling`` sizes the instance pool; the base component names the
model and reserves accelerators, CPU cores and memory per copy; an adapter component names the
base component and an S3 ``ArtifactUrl`` (one ``.tar.gz``) and reserves nothing.
"""

from collections.abc import Mapping, Sequence

from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from app_config.inference_components import InferenceComponentsConfig
from cdk_constructs.common.fixed_name_log_group import FixedNameLogGroup
from cdk_constructs.endpoint.invoke_grant import grant_invoke
from cdk_constructs.endpoint.serving_model import EndpointHosting, serving_model
from serving_contract.components import adapter_component_name, base_component_name
from serving_contract.log_groups import component_log_group_name
from serving_contract.outputs import pascal_case


class InferenceComponentEndpoint(Construct):
    """A real-time endpoint hosting the base model and each LoRA adapter as inference components.

    Attributes:
        endpoint: the ``AWS::SageMaker::Endpoint``.
        endpoint_config: its ``AWS::SageMaker::EndpointConfig`` (no model on the variant).
        log_group: ``/aws/sagemaker/Endpoints/<endpoint>``.
        component_log_group: ``/aws/sagemaker/InferenceComponents/<base component>``.
        endpoint_name: the endpoint's name (known at synth).
        variant_names: the one production variant.
        models: variant name to the ``AWS::SageMaker::Model`` the base component runs.
        base_component: the base ``AWS::SageMaker::InferenceComponent``.
        adapter_components: adapter name to its ``AWS::SageMaker::InferenceComponent``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        variant_name: str,
        instance_type: str,
        image_uri: str,
        role: iam.IRole,
        environment: Mapping[str, str],
        components: InferenceComponentsConfig,
        accelerators_per_copy: int,
        adapter_artifact_urls: Mapping[str, str],
        rollback_alarm_names: Sequence[str],
        hosting: EndpointHosting,
        log_group: FixedNameLogGroup,
    ) -> None:
        """
        Args:
            endpoint_name: fixed at synth (scaling ResourceIds and alarms need the component names).
            variant_name: the production variant hosting the components.
            instance_type: the pool's instance type (validated in config against the GPU table).
            image_uri: the serving image (base model baked in, no adapters).
            role: execution role (ECR pull, logs, adapter artifacts read).
            environment: container environment (``LORA_RUNTIME_ADAPTERS=true``).
            components: copies, instances, reservations and rollout (``serving.inference_components``).
            accelerators_per_copy: GPUs one copy takes (``engine.tensor_parallel_size``).
            adapter_artifact_urls: adapter name to its ``s3://.../adapter.tar.gz``.
            rollback_alarm_names: alarms that roll a base-component update back.
            hosting: as in variants mode; the startup health check applies per copy, the log
                settings to both log groups.
            log_group: the endpoint's log group (made by the stack, the same in both modes).
        """
        super().__init__(scope, construct_id)
        self.endpoint_name = endpoint_name
        self.variant_names = [variant_name]
        base_name = base_component_name(endpoint_name)
        self.log_group = log_group.log_group
        # Where a component's container output lands is not in the developer guide; the
        # console and AWS's samples show /aws/sagemaker/InferenceComponents/<name>. Both groups
        # exist with retention, and the role may write to both.
        component_logs = FixedNameLogGroup(
            self,
            "ComponentLogGroup",
            log_group_name=component_log_group_name(base_name),
            retention=hosting.log_retention,
            removal_policy=hosting.log_removal_policy,
        )
        self.component_log_group = component_logs.log_group
        model = serving_model(
            self,
            variant_name=variant_name,
            image_uri=image_uri,
            instance_type=instance_type,
            role=role,
            environment=environment,
            hosting=hosting,
        )
        self.models = {variant_name: model}
        self.endpoint_config = self._build_endpoint_config(
            variant_name=variant_name, instance_type=instance_type, role=role, components=components, hosting=hosting
        )
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            # SageMaker owns the instance count (managed instance scaling): keep it on updates.
            retain_all_variant_properties=True,
        )
        self.endpoint.node.add_dependency(log_group, component_logs)
        self.base_component = self._build_base_component(
            base_name=base_name,
            variant_name=variant_name,
            model=model,
            components=components,
            accelerators_per_copy=accelerators_per_copy,
            rollback_alarm_names=rollback_alarm_names,
            hosting=hosting,
        )
        self.base_component.node.add_dependency(self.endpoint)
        self.adapter_components: dict[str, sagemaker.CfnInferenceComponent] = {}
        for adapter, artifact_url in adapter_artifact_urls.items():
            component = self._build_adapter_component(
                adapter, artifact_url, base_name=base_name, download_timeout_s=components.model_data_download_timeout_s
            )
            # The base component must be InService before SageMaker can load an adapter into it.
            component.node.add_dependency(self.base_component)
            self.adapter_components[adapter] = component

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` invoke the endpoint's base and adapter components, sync and streaming
        (:func:`~cdk_constructs.endpoint.invoke_grant.grant_invoke`)."""
        return grant_invoke(
            grantee, endpoint=self.endpoint, components=[self.base_component, *self.adapter_components.values()]
        )

    def _build_endpoint_config(
        self,
        *,
        variant_name: str,
        instance_type: str,
        role: iam.IRole,
        components: InferenceComponentsConfig,
        hosting: EndpointHosting,
    ) -> sagemaker.CfnEndpointConfig:
        """The endpoint config: the role SageMaker runs components with, and one variant whose instance
        pool managed instance scaling sizes (no model on the variant)."""
        endpoint_config = sagemaker.CfnEndpointConfig(
            self,
            "EndpointConfig",
            execution_role_arn=role.role_arn,
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=variant_name,
                    instance_type=instance_type,
                    initial_instance_count=components.initial_instance_count,
                    managed_instance_scaling=sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                        status="ENABLED",
                        min_instance_count=components.min_instance_count,
                        max_instance_count=components.max_instance_count,
                    ),
                    routing_config=hosting.routing_config,
                    inference_ami_version=hosting.inference_ami_version,
                )
            ],
            metrics_config=hosting.metrics_config,
        )
        # The components run with the config's role: wait for its policy (ECR pull, logs, adapter reads).
        policy = role.node.try_find_child("DefaultPolicy")
        if policy is not None:
            endpoint_config.node.add_dependency(policy)
        return endpoint_config

    def _build_base_component(
        self,
        *,
        base_name: str,
        variant_name: str,
        model: sagemaker.CfnModel,
        components: InferenceComponentsConfig,
        accelerators_per_copy: int,
        rollback_alarm_names: Sequence[str],
        hosting: EndpointHosting,
    ) -> sagemaker.CfnInferenceComponent:
        """The base model's component: its reservation per copy, its copies and its rolling update."""
        component = sagemaker.CfnInferenceComponent
        rollout = components.rollout
        return component(
            self,
            "BaseComponent",
            endpoint_name=self.endpoint_name,
            inference_component_name=base_name,
            variant_name=variant_name,
            specification=component.InferenceComponentSpecificationProperty(
                model_name=model.attr_model_name,
                compute_resource_requirements=component.InferenceComponentComputeResourceRequirementsProperty(
                    number_of_accelerator_devices_required=accelerators_per_copy,
                    number_of_cpu_cores_required=components.cpu_cores_per_copy,
                    min_memory_required_in_mb=components.memory_per_copy_mib,
                ),
                startup_parameters=component.InferenceComponentStartupParametersProperty(
                    container_startup_health_check_timeout_in_seconds=hosting.startup_health_check_timeout_s,
                ),
            ),
            runtime_config=component.InferenceComponentRuntimeConfigProperty(
                copy_count=components.initial_copy_count,
            ),
            # The canary of this mode: copies are replaced a batch at a time, and SageMaker
            # rolls back by itself when a guardrail alarm fires (used on updates only).
            deployment_config=component.InferenceComponentDeploymentConfigProperty(
                rolling_update_policy=component.InferenceComponentRollingUpdatePolicyProperty(
                    maximum_batch_size=component.InferenceComponentCapacitySizeProperty(
                        type="COPY_COUNT", value=rollout.maximum_batch_size_copies
                    ),
                    wait_interval_in_seconds=rollout.wait_interval_s,
                    maximum_execution_timeout_in_seconds=rollout.maximum_execution_timeout_s,
                    rollback_maximum_batch_size=component.InferenceComponentCapacitySizeProperty(
                        type="COPY_COUNT", value=rollout.rollback_maximum_batch_size_copies
                    ),
                ),
                auto_rollback_configuration=component.AutoRollbackConfigurationProperty(
                    alarms=[component.AlarmProperty(alarm_name=name) for name in rollback_alarm_names]
                ),
            ),
        )

    def _build_adapter_component(
        self, adapter: str, artifact_url: str, *, base_name: str, download_timeout_s: int
    ) -> sagemaker.CfnInferenceComponent:
        """An adapter's component: loaded into the base component from its archive, reserving nothing."""
        component = sagemaker.CfnInferenceComponent
        return component(
            self,
            f"{pascal_case(adapter)}Component",
            endpoint_name=self.endpoint_name,
            inference_component_name=adapter_component_name(self.endpoint_name, adapter),
            specification=component.InferenceComponentSpecificationProperty(
                base_inference_component_name=base_name,
                container=component.InferenceComponentContainerSpecificationProperty(artifact_url=artifact_url),
                startup_parameters=component.InferenceComponentStartupParametersProperty(
                    model_data_download_timeout_in_seconds=download_timeout_s,
                ),
            ),
        )
