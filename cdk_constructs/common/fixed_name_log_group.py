"""A log group whose name AWS fixes, created if missing and adopted if it already exists, encrypted
with the stack's key; and the one every SageMaker processing job of the region writes to."""

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_constructs.common.custom_resource_handlers import (
    CustomResourceHandlers,
    Handler,
    acknowledge_provider_findings,
    drop_role_depends_on,
)
from cdk_constructs.common.kms_keys import stack_logs_key
from cdk_constructs.common.nag import acknowledge, acknowledge_all, checkov_skip, log_group_arn_placeholder
from serving_contract.log_groups import PROCESSING_JOBS_LOG_GROUP

# CDK's singleton provider of Custom::LogRetention (one per stack, at the stack's root).
_PROVIDER_ID = "LogRetentionaae0aa3c5b4d4f87b02d85b201efdd8a"
# This module's singleton provider of Custom::LogGroupKey (one per stack, at the stack's root).
_KEY_PROVIDER_ID = "LogGroupKeys"
RUNTIME = Path(__file__).resolve().parent / "runtime"
"""The Custom::LogGroupKey handler's folder (``runtime/index.py``)."""
KEY_RESOURCE_TYPE = "Custom::LogGroupKey"


class FixedNameLogGroup(Construct):
    """``/aws/sagemaker/Endpoints/<endpoint>`` and its kind: a name SageMaker writes to, set by AWS.

    Why not ``AWS::Logs::LogGroup``: a retained log group outlives its stack, and a resource with
    a fixed name cannot be created again while it exists, so deleting the serving stack and
    deploying it again failed on "already exists" (issue 20). CDK's ``LogRetention`` custom
    resource (aws-cdk-lib ``aws_logs.LogRetention``, the library CDK itself uses for Lambda log
    groups) creates the group when it is missing, adopts it when it exists, sets the retention
    either way, and on delete removes the group only when ``removal_policy`` is DESTROY.

    ``LogRetention`` has no KMS option: with ``encrypted`` (the default) a ``Custom::LogGroupKey``
    (``runtime/index.py``) associates the stack's logs key (:func:`cdk_constructs.common.kms_keys.stack_logs_key`),
    as every other log group of the app has (issue 49, finding 8).

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
        encrypted: bool = True,
    ) -> None:
        """
        Args:
            log_group_name: the fixed name (at most 512 characters; checked with the config).
            retention: days kept (``observability.log_retention_days``).
            removal_policy: DESTROY deletes the group with the stack; any retain keeps it.
            encrypted: encrypt it with the stack's logs key (False for a group other apps share).
        """
        super().__init__(scope, construct_id)
        retention_resource = logs.LogRetention(
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
        if encrypted:
            key = stack_logs_key(self, removal_policy=removal_policy)
            handlers = _key_handlers(self, retention, removal_policy)
            group_arn = cdk.Stack.of(self).format_arn(
                service="logs",
                resource="log-group",
                resource_name=log_group_name,
                arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
            )
            assert handlers.on_event_role is not None
            handlers.on_event_role.add_to_policy(
                iam.PolicyStatement(actions=["logs:AssociateKmsKey"], resources=[group_arn, f"{group_arn}:*"])
            )
            acknowledge(
                handlers.on_event_role,
                f"AwsSolutions-IAM5[Resource::{log_group_arn_placeholder(self, log_group_name)}]",
                "logs:AssociateKmsKey on this one fixed-name log group, in both of its ARN forms.",
            )
            encryption = cdk.CustomResource(
                self,
                "Key",
                service_token=handlers.service_token,
                resource_type=KEY_RESOURCE_TYPE,
                properties={"LogGroupName": log_group_name, "KmsKeyArn": key.key_arn},
            )
            encryption.node.add_dependency(retention_resource)  # the group exists first
            encryption.node.add_dependency(handlers.on_event_role)
        if removal_policy == cdk.RemovalPolicy.DESTROY:
            provider = cdk.Stack.of(self).node.find_child(_PROVIDER_ID)
            acknowledge(
                provider,
                f"AwsSolutions-IAM5[Resource::{log_group_arn_placeholder(self, log_group_name)}]",
                "logs:DeleteLogGroup on this one log group (its streams are part of its ARN form): the provider "
                "deletes it with the stack, as observability.retain_logs_on_delete = false asks.",
            )


def _key_handlers(
    scope: Construct, retention: logs.RetentionDays, removal_policy: cdk.RemovalPolicy
) -> CustomResourceHandlers:
    """The stack's one Custom::LogGroupKey provider (made at the stack's root by the first caller)."""
    stack = cdk.Stack.of(scope)
    existing = stack.node.try_find_child(_KEY_PROVIDER_ID)
    if isinstance(existing, CustomResourceHandlers):
        return existing
    return CustomResourceHandlers(
        stack,
        _KEY_PROVIDER_ID,
        handler_dir=RUNTIME,
        on_event=Handler("OnEvent", "on_event", "Encrypts fixed-name log groups with the stack's logs key"),
        # One AssociateKmsKey call.
        timeout=cdk.Duration.seconds(30),
        memory_mib=128,
        log_retention=retention,
        log_removal_policy=removal_policy,
    )


def processing_job_logs(scope: Construct, construct_id: str, *, retention: logs.RetentionDays) -> FixedNameLogGroup:
    """``/aws/sagemaker/ProcessingJobs``: SageMaker writes every processing job of the account and region there
    (the compile cache's jobs, the capacity jobs, the release steps), and nothing set its retention, so it kept
    logs forever.

    One per stack: the first caller makes it under ``scope`` as ``construct_id``; a later caller in the same
    stack gets that one (two ``Custom::LogRetention`` resources would fight over one group's retention).

    Shared with every other app of the region: always retained (deleting a stack must not delete other
    apps' logs) and left on CloudWatch's default key (a stack's key, deleted with it, would make other
    apps' logs unreadable). ``retention`` is ``observability.processing_job_log_retention_days``.
    """
    for node in cdk.Stack.of(scope).node.find_all():
        if isinstance(node, FixedNameLogGroup) and node.log_group.log_group_name == PROCESSING_JOBS_LOG_GROUP:
            return node
    return FixedNameLogGroup(
        scope,
        construct_id,
        log_group_name=PROCESSING_JOBS_LOG_GROUP,
        retention=retention,
        removal_policy=cdk.RemovalPolicy.RETAIN,
        encrypted=False,
    )


def grant_processing_job_logs(role: iam.IRole, *, sid: str = "ProcessingJobLogs") -> None:
    """What SageMaker needs, as the job's ``role``, to write a processing job's logs: its stream in
    /aws/sagemaker/ProcessingJobs (created if missing), and the ``AwsSolutions-IAM5`` finding acknowledged.

    Grants only: the group itself is :func:`processing_job_logs`'s.
    """
    job_logs = cdk.Stack.of(role).format_arn(
        service="logs",
        resource="log-group",
        resource_name=f"{PROCESSING_JOBS_LOG_GROUP}:*",
        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid=sid,
            actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            resources=[job_logs],
        )
    )
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::{log_group_arn_placeholder(role, PROCESSING_JOBS_LOG_GROUP)}]",
        "SageMaker writes a processing job's output to /aws/sagemaker/ProcessingJobs, one stream per job named "
        "at run time (SageMaker developer guide, 'Log Amazon SageMaker Events with Amazon CloudWatch').",
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
