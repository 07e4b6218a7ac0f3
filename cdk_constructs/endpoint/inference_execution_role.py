"""The IAM role SageMaker assumes to run the serving container."""

from collections.abc import Sequence

from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_constructs.common.nag import acknowledge, checkov_skip, log_group_arn_placeholder
from cdk_constructs.common.trust import account_service_principal

# Permissions SageMaker needs to attach the container to customer subnets (SageMaker
# developer guide, "Give SageMaker Hosted Endpoints Access to Resources in Your Amazon VPC").
_VPC_ACTIONS = [
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
]


class InferenceExecutionRole(Construct):
    """Least-privilege execution role for SageMaker models.

    Pulls from the serving image's repositories from the start, and writes to the endpoint's log
    groups once :meth:`write_to` names them. No managed policy is attached and no ``cloudwatch:PutMetricData``:
    the container publishes its metrics as EMF lines on stdout, which SageMaker ships to the
    endpoint's log group and CloudWatch Logs turns into metrics, so it never calls CloudWatch
    (and with ``serving.network_isolation``, the default, it could not reach it).

    Attributes:
        role: the IAM role; pass it to the SageMaker models.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc_placement: bool,
        repositories: Sequence[ecr.IRepository],
    ) -> None:
        """
        Args:
            vpc_placement: add the ENI permissions SageMaker needs for VPC placement.
            repositories: the ECR repositories the serving images are in; the role may pull from each.
        """
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=account_service_principal("sagemaker.amazonaws.com"),
            description="Runs the vLLM serving container on SageMaker",
        )
        if vpc_placement:
            self.role.add_to_policy(iam.PolicyStatement(actions=_VPC_ACTIONS, resources=["*"]))
            policy = self.role.node.find_child("DefaultPolicy")
            for check in ("CKV_AWS_109", "CKV_AWS_111"):
                checkov_skip(
                    policy,
                    check,
                    "The EC2 ENI actions SageMaker needs for VPC placement (SageMaker developer guide, 'Give "
                    "SageMaker Hosted Endpoints Access to Resources in Your Amazon VPC') take Resource '*' there; "
                    "the role is assumable only by sagemaker.amazonaws.com from this account.",
                )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken and the EC2 ENI actions have no resource-level permissions.",
        )
        # Here, before any model exists: each model waits for the role's DefaultPolicy (CreateModel
        # checks the role can pull the image), and the ECR grant is what creates that policy.
        for repository in repositories:
            repository.grant_pull(self.role)

    def write_to(self, log_groups: Sequence[logs.ILogGroup]) -> None:
        """Let the container write its output to each of ``log_groups`` (the endpoint's, the components')."""
        for log_group in log_groups:
            log_group.grant_write(self.role)
            log_group.grant(self.role, "logs:DescribeLogStreams")
            acknowledge(
                self.role,
                f"AwsSolutions-IAM5[Resource::{log_group_arn_placeholder(self, log_group.log_group_name)}]",
                "Every log stream of the endpoint's own log group: SageMaker names a stream per instance and "
                "container as it starts them, so no stream name is known at deploy time.",
            )
