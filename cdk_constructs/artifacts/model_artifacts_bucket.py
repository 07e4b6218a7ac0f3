"""S3 bucket for model artifacts (base models and LoRA adapters with CURRENT pointers)."""

from collections.abc import Sequence

from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk_constructs.common.nag import acknowledge, checkov_skip
from cdk_constructs.common.removal import RETAIN_EXCEPT_ON_CREATE


class ModelArtifactsBucket(Construct):
    """A versioned, encrypted, TLS-only, private bucket with server access logging.

    Layout and digest: serving_contract/model_artifacts.py. Both buckets are retained when
    the stack is deleted: they hold the only copy of trained weights and their audit trail;
    but not when the stack's first create fails (``RetainExceptOnCreate``): they are empty then,
    and a retry must not meet leftovers.

    Attributes:
        bucket: the artifacts bucket.
        access_logs: the bucket receiving its server access logs.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,  # server access logging supports SSE-S3 only
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            removal_policy=RETAIN_EXCEPT_ON_CREATE,
        )
        self_logging = (
            "This bucket is the access-log destination of the artifacts bucket; logging it to itself would loop."
        )
        acknowledge(self.access_logs, "AwsSolutions-S1", self_logging)
        checkov_skip(self.access_logs, "CKV_AWS_18", self_logging)
        checkov_skip(
            self.access_logs,
            "CKV_AWS_21",
            "S3's log delivery writes each log object once under a new key; nothing overwrites one, so versions "
            "would only double storage.",
        )
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            versioned=True,  # an overwritten CURRENT pointer or version folder can be recovered
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="model-artifacts/",
            removal_policy=RETAIN_EXCEPT_ON_CREATE,
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
    ``lambdas/compile_cache`` lists before it reads for that reason.
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
