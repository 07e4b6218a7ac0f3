"""Deployment unit: builds the serving image(s) in the account during ``cdk deploy``."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_s3 as s3
from constructs import Construct

from app_config import AppConfig
from cdk_constructs.common.log_retention import log_removal_policy, retention_days
from cdk_constructs.image.image_inputs import resolve_inputs
from cdk_constructs.image.serving_images import ServingImages
from serving_contract import outputs

REPO_ROOT = Path(__file__).resolve().parent.parent


class ImageBuildStack(cdk.Stack):
    """CodeBuild project and one image per variant, built from the model-artifacts bucket
    (:class:`ServingImages`).

    Attributes:
        image_uris: ``{"primary": uri, "canary": uri, "shadow": uri}``; the canary's and the shadow's equal the
            primary's when they have no artifacts of their own. Known at synth (the tag is).
        image_tags: ``{"primary": tag, "canary": tag, "shadow": tag}``, the same way.
        image_build: the :class:`ImageBuild` construct.
        docker_hub_cache: the :class:`DockerHubCache`, or None.
        artifacts_bucket: the model-artifacts bucket (the ModelArtifacts stack's, or the configured one).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        repository: ecr.IRepository,
        artifacts_bucket: s3.IBucket,
        source_root: Path = REPO_ROOT,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.artifacts_bucket = artifacts_bucket
        # "Default": the build's resources keep the logical ids they had as the stack's children.
        images = ServingImages(
            self,
            "Default",
            inputs=resolve_inputs(config),
            repository=repository,
            artifacts_bucket=artifacts_bucket,
            source_root=source_root,
            log_retention=retention_days(config.observability.log_retention_days),
            log_removal_policy=log_removal_policy(config.observability.retain_logs_on_delete),
        )
        self.image_build = images.image_build
        self.docker_hub_cache = images.docker_hub_cache
        self.image_uris: Mapping[str, str] = images.image_uris
        self.image_tags: Mapping[str, str] = images.image_tags

        cdk.CfnOutput(self, outputs.IMAGE_BUILD_PROJECT_NAME, value=self.image_build.project.project_name)
        cdk.CfnOutput(self, outputs.PRIMARY_IMAGE_TAG, value=self.image_tags["primary"])
        cdk.CfnOutput(self, outputs.CANARY_IMAGE_TAG, value=self.image_tags["canary"])
        if config.serving.shadow.enabled:
            cdk.CfnOutput(self, outputs.SHADOW_IMAGE_TAG, value=self.image_tags["shadow"])
