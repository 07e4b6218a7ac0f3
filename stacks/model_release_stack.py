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
from cdk_constructs.release.model_release_pipeline import KINDS, ModelReleasePipeline
from serving_contract import outputs


class ModelReleaseStack(cdk.Stack):
    """The release pipelines, their model package groups and role.

    Attributes:
        release: the :class:`ModelReleasePipeline`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        bucket: s3.IBucket,
        repository: ecr.IRepository,
        serving_image_uri: str,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        primary = config.variant("primary").serving
        self.release = ModelReleasePipeline(
            self,
            "ModelRelease",
            release=config.release,
            project_name=config.project_name,
            stage=config.stage,
            bucket=bucket,
            repository=repository,
            serving_image_uri=serving_image_uri,
            serving_instance_type=primary.instance_type,
            base_model_name=config.model.name,
            adapters=[adapter.name for adapter in config.model.adapters],
            max_lora_rank=config.engine.max_lora_rank,
            base_models_prefix=config.image.build.base_models_prefix,
            adapters_prefix=config.image.build.adapters_prefix,
            engine_environment=config.engine.environment(),
        )
        for kind in KINDS:
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
