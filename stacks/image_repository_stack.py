"""Deployment unit: the ECR repository for the serving image (long-lived, rarely changes)."""

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from constructs import Construct

from app_config.image import ImageConfig
from cdk_constructs.image.model_image_repository import ModelImageRepository
from serving_contract import outputs


class ImageRepositoryStack(cdk.Stack):
    """Holds the ECR repository that the serving stack pulls from.

    Attributes:
        repository: the ECR repository.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        image: ImageConfig,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.repository: ecr.IRepository = ModelImageRepository(
            self, "ModelImageRepository", untagged_expiry_days=image.untagged_image_expiry_days
        ).repository
        cdk.CfnOutput(self, outputs.IMAGE_REPOSITORY_URI, value=self.repository.repository_uri)
