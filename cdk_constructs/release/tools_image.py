"""The release tools image, built in the account during ``cdk deploy`` by :class:`ImageBuild`.

``runtime/Dockerfile`` is the serving image plus a virtualenv with the quantize and evaluate steps' libraries
(llm-compressor, sacrebleu), installed from ``runtime/requirements.lock`` in hash-checking mode. The Quantize,
Validate and Evaluate steps run it (pipeline_definition.py).

The image has an ECR repository of its own: its privileged CodeBuild project may push there and only pull the
serving image, so a build of the tools (which installs third-party packages) can never replace what the endpoint
runs (issue 49, finding 5).
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
from cdk_constructs.image.model_image_repository import ModelImageRepository

RUNTIME: Final = Path(__file__).parent / "runtime"
DOCKERFILE: Final = "Dockerfile"
"""At the root of the sources asset: runtime/'s Dockerfile and :data:`LOCK`, nothing else."""
LOCK: Final = "requirements.lock"
"""The tools virtualenv's packages, each with its files' sha256 (runtime/requirements.lock)."""
SERVING_IMAGE_ARG: Final = "SERVING_IMAGE"
LLMCOMPRESSOR_VERSION_ARG: Final = "LLMCOMPRESSOR_VERSION"
TAG_PREFIX: Final = "release-tools-"
REQUEST: Final = "tools"


def locked_llmcompressor_version(lock: str) -> str:
    """The ``llmcompressor==<version>`` pin of the tools lock's text (ValueError when it has none)."""
    for line in lock.splitlines():
        if line.startswith("llmcompressor=="):
            return line.removeprefix("llmcompressor==").split()[0]
    raise ValueError(f"{RUNTIME / LOCK} pins no llmcompressor")


def tools_image_tag(*, dockerfile_sha256: str, build_args: Mapping[str, object], lock_sha256: str = "") -> str:
    """``release-tools-<64 hex>`` (78 characters): sha256 of the canonical JSON of the image's inputs (the
    Dockerfile, the lock, the build arguments).

    ``build_args`` values may be resolved CloudFormation expressions (the serving image's URI names the
    repository by reference): each resolves to the same JSON for the same image, tag or digest, so the same
    inputs give the same tag, and a new serving image tag (every input of the serving image: image_inputs.py)
    gives a new tools image.
    """
    inputs: dict[str, object] = {"dockerfile": dockerfile_sha256, "build_args": build_args}
    if lock_sha256:
        inputs["lock"] = lock_sha256
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return TAG_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()


class ToolsImage(Construct):
    """Builds ``runtime/Dockerfile`` FROM the serving image, with the hash-locked packages, into a repository of
    its own.

    One :class:`ImageBuild` (its CodeBuild project, custom resource and handlers), without model artifacts: the
    serving image already holds them. The tag is derived from every input (:func:`tools_image_tag`), so a deploy
    with unchanged inputs builds nothing, and the repository's immutable tags never confuse two builds.

    Attributes:
        repository: the tools image's ECR repository (module docstring: why not the serving image's).
        image_uri: ``<repository uri>:<tag>`` (known at synth).
        image: the custom resource; a resource that names ``image_uri`` depends on it.
        image_build: the :class:`ImageBuild`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        serving_image_uri: str,
        serving_image_repository: ecr.IRepository,
        llmcompressor_version: str,
        untagged_expiry_days: int,
        compute_type: str,
        build_timeout: cdk.Duration,
        poll_interval: cdk.Duration,
        log_retention: logs.RetentionDays,
        log_removal_policy: cdk.RemovalPolicy,
    ) -> None:
        """
        Args:
            serving_image_uri: the image the endpoint runs (``FROM``), by immutable tag or digest.
            serving_image_repository: the repository that holds it (the app's, or a prebuilt image's in another
                account, whose repository policy must then allow this account's pulls, as for the endpoint); the
                build may only pull from it.
            llmcompressor_version: ``release.quantize.llmcompressor_version``, which the quantize step checks.
            untagged_expiry_days: of the tools repository (``image.untagged_image_expiry_days``).
            compute_type / build_timeout / poll_interval: ``image.build``'s, as for the serving image.
            log_retention / log_removal_policy: for every log group made here.

        Raises:
            ValueError: ``llmcompressor_version`` is not the lock's pin (the build would stop on it).
        """
        super().__init__(scope, construct_id)
        lock = (RUNTIME / LOCK).read_text()
        locked = locked_llmcompressor_version(lock)
        if llmcompressor_version != locked:
            raise ValueError(
                f"release.quantize.llmcompressor_version = {llmcompressor_version!r}: the tools image installs "
                f"llmcompressor=={locked} from its hash lock (cdk_constructs/release/runtime/requirements.lock); "
                "regenerate the lock (its header has the command) to use another version"
            )
        self.repository = ModelImageRepository(self, "Repository", untagged_expiry_days=untagged_expiry_days).repository
        sources = s3_assets.Asset(self, "Sources", path=str(RUNTIME), exclude=["*", f"!{DOCKERFILE}", f"!{LOCK}"])
        build_args = {SERVING_IMAGE_ARG: serving_image_uri, LLMCOMPRESSOR_VERSION_ARG: llmcompressor_version}
        tag = tools_image_tag(
            dockerfile_sha256=hashlib.sha256((RUNTIME / DOCKERFILE).read_bytes()).hexdigest(),
            lock_sha256=hashlib.sha256(lock.encode()).hexdigest(),
            build_args=cdk.Stack.of(self).resolve(build_args),
        )
        self.image_build = ImageBuild(
            self,
            "Build",
            repository=self.repository,
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
        # FROM the serving image: pull only. Pushes go to this construct's repository alone.
        serving_image_repository.grant_pull(self.image_build.project)
        self.image = self.image_build.images[REQUEST]
        self.image_uri = self.image_build.image_uris[REQUEST]
