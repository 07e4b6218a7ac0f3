"""``grant_invoke`` on the endpoint of either serving mode (issue 55; docs/client.md, "Permissions").

The stacks are built, not synthesized: the grant's statement is resolved in place, which keeps these tests a
few seconds each.
"""

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam

from app_config import load_config
from planning.make_plan import make_plan
from stacks.composition import build_app
from tests.conftest import COMPONENTS
from tests.synth_helpers import cdk_json_context


def _granted(overrides: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The statement a caller's role gets from the serving stack's ``endpoint.grant_invoke``, resolved, and the
    serving stack's resources it names (logical id -> type)."""
    app = cdk.App(context={**cdk_json_context(), **overrides})
    config = load_config(app.node.get_all_context())
    stacks = build_app(app, config, make_plan(config))
    serving = stacks.serving
    caller = iam.Role(serving, "Caller", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    grant = stacks.serving.endpoint.grant_invoke(caller)
    assert grant.success
    statement = serving.resolve(grant.principal_statement.to_statement_json())  # type: ignore[union-attr]
    types = {serving.get_logical_id(child): child.cfn_resource_type for child in _cfn_resources(serving)}
    return statement, types


def _cfn_resources(scope: cdk.Stack) -> list[cdk.CfnResource]:
    return [node for node in scope.node.find_all() if isinstance(node, cdk.CfnResource)]


def _named(resource: Any) -> str:
    """The logical id a ``Ref`` or ``Fn::GetAtt`` names."""
    return str(resource["Ref"]) if "Ref" in resource else str(resource["Fn::GetAtt"][0])


def test_variants_mode_grants_invoke_on_the_endpoint() -> None:
    statement, types = _granted({})
    assert statement["Action"] == "sagemaker:InvokeEndpoint"  # the streaming call too (SageMaker Runtime API)
    assert statement["Effect"] == "Allow"
    assert types[_named(statement["Resource"])] == "AWS::SageMaker::Endpoint"


@pytest.mark.parametrize("overrides", [COMPONENTS])
def test_inference_components_mode_grants_the_endpoint_and_every_component(overrides: dict[str, str]) -> None:
    statement, types = _granted(overrides)
    assert statement["Action"] == "sagemaker:InvokeEndpoint"
    named = [types[_named(resource)] for resource in statement["Resource"]]
    # The endpoint, the base component and one per adapter (three).
    assert named == ["AWS::SageMaker::Endpoint"] + ["AWS::SageMaker::InferenceComponent"] * 4
