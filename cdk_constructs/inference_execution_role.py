"""The IAM role SageMaker assumes to run the serving container."""

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_constructs.nag import acknowledge

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

    Starts with metric publishing only (scoped by namespace); the stack grants ECR pull
    on the one repository and write access to the endpoint's log group. No managed policy
    is attached.

    Attributes:
        role: the IAM role; pass it to the SageMaker models.
    """

    def __init__(self, scope: Construct, construct_id: str, *, metrics_namespace: str, vpc_placement: bool) -> None:
        """
        Args:
            metrics_namespace: the custom namespace the container may publish to.
            vpc_placement: add the ENI permissions SageMaker needs for VPC placement.
        """
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com").with_conditions(
                {"StringEquals": {"aws:SourceAccount": cdk.Aws.ACCOUNT_ID}}
            ),
            description="Runs the vLLM serving container on SageMaker",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                # Only the app's own namespace: SageMaker publishes the instance metrics in
                # /aws/sagemaker/Endpoints (GPU/CPU/memory) itself, and the container must not be
                # able to write fake datapoints into what the alarms and autoscaling read.
                conditions={"StringEquals": {"cloudwatch:namespace": metrics_namespace}},
            )
        )
        if vpc_placement:
            self.role.add_to_policy(iam.PolicyStatement(actions=_VPC_ACTIONS, resources=["*"]))
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "cloudwatch:PutMetricData, ecr:GetAuthorizationToken and the EC2 ENI actions have no resource-level "
            "permissions; PutMetricData is limited by the cloudwatch:namespace condition.",
        )
