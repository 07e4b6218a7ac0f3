"""The server-access-log bucket every app bucket that holds data logs to (AWS Control Tower CT.S3.PR.2)."""

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk_constructs.common.bucket_defaults import abort_incomplete_uploads, send_events_to_eventbridge
from cdk_constructs.common.nag import acknowledge, checkov_skip, guard_suppress
from cdk_constructs.common.removal import RETAIN_EXCEPT_ON_CREATE

NONCURRENT_LOGS_KEPT_DAYS = 90
"""Days a deleted or overwritten access-log object's old version is kept (a quarter's audit look-back)."""


def access_logs_bucket(scope: Construct, construct_id: str, *, logged: str) -> s3.Bucket:
    """A versioned, SSE-S3, TLS-only, private bucket for ``logged``'s server access logs, kept on stack deletion
    (but not when the stack's first create fails), with events to EventBridge.

    Args:
        logged: what logs to it, for the acknowledgements' reasons (e.g. ``the artifacts bucket``).
    """
    bucket = s3.Bucket(
        scope,
        construct_id,
        encryption=s3.BucketEncryption.S3_MANAGED,  # server access logging supports SSE-S3 only
        enforce_ssl=True,
        # S3's log delivery writes each log object once under a new key, so versions cost nothing until a log
        # is deleted or overwritten: then the old version stays NONCURRENT_LOGS_KEPT_DAYS, an audit trail
        # that outlives a mistaken (or hostile) delete.
        versioned=True,
        lifecycle_rules=[
            abort_incomplete_uploads(
                "ExpireDeletedLogs", noncurrent_version_expiration=cdk.Duration.days(NONCURRENT_LOGS_KEPT_DAYS)
            )
        ],
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        removal_policy=RETAIN_EXCEPT_ON_CREATE,
    )
    self_logging = f"This bucket is the access-log destination of {logged}; logging it to itself would loop."
    acknowledge(bucket, "AwsSolutions-S1", self_logging)
    checkov_skip(bucket, "CKV_AWS_18", self_logging)
    guard_suppress(bucket, "CT.S3.PR.2", self_logging)
    guard_suppress(
        bucket,
        "CT.S3.PR.10",
        "S3 server access logging delivers only to a destination bucket encrypted with SSE-S3 (S3 user guide, "
        "'Enabling Amazon S3 server access logging'): SSE-KMS here would stop the logs.",
    )
    guard_suppress(
        bucket,
        "CT.S3.PR.9",
        "A bucket with S3 Object Lock cannot be a server access logging destination (S3 user guide, "
        "'Configuring S3 Object Lock').",
    )
    send_events_to_eventbridge(bucket)
    return bucket
