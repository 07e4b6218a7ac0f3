"""What every custom-resource handler of this app shares: the runtime, and two synth fixes.

Used by ``bedrock_import`` and ``scheduled_capacity`` (both on CDK's ``custom_resources.Provider``);
``image_build`` uses :func:`acknowledge_provider_checkov_findings` too.
"""

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import IConstruct

from cdk_constructs.nag import checkov_skip

# Newest Python runtime in aws-cdk-lib 2.275; cdk-nag 3.0.2's AwsSolutions-L1 accepts only the
# newest runtime of a family that the CDK in use knows (rules/lambda/LambdaLatestVersion).
HANDLER_RUNTIME = lambda_.Runtime.PYTHON_3_14


def nag_arn_of(construct: IConstruct) -> str:
    """How cdk-nag renders ``Fn::GetAtt [<resource>, Arn]`` in a granular finding id."""
    resource = construct.node.default_child
    assert isinstance(resource, cdk.CfnResource)
    return f"<{cdk.Stack.of(construct).get_logical_id(resource)}.Arn>"


# Why checkov's Lambda and log checks do not apply to a custom-resource provider's functions
# (its own handlers and CDK's framework functions alike); check id -> reason.
_PROVIDER_FUNCTION_FINDINGS = {
    "CKV_AWS_115": "Custom-resource handler: runs only during this stack's CloudFormation operations, a few "
    "invocations each; reserved concurrency would take capacity from the account's pool for nothing.",
    "CKV_AWS_116": "Custom-resource handler: a failure is reported to CloudFormation by the provider framework "
    "(stack event, rollback); a DLQ would hold a request nothing replays.",
    "CKV_AWS_117": "Custom-resource handler: calls only AWS control-plane APIs over their public endpoints; a VPC "
    "would need NAT or interface endpoints and protects nothing here.",
}
_UNENCRYPTED_ENV = (
    "CKV_AWS_173",
    "The environment holds resource names and ARNs, no secrets; Lambda encrypts it at rest with its AWS-owned key.",
)
_UNENCRYPTED_LOGS = (
    "CKV_AWS_158",
    "Handler logs hold request ids, resource names and API errors, no customer data; CloudWatch Logs encrypts "
    "them at rest with service-managed keys.",
)
_WAITER_LOG_DELIVERY = (
    "CKV_AWS_111",
    "CDK's waiter state machine role: Step Functions log delivery (logs:CreateLogDelivery, PutResourcePolicy, ...) "
    "supports no resource-level permissions (Step Functions developer guide, 'IAM policies for logging to "
    "CloudWatch Logs').",
)


def acknowledge_provider_checkov_findings(scope: IConstruct) -> None:
    """Acknowledge checkov's findings that do not apply to a custom-resource provider under ``scope``.

    Walks ``scope``'s resources once they exist (call it after the ``cr.Provider``): every Lambda
    function gets the reasons above; one without ``KmsKeyArn`` also CKV_AWS_173, a log group
    without ``KmsKeyId`` CKV_AWS_158, and the waiter state machine's role policy CKV_AWS_111.
    Each entry lands in that resource's own ``Metadata`` (:func:`cdk_constructs.nag.checkov_skip`).
    """
    for node in scope.node.find_all():
        # By type name: CDK's LogRetention provider writes its function as a plain CfnResource.
        if isinstance(node, cdk.CfnResource) and node.cfn_resource_type == lambda_.CfnFunction.CFN_RESOURCE_TYPE_NAME:
            for check, reason in _PROVIDER_FUNCTION_FINDINGS.items():
                checkov_skip(node, check, reason)
            if not isinstance(node, lambda_.CfnFunction) or node.kms_key_arn is None:
                checkov_skip(node, *_UNENCRYPTED_ENV)
        elif isinstance(node, logs.CfnLogGroup) and node.kms_key_id is None:
            checkov_skip(node, *_UNENCRYPTED_LOGS)
        elif isinstance(node, iam.CfnPolicy) and "/waiter-state-machine/" in node.node.path:
            checkov_skip(node, *_WAITER_LOG_DELIVERY)


_ROLE_USERS = {lambda_.CfnFunction.CFN_RESOURCE_TYPE_NAME, sfn.CfnStateMachine.CFN_RESOURCE_TYPE_NAME}


def drop_role_depends_on(scope: IConstruct) -> None:
    """Remove each Lambda function's and state machine's DependsOn on its own role.

    CDK adds DependsOn for both the role and its policy, but the role is already referenced
    by GetAtt, so cfn-lint reports the role entry (W3005). The policy entry stays: it is
    what makes the function wait for its permissions.
    """
    for node in scope.node.find_all():
        # By type name, not class: CDK's LogRetention provider writes its function as a plain CfnResource.
        if isinstance(node, cdk.CfnResource) and node.cfn_resource_type in _ROLE_USERS:
            node.add_override("DependsOn", _DependsOnWithoutRole(node))


@jsii.implements(cdk.IResolvable)
class _DependsOnWithoutRole:
    """Resolves to a resource's DependsOn less roles, after CDK has turned construct dependencies into them."""

    def __init__(self, resource: cdk.CfnResource) -> None:
        self._resource = resource

    @property
    def creation_stack(self) -> list[str]:
        return []

    def resolve(self, _context: cdk.IResolveContext) -> list[str]:
        stack = cdk.Stack.of(self._resource)
        dependencies = self._resource.obtain_dependencies()
        return sorted(
            stack.get_logical_id(dep)
            for dep in dependencies
            if isinstance(dep, cdk.CfnResource) and not isinstance(dep, iam.CfnRole)
        )

    def to_string(self) -> str:
        return "DependsOnWithoutRole"
