"""The migration's comparison store: the pairs the clients write, their scores, human samples and reports."""

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk_constructs.common.access_logs import access_logs_bucket
from cdk_constructs.common.bucket_defaults import abort_incomplete_uploads, send_events_to_eventbridge
from cdk_constructs.common.kms_keys import deny_grants_except_for_aws_services
from cdk_constructs.common.nag import guard_suppress
from cdk_constructs.common.removal import RETAIN_EXCEPT_ON_CREATE

NONCURRENT_KEPT_DAYS = 1
"""Days an expired or overwritten object's old version stays: versioning lets a mistaken overwrite be recovered;
a day is enough to notice one, and short enough that an expired pair is gone."""


class ComparisonStore(Construct):
    """One S3 bucket under a customer-managed key of its own (docs/security.md, "The migration's comparison store").

    Everything in it expires ``retention_days`` after it was written, every version of it (pairs hold users'
    answers). It is versioned, TLS-only, private, logs its access to a bucket of its own and sends its events to
    EventBridge. Default encryption is SSE-KMS with the key (bucket keys on: one KMS call per object batch, not
    per object); the bucket policy refuses a put that names another key or another kind of encryption, so the
    clients' batched puts (which name the key) and the ops commands' (which rely on the default) both land under
    it. The key rotates yearly, denies grants except to AWS services (Control Tower CT.KMS.PR.3) and is kept when
    the stack is deleted, as the bucket is, so retained objects stay readable until they expire; neither is kept
    when the stack's first create fails.

    Attributes:
        bucket: the store.
        key: its key.
        access_logs: the bucket receiving its server access logs.
    """

    def __init__(self, scope: Construct, construct_id: str, *, retention_days: int) -> None:
        """
        Args:
            retention_days: days every object is kept (``migration.store.retention_days``).
        """
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Key",
            enable_key_rotation=True,
            description="Encrypts the migration's comparison store: pairs of answers, scores, samples, reports",
            removal_policy=RETAIN_EXCEPT_ON_CREATE,
        )
        deny_grants_except_for_aws_services(self.key)
        self.access_logs = access_logs_bucket(self, "AccessLogs", logged="the migration's comparison store")
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.key,
            bucket_key_enabled=True,
            enforce_ssl=True,
            versioned=True,
            lifecycle_rules=[
                abort_incomplete_uploads(
                    "ExpireEverything",
                    expiration=cdk.Duration.days(retention_days),
                    noncurrent_version_expiration=cdk.Duration.days(NONCURRENT_KEPT_DAYS),
                )
            ],
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="comparison-store/",
            removal_policy=RETAIN_EXCEPT_ON_CREATE,
        )
        send_events_to_eventbridge(self.bucket)
        for condition in (
            {"StringNotEqualsIfExists": {"s3:x-amz-server-side-encryption": "aws:kms"}},
            {"StringNotEqualsIfExists": {"s3:x-amz-server-side-encryption-aws-kms-key-id": self.key.key_arn}},
        ):
            self.bucket.add_to_resource_policy(
                iam.PolicyStatement(
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=["s3:PutObject"],
                    resources=[self.bucket.arn_for_objects("*")],
                    conditions=condition,
                )
            )
        guard_suppress(
            self.bucket,
            "CT.S3.PR.9",
            "No S3 Object Lock: the store must expire what it holds (users' answers) after "
            "migration.store.retention_days; a default retention would keep objects past it, and Object Lock "
            "cannot be turned off again (S3 user guide, 'Configuring S3 Object Lock').",
        )
