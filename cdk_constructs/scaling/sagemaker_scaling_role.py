"""The service-linked role Application Auto Scaling uses for SageMaker scalable targets."""

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

SERVICE_LINKED_ROLE = (
    "aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
    "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
)
"""One role per service for variants and inference components alike (Application Auto Scaling
user guide, "Service-linked role ARN reference"); created on the first RegisterScalableTarget."""


def sagemaker_scaling_role(scope: Construct) -> iam.IRole:
    """The role by ARN: without it the ``ScalableTarget`` L2 adds a role of its own."""
    return iam.Role.from_role_arn(
        scope,
        "ServiceLinkedRole",
        cdk.Stack.of(scope).format_arn(service="iam", region="", resource="role", resource_name=SERVICE_LINKED_ROLE),
        mutable=False,
    )
