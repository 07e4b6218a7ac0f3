"""Template assertions for the in-account image build and how the serving stack consumes it."""

import json
from typing import Any

from aws_cdk.assertions import Match

from app_config.cloudformation_limits import CUSTOM_RESOURCE_SERVICE_TIMEOUT_S
from cdk_constructs.common.handler_code import HANDLER_RUNTIME
from cdk_constructs.image import image_inputs
from cdk_constructs.image.image_build import HANDLER_TIMEOUT_S
from serving_contract import env, outputs
from stacks.image_build_stack import REPO_ROOT
from tests.synth_helpers import Synth


def _resources(synth: Synth, unit: str, kind: str) -> dict[str, Any]:
    return dict(synth.template(unit).find_resources(kind))


def _model_images(synth: Synth) -> dict[str, Any]:
    return {
        m["Properties"]["PrimaryContainer"]["Environment"][env.VARIANT_NAME]: m["Properties"]["PrimaryContainer"][
            "Image"
        ]
        for m in _resources(synth, "Serving", "AWS::SageMaker::Model").values()
    }


def _statements(policy: dict[str, Any]) -> dict[str, dict[str, Any]]:
    by_action = {}
    for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        for action in actions:
            by_action[action] = statement
    return by_action


def _policy_of_role(synth: Synth, role_prefix: str) -> dict[str, dict[str, Any]]:
    policies = _resources(synth, "ImageBuild", "AWS::IAM::Policy")
    (policy,) = [
        p for p in policies.values() if any(r["Ref"].startswith(role_prefix) for r in p["Properties"]["Roles"])
    ]
    return _statements(policy)


def test_project_is_privileged_sized_from_config_and_encrypted(default_synth: Synth) -> None:
    template = default_synth.template("ImageBuild")
    template.has_resource_properties(
        "AWS::CodeBuild::Project",
        {
            "Environment": Match.object_like(
                {"ComputeType": "BUILD_GENERAL1_LARGE", "PrivilegedMode": True, "Image": "aws/codebuild/standard:7.0"}
            ),
            "TimeoutInMinutes": 50,
            "EncryptionKey": {"Fn::GetAtt": [Match.string_like_regexp("^ImageBuildKey"), "Arn"]},
            "Source": Match.object_like({"Type": "S3"}),
            "LogsConfig": {
                "CloudWatchLogs": {"GroupName": {"Ref": Match.string_like_regexp("BuildLogs")}, "Status": "ENABLED"}
            },
        },
    )


def test_buildspec_fetches_verifies_builds_and_pushes(default_synth: Synth) -> None:
    (project,) = _resources(default_synth, "ImageBuild", "AWS::CodeBuild::Project").values()
    spec = json.loads(project["Properties"]["Source"]["BuildSpec"])
    pre, build = spec["phases"]["pre_build"]["commands"], spec["phases"]["build"]["commands"]
    assert any("python3 -m serving_contract.model_artifacts fetch" in c and "--dest model-artifacts" in c for c in pre)
    (docker_build,) = [c for c in build if c.startswith("docker build")]
    assert docker_build.startswith("docker build -f container/Dockerfile --build-arg MODEL_CONTEXT=model-artifacts ")
    assert "--build-arg LORA_ADAPTERS=manga_domain_v3,general_support_v2,jp_style_v1" in docker_build
    assert "--build-arg MAX_LORA_RANK=16" in docker_build
    assert docker_build.endswith('-t "$REPOSITORY_URI:$IMAGE_TAG" .')
    # Pushed in the build phase: post_build would also run after a failed docker build.
    assert build[-1] == 'docker push "$REPOSITORY_URI:$IMAGE_TAG"'
    assert "post_build" not in spec["phases"]


def test_base_images_reach_the_build_pinned_by_digest(default_synth: Synth) -> None:
    # Issue 22 item 6: the custom resource carries the config's digest-pinned base images, the
    # handler passes them to StartBuild as variables, and the buildspec hands them to docker build.
    build = default_synth.config.image.build
    (resource,) = _resources(default_synth, "ImageBuild", "Custom::ServingImage").values()
    assert json.loads(resource["Properties"]["BaseImages"]) == {
        "CUDA_BASE": build.cuda_base_image,
        "UV_IMAGE": build.uv_image,
    }
    assert build.cuda_base_image.endswith("@sha256:0f6bfcbf267e65123bcc2287e2153dedfc0f24772fb5ce84afe16ac4b2fada95")
    (project,) = _resources(default_synth, "ImageBuild", "AWS::CodeBuild::Project").values()
    spec = json.loads(project["Properties"]["Source"]["BuildSpec"])
    (docker_build,) = [c for c in spec["phases"]["build"]["commands"] if c.startswith("docker build")]
    assert '--build-arg CUDA_BASE="$CUDA_BASE" --build-arg UV_IMAGE="$UV_IMAGE" -t ' in docker_build
    pre = spec["phases"]["pre_build"]["commands"]
    for name in ("CUDA_BASE", "UV_IMAGE"):
        # A build started without the handler's variables fails before any pull.
        assert any(c.startswith(f'[[ "${name}" == *@sha256:* ]] || ') and "exit 1" in c for c in pre)
    # The digests are part of the tag (cdk_constructs/image/image_inputs.py), so a new base digest is a new build.
    tag = resource["Properties"]["ImageTag"]
    inputs = {
        "sources_sha256": image_inputs.sources_sha256(REPO_ROOT),
        "base_model_name": default_synth.config.model.name,
        "artifacts": image_inputs.baked_artifacts(default_synth.config.serving, build.primary),
        "build_args": image_inputs.docker_build_args(default_synth.config),
    }
    base_images = image_inputs.base_images(default_synth.config.image)
    assert image_inputs.image_tag(**inputs, base_images=base_images) == tag  # type: ignore[arg-type]
    moved = {**base_images, "CUDA_BASE": base_images["CUDA_BASE"][:-64] + "e" * 64}
    assert image_inputs.image_tag(**inputs, base_images=moved) != tag  # type: ignore[arg-type]


def test_default_builds_one_image_and_both_variants_run_it(default_synth: Synth) -> None:
    images = _resources(default_synth, "ImageBuild", "Custom::ServingImage")
    (resource,) = images.values()
    tag = resource["Properties"]["ImageTag"]
    assert tag == default_synth.stacks.image_build.image_tags["primary"]  # type: ignore[union-attr]
    assert tag.startswith("build-") and len(tag) == 70
    # CloudFormation's custom-resource maximum (ServiceTimeout 1-3600 s).
    assert resource["Properties"]["ServiceTimeout"] == str(CUSTOM_RESOURCE_SERVICE_TIMEOUT_S) == "3600"
    assert any(d.startswith("ImageBuildProject") for d in resource["DependsOn"])
    pins = json.loads(resource["Properties"]["ArtifactPins"])
    assert sorted(pins) == ["base", "general_support_v2", "jp_style_v1", "manga_domain_v3"]
    for image in _model_images(default_synth).values():
        assert image["Fn::Join"][1][-1] == f":{tag}"
    default_synth.template("ImageBuild").has_output(outputs.PRIMARY_IMAGE_TAG, {"Value": tag})


def test_serving_stack_deploys_after_the_build(default_synth: Synth) -> None:
    manifest = json.loads((default_synth.outdir / "manifest.json").read_text())
    serving = manifest["artifacts"][default_synth.config.stack_name("Serving")]
    assert default_synth.config.stack_name("ImageBuild") in serving["dependencies"]


def test_canary_gets_its_own_build(canary_build_synth: Synth) -> None:
    synth = canary_build_synth
    images = _resources(synth, "ImageBuild", "Custom::ServingImage")
    tags = {r["Properties"]["ImageTag"] for r in images.values()}
    assert len(images) == 2 and len(tags) == 2
    built = synth.stacks.image_build.image_tags  # type: ignore[union-attr]
    models = _model_images(synth)
    # The canary runs its own build (a prebuilt image.canary in build mode is refused at synth).
    assert models["primary"]["Fn::Join"][1][-1] == f":{built['primary']}"
    assert models["canary"]["Fn::Join"][1][-1] == f":{built['canary']}"
    canary = next(r for r in images.values() if r["Properties"]["ImageTag"] == built["canary"])
    assert json.loads(canary["Properties"]["ArtifactPins"])["manga_domain_v3"].startswith("v4/")


def test_existing_bucket_is_read_only_by_prefix(canary_build_synth: Synth) -> None:
    synth = canary_build_synth
    assert _resources(synth, "ImageBuild", "AWS::S3::Bucket") == {}
    statements = _policy_of_role(synth, "ImageBuildProjectRole")
    read = statements["s3:GetObject*"]["Resource"]
    joined = json.dumps(read)
    assert "mangaassist-model-artifacts/base-models/*" in joined
    assert "mangaassist-model-artifacts/adapters/*" in joined
    assert not any(a.startswith("s3:Put") or a.startswith("s3:Delete") for a in statements)


def test_handler_roles_are_least_privilege(default_synth: Synth) -> None:
    roles = _resources(default_synth, "ImageBuild", "AWS::IAM::Role")
    assert all("ManagedPolicyArns" not in r["Properties"] for r in roles.values())
    on_event = _policy_of_role(default_synth, "ImageBuildOnEventRole")
    is_complete = _policy_of_role(default_synth, "ImageBuildIsCompleteRole")
    build_actions = {"codebuild:StartBuild", "codebuild:ListBuildsForProject", "codebuild:BatchGetBuilds"}
    assert build_actions <= set(on_event)
    assert "codebuild:StartBuild" not in is_complete
    for statements in (on_event, is_complete):
        assert statements["codebuild:BatchGetBuilds"]["Resource"]["Fn::GetAtt"][0].startswith("ImageBuildProject")
        assert "Fn::ImportValue" in json.dumps(statements["ecr:DescribeImages"]["Resource"])
        assert not any(a.startswith("ecr:Put") or a == "ecr:*" for a in statements)


def test_build_role_pushes_only_to_the_app_repository(default_synth: Synth) -> None:
    statements = _policy_of_role(default_synth, "ImageBuildProjectRole")
    assert "Fn::ImportValue" in json.dumps(statements["ecr:PutImage"]["Resource"])
    assert statements["ecr:GetAuthorizationToken"]["Resource"] == "*"


def test_every_log_group_is_encrypted(default_synth: Synth) -> None:
    groups = _resources(default_synth, "ImageBuild", "AWS::Logs::LogGroup")
    assert len(groups) >= 4
    for group in groups.values():
        assert group["Properties"]["KmsKeyId"]["Fn::GetAtt"][0].startswith("ImageBuildKey")
    default_synth.template("ImageBuild").has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


def test_handlers_run_the_one_handler_runtime(default_synth: Synth) -> None:
    functions = _resources(default_synth, "ImageBuild", "AWS::Lambda::Function")
    handlers = {f["Properties"]["Handler"]: f["Properties"]["Runtime"] for f in functions.values()}
    assert handlers["index.on_event"] == handlers["index.is_complete"] == HANDLER_RUNTIME.name == "python3.14"
    timeouts = {f["Properties"]["Handler"]: f["Properties"].get("Timeout") for f in functions.values()}
    assert timeouts["index.on_event"] == timeouts["index.is_complete"] == HANDLER_TIMEOUT_S


def test_prebuilt_synthesizes_without_the_build(vpc_single_variant_synth: Synth, prebuilt_uri_synth: Synth) -> None:
    for synth in (vpc_single_variant_synth, prebuilt_uri_synth):
        assert synth.stacks.image_build is None
        assert synth.config.stack_name("ImageBuild") not in synth.templates
    images = _model_images(prebuilt_uri_synth)
    uri = "123456789012.dkr.ecr.us-east-1.amazonaws.com/ci/serving@sha256:"
    assert images == {"primary": uri + "ab" * 32, "canary": uri + "cd" * 32}
    policy = next(iter(_resources(prebuilt_uri_synth, "Serving", "AWS::IAM::Policy").values()))
    pull = _statements(policy)["ecr:BatchGetImage"]["Resource"]
    assert "repository/ci/serving" in json.dumps(pull)
