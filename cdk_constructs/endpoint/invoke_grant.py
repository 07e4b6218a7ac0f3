"""Who may call the endpoint: ``grant_invoke``, the one place the invoke permission is written.

``InvokeEndpoint`` and ``InvokeEndpointWithResponseStream`` both need ``sagemaker:InvokeEndpoint``
(SageMaker Runtime API reference: "your IAM permissions must allow the sagemaker:InvokeEndpoint
action"), on the endpoint's ARN. A call to an inference component names the endpoint and the
component (``InferenceComponentName``): the grant lists the components' ARNs beside the endpoint's,
so it holds whichever of the two IAM evaluates. aws-cdk's ``aws-sagemaker-alpha`` ``Endpoint.grantInvoke``
grants the same action on the endpoint.
"""

from collections.abc import Sequence

from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker

INVOKE_ACTIONS = ("sagemaker:InvokeEndpoint",)
"""What both invoke calls, sync and streaming, are authorized as."""


def grant_invoke(
    grantee: iam.IGrantable,
    *,
    endpoint: sagemaker.CfnEndpoint,
    components: Sequence[sagemaker.CfnInferenceComponent] = (),
) -> iam.Grant:
    """Let ``grantee`` (a role, a user, a Lambda function...) invoke ``endpoint``, synchronously or streaming,
    and through each of its inference ``components``.

    Returns:
        The grant: its statement lands in ``grantee``'s default policy (``iam.Grant.add_to_principal``).
    """
    return iam.Grant.add_to_principal(
        grantee=grantee,
        actions=list(INVOKE_ACTIONS),
        # Ref of AWS::SageMaker::Endpoint is its ARN (CloudFormation resource reference).
        resource_arns=[endpoint.ref, *(component.attr_inference_component_arn for component in components)],
    )
