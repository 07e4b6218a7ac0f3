"""Who may assume or be handed a role: AWS services acting for this account only.

Cross-service confused-deputy prevention (IAM user guide, "The confused deputy problem"): a role
that an AWS service assumes names the account it acts for (``aws:SourceAccount``), so the
service cannot be made to assume it on another account's behalf; a role this app passes to a
service names that service (``iam:PassedToService``), so the permission to pass it cannot be
used to hand it to anything else. SageMaker and CodeBuild both document the source keys for
their service roles (SageMaker developer guide, "Cross-service confused deputy prevention";
CodeBuild user guide, "Cross-service confused deputy prevention").
"""

import aws_cdk as cdk
from aws_cdk import aws_iam as iam


def account_service_principal(service: str) -> iam.PrincipalBase:
    """``service`` (e.g. ``sagemaker.amazonaws.com``) acting for this stack's account only."""
    return iam.ServicePrincipal(service).with_conditions({"StringEquals": {"aws:SourceAccount": cdk.Aws.ACCOUNT_ID}})


def limit_trust_to_account(role: iam.IRole) -> None:
    """Add ``aws:SourceAccount`` to the trust of a role another construct made (a CodeBuild project's).

    Raises:
        TypeError: the role's trust is not one statement naming one service (nothing is guessed).
    """
    resource = role.node.default_child
    if not isinstance(resource, iam.CfnRole):
        raise TypeError(f"{role.node.path}: not a role this app made")
    document = cdk.Stack.of(role).resolve(resource.assume_role_policy_document)
    statements = document["Statement"]
    if len(statements) != 1 or set(statements[0].get("Principal", {})) != {"Service"}:
        raise TypeError(f"{role.node.path}: trust is not one service principal: {statements}")
    resource.add_property_override(
        "AssumeRolePolicyDocument.Statement.0.Condition",
        {"StringEquals": {"aws:SourceAccount": cdk.Aws.ACCOUNT_ID}},
    )


def pass_role_statement(role: iam.IRole, service: str) -> iam.PolicyStatement:
    """``iam:PassRole`` on ``role``, only to ``service`` (``iam:PassedToService``): for a managed policy."""
    return iam.PolicyStatement(
        actions=["iam:PassRole"],
        resources=[role.role_arn],
        conditions={"StringEquals": {"iam:PassedToService": service}},
    )


def grant_pass_role_to(role: iam.IRole, grantee: iam.IGrantable, service: str) -> None:
    """``iam:PassRole`` on ``role`` for ``grantee``, only to ``service`` (``iam:PassedToService``)."""
    grantee.grant_principal.add_to_principal_policy(pass_role_statement(role, service))
