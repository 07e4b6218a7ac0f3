"""A log group whose name AWS fixes, created if missing and adopted if it already exists."""

import aws_cdk as cdk
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_constructs.common.custom_resource_handlers import acknowledge_provider_findings, drop_role_depends_on
from cdk_constructs.common.nag import acknowledge, acknowledge_all, checkov_skip, log_group_arn_placeholder

# CDK's singleton provider of Custom::LogRetention (one per stack, at the stack's root).
_PROVIDER_ID = "LogRetentionaae0aa3c5b4d4f87b02d85b201efdd8a"


class FixedNameLogGroup(Construct):
    """``/aws/sagemaker/Endpoints/<endpoint>`` and its kind: a name SageMaker writes to, set by AWS.

    Why not ``AWS::Logs::LogGroup``: a retained log group outlives its stack, and a resource with
    a fixed name cannot be created again while it exists, so deleting the serving stack and
    deploying it again failed on "already exists" (issue 20). CDK's ``LogRetention`` custom
    resource (aws-cdk-lib ``aws_logs.LogRetention``, the library CDK itself uses for Lambda log
    groups) creates the group when it is missing, adopts it when it exists, sets the retention
    either way, and on delete removes the group only when ``removal_policy`` is DESTROY.

    Attributes:
        log_group: the group, for grants and outputs.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        log_group_name: str,
        retention: logs.RetentionDays,
        removal_policy: cdk.RemovalPolicy,
    ) -> None:
        """
        Args:
            log_group_name: the fixed name (at most 512 characters; checked with the config).
            retention: days kept (``observability.log_retention_days``).
            removal_policy: DESTROY deletes the group with the stack; any retain keeps it.
        """
        super().__init__(scope, construct_id)
        logs.LogRetention(
            self,
            "Retention",
            log_group_name=log_group_name,
            retention=retention,
            # The provider deletes the group only on "destroy"; every retain flavour keeps it.
            removal_policy=cdk.RemovalPolicy.DESTROY
            if removal_policy == cdk.RemovalPolicy.DESTROY
            else cdk.RemovalPolicy.RETAIN,
        )
        self.log_group = logs.LogGroup.from_log_group_name(self, "LogGroup", log_group_name)
        if removal_policy == cdk.RemovalPolicy.DESTROY:
            provider = cdk.Stack.of(self).node.find_child(_PROVIDER_ID)
            acknowledge(
                provider,
                f"AwsSolutions-IAM5[Resource::{log_group_arn_placeholder(self, log_group_name)}]",
                "logs:DeleteLogGroup on this one log group (its streams are part of its ARN form): the provider "
                "deletes it with the stack, as observability.retain_logs_on_delete = false asks.",
            )


def finish_log_retention_provider(stack: cdk.Stack) -> None:
    """CDK's LogRetention provider function in ``stack``: its findings acknowledged with their reasons,
    and the DependsOn on its own role that cfn-lint reports (W3005) dropped.

    Call once per stack, after its last :class:`FixedNameLogGroup` (the provider is a singleton at
    the stack's root, made by the first one).
    """
    provider = stack.node.try_find_child(_PROVIDER_ID)
    if provider is None:
        return
    acknowledge_provider_findings(provider)
    drop_role_depends_on(provider)
    checkov_skip(
        provider.node.find_child("ServiceRole").node.find_child("DefaultPolicy"),
        "CKV_AWS_111",
        "logs:PutRetentionPolicy/DeleteRetentionPolicy on '*': CDK's LogRetention provider serves every log group "
        "of the stack that sets retention through it; it runs only during CloudFormation operations.",
    )
    acknowledge_all(
        provider,
        [
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "AwsSolutions-IAM5[Resource::*]",
        ],
        "CDK's LogRetention provider (aws-cdk-lib): AWSLambdaBasicExecutionRole for its own logs, and "
        "logs:PutRetentionPolicy/DeleteRetentionPolicy/CreateLogGroup on '*' because it serves every log group "
        "of the stack that sets retention through it; it runs only during CloudFormation operations.",
    )
