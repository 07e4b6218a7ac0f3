"""The release tools image, built in the account during ``cdk deploy`` by :class:`ImageBuild`.

``runtime/Dockerfile`` is the serving image plus a virtualenv with the quantize and evaluate steps' libraries
(llm-compressor, sacrebleu). The Quantize, Validate and Evaluate steps run it (pipeline_definition.py).
"""

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from cdk_constructs.image.image_build import ImageBuild, ImageBuildRequest
from cdk_constructs.image.image_buildspec import BuildRecipe

RUNTIME: Final = Path(__file__).parent / "runtime"
DOCKERFILE: Final = "Dockerfile"
"""At the root of the sources asset (runtime/'s Dockerfile alone: it copies nothing into the image)."""
SERVING_IMAGE_ARG: Final = "SERVING_IMAGE"
LLMCOMPRESSOR_VERSION_ARG: Final = "LLMCOMPRESSOR_VERSION"
TAG_PREFIX: Final = "release-tools-"
REQUEST: Final = "tools"


def tools_image_tag(*, dockerfile_sha256: str, build_args: Mapping[str, object]) -> str:
    """``release-tools-<64 hex>`` (78 characters): sha256 of the canonical JSON of the image's inputs.

    ``build_args`` values may be resolved CloudFormation expressions (the serving image's URI names the
    repository by reference): each resolves to the same JSON for the same image, tag or digest, so the same
    inputs give the same tag, and a new serving image tag (every input of the serving image: image_inputs.py)
    gives a new tools image.
    """
    inputs = {"dockerfile": dockerfile_sha256, "build_args": build_args}
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return TAG_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()


class ToolsImage(Construct):
    """Builds ``runtime/Dockerfile`` FROM the serving image, with the pinned llm-compressor, into ``repository``.

    One :class:`ImageBuild` (its CodeBuild project, custom resource and handlers), without model artifacts: the
    serving image already holds them. The tag is derived from every input (:func:`tools_image_tag`), so a deploy
    with unchanged inputs builds nothing, and the repository's immutable tags never confuse two builds.

    Attributes:
        image_uri: ``<repository uri>:<tag>`` (known at synth).
        image: the custom resource; a resource that names ``image_uri`` depends on it.
        image_build: the :class:`ImageBuild`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        repository: ecr.IRepository,
        serving_image_uri: str,
        serving_image_repository: ecr.IRepository,
        llmcompressor_version: str,
        compute_type: str,
        build_timeout: cdk.Duration,
        poll_interval: cdk.Duration,
        log_retention: logs.RetentionDays,
        log_removal_policy: cdk.RemovalPolicy,
    ) -> None:
        """
        Args:
            repository: the app's ECR repository: the tools image is pushed to it.
            serving_image_uri: the image the endpoint runs (``FROM``), by immutable tag or digest.
            serving_image_repository: the repository that holds it (the app's, or a prebuilt image's in another
                account, whose repository policy must then allow this account's pulls, as for the endpoint).
            llmcompressor_version: ``release.quantize.llmcompressor_version``, which the quantize step checks.
            compute_type / build_timeout / poll_interval: ``image.build``'s, as for the serving image.
            log_retention / log_removal_policy: for every log group made here.
        """
        super().__init__(scope, construct_id)
        sources = s3_assets.Asset(self, "Sources", path=str(RUNTIME), exclude=["*", f"!{DOCKERFILE}"])
        build_args = {SERVING_IMAGE_ARG: serving_image_uri, LLMCOMPRESSOR_VERSION_ARG: llmcompressor_version}
        tag = tools_image_tag(
            dockerfile_sha256=hashlib.sha256((RUNTIME / DOCKERFILE).read_bytes()).hexdigest(),
            build_args=cdk.Stack.of(self).resolve(build_args),
        )
        self.image_build = ImageBuild(
            self,
            "Build",
            repository=repository,
            sources=sources,
            artifacts_bucket=None,
            recipe=BuildRecipe(
                dockerfile=DOCKERFILE,
                build_args=build_args,
                base_image_args=(),
                description="Builds the release tools image (llm-compressor, sacrebleu) from the serving image",
                # A literal URI is a prebuilt image's, maybe in another registry; a token is the app's repository.
                pull_registries=()
                if cdk.Token.is_unresolved(serving_image_uri)
                else (serving_image_uri.split("/", 1)[0],),
            ),
            requests={REQUEST: ImageBuildRequest(tag=tag, pins={}, base_images={})},
            compute_type=compute_type,
            build_timeout=build_timeout,
            poll_interval=poll_interval,
            log_retention=log_retention,
            log_removal_policy=log_removal_policy,
            resource_type="Custom::ReleaseToolsImage",
        )
        if serving_image_repository is not repository:
            serving_image_repository.grant_pull(self.image_build.project)
        self.image = self.image_build.images[REQUEST]
        self.image_uri = self.image_build.image_uris[REQUEST]
