"""Roles that AWS services assume act for this account only, and roles the app passes go to one service
(issue 49, finding 8: job and CodeBuild role trusts without aws:SourceAccount, iam:PassRole without
iam:PassedToService)."""

import json
from typing import Any

import pytest

from tests.synth_helpers import Synth

CONFUSED_DEPUTY_SERVICES = {"sagemaker.amazonaws.com", "codebuild.amazonaws.com"}
"""Services whose service roles document aws:SourceAccount (SageMaker developer guide and CodeBuild user guide,
"Cross-service confused deputy prevention"). Lambda and Step Functions execution roles are left as CDK makes
them: their trust names the service, which runs only this account's functions and state machines."""


def _statements(template: dict[str, Any], resource_type: str, key: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (lid, statement)
        for lid, resource in template["Resources"].items()
        if resource["Type"] == resource_type
        for statement in resource["Properties"][key]["Statement"]
    ]


@pytest.fixture(scope="module")
def templates(default_synth: Synth, components_synth: Synth, dev_synth: Synth) -> dict[str, Any]:
    return {
        f"{synth.config.stage}/{synth.config.serving.mode}/{name}": template.to_json()
        for synth in (default_synth, components_synth, dev_synth)
        for name, template in synth.templates.items()
    }


def test_every_job_and_build_role_trusts_its_service_for_this_account_only(templates: dict[str, Any]) -> None:
    checked = []
    for name, template in templates.items():
        for lid, statement in _statements(template, "AWS::IAM::Role", "AssumeRolePolicyDocument"):
            service = statement.get("Principal", {}).get("Service")
            if service in CONFUSED_DEPUTY_SERVICES:
                checked.append(f"{name}/{lid}")
                assert statement.get("Condition") == {
                    "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
                }, f"{name}/{lid}"
    # The endpoint's execution role, the compile-cache job's, the release pipelines', both image builds'.
    assert any("CompileCacheJobRole" in c for c in checked) and any("ToolsImageBuildProjectRole" in c for c in checked)
    assert any("ModelReleaseRole" in c for c in checked) and any("/ImageBuildProjectRole" in c for c in checked)


def test_every_pass_role_names_the_service_it_passes_to(templates: dict[str, Any]) -> None:
    passes = [
        (name, lid, statement)
        for name, template in templates.items()
        for lid, statement in _statements(template, "AWS::IAM::Policy", "PolicyDocument")
        if "iam:PassRole" in json.dumps(statement["Action"])
    ]
    assert len({lid for _, lid, _ in passes}) >= 3  # the two compile-cache handlers, the release role
    for name, lid, statement in passes:
        assert statement["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}, (
            f"{name}/{lid}"
        )
