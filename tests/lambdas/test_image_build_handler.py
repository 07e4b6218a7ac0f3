"""The image-build custom-resource handlers against botocore's Stubber.

The Stubber validates every request against the real CodeBuild and ECR service models and
fails on any call without a queued response, so "no second build" is asserted by simply
not queueing a StartBuild.
"""

import json
from types import ModuleType
from typing import Any

import pytest
from botocore.stub import ANY, Stubber

PROJECT = "ImageBuildProject-abc123"
REPOSITORY = "mangaassist-serving"
REPOSITORY_URI = f"123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/{REPOSITORY}"
TAG = "build-" + "ab" * 32
DIGEST = "sha256:" + "cd" * 32
BUILD_ID = f"{PROJECT}:0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
LOG_LINK = "https://console.aws.amazon.com/cloudwatch/home?region=ap-northeast-1#logsV2:log-groups/x"
PINS = {"base": "v1/" + "1" * 64, "manga_domain_v3": "v3/" + "2" * 64}
BASE_IMAGES = {
    "CUDA_BASE": "nvidia/cuda:12.4.1-base-ubuntu22.04@sha256:" + "3" * 64,
    "UV_IMAGE": "ghcr.io/astral-sh/uv:0.13.8@sha256:" + "4" * 64,
}


HANDLER_MODULE = "cdk_constructs.image.runtime.index"
STUBBED_CLIENTS = ("CODEBUILD", "ECR")
HANDLER_ENVIRONMENT = {"PROJECT_NAME": PROJECT, "REPOSITORY_NAME": REPOSITORY, "REPOSITORY_URI": REPOSITORY_URI}


def _create_event(request: str = "Create", request_id: str = "req-1") -> dict[str, Any]:
    return {
        "RequestType": request,
        "RequestId": request_id,
        "ResourceProperties": {
            "ServiceToken": "arn",
            "ImageTag": TAG,
            "ArtifactPins": json.dumps(PINS),
            "BaseImages": json.dumps(BASE_IMAGES),
        },
    }


def _image_missing(ecr: Stubber) -> None:
    ecr.add_client_error(
        "describe_images",
        service_error_code="ImageNotFoundException",
        expected_params={"repositoryName": REPOSITORY, "imageIds": [{"imageTag": TAG}]},
    )


def _image_present(ecr: Stubber) -> None:
    ecr.add_response(
        "describe_images",
        {"imageDetails": [{"repositoryName": REPOSITORY, "imageDigest": DIGEST, "imageTags": [TAG]}]},
        {"repositoryName": REPOSITORY, "imageIds": [{"imageTag": TAG}]},
    )


def _build(status: str, tag: str = TAG, **extra: Any) -> dict[str, Any]:
    return {
        "id": BUILD_ID,
        "buildStatus": status,
        "currentPhase": "BUILD",
        "environment": {
            "type": "LINUX_CONTAINER",
            "image": "aws/codebuild/standard:7.0",
            "computeType": "BUILD_GENERAL1_LARGE",
            "environmentVariables": [{"name": "IMAGE_TAG", "value": tag, "type": "PLAINTEXT"}],
        },
        "logs": {"deepLink": LOG_LINK},
        **extra,
    }


def _no_builds(codebuild: Stubber) -> None:
    codebuild.add_response("list_builds_for_project", {}, {"projectName": PROJECT, "sortOrder": "DESCENDING"})


def test_create_starts_a_build_when_the_tag_is_new(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    codebuild, ecr = stubs
    _image_missing(ecr)
    _no_builds(codebuild)
    codebuild.add_response(
        "start_build",
        {"build": {"id": BUILD_ID, "buildStatus": "IN_PROGRESS"}},
        {
            "projectName": PROJECT,
            "environmentVariablesOverride": [
                {"name": "IMAGE_TAG", "value": TAG, "type": "PLAINTEXT"},
                {"name": "ARTIFACT_PINS", "value": json.dumps(PINS, sort_keys=True), "type": "PLAINTEXT"},
                # The base images, one variable per Dockerfile ARG (the buildspec's --build-arg).
                {"name": "CUDA_BASE", "value": BASE_IMAGES["CUDA_BASE"], "type": "PLAINTEXT"},
                {"name": "UV_IMAGE", "value": BASE_IMAGES["UV_IMAGE"], "type": "PLAINTEXT"},
            ],
            "idempotencyToken": ANY,
        },
    )
    result = handler.on_event(_create_event())
    assert result == {"PhysicalResourceId": TAG, "Data": {"BuildId": BUILD_ID}}


def test_unchanged_inputs_never_rebuild(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    # The tag is in ECR already (e.g. a stack re-created with the same inputs): no build at all.
    _, ecr = stubs
    _image_present(ecr)
    result = handler.on_event(_create_event("Update"))
    assert result["PhysicalResourceId"] == TAG
    assert result["Data"] == {"BuildId": "", "ImageUri": f"{REPOSITORY_URI}@{DIGEST}", "ImageDigest": DIGEST}
    assert handler.is_complete({**_create_event("Update"), **result}) == {"IsComplete": True, "Data": result["Data"]}


def test_retry_after_a_timeout_adopts_the_running_build(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    # A deploy timed out and rolled back; the next deploy asks for the same tag while the first
    # build is still running. No StartBuild is queued: the Stubber would fail on one.
    codebuild, ecr = stubs
    _image_missing(ecr)
    other = f"{PROJECT}:11111111-2222-3333-4444-555555555555"
    codebuild.add_response(
        "list_builds_for_project", {"ids": [other, BUILD_ID]}, {"projectName": PROJECT, "sortOrder": "DESCENDING"}
    )
    codebuild.add_response(
        "batch_get_builds",
        {"builds": [{**_build("IN_PROGRESS", tag="build-" + "ee" * 32), "id": other}, _build("IN_PROGRESS")]},
        {"ids": [other, BUILD_ID]},
    )
    result = handler.on_event(_create_event())
    assert result == {"PhysicalResourceId": TAG, "Data": {"BuildId": BUILD_ID}}


def test_a_failed_earlier_build_for_the_tag_is_not_adopted(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    codebuild, ecr = stubs
    _image_missing(ecr)
    codebuild.add_response(
        "list_builds_for_project", {"ids": [BUILD_ID]}, {"projectName": PROJECT, "sortOrder": "DESCENDING"}
    )
    codebuild.add_response("batch_get_builds", {"builds": [_build("FAILED")]}, {"ids": [BUILD_ID]})
    new_id = f"{PROJECT}:99999999-2222-3333-4444-555555555555"
    codebuild.add_response(
        "start_build",
        {"build": {"id": new_id}},
        {"projectName": PROJECT, "environmentVariablesOverride": ANY, "idempotencyToken": ANY},
    )
    assert handler.on_event(_create_event())["Data"] == {"BuildId": new_id}


def test_placeholder_pins_stop_before_any_build(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    codebuild, ecr = stubs
    _image_missing(ecr)
    _no_builds(codebuild)
    event = _create_event()
    event["ResourceProperties"]["ArtifactPins"] = json.dumps({"base": "v1/" + "0" * 64})
    with pytest.raises(ValueError, match=r"artifact pin\(s\) base still carry the placeholder sha256"):
        handler.on_event(event)


def test_placeholder_base_image_digest_stops_before_any_build(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    # Issue 22 item 6: the uv image's default digest is a placeholder; synth accepts it, the build does not.
    codebuild, ecr = stubs
    _image_missing(ecr)
    _no_builds(codebuild)
    uv = "ghcr.io/astral-sh/uv:0.13.8@sha256:" + "0" * 64
    event = _create_event()
    event["ResourceProperties"]["BaseImages"] = json.dumps({**BASE_IMAGES, "UV_IMAGE": uv})
    with pytest.raises(ValueError) as info:
        handler.on_event(event)
    assert str(info.value) == (
        f"base image(s) image.build.uv_image = '{uv}' still carry the placeholder digest; set "
        "name:tag@sha256:<digest> from docker buildx imagetools inspect name:tag (docs/image-build.md)"
    )


def test_a_placeholder_base_digest_does_not_stop_an_image_already_built(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    # The check guards StartBuild only, as for artifact pins: an image already in ECR is used as is.
    _, ecr = stubs
    _image_present(ecr)
    event = _create_event()
    event["ResourceProperties"]["BaseImages"] = json.dumps({"UV_IMAGE": "x:y@sha256:" + "0" * 64})
    assert handler.on_event(event)["Data"]["ImageDigest"] == DIGEST


def _poll(handler: ModuleType) -> Any:
    return handler.is_complete({**_create_event(), "PhysicalResourceId": TAG, "Data": {"BuildId": BUILD_ID}})


def test_poll_while_the_build_runs(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    codebuild, _ = stubs
    codebuild.add_response("batch_get_builds", {"builds": [_build("IN_PROGRESS")]}, {"ids": [BUILD_ID]})
    assert _poll(handler) == {"IsComplete": False}


def test_poll_after_success_returns_the_pushed_digest(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    codebuild, ecr = stubs
    codebuild.add_response("batch_get_builds", {"builds": [_build("SUCCEEDED")]}, {"ids": [BUILD_ID]})
    _image_present(ecr)
    assert _poll(handler) == {
        "IsComplete": True,
        "Data": {"BuildId": BUILD_ID, "ImageUri": f"{REPOSITORY_URI}@{DIGEST}", "ImageDigest": DIGEST},
    }


def test_failed_build_raises_with_build_id_message_and_log_link(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    codebuild, _ = stubs
    phases = [
        {"phaseType": "PRE_BUILD", "phaseStatus": "SUCCEEDED"},
        {
            "phaseType": "BUILD",
            "phaseStatus": "FAILED",
            "contexts": [{"statusCode": "COMMAND_EXECUTION_ERROR", "message": "Error while executing docker build"}],
        },
    ]
    codebuild.add_response("batch_get_builds", {"builds": [_build("FAILED", phases=phases)]}, {"ids": [BUILD_ID]})
    with pytest.raises(handler.BuildFailedError) as info:
        _poll(handler)
    message = str(info.value)
    assert message == (
        f"image build {BUILD_ID} for tag {TAG} ended FAILED in BUILD: Error while executing docker build; "
        f"logs: {LOG_LINK}"
    )


def test_success_without_the_image_in_ecr_fails(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    codebuild, ecr = stubs
    codebuild.add_response("batch_get_builds", {"builds": [_build("SUCCEEDED")]}, {"ids": [BUILD_ID]})
    _image_missing(ecr)
    with pytest.raises(handler.BuildFailedError, match=f"succeeded but {TAG} is not in ECR; logs: "):
        _poll(handler)


def test_delete_keeps_the_image(handler: ModuleType, stubs: tuple[Stubber, Stubber]) -> None:
    event = {"RequestType": "Delete", "PhysicalResourceId": TAG, "ResourceProperties": {}}
    assert handler.on_event(event) == {"PhysicalResourceId": TAG}
    assert handler.is_complete(event) == {"IsComplete": True}


def test_environment_is_validated_at_import(handler: ModuleType) -> None:
    with pytest.raises(RuntimeError, match="environment variable\\(s\\) PROJECT_NAME, REPOSITORY_URI not set"):
        handler.Environment.from_environ({"REPOSITORY_NAME": REPOSITORY})


def test_image_uri_is_the_digest_reference_alone(handler: ModuleType) -> None:
    # One argument: the URI never depends on the tag (a moved tag must not change a pinned image).
    assert handler._image_uri(DIGEST) == f"{REPOSITORY_URI}@{DIGEST}"


def _token(handler: ModuleType, request_id: str) -> str:
    return str(handler._idempotency_token(TAG, _create_event(request_id=request_id)))


def test_a_deploy_retried_within_5_minutes_of_a_failed_build_starts_a_new_build(
    handler: ModuleType, stubs: tuple[Stubber, Stubber]
) -> None:
    # CodeBuild hands back the build of a token reused within 5 minutes, failed or not: on
    # e706d98 the token was the tag's alone, so the retry got the failed build back.
    codebuild, ecr = stubs
    _image_missing(ecr)
    codebuild.add_response(
        "list_builds_for_project", {"ids": [BUILD_ID]}, {"projectName": PROJECT, "sortOrder": "DESCENDING"}
    )
    codebuild.add_response("batch_get_builds", {"builds": [_build("FAILED")]}, {"ids": [BUILD_ID]})
    new_id = f"{PROJECT}:99999999-2222-3333-4444-555555555555"
    codebuild.add_response(
        "start_build",
        {"build": {"id": new_id}},
        {"projectName": PROJECT, "environmentVariablesOverride": ANY, "idempotencyToken": _token(handler, "req-2")},
    )
    assert handler.on_event(_create_event(request_id="req-2"))["Data"] == {"BuildId": new_id}
    assert _token(handler, "req-2") != _token(handler, "req-1")
    assert _token(handler, "req-1") == _token(handler, "req-1")  # the provider's retries of one request
    assert len(_token(handler, "req-1")) == 64
