"""ECR repository of an image the app builds: the serving image (vLLM + baked weights), the release tools image."""

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from constructs import Construct

from cdk_constructs.common.removal import RETAIN_EXCEPT_ON_CREATE


class ModelImageRepository(Construct):
    """A private ECR repository for an image the app builds (the serving image, the release tools image).

    Tags are immutable (a tag always means the same weights), images are scanned on push
    and encrypted with KMS. The lifecycle rule expires untagged images only: a "keep the N
    newest" rule could expire the image a variant runs or a rollback returns to, and scale-out
    or instance replacement would then fail to pull it (issue 20).

    Attributes:
        repository: the ECR repository; grant pulls with ``repository.grant_pull(role)``.
    """

    def __init__(self, scope: Construct, construct_id: str, *, untagged_expiry_days: int) -> None:
        """
        Args:
            untagged_expiry_days: days after push that an untagged image expires
                (config ``image.untagged_image_expiry_days``).
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
                    description=f"Expire untagged images {untagged_expiry_days} days after push; never tagged ones",
                    tag_status=ecr.TagStatus.UNTAGGED,
                    max_image_age=cdk.Duration.days(untagged_expiry_days),
                )
            ],
            # Images are the rollback path: deleting the stack must not delete them.
            removal_policy=RETAIN_EXCEPT_ON_CREATE,
        )
