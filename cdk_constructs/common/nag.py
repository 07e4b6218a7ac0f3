"""Record an acknowledgement (cdk-nag, checkov, Control Tower's cfn-guard rules) next to its resource."""

import re

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


GUARD_RULES_PACKAGE = "@cdklabs/cdk-validator-cfnguard"
"""The npm package (pinned in ``package.json``) that ships AWS Control Tower's proactive controls as
cfn-guard rule files, and the cfn-guard binary that runs them (``tests/infra/test_control_tower.py``)."""


def guard_suppress(scope: IConstruct, control: str, reason: str) -> None:
    """Reason an AWS Control Tower proactive-control finding on ``scope``'s CloudFormation resource.

    Writes the cfn-guard suppression form, ``Metadata.guard.SuppressedRules`` (a list of rule ids,
    the form of the AWS Guard Rules Registry's rules), with the control id as the rule id, and
    the reason beside it in ``Metadata.guard.Reasons`` (control id -> reason). Calls for the same
    resource add to both.

    The Control Tower rule files (:data:`GUARD_RULES_PACKAGE` 0.0.62) read no suppression, and
    neither do the CloudFormation hooks Control Tower runs them in: ``tests/infra/test_control_tower.py``
    drops a finding only when this metadata reasons it, and an account that enforces the control
    refuses the resource all the same (docs/deploy.md lists the controls such a team exempts).

    Args:
        scope: an L1 resource or a construct whose default child is one (keep it narrow).
        control: the control id as the rule's message names it, e.g. ``CT.LAMBDA.PR.3``.
        reason: why the control does not fit this resource, specific enough for a reviewer to check.

    Raises:
        AssertionError: ``scope`` has no CloudFormation resource, or ``control`` or ``reason`` is malformed.
    """
    assert re.fullmatch(r"CT\.[A-Z0-9]+\.PR\.\d+", control), f"{control!r} is not a Control Tower control id"
    assert reason.strip(), f"{control} on {scope.node.path}: a suppression needs a reason"
    resource = scope if isinstance(scope, cdk.CfnResource) else scope.node.default_child
    assert isinstance(resource, cdk.CfnResource), f"{scope.node.path} has no CloudFormation resource"
    existing = resource.get_metadata("guard") or {}
    rules = [rule for rule in existing.get("SuppressedRules", []) if rule != control]
    reasons = {**existing.get("Reasons", {}), control: reason}
    resource.add_metadata("guard", {"SuppressedRules": [*rules, control], "Reasons": reasons})
