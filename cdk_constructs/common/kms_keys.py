"""Customer-managed KMS keys the app makes: key-policy statements every key carries, and the logs key."""

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

_STACK_LOGS_KEY_ID = "LogsKey"


def deny_grants_except_for_aws_services(key: kms.Key) -> None:
    """Deny ``kms:CreateGrant`` on ``key`` unless an AWS service asks for it, or for an AWS resource.

    The statement AWS Control Tower's proactive control CT.KMS.PR.3 requires, in the form its rule
    (``ct-kms-pr-3.guard``) checks: Deny, any principal, ``BoolIfExists`` with both
    ``kms:GrantIsForAWSResource`` and ``aws:PrincipalIsAWSService`` false. Grants the app relies on
    (Lambda for an encrypted environment, Bedrock for an imported model) are made by those services
    for their resources, so both keys are true for them and nothing they do is denied.
    """
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="DenyGrantsExceptForAwsServices",
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=["kms:CreateGrant"],
            resources=["*"],  # in a key policy "*" means this key
            conditions={"BoolIfExists": {"kms:GrantIsForAWSResource": "false", "aws:PrincipalIsAWSService": "false"}},
        )
    )


def logs_key(scope: Construct, construct_id: str, *, description: str, removal_policy: cdk.RemovalPolicy) -> kms.Key:
    """A rotating key that CloudWatch Logs may use for this account's log groups in this region.

    CloudWatch Logs needs the key policy to name its service principal, limited here by the
    ``kms:EncryptionContext:aws:logs:arn`` of a log group of this account and region (CloudWatch
    Logs user guide, "Encrypt log data in CloudWatch Logs using AWS KMS"); it carries
    :func:`deny_grants_except_for_aws_services` too.

    Args:
        description: the key's description.
        removal_policy: of the key; give it the one of the logs it encrypts (a deleted key makes
            retained logs unreadable).
    """
    stack = cdk.Stack.of(scope)
    key = kms.Key(
        scope,
        construct_id,
        enable_key_rotation=True,
        description=description,
        removal_policy=removal_policy,
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.{stack.url_suffix}")],
            resources=["*"],  # in a key policy "*" means this key
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name="*",
                        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                    )
                }
            },
        )
    )
    deny_grants_except_for_aws_services(key)
    return key


def stack_logs_key(scope: Construct, *, removal_policy: cdk.RemovalPolicy) -> kms.Key:
    """The one :func:`logs_key` of ``scope``'s stack (made at the stack's root by the first caller).

    For the custom-resource providers' log groups and function environments
    (:class:`cdk_constructs.common.custom_resource_handlers.CustomResourceHandlers`), so a stack with
    several providers pays for one key (USD 1 a month, KMS pricing), not one each. ``removal_policy``
    is the first caller's; every caller passes ``observability.retain_logs_on_delete``'s.
    """
    stack = cdk.Stack.of(scope)
    existing = stack.node.try_find_child(_STACK_LOGS_KEY_ID)
    if isinstance(existing, kms.Key):
        return existing
    return logs_key(
        stack,
        _STACK_LOGS_KEY_ID,
        description="Custom-resource handler logs and environments of this stack",
        removal_policy=removal_policy,
    )
