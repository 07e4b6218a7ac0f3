"""Deployment unit: the release pipelines of base-model and adapter versions (issue 36; docs/model-release.md).

A version reaches an endpoint only through them: quantize (base models), validate, load test, evaluate
against the quality gates, register in a model package group; ``ops preflight`` and ``ops pin_artifacts``
refuse a pin whose model package is not Approved.
"""

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_s3 as s3
from constructs import Construct

from app_config import AppConfig
from cdk_constructs.common.fixed_name_log_group import finish_log_retention_provider
from cdk_constructs.common.log_retention import log_removal_policy, retention_days
from cdk_constructs.release.model_release_pipeline import KINDS, ModelReleasePipeline
from cdk_constructs.release.tools_image import ToolsImage
from serving_contract import outputs
from serving_contract.model_artifacts import RELEASE_SCRATCH_PREFIX


class ModelReleaseStack(cdk.Stack):
    """The release pipelines, their model package groups and role, and the tools image their steps run.

    Attributes:
        tools_image: the :class:`ToolsImage` (built FROM ``serving_image_uri`` during the deploy).
        release: the :class:`ModelReleasePipeline`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        bucket: s3.IBucket,
        serving_image_uri: str,
        serving_image_repository: ecr.IRepository,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        primary = config.serving.primary
        build = config.image.build
        self.tools_image = ToolsImage(
            self,
            "ToolsImage",
            serving_image_uri=serving_image_uri,
            serving_image_repository=serving_image_repository,
            llmcompressor_version=config.release.quantize.llmcompressor_version,
            untagged_expiry_days=config.image.untagged_image_expiry_days,
            compute_type=build.compute_type,
            build_timeout=cdk.Duration.minutes(build.timeout_min),
            poll_interval=cdk.Duration.seconds(build.poll_interval_s),
            log_retention=retention_days(config.observability.log_retention_days),
            log_removal_policy=log_removal_policy(config.observability.retain_logs_on_delete),
        )
        self.release = ModelReleasePipeline(
            self,
            "ModelRelease",
            release=config.release,
            project_name=config.project_name,
            stage=config.stage,
            bucket=bucket,
            tools_repository=self.tools_image.repository,
            tools_image_uri=self.tools_image.image_uri,
            serving_image_uri=serving_image_uri,
            serving_image_repository=serving_image_repository,
            serving_instance_type=primary.instance_type,
            base_model_name=config.model.name,
            adapters=[adapter.name for adapter in config.model.adapters],
            max_lora_rank=config.engine.max_lora_rank,
            base_models_prefix=config.image.build.base_models_prefix,
            adapters_prefix=config.image.build.adapters_prefix,
            engine_environment=config.engine.environment(),
            job_log_retention=retention_days(config.observability.processing_job_log_retention_days),
        )
        if build.artifacts_bucket_name and config.release.quantize.enabled:
            cdk.Annotations.of(self).add_warning_v2(
                "Release:ScratchRetention",
                f"the Quantize step writes each run's checkpoint under {RELEASE_SCRATCH_PREFIX}/ of "
                f"{build.artifacts_bucket_name}, a bucket this app does not manage: release.scratch_retention_days is "
                f"not applied there; give the bucket a lifecycle rule that expires {RELEASE_SCRATCH_PREFIX}/",
            )
        for kind in KINDS:
            # A pipeline's ToolsImageUri default names the image only once it is pushed.
            self.release.pipelines[kind].node.add_dependency(self.tools_image.image)
            cdk.CfnOutput(
                self,
                outputs.release_pipeline_output(kind),
                value=self.release.pipelines[kind].pipeline_name,
                description=f"SageMaker Pipeline that releases a {kind.replace('_', ' ')} version (ops release)",
            )
            cdk.CfnOutput(
                self,
                outputs.model_package_group_output(kind),
                value=self.release.model_package_groups[kind].model_package_group_name,
                description=f"Model package group of released {kind.replace('_', ' ')} versions",
            )
        finish_log_retention_provider(self)
