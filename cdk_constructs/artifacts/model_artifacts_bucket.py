"""S3 bucket for model artifacts (base models and LoRA adapters with CURRENT pointers)."""

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk_constructs.common.access_logs import access_logs_bucket
from cdk_constructs.common.bucket_defaults import abort_incomplete_uploads, send_events_to_eventbridge
from cdk_constructs.common.nag import guard_suppress
from cdk_constructs.common.removal import RETAIN_EXCEPT_ON_CREATE
from serving_contract.data_capture import DATA_CAPTURE_PREFIX
from serving_contract.model_artifacts import RELEASE_SCRATCH_PREFIX


class ModelArtifactsBucket(Construct):
    """A versioned, encrypted, TLS-only, private bucket with server access logging and events to EventBridge.

    Layout and digest: serving_contract/model_artifacts.py. Both buckets are retained when
    the stack is deleted: they hold the only copy of trained weights and their audit trail;
    but not when the stack's first create fails (``RetainExceptOnCreate``): they are empty then,
    and a retry must not meet leftovers.

    Attributes:
        bucket: the artifacts bucket.
        access_logs: the bucket receiving its server access logs.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, capture_retention_days: int, scratch_retention_days: int
    ) -> None:
        """
        Args:
            capture_retention_days: days the shadow phase's captured answers (``data-capture/``) are kept, every
                version of them (``serving.shadow.capture_retention_days``).
            scratch_retention_days: days a release run's intermediate checkpoint (``release-scratch/``) is kept
                (``release.scratch_retention_days``).
        """
        super().__init__(scope, construct_id)
        self.access_logs = access_logs_bucket(self, "AccessLogs", logged="the artifacts bucket")
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            versioned=True,  # an overwritten CURRENT pointer or version folder can be recovered
            lifecycle_rules=[
                abort_incomplete_uploads(),
                s3.LifecycleRule(
                    id="ExpireDataCapture",
                    prefix=f"{DATA_CAPTURE_PREFIX}/",
                    expiration=cdk.Duration.days(capture_retention_days),
                    # Versioned: an expired capture leaves a noncurrent version; it goes the next day.
                    noncurrent_version_expiration=cdk.Duration.days(1),
                ),
                s3.LifecycleRule(
                    id="ExpireReleaseScratch",
                    prefix=f"{RELEASE_SCRATCH_PREFIX}/",
                    expiration=cdk.Duration.days(scratch_retention_days),
                    noncurrent_version_expiration=cdk.Duration.days(1),
                ),
            ],
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="model-artifacts/",
            removal_policy=RETAIN_EXCEPT_ON_CREATE,
        )
        guard_suppress(
            self.bucket,
            "CT.S3.PR.10",
            "SSE-S3: the build (CodeBuild), the compile-cache jobs (SageMaker), Bedrock Custom Model Import and the "
            "ops tooling read the weights with IAM alone, across stacks and service roles; a customer-managed key "
            "would need each of them in its key policy. Access is already limited by prefix (grant_archive_read).",
        )
        send_events_to_eventbridge(self.bucket)
        guard_suppress(
            self.bucket,
            "CT.S3.PR.9",
            "No S3 Object Lock: it is one-way (it cannot be turned off again, S3 user guide 'Configuring S3 Object "
            "Lock'); without a default retention it adds nothing to versioning and this retained bucket, and with one "
            "superseded weights (GBs each) could not be removed until it ran out.",
        )


def grant_archive_read(bucket: s3.IBucket, grantee: iam.IGrantable, keys: Sequence[str]) -> None:
    """Read access to exactly ``keys``: ``s3:GetObject`` on each, ``s3:ListBucket`` only where
    ``s3:prefix`` is one of them.

    ``bucket.grant_read(grantee, key)`` would also give ``s3:List*`` and ``s3:GetBucket*`` on the
    whole bucket, so the grantee could list every artifact (issue 22). Listing stays possible for
    exactly these keys (a downloader may list a key to check it exists), nothing else.

    It does not turn a missing archive's 403 into a 404: S3 answers a GetObject of a missing key
    with 404 only to a caller allowed ``s3:ListBucket`` (S3 API reference, GetObject), and a
    GetObject carries no ``s3:prefix``, so a condition on that key does not match (IAM: a
    condition key absent from the request does not match). A missing archive answers 403;
    ``cdk_constructs/compile_cache/runtime/index.py`` lists before it reads for that reason.
    """
    grantee.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects(key) for key in keys])
    )
    grantee.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringEquals": {"s3:prefix": list(keys)}},
        )
    )
