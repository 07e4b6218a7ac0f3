"""What CloudFormation's lifecycle needs from the templates (issue 20): a first deploy that cannot
build from an empty bucket or with placeholder pins, a failed create that can be retried, a
delete that can be re-created, and exports that survive a serving-mode switch."""

import json
import re
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match

from app_config import pins
from serving_contract import outputs
from tests.synth_helpers import Synth, synthesize

PINNED = {
    "image.build.primary": json.dumps(
        {
            "base_model": "v1/" + "a" * 64,
            "adapters": {
                "manga_domain_v3": "v3/" + "b" * 64,
                "general_support_v2": "v2/" + "c" * 64,
                "jp_style_v1": "v1/" + "d" * 64,
            },
        }
    ),
    "image.build.uv_image": "ghcr.io/astral-sh/uv:0.13.8@sha256:" + "f" * 64,
}


@pytest.fixture(scope="module")
def pinned_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("cdk-out-pinned"), PINNED)


def _all_templates(*synths: Synth) -> list[tuple[str, dict[str, Any]]]:
    return [(name, dict(t.to_json())) for s in synths for name, t in s.templates.items()]


def test_the_artifacts_bucket_is_its_own_stack_deployed_before_the_build(default_synth: Synth) -> None:
    """The bucket must hold the artifacts before a build reads them: it lives in a stack that
    `make deploy-foundation` deploys first, never beside the build that reads it."""
    assert default_synth.template("ImageBuild").find_resources("AWS::S3::Bucket") == {}
    build_stack = default_synth.stacks.image_build
    assert build_stack is not None and default_synth.stacks.model_artifacts is not None
    assert default_synth.stacks.model_artifacts.stack_name in [d.stack_name for d in build_stack.dependencies]
    default_synth.template("ModelArtifacts").has_output(outputs.MODEL_ARTIFACTS_BUCKET_NAME, Match.any_value())


def test_artifacts_bucket_is_encrypted_versioned_private_tls_only_logged_and_retained_except_on_create(
    default_synth: Synth,
) -> None:
    template = default_synth.template("ModelArtifacts")
    template.has_resource(
        "AWS::S3::Bucket",
        {
            "Properties": Match.object_like(
                {
                    "VersioningConfiguration": {"Status": "Enabled"},
                    "BucketEncryption": Match.any_value(),
                    "PublicAccessBlockConfiguration": {
                        "BlockPublicAcls": True,
                        "BlockPublicPolicy": True,
                        "IgnorePublicAcls": True,
                        "RestrictPublicBuckets": True,
                    },
                    "LoggingConfiguration": Match.object_like({"DestinationBucketName": Match.any_value()}),
                }
            ),
            "DeletionPolicy": "RetainExceptOnCreate",
        },
    )
    policies = template.find_resources("AWS::S3::BucketPolicy")
    assert policies and all(
        any(
            s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}} and s["Effect"] == "Deny"
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        )
        for p in policies.values()
    )


def test_placeholder_pins_stop_the_deploy_before_anything_is_created(default_synth: Synth) -> None:
    """CloudFormation evaluates Rules before creating a resource; the assertion names every key."""
    rules = default_synth.template_json("ImageBuild")["Rules"]
    (assertion,) = rules[pins.RULE_ID]["Assertions"]
    assert assertion["Assert"] == {"Fn::Contains": [["pinned"], "placeholder"]}  # always false
    assert assertion["AssertDescription"] == (
        "placeholder pin(s) image.build.primary.adapters.general_support_v2, "
        "image.build.primary.adapters.jp_style_v1, image.build.primary.adapters.manga_domain_v3, "
        "image.build.primary.base_model, image.build.uv_image: set these keys in cdk.json before deploying "
        "(artifacts: upload them and pin them with `python -m ops.pin_artifacts`; base images: their "
        "registry digest) (docs/deploy.md)"
    )
    assert len(assertion["AssertDescription"]) <= 1024  # CloudFormation's limit on AssertDescription


def test_pinned_artifacts_deploy_without_the_rule(pinned_synth: Synth, canary_build_synth: Synth) -> None:
    assert pins.RULE_ID not in pinned_synth.template_json("ImageBuild").get("Rules", {})
    # A pinned canary does not hide an unpinned primary.
    description = canary_build_synth.template_json("ImageBuild")["Rules"][pins.RULE_ID]["Assertions"][0][
        "AssertDescription"
    ]
    assert "image.build.primary.base_model" in description and "image.build.canary" not in description


def test_nothing_is_plainly_retained_so_a_failed_first_create_can_be_retried(
    all_synths: list[Synth], extra_synths: list[Synth]
) -> None:
    """`Retain` keeps a failed first create's buckets, keys and log groups, and the retry meets them
    ("already exists"); `RetainExceptOnCreate` deletes them only when the create rolls back."""
    plain = [
        f"{stack}/{logical_id}"
        for stack, template in _all_templates(*all_synths, *extra_synths)
        for logical_id, resource in template["Resources"].items()
        if resource.get("DeletionPolicy") == "Retain"
    ]
    assert plain == []


def test_no_fixed_name_log_group_is_a_plain_resource(all_synths: list[Synth], extra_synths: list[Synth]) -> None:
    """A retained AWS::Logs::LogGroup with a name AWS fixes would make the next create of its stack
    fail; those groups go through CDK's LogRetention, which adopts an existing one."""
    fixed = [
        f"{stack}/{resource['Properties']['LogGroupName']}"
        for stack, template in _all_templates(*all_synths, *extra_synths)
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::Logs::LogGroup" and "LogGroupName" in resource.get("Properties", {})
    ]
    assert fixed == []


def test_a_serving_mode_switch_keeps_the_log_groups_logical_id(default_synth: Synth, components_synth: Synth) -> None:
    def endpoint_log_group(synth: Synth) -> str:
        (logical_id,) = synth.template("Serving").find_resources(
            "Custom::LogRetention",
            {"Properties": {"LogGroupName": f"/aws/sagemaker/Endpoints/{synth.config.endpoint_name}"}},
        )
        return str(logical_id)

    assert endpoint_log_group(default_synth) == endpoint_log_group(components_synth)


def test_the_artifacts_stack_exports_its_bucket_with_no_consumer(
    tmp_path: Path, default_synth: Synth, components_synth: Synth
) -> None:
    """CloudFormation refuses to delete an export another stack imports, and a consumer that stops
    importing (a switch back from inference_components) would make the exporting stack drop it in
    the same deploy. The stack exports name and ARN on its own, with nothing importing them, and
    every import of the bucket in either mode names one of those exports."""
    import aws_cdk as cdk

    from stacks.model_artifacts_stack import ModelArtifactsStack

    app = cdk.App(outdir=str(tmp_path))
    alone = ModelArtifactsStack(app, "Alone", capture_retention_days=30, scratch_retention_days=7)
    outputs_ = app.synth().get_stack_by_name(alone.stack_name).template["Outputs"]
    exported = {o["Export"]["Name"] for o in outputs_.values() if "Export" in o}
    assert len(exported) == 2, outputs_  # the bucket's name and ARN

    def exports(synth: Synth) -> set[str]:
        template = synth.template_json("ModelArtifacts")
        return {o["Export"]["Name"] for o in template["Outputs"].values() if "Export" in o}

    for synth in (default_synth, components_synth):
        text = json.dumps([t for _, t in _all_templates(synth)])
        imported = set(re.findall(r'"Fn::ImportValue": "(MangaAssist-prod-ModelArtifacts:[^"]+)"', text))
        assert imported and imported <= exports(synth), (imported, exports(synth))


def test_make_synth_prints_what_a_deploy_refuses(default_synth: Synth, capsys: pytest.CaptureFixture[str]) -> None:
    from devtools import synth_summary

    synth_summary.main(["synth_summary", str(default_synth.outdir)])
    out = capsys.readouterr().out
    assert "Deploy refused until pinned:" in out
    assert "image.build.primary.base_model" in out


def test_no_test_leaves_cdk_out_in_the_repo(repo_root: Path) -> None:
    assert not (repo_root / "tests" / "cdk.out").exists()


def test_every_stack_carries_the_configured_tags(all_synths: list[Synth], bedrock_synth: Synth) -> None:
    """Tags are applied once, on the app (issue 27): every stack gets them, so CloudFormation
    passes them to every resource it creates, including the optional Bedrock stack."""
    for synth in (*all_synths, bedrock_synth):
        manifest = json.loads((synth.outdir / "manifest.json").read_text())
        stacks = {
            name: artifact["properties"].get("tags")
            for name, artifact in manifest["artifacts"].items()
            if artifact.get("type") == "aws:cloudformation:stack"
        }
        assert stacks and all(tags == dict(synth.config.tags) for tags in stacks.values()), stacks
