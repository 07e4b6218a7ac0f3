"""Record a cdk-nag (v3) acknowledgement next to the resource it concerns."""

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge an AwsSolutions finding on ``scope`` and its children.

    Args:
        scope: the construct the finding is about (keep it as narrow as possible).
        rule: the rule id as cdk-nag reports it, e.g. ``AwsSolutions-IAM5`` or a granular
            ``AwsSolutions-IAM5[Resource::*]``.
        reason: why the finding does not apply here, specific enough for a reviewer to check.
    """
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"AwsSolutions::{rule}", reason=reason))


def arn_placeholder(construct: IConstruct, attribute: str = "Arn") -> str:
    """How cdk-nag writes ``Fn::GetAtt`` of ``construct``'s resource in a granular rule id.

    E.g. ``<ImageBuildOnEventAE3FE167.Arn>``; use it to build ids such as
    ``AwsSolutions-IAM5[Resource::<...Arn>:*]`` for resources whose logical id is generated.
    """
    return f"<{logical_id(construct)}.{attribute}>"


def pseudo_placeholder(scope: IConstruct, name: str) -> str:
    """How cdk-nag writes the stack's ``AWS::Region``, ``AWS::Partition`` or ``AWS::AccountId`` in a granular rule id.

    A stack with a concrete ``env`` resolves them to literals (``us-east-1``, ``aws``); an
    environment-agnostic stack leaves the pseudo parameter, written ``<AWS::Region>``.
    """
    stack = cdk.Stack.of(scope)
    value = {"Region": stack.region, "Partition": stack.partition, "AccountId": stack.account}[name]
    return f"<AWS::{name}>" if cdk.Token.is_unresolved(value) else value


def resource_arn_placeholder(scope: IConstruct, service: str, resource: str) -> str:
    """``arn:<partition>:<service>:<region>:<account>:<resource>`` as cdk-nag writes it in a granular id."""
    partition, region, account = (pseudo_placeholder(scope, p) for p in ("Partition", "Region", "AccountId"))
    return f"arn:{partition}:{service}:{region}:{account}:{resource}"


def bucket_arn_placeholder(scope: IConstruct, bucket: s3.IBucket) -> str:
    """How cdk-nag writes ``bucket``'s ARN in a granular id of a policy in ``scope``'s stack: a literal
    ARN for a bucket imported by name, ``<logical id.Arn>`` for one of the same stack, and the export's
    name for another stack's bucket (the ModelArtifacts stack), as ``Fn::ImportValue`` renders."""
    if not isinstance(bucket, s3.Bucket):
        return f"arn:{pseudo_placeholder(scope, 'Partition')}:s3:::{bucket.bucket_name}"
    if cdk.Stack.of(bucket).node.path == cdk.Stack.of(scope).node.path:
        return arn_placeholder(bucket)
    # export_value returns the export CDK made for this cross-stack reference.
    owner = cdk.Stack.of(bucket)
    return str(owner.resolve(owner.export_value(bucket.bucket_arn))["Fn::ImportValue"])


def log_group_arn_placeholder(scope: IConstruct, name: str) -> str:
    """``arn:<partition>:logs:<region>:<account>:log-group:<name>:*`` as cdk-nag writes it."""
    return resource_arn_placeholder(scope, "logs", f"log-group:{name}:*")


def ref_placeholder(construct: IConstruct) -> str:
    """How cdk-nag writes ``Ref`` of ``construct``'s resource in a granular rule id."""
    return f"<{logical_id(construct)}>"


def logical_id(construct: IConstruct) -> str:
    """The CloudFormation logical id of ``construct`` (or of its default child)."""
    element = construct.node.default_child or construct
    assert isinstance(element, cdk.CfnElement), f"{construct.node.path} has no CloudFormation resource"
    return cdk.Stack.of(construct).get_logical_id(element)


def acknowledge_all(scope: IConstruct, rules: list[str], reason: str) -> None:
    """:func:`acknowledge` each of ``rules`` on ``scope`` with one shared reason."""
    for rule in rules:
        acknowledge(scope, rule, reason)


def checkov_skip(scope: IConstruct, check: str, reason: str) -> None:
    """Acknowledge a checkov finding on ``scope``'s CloudFormation resource, with its reason.

    checkov (``requirements-checkov.txt``, run by ``tests/infra/test_checkov.py``) reads a
    resource's ``Metadata.checkov.skip``, a list of ``{"id": <check id>, "comment": <reason>}``
    (checkov 3.3.30, ``checkov/cloudformation/context_parser.py``, ``collect_skip_comments``).
    Calls for the same resource add to the list.

    Args:
        scope: an L1 resource or a construct whose default child is one (keep it narrow: the
            acknowledgement sits next to the resource it concerns, as cdk-nag's do).
        check: the check id as checkov reports it, e.g. ``CKV_AWS_116``.
        reason: why the finding does not apply here, specific enough for a reviewer to check.

    Raises:
        AssertionError: ``scope`` has no CloudFormation resource.
    """
    resource = scope if isinstance(scope, cdk.CfnResource) else scope.node.default_child
    assert isinstance(resource, cdk.CfnResource), f"{scope.node.path} has no CloudFormation resource"
    existing = resource.get_metadata("checkov") or {}
    skips = [entry for entry in existing.get("skip", []) if entry["id"] != check]
    resource.add_metadata("checkov", {"skip": [*skips, {"id": check, "comment": reason}]})
