"""Settings every S3 bucket the app creates shares (AWS Control Tower's CT.S3.PR.3, PR.4 and PR.6)."""

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3

INCOMPLETE_UPLOADS_KEPT_DAYS = 7
"""Days before S3 aborts an unfinished multipart upload and frees its parts (a week to resume one)."""


def abort_incomplete_uploads(rule_id: str = "AbortIncompleteUploads", **rule: object) -> s3.LifecycleRule:
    """A lifecycle rule that aborts multipart uploads left unfinished :data:`INCOMPLETE_UPLOADS_KEPT_DAYS`.

    Multi-GB weight uploads are multipart; an interrupted one leaves parts that are billed and that no
    listing shows. ``rule`` adds other ``s3.LifecycleRule`` settings to the same rule.
    """
    return s3.LifecycleRule(
        id=rule_id,
        abort_incomplete_multipart_upload_after=cdk.Duration.days(INCOMPLETE_UPLOADS_KEPT_DAYS),
        **rule,  # type: ignore[arg-type]
    )


def send_events_to_eventbridge(bucket: s3.Bucket) -> None:
    """S3 sends ``bucket``'s object events to EventBridge's default bus.

    Set on the ``AWS::S3::Bucket`` itself: CDK's ``event_bridge_enabled`` adds a Lambda-backed custom
    resource to do the same. AWS service events on the default bus cost nothing (EventBridge pricing);
    a rule that watches, e.g., who rewrote a CURRENT pointer can be added without touching the bucket.
    """
    resource = bucket.node.default_child
    assert isinstance(resource, s3.CfnBucket), f"{bucket.node.path} has no AWS::S3::Bucket"
    resource.notification_configuration = s3.CfnBucket.NotificationConfigurationProperty(
        event_bridge_configuration=s3.CfnBucket.EventBridgeConfigurationProperty(event_bridge_enabled=True)
    )
