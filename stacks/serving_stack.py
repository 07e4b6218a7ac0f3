"""Deployment unit: the SageMaker endpoint, as production variants or as inference components."""

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from app_config import AppConfig
from app_config.pins import component_pin_problem, pin_package_group, pins_in_effect
from app_config.variants import capacity_job_instance_types
from cdk_constructs.approval.approved_pins import ApprovedPins, PinToApprove
from cdk_constructs.capacity_job.capacity_job import CapacityJob
from cdk_constructs.common.fixed_name_log_group import finish_log_retention_provider
from cdk_constructs.common.log_retention import log_removal_policy, retention_days
from cdk_constructs.compile_cache.compile_cache import CompileCacheMaker
from cdk_constructs.endpoint.components_serving import ComponentsServing
from cdk_constructs.endpoint.container_environment import container_environment, model_versions_environment
from cdk_constructs.endpoint.data_capture import DataCapture
from cdk_constructs.endpoint.deployment_guardrail_alarms import DeploymentGuardrailAlarms
from cdk_constructs.endpoint.inference_execution_role import InferenceExecutionRole
from cdk_constructs.endpoint.serving_mode import AdapterArtifacts, ServingModeConstruct, VariantImages
from cdk_constructs.endpoint.serving_model import EndpointHosting, endpoint_log_group
from cdk_constructs.endpoint.variants_serving import ShadowPlan, VariantsServing
from cdk_constructs.observability.endpoint_metrics import EndpointMetrics
from planning.plan import Plan
from planning.topology import serving_topology
from serving_contract import capacity_job, outputs
from serving_contract.data_capture import endpoint_prefix
from serving_contract.model_packages import registered_key


class ServingStack(cdk.Stack):
    """The serving system: execution role, log group, the endpoint and its scaling, the guardrails.

    The plan's units (planning/units.py) pick the endpoint's construct: :class:`VariantsServing` (a SageMaker model per
    production variant, blue/green deployments) or :class:`ComponentsServing` (one variant hosting a
    base component and one component per adapter, rolling updates). The stack wires either through
    :class:`ServingModeConstruct`: the role, the log group, the guardrail alarms and the outputs are
    the same in both.

    Attributes:
        endpoint: the endpoint of the configured mode, with its scaling.
        endpoint_log_group: ``/aws/sagemaker/Endpoints/<endpoint>``.
        topology: what monitoring and scaling name in this mode.
        guardrail_alarms: the alarms deployments roll back on (``serving_contract.alarms``).
        data_capture: the shadow phase's data capture (``serving.shadow.enabled``), or None.
        capacity_job: what ``ops throughput measure`` starts its jobs with, or None without the model-artifacts
            bucket (where the jobs read and write).
        approved_pins: the deploy's approval check (``release.deploy_approval``), or None when waived or when
            no pin is in effect.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        plan: Plan,
        images: VariantImages,
        adapter_artifacts: AdapterArtifacts | None = None,
        artifacts_bucket: s3.IBucket | None = None,
        **kwargs: Any,
    ) -> None:
        """
        Args:
            config: the app's config.
            plan: its plan (planning/plan.py): the variants with their resolved scaling, the copy
                target, prefix-aware routing's fields.
            images: the image of each variant.
            adapter_artifacts: where the adapter components' archives are (inference_components mode).
            artifacts_bucket: the model-artifacts bucket, where each model's compile cache is made
                (``serving.compile_cache.enabled``), the shadow phase captures (``serving.shadow.enabled``) and
                the capacity jobs read and write; None when the app has none.

        Raises:
            ValueError: inference_components mode without ``adapter_artifacts``, or the compile cache or the
                shadow on without ``artifacts_bucket`` (composition's errors).
        """
        super().__init__(scope, construct_id, **kwargs)
        serving = config.serving
        self.topology = serving_topology(plan)
        execution_role = InferenceExecutionRole(
            self,
            "ExecutionRole",
            vpc_placement=serving.vpc is not None,
            repositories=images.repositories,
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
        compile_cache = None
        if serving.compile_cache.enabled:
            if artifacts_bucket is None:
                raise ValueError("serving.compile_cache needs the model-artifacts bucket (composition)")
            compile_cache = CompileCacheMaker(
                self,
                "CompileCache",
                bucket=artifacts_bucket,
                repositories=list(images.repositories),
                endpoint_name=config.endpoint_name,
                config=serving.compile_cache,
                log_retention=retention_days(config.observability.log_retention_days),
                log_removal_policy=log_removal_policy(config.observability.retain_logs_on_delete),
                job_log_retention=retention_days(config.observability.processing_job_log_retention_days),
            )
        # After the compile cache, whose construct makes /aws/sagemaker/ProcessingJobs first (one per stack).
        self.capacity_job = self._capacity_job(config, images, artifacts_bucket)
        hosting = _hosting(config, plan, compile_cache)  # both modes and the log group take the same settings
        # Here, not in the mode's construct: one construct whichever mode is deployed.
        self.endpoint_log_group = endpoint_log_group(self, "EndpointLogGroup", config.endpoint_name, hosting)
        self.data_capture: DataCapture | None = None
        if serving.shadow.enabled:
            if artifacts_bucket is None:
                raise ValueError("serving.shadow needs the model-artifacts bucket, where it captures (composition)")
            self.data_capture = DataCapture(
                self,
                "DataCapture",
                bucket=artifacts_bucket,
                endpoint_name=config.endpoint_name,
                execution_role=execution_role.role,
                capture_percent=serving.shadow.capture_share,
            )
            if config.image.build.artifacts_bucket_name:
                cdk.Annotations.of(self).add_warning_v2(
                    "Serving:DataCaptureRetention",
                    f"serving.shadow captures requests and answers to {config.image.build.artifacts_bucket_name}, a "
                    "bucket this app does not manage: serving.shadow.capture_retention_days is not applied there; "
                    "give the bucket a lifecycle rule that expires data-capture/ (they hold user prompts)",
                )
        self.endpoint = self._serving_mode(config, plan, images, execution_role.role, hosting, adapter_artifacts)
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
            slo=config.slo,
            error_rate=config.monitoring.canary_error_rate,
            ttft_p95=config.monitoring.canary_ttft_p95,
            model_latency_p99=config.monitoring.canary_model_latency_p99,
            client_error_rate=config.monitoring.canary_client_error_rate,
            client_error_baseline_cap_percent=config.monitoring.canary_client_error_baseline_cap_percent,
        )
        self.endpoint.rollout_target.node.add_dependency(self.guardrail_alarms)
        self.approved_pins = self._approval_check(config, hosting)
        execution_role.write_to(self.endpoint.log_groups)
        self._outputs(config, execution_role.role, artifacts_bucket.bucket_name if artifacts_bucket else "")
        finish_log_retention_provider(self)

    def _capacity_job(
        self, config: AppConfig, images: VariantImages, artifacts_bucket: s3.IBucket | None
    ) -> CapacityJob | None:
        """What ``ops throughput measure`` starts its jobs with, in both modes alike (the job runs the primary's
        image, the base model and every adapter in it); None without the bucket the jobs read and write."""
        if artifacts_bucket is None:
            return None
        return CapacityJob(
            self,
            "CapacityJob",
            bucket=artifacts_bucket,
            repositories=list(images.repositories),
            image_uri=images.primary,
            endpoint_name=config.endpoint_name,
            max_runtime_s=config.throughput.job.max_runtime_s,
            instance_types=capacity_job_instance_types(config.throughput.job, config.serving),
            job_log_retention=retention_days(config.observability.processing_job_log_retention_days),
        )

    def _serving_mode(  # noqa: PLR0917 (private; its call site names every part)
        self,
        config: AppConfig,
        plan: Plan,
        images: VariantImages,
        role: iam.Role,
        hosting: EndpointHosting,
        adapter_artifacts: AdapterArtifacts | None,
    ) -> ServingModeConstruct:
        """The endpoint of ``serving.mode``, given the parts of the config it reads."""
        serving = config.serving
        environment = container_environment(config)  # the same in both modes
        # "Default" (ServingModeConstruct): the endpoint keeps the logical ids it had as the stack's child.
        if plan.unit("base") is not None:  # the plan's units: a base component and its adapters
            if adapter_artifacts is None:
                raise ValueError("inference_components mode needs the adapter artifacts' bucket (composition)")
            return ComponentsServing(
                self,
                "Default",
                endpoint_name=config.endpoint_name,
                variant=serving.primary,
                components=plan.inference_components,  # with its derived copy target
                adapters=[adapter.name for adapter in config.model.adapters],
                environment=environment,
                accelerators_per_copy=config.engine.tensor_parallel_size,
                pin_problem=component_pin_problem(config),
                images=images,
                role=role,
                hosting=hosting,
                log_group=self.endpoint_log_group,
                adapter_artifacts=adapter_artifacts,
            )
        return VariantsServing(
            self,
            "Default",
            endpoint_name=config.endpoint_name,
            variants=plan.variants(),
            hardware=plan.hardware,
            environment=environment,
            versions_environments={v.key: model_versions_environment(config, v.key) for v in plan.variants()},
            rollout=config.scaling.rollout,
            timezone=config.scaling.timezone,
            metrics_namespace=config.observability.metrics_namespace,
            log_retention=hosting.log_retention,
            log_removal_policy=hosting.log_removal_policy,
            images=images,
            role=role,
            hosting=hosting,
            log_group=self.endpoint_log_group,
            shadow=self._shadow_plan(config, plan),
        )

    def _shadow_plan(self, config: AppConfig, plan: Plan) -> ShadowPlan | None:
        """The shadow variant's part of the endpoint (``serving.shadow``, variants mode only: check_shadow)."""
        if self.data_capture is None:
            return None
        return ShadowPlan(
            config=config.serving.shadow,
            primary_weight=config.serving.primary.initial_weight,
            scaling_enabled=config.scaling.shadow.enabled,
            target_tracking=plan.scaling.shadow.target_tracking,  # its concurrency target derived
            data_capture=self.data_capture.property,
            versions_environment=model_versions_environment(config, "shadow"),
        )

    def _approval_check(self, config: AppConfig, hosting: EndpointHosting) -> ApprovedPins | None:
        """The deploy's own approval check (``release.deploy_approval``): what deploys the pins waits for it."""
        if not config.release.deploy_approval.enforced:
            return None
        pins = []
        for ref in pins_in_effect(config):
            group, artifact = pin_package_group(config, ref)
            package = config.release.registered_packages.get(registered_key(artifact, ref.version), "")
            pins.append(PinToApprove(ref.key, ref.pin, group, artifact, package))
        if not pins:  # never with the check enforced: config refuses a prebuilt image then (check_deploy_approval)
            return None
        check = ApprovedPins(
            self,
            "ApprovedPins",
            pins=pins,
            log_retention=hosting.log_retention,
            log_removal_policy=hosting.log_removal_policy,
        )
        for resource in self.endpoint.pinned_resources:
            resource.node.add_dependency(check.resource)
        return check

    def _outputs(self, config: AppConfig, role: iam.Role, bucket_name: str) -> None:
        cdk.CfnOutput(self, outputs.ENDPOINT_NAME, value=config.endpoint_name)
        cdk.CfnOutput(self, outputs.SERVING_MODE, value=config.serving.mode)
        cdk.CfnOutput(self, outputs.PRIMARY_VARIANT_NAME, value=config.serving.primary.variant_name)
        for key, value in self.endpoint.outputs.items():
            cdk.CfnOutput(self, key, value=value)
        if self.data_capture is not None:
            cdk.CfnOutput(self, outputs.DATA_CAPTURE_PREFIX, value=endpoint_prefix(config.endpoint_name))
        cdk.CfnOutput(self, outputs.EXECUTION_ROLE_ARN, value=role.role_arn)
        cdk.CfnOutput(self, outputs.LOG_GROUP_NAME, value=self.endpoint_log_group.log_group.log_group_name)
        if self.capacity_job is not None:
            self._capacity_job_outputs(self.capacity_job, bucket_name)

    def _capacity_job_outputs(self, job: CapacityJob, bucket_name: str) -> None:
        """What ``ops throughput measure`` reads (serving_contract/capacity_job.py). The image and the bucket only
        when known at synth: another stack's value would be an export re-exported (cfn-lint W6001)."""
        cdk.CfnOutput(self, capacity_job.OUTPUT_ROLE_ARN, value=job.role.role_arn)
        cdk.CfnOutput(self, capacity_job.OUTPUT_CODE_URI, value=job.code_uri)
        cdk.CfnOutput(self, capacity_job.OUTPUT_KMS_KEY_ARN, value=job.key.key_arn)
        cdk.CfnOutput(self, capacity_job.OUTPUT_OPERATOR_POLICY_ARN, value=job.operator_policy.managed_policy_arn)
        for key, value in ((capacity_job.OUTPUT_IMAGE_URI, job.image_uri), (capacity_job.OUTPUT_BUCKET, bucket_name)):
            if not cdk.Token.is_unresolved(value):
                cdk.CfnOutput(self, key, value=value)


def _hosting(config: AppConfig, plan: Plan, compile_cache: CompileCacheMaker | None = None) -> EndpointHosting:
    """What both topologies take alike from ``serving.*`` and ``observability.*``."""
    serving, observability = config.serving, config.observability
    # throughput.routing = prefix_aware: SageMaker's prefix-aware routing, both fields derived
    # (planning/prefix_routing.py); otherwise serving.routing_strategy.
    prefix_routing = plan.prefix_routing
    return EndpointHosting(
        startup_health_check_timeout_s=serving.container_startup_health_check_timeout_s,
        routing_strategy="PREFIX_AWARE"
        if prefix_routing is not None
        else serving.routing_strategy or "LEAST_OUTSTANDING_REQUESTS",
        prefix_routing=prefix_routing,
        inference_ami_version=serving.inference_ami_version,
        network_isolation=serving.network_isolation,
        vpc=serving.vpc,
        log_retention=retention_days(observability.log_retention_days),
        log_removal_policy=log_removal_policy(observability.retain_logs_on_delete),
        detailed_observability=observability.detailed_observability,
        metric_publish_frequency_s=observability.metric_publish_frequency_s,
        compile_cache=compile_cache,
    )
