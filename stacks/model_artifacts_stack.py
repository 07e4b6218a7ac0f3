"""Deployment unit: the model-artifacts bucket, deployed before anything that reads it."""

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk_constructs.artifacts.model_artifacts_bucket import ModelArtifactsBucket
from serving_contract import outputs


class ModelArtifactsStack(cdk.Stack):
    """The bucket that base models and LoRA adapters are uploaded to, in a stack of its own.

    Why its own stack: the data has to be in the bucket before an image is built from it
    (ImageBuild) or an adapter component loads from it (Serving). With the bucket in the
    ImageBuild stack, the first deploy started a build on a bucket that was always empty
    (issue 20). Deploy order: this stack and ImageRepository (`make deploy-foundation`),
    upload and pin the artifacts, then everything (`make deploy`); docs/deploy.md.

    The bucket's name and ARN are always exported, whether or not a consumer imports them
    this synth: CloudFormation refuses to delete an export another stack imports, and a
    consumer that stops importing (a switch back from ``inference_components`` to
    ``variants``) would otherwise make this stack drop the export in the same deploy.

    Attributes:
        bucket: the model-artifacts bucket.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        capture_retention_days: int,
        scratch_retention_days: int,
        **kwargs: Any,
    ) -> None:
        """
        Args:
            capture_retention_days: how long the shadow phase's captures stay
                (``serving.shadow.capture_retention_days``).
            scratch_retention_days: how long a release run's intermediate checkpoint stays
                (``release.scratch_retention_days``).
        """
        super().__init__(scope, construct_id, **kwargs)
        bucket = ModelArtifactsBucket(
            self,
            "ModelArtifacts",
            capture_retention_days=capture_retention_days,
            scratch_retention_days=scratch_retention_days,
        )
        self.bucket: s3.IBucket = bucket.bucket
        self.export_value(self.bucket.bucket_name)
        self.export_value(self.bucket.bucket_arn)
        cdk.CfnOutput(self, outputs.MODEL_ARTIFACTS_BUCKET_NAME, value=self.bucket.bucket_name)
