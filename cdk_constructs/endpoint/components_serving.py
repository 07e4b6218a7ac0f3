"""``serving.mode = inference_components``: one production variant hosting a base component and one
component per adapter, the base component's copy scaling (optionally to zero) and rolling updates."""

from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_iam as iam
from constructs import Construct

from app_config.inference_components import InferenceComponentsConfig
from app_config.serving import VariantConfig
from cdk_constructs.artifacts.model_artifacts_bucket import grant_archive_read
from cdk_constructs.common.fixed_name_log_group import FixedNameLogGroup
from cdk_constructs.common.placeholder_pins import refuse_placeholder_pins
from cdk_constructs.endpoint.inference_component_endpoint import InferenceComponentEndpoint
from cdk_constructs.endpoint.serving_mode import AdapterArtifacts, VariantImages
from cdk_constructs.endpoint.serving_model import EndpointHosting
from cdk_constructs.scaling.component_autoscaling import ComponentAutoscaling
from serving_contract import outputs
from serving_contract.alarms import rollback_alarm_names
from serving_contract.components import BASE_SUFFIX, adapter_component_name, base_component_name


class ComponentsServing(Construct):
    """The endpoint of inference components and the base component's copy scaling.

    Implements :class:`~cdk_constructs.endpoint.serving_mode.ServingModeConstruct`. The stack adds it
    as ``Default``, so the construct ids below are the ones the stack's own children had: they make
    the logical ids.

    Attributes:
        endpoint_construct: the :class:`InferenceComponentEndpoint` (pool, base and adapter components).
        endpoint, endpoint_name, variant_names, log_groups, rollout_target, pinned_resources, scalable_targets,
            outputs:
            the :class:`ServingModeConstruct` face.
        autoscaling: the base component's :class:`ComponentAutoscaling`.

    An adapter pin that still holds the placeholder (``pin_problem``, decided in
    :func:`app_config.pins.component_pin_problem`) adds the stack's CloudFormation rule
    (``cdk_constructs.common.placeholder_pins``): the synth works offline, the deploy is refused.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        variant: VariantConfig,
        components: InferenceComponentsConfig,
        adapters: Sequence[str],
        environment: Mapping[str, str],
        accelerators_per_copy: int,
        pin_problem: str | None,
        images: VariantImages,
        role: iam.Role,
        hosting: EndpointHosting,
        log_group: FixedNameLogGroup,
        adapter_artifacts: AdapterArtifacts,
    ) -> None:
        """
        Args:
            endpoint_name: the endpoint's name (``endpoint_name``; the components' names derive from it).
            variant: the production variant hosting the components (``serving.primary``: name, instance type).
            components: copies, instances, reservations, rollout and adapter pins (``serving.inference_components``).
            adapters: LoRA adapter names (``model.adapters``); one component each.
            environment: the container's environment (``container_environment``).
            accelerators_per_copy: GPUs one copy takes (``engine.tensor_parallel_size``).
            pin_problem: the one-line refusal when an adapter pin is a placeholder, else None
                (:func:`app_config.pins.component_pin_problem`).
            images: the image of the base component (``images.primary``; it bakes no adapter).
            role: the execution role, already granted its ECR pull (CreateModel checks it).
            hosting: health check, routing, AMI, placement and log settings (per copy).
            log_group: the endpoint's log group (the stack's, the same in both modes).
            adapter_artifacts: the bucket and prefix of the adapters' archives.
        """
        super().__init__(scope, construct_id)
        # Offline synth works on every default; the deploy refuses the placeholders, as in variants mode.
        refuse_placeholder_pins(self, pin_problem)
        self.endpoint_construct = InferenceComponentEndpoint(
            self,
            "ComponentEndpoint",
            endpoint_name=endpoint_name,
            variant_name=variant.variant_name,
            instance_type=variant.instance_type,
            image_uri=images.primary,
            role=role,
            environment=environment,
            components=components,
            accelerators_per_copy=accelerators_per_copy,
            adapter_artifact_urls={
                name: adapter_artifacts.url(name, components.adapter_artifacts[name]) for name in adapters
            },
            rollback_alarm_names=rollback_alarm_names(endpoint_name, BASE_SUFFIX),
            hosting=hosting,
            log_group=log_group,
        )
        # SageMaker downloads each adapter component's ArtifactUrl with the execution role: read
        # access to exactly those archives; listing limited to their keys.
        grant_archive_read(
            adapter_artifacts.bucket,
            role,
            [adapter_artifacts.key(name, components.adapter_artifacts[name]) for name in adapters],
        )
        base_name = base_component_name(endpoint_name)
        self.autoscaling = ComponentAutoscaling(
            self,
            "BaseComponentScaling",
            component=self.endpoint_construct.base_component,
            component_name=base_name,
            min_copies=components.min_copy_count,
            max_copies=components.max_copy_count,
            scaling=components.scaling,
            scale_to_zero=components.scale_to_zero,
        )
        self.endpoint = self.endpoint_construct.endpoint
        self.endpoint_name = endpoint_name
        self.variant_names = self.endpoint_construct.variant_names
        self.log_groups = [self.endpoint_construct.log_group, self.endpoint_construct.component_log_group]
        self.rollout_target: cdk.CfnResource = self.endpoint_construct.base_component
        self.pinned_resources: Sequence[cdk.CfnResource] = [
            self.endpoint_construct.base_component,
            *self.endpoint_construct.adapter_components.values(),
        ]
        self.scalable_targets: Mapping[str, appscaling.ScalableTarget] = {base_name: self.autoscaling.scalable_target}
        self.outputs: Mapping[str, str] = {
            outputs.BASE_COMPONENT_NAME: base_name,
            **{
                outputs.adapter_component_output(name): adapter_component_name(endpoint_name, name) for name in adapters
            },
        }

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` invoke the endpoint's base and adapter components, sync and streaming."""
        return self.endpoint_construct.grant_invoke(grantee)
