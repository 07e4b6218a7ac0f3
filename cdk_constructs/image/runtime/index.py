"""Custom-resource handlers (CDK ``custom_resources.Provider``) that build the serving image.

``on_event`` (Create/Update) makes sure an image with the requested tag exists or is being
built, and ``is_complete`` polls that build until it ends. The tag is derived from every
input of the image at synth (cdk_constructs/image/image_inputs.py), so the handlers never decide *whether*
the inputs changed, only whether the image for this tag already exists:

1. the tag is in ECR             -> done, no build (unchanged inputs never rebuild);
2. a build for the tag is running -> adopt it (a deploy retried after a timeout waits on the
                                    build it started, never a second one);
3. otherwise                      -> StartBuild with an idempotency token derived from the tag
                                    and the CloudFormation request (``_idempotency_token``).

Before a build starts, the request's artifact pins and base images (``BaseImages``:
``{"CUDA_BASE": "name:tag@sha256:...", ...}``) are checked for the placeholder digest that
unpinned config defaults carry; the base images reach the build as environment variables of
the same names, which the buildspec passes to ``docker build --build-arg``.

Delete does nothing: images are the rollback path; ECR's lifecycle rule expires untagged images only.
A build that ends in any state but SUCCEEDED raises with the build id, the failed phase's
message and the CloudWatch Logs link, which CloudFormation shows as the resource's reason.
"""

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

import boto3

# Each deploy starts at most two builds (primary, canary), so the 20 newest builds of the
# project cover the last ten deploys; an in-flight build for a tag is always among them.
BUILD_LOOKBACK = 20
TAG_VARIABLE = "IMAGE_TAG"
PINS_VARIABLE = "ARTIFACT_PINS"
PLACEHOLDER_SHA256 = "0" * 64  # app_config/image_build.py: the unpinned default
# The config keys of the base-image build arguments (cdk_constructs/image/image_inputs.py), for the message.
BASE_IMAGE_KEYS = {"CUDA_BASE": "image.build.cuda_base_image", "UV_IMAGE": "image.build.uv_image"}


@dataclass(frozen=True)
class Environment:
    """The handler's environment, parsed once at import.

    Attributes:
        project_name: the CodeBuild project that builds the image.
        repository_name: the ECR repository the build pushes to.
        repository_uri: that repository's URI (``<registry>/<name>``).
    """

    project_name: str
    repository_name: str
    repository_uri: str

    @classmethod
    def from_environ(cls, environ: "os._Environ[str] | dict[str, str]") -> "Environment":
        missing = [k for k in ("PROJECT_NAME", "REPOSITORY_NAME", "REPOSITORY_URI") if not environ.get(k)]
        if missing:
            raise RuntimeError(f"image build handler: environment variable(s) {', '.join(missing)} not set")
        return cls(
            project_name=environ["PROJECT_NAME"],
            repository_name=environ["REPOSITORY_NAME"],
            repository_uri=environ["REPOSITORY_URI"],
        )


ENV = Environment.from_environ(os.environ)
CODEBUILD = boto3.client("codebuild")
ECR = boto3.client("ecr")


class BuildFailedError(RuntimeError):
    """The image build ended in a state other than SUCCEEDED."""


def _image_digest(tag: str) -> str | None:
    try:
        response = ECR.describe_images(repositoryName=ENV.repository_name, imageIds=[{"imageTag": tag}])
    except ECR.exceptions.ImageNotFoundException:
        return None
    details = response.get("imageDetails", [])
    return str(details[0]["imageDigest"]) if details else None


def _build_tag(build: dict[str, Any]) -> str | None:
    for variable in build.get("environment", {}).get("environmentVariables", []):
        if variable.get("name") == TAG_VARIABLE:
            return str(variable.get("value"))
    return None


def _in_flight_build(tag: str) -> str | None:
    ids = CODEBUILD.list_builds_for_project(projectName=ENV.project_name, sortOrder="DESCENDING").get("ids", [])
    ids = ids[:BUILD_LOOKBACK]
    if not ids:
        return None
    for build in CODEBUILD.batch_get_builds(ids=ids).get("builds", []):
        if build.get("buildStatus") == "IN_PROGRESS" and _build_tag(build) == tag:
            return str(build["id"])
    return None


def _check_pins(pins: dict[str, str]) -> None:
    unpinned = sorted(name for name, pin in pins.items() if pin.endswith("/" + PLACEHOLDER_SHA256))
    if unpinned:
        raise ValueError(
            f"artifact pin(s) {', '.join(unpinned)} still carry the placeholder sha256; set image.build.<variant> "
            "from the CURRENT pointers (python -m ops.pin_artifacts, docs/image-build.md)"
        )


def _check_base_images(base_images: dict[str, str]) -> None:
    unpinned = sorted(name for name, ref in base_images.items() if ref.endswith("@sha256:" + PLACEHOLDER_SHA256))
    if unpinned:
        keys = ", ".join(f"{BASE_IMAGE_KEYS.get(name, name)} = {base_images[name]!r}" for name in unpinned)
        raise ValueError(
            f"base image(s) {keys} still carry the placeholder digest; set name:tag@sha256:<digest> from "
            "docker buildx imagetools inspect name:tag (docs/image-build.md)"
        )


def _idempotency_token(tag: str, event: dict[str, Any]) -> str:
    """StartBuild's token, per tag and CloudFormation request (64 hex characters).

    CodeBuild returns the earlier build for a token reused within 5 minutes (StartBuild API
    reference, ``idempotencyToken``), whatever that build's state. A token per tag alone made a
    deploy retried within 5 minutes of a failed build get the failed build back. The request id
    is the same for the provider's own retries of one request (which must not start a second
    build) and new for every CloudFormation request (a retried deploy builds again).
    """
    request_id = str(event.get("RequestId", ""))
    return hashlib.sha256(f"{ENV.project_name}:{tag}:{request_id}".encode()).hexdigest()[:64]


def _image_uri(digest: str) -> str:
    """``<repository>@sha256:...``: pinned by digest (the tag only found the image)."""
    return f"{ENV.repository_uri}@{digest}"


def on_event(event: dict[str, Any], _context: object = None) -> dict[str, Any]:
    """Create/Update: find or start the build of ``ImageTag``. Delete: keep the image."""
    request = event["RequestType"]
    if request == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    props = event["ResourceProperties"]
    tag = str(props["ImageTag"])
    pins = json.loads(props["ArtifactPins"])
    # Absent only in a rollback to a template from before base images were pinned: its tag is in
    # ECR, so no build starts; a build without them would fail the buildspec's digest check.
    base_images = json.loads(props.get("BaseImages", "{}"))
    result: dict[str, Any] = {"PhysicalResourceId": tag}
    digest = _image_digest(tag)
    if digest is not None:
        print(f"image {ENV.repository_uri}:{tag} exists ({digest}); no build")
        result["Data"] = {"BuildId": "", "ImageUri": _image_uri(digest), "ImageDigest": digest}
        return result
    build_id = _in_flight_build(tag)
    if build_id is not None:
        print(f"adopting build {build_id}, already building {tag}")
    else:
        _check_pins(pins)
        _check_base_images(base_images)
        build_id = CODEBUILD.start_build(
            projectName=ENV.project_name,
            environmentVariablesOverride=[
                {"name": TAG_VARIABLE, "value": tag, "type": "PLAINTEXT"},
                {"name": PINS_VARIABLE, "value": json.dumps(pins, sort_keys=True), "type": "PLAINTEXT"},
                *({"name": name, "value": ref, "type": "PLAINTEXT"} for name, ref in sorted(base_images.items())),
            ],
            idempotencyToken=_idempotency_token(tag, event),
        )["build"]["id"]
        print(f"started build {build_id} for {tag}")
    result["Data"] = {"BuildId": build_id}
    return result


def _failure(build: dict[str, Any], tag: str) -> str:
    failed = [p for p in build.get("phases", []) if p.get("phaseStatus") not in (None, "SUCCEEDED")]
    detail = "; ".join(
        f"{p['phaseType']}: {c.get('message', '')}".strip() for p in failed for c in p.get("contexts", []) or [{}]
    )
    link = build.get("logs", {}).get("deepLink", "(no log link)")
    return (
        f"image build {build['id']} for tag {tag} ended {build['buildStatus']}"
        f"{' in ' + detail if detail else ''}; logs: {link}"
    )


def is_complete(event: dict[str, Any], _context: object = None) -> dict[str, Any]:
    """Poll the build ``on_event`` started or adopted; raise with id and log link when it fails."""
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    data = event.get("Data", {})
    tag = str(event["PhysicalResourceId"])
    build_id = data.get("BuildId", "")
    if not build_id:
        return {"IsComplete": True, "Data": data}
    builds = CODEBUILD.batch_get_builds(ids=[build_id]).get("builds", [])
    if not builds:
        raise BuildFailedError(f"image build {build_id} for tag {tag} not found")
    build = builds[0]
    status = build.get("buildStatus")
    if status == "IN_PROGRESS":
        print(f"build {build_id} in phase {build.get('currentPhase')}")
        return {"IsComplete": False}
    if status != "SUCCEEDED":
        raise BuildFailedError(_failure(build, tag))
    digest = _image_digest(tag)
    if digest is None:
        link = build.get("logs", {}).get("deepLink", "(no log link)")
        raise BuildFailedError(f"image build {build_id} succeeded but {tag} is not in ECR; logs: {link}")
    return {
        "IsComplete": True,
        "Data": {"BuildId": build_id, "ImageUri": _image_uri(digest), "ImageDigest": digest},
    }
