"""Every physical name the stacks set fits its AWS limit at the longest config allows (issue 20).

Names that can overflow (the endpoint, inference components) are refused when the config loads,
in one line naming the key (tests/unit/config/test_deploy_config.py); this proves the rest cannot: synthesized
with the longest project name and endpoint name the config accepts, each name is within its limit.
"""

import re
from typing import Any

import pytest

from tests.synth_helpers import Synth, synthesize

# (resource type, property, limit, pattern): the AWS API reference of each resource's name field.
LIMITS: list[tuple[str, str, int, str]] = [
    ("AWS::SageMaker::Endpoint", "EndpointName", 63, r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"),
    ("AWS::SageMaker::InferenceComponent", "InferenceComponentName", 63, r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"),
    ("AWS::CloudWatch::Alarm", "AlarmName", 255, r"^[^\x00-\x1f]+$"),
    ("AWS::CloudWatch::CompositeAlarm", "AlarmName", 255, r"^[^\x00-\x1f]+$"),
    ("Custom::LogRetention", "LogGroupName", 512, r"^[.\-_/#A-Za-z0-9]+$"),
    ("AWS::ApplicationAutoScaling::ScalableTarget", "ResourceId", 1600, r"^\S+$"),
    ("AWS::ApplicationAutoScaling::ScalingPolicy", "PolicyName", 256, r"^\S+$"),
    ("AWS::SageMaker::Pipeline", "PipelineName", 256, r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}$"),
    ("AWS::SageMaker::Pipeline", "PipelineDisplayName", 256, r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}$"),
    ("AWS::SageMaker::ModelPackageGroup", "ModelPackageGroupName", 63, r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"),
]

LONGEST = {"project_name": "A" + "b" * 31, "serving.endpoint_name": "e" * 63}


@pytest.fixture(scope="module", params=["variants", "inference_components"])
def longest_synth(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    overrides = dict(LONGEST)
    if request.param == "inference_components":
        # Component names add "-<adapter>" to the endpoint's: the longest endpoint that still fits them.
        overrides["serving.endpoint_name"] = "e" * (63 - len("-general-support-v2"))
        overrides["serving.mode"] = "inference_components"
        overrides["serving.inference_components.adapter_artifacts"] = (
            '{"manga_domain_v3": "v3/' + "1" * 64 + '", "general_support_v2": "v2/' + "2" * 64 + '", '
            '"jp_style_v1": "v1/' + "3" * 64 + '"}'
        )
    return synthesize(tmp_path_factory.mktemp(f"cdk-out-longest-{request.param}"), overrides)


def _strings(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def test_every_physical_name_fits_its_limit_at_the_longest_config(longest_synth: Synth) -> None:
    checked = 0
    for stack, template in longest_synth.templates.items():
        assert len(stack) <= 128 and re.match(r"^[A-Za-z][A-Za-z0-9-]*$", stack), stack  # CloudFormation stack name
        for kind, prop, limit, pattern in LIMITS:
            for resource in template.find_resources(kind).values():
                name = _strings(resource["Properties"].get(prop))
                if name is None:
                    continue
                checked += 1
                assert len(name) <= limit and re.match(pattern, name), f"{kind}.{prop} = {name!r} ({len(name)})"
    assert checked >= 10
