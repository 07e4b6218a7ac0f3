"""ECR repository holding the serving image (vLLM + baked weights)."""

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from constructs import Construct


class ModelImageRepository(Construct):
    """A private ECR repository for the serving image.

    Tags are immutable (a tag always means the same weights), images are scanned on push
    and encrypted with KMS, and a lifecycle rule keeps only the newest images.

    Attributes:
        repository: the ECR repository; grant pulls with ``repository.grant_pull(role)``.
    """

    def __init__(self, scope: Construct, construct_id: str, *, keep_last_images: int) -> None:
        """
        Args:
            keep_last_images: images kept by the lifecycle rule (config ``image.keep_last_images``).
        """
        super().__init__(scope, construct_id)
        self.repository = ecr.Repository(
            self,
            "Repository",
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            # Basic scanning; nothing gates a deploy on its findings (asynchronous, OS packages only;
            # enhanced scanning is Inspector, a registry-wide choice): docs/image-build.md, "ECR scanning".
            image_scan_on_push=True,
            encryption=ecr.RepositoryEncryption.KMS,
            lifecycle_rules=[
                ecr.LifecycleRule(
                    description=f"Keep the {keep_last_images} most recent images",
                    max_image_count=keep_last_images,
                )
            ],
            # Images are the rollback path: deleting the stack must not delete them.
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
