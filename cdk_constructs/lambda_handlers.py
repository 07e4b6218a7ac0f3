"""What every custom-resource handler of this app shares: the runtime, and two synth fixes.

Used by ``bedrock_import`` and ``scheduled_capacity`` (both on CDK's ``custom_resources.Provider``).
"""

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct, IConstruct

# Newest Python runtime in aws-cdk-lib 2.275; cdk-nag 3.0.2's AwsSolutions-L1 accepts only the
# newest runtime of a family that the CDK in use knows (rules/lambda/LambdaLatestVersion).
HANDLER_RUNTIME = lambda_.Runtime.PYTHON_3_14


def nag_arn_of(construct: IConstruct) -> str:
    """How cdk-nag renders ``Fn::GetAtt [<resource>, Arn]`` in a granular finding id."""
    resource = construct.node.default_child
    assert isinstance(resource, cdk.CfnResource)
    return f"<{cdk.Stack.of(construct).get_logical_id(resource)}.Arn>"


def drop_role_depends_on(scope: Construct) -> None:
    """Remove each Lambda function's and state machine's DependsOn on its own role.

    CDK adds DependsOn for both the role and its policy, but the role is already referenced
    by GetAtt, so cfn-lint reports the role entry (W3005). The policy entry stays: it is
    what makes the function wait for its permissions.
    """
    for node in scope.node.find_all():
        if isinstance(node, (lambda_.CfnFunction, sfn.CfnStateMachine)):
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
