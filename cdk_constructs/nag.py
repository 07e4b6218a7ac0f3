"""Record a cdk-nag (v3) acknowledgement next to the resource it concerns."""

import aws_cdk as cdk
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge an AwsSolutions finding on ``scope`` and its children.

    Args:
        scope: the construct the finding is about (keep it as narrow as possible).
        rule: the rule id as cdk-nag reports it, e.g. ``AwsSolutions-IAM5`` or a granular
            ``AwsSolutions-IAM5[Resource::*]``.
        reason: why the finding does not apply here, specific enough for a reviewer to check.
    """
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"AwsSolutions::{rule}", reason=reason))
