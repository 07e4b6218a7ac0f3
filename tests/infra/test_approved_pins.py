"""The deploy's approval check in the Serving template (issue 47): in prod, on the defaults, a
``Custom::ApprovedPins`` resource over every pin in effect, which what deploys the pins waits for."""

import json
from pathlib import Path
from typing import Any

import pytest

from app_config.pins import pin_package_group, pins_in_effect
from cdk_constructs.approval.approved_pins import RESOURCE_TYPE, RUNTIME
from tests.conftest import CANARY_BUILD_OVERRIDES
from tests.metric_refs import resources
from tests.synth_helpers import Synth, synthesize


def _check(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    ((logical_id, resource),) = resources(template, RESOURCE_TYPE).items()
    return logical_id, resource["Properties"]


def _statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        statement
        for policy in resources(template, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_prod_on_the_defaults_checks_every_pin_before_the_endpoint_config(default_synth: Synth) -> None:
    config, template = default_synth.config, default_synth.template_json("Serving")
    assert config.stage == "prod" and config.release.deploy_approval.enforced
    logical_id, properties = _check(template)
    expected = [
        {
            "Key": ref.key,
            "Pin": ref.pin,
            **dict(zip(("Group", "Artifact"), pin_package_group(config, ref), strict=True)),
            "Package": "",  # the defaults record no package: the deploy refuses each pin until one is
        }
        for ref in pins_in_effect(config)
    ]
    assert properties["Pins"] == expected
    assert {pin["Key"] for pin in expected} >= {
        "image.build.primary.base_model",
        "image.build.primary.adapters.jp_style_v1",
    }
    assert {pin["Group"] for pin in expected} == {"mangaassist-prod-base-model", "mangaassist-prod-adapters"}
    (endpoint_config,) = resources(template, "AWS::SageMaker::EndpointConfig").values()
    assert logical_id in endpoint_config["DependsOn"]


def test_the_handler_may_describe_the_releases_packages_and_its_own_stack_only(default_synth: Synth) -> None:
    statements = {s.get("Sid"): s for s in _statements(default_synth.template_json("Serving"))}
    assert "ListModelPackages" not in statements  # it describes the recorded package, never searches the group
    described = statements["DescribeReleasedPackages"]
    assert described["Action"] == "sagemaker:DescribeModelPackage"
    tails = sorted(arn["Fn::Join"][1][-1] for arn in described["Resource"])
    assert tails == [":model-package/mangaassist-prod-adapters/*", ":model-package/mangaassist-prod-base-model/*"]
    own = statements["ReadOwnStackStatus"]
    assert (own["Action"], own["Resource"]) == ("cloudformation:DescribeStacks", {"Ref": "AWS::StackId"})


def test_a_recorded_package_reaches_the_check(tmp_path_factory: pytest.TempPathFactory) -> None:
    """release.registered_packages: the ARN of the package the release registered for a pinned version."""
    arn = "arn:aws:sagemaker:us-east-1:123456789012:model-package/mangaassist-prod-adapters/7"
    overrides = {**CANARY_BUILD_OVERRIDES, "release.registered_packages": json.dumps({"manga_domain_v3/v4": arn})}
    synth = synthesize(tmp_path_factory.mktemp("cdk-out-registered"), overrides)
    _, properties = _check(synth.template_json("Serving"))
    (adapter,) = [p for p in properties["Pins"] if p["Key"] == "image.build.canary.adapters.manga_domain_v3"]
    assert adapter["Package"] == arn


def test_the_handler_bundles_the_lookup_ops_uses(default_synth: Synth) -> None:
    # The Lambda asset holds index.py and serving_contract/model_packages.py, the file ops imports.
    from serving_contract import model_packages

    assets = [path for path in default_synth.outdir.glob("asset.*") if (path / "index.py").is_file()]
    bundled = [path for path in assets if (path / "serving_contract" / "model_packages.py").is_file()]
    assert len(bundled) == 1
    assert (bundled[0] / "index.py").read_text() == (RUNTIME / "index.py").read_text()
    shared = Path(str(model_packages.__file__)).read_text()
    assert (bundled[0] / "serving_contract" / "model_packages.py").read_text() == shared


def test_in_inference_components_mode_every_component_waits_for_the_check(components_synth: Synth) -> None:
    template = components_synth.template_json("Serving")
    logical_id, properties = _check(template)
    keys = [pin["Key"] for pin in properties["Pins"]]
    assert "serving.inference_components.adapter_artifacts.manga_domain_v3" in keys
    components = resources(template, "AWS::SageMaker::InferenceComponent")
    assert len(components) == 4 and all(logical_id in c["DependsOn"] for c in components.values())
