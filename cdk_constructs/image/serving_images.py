"""The serving image of each variant, built in the account: its inputs, its tag, one build per tag."""

from collections.abc import Mapping
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from cdk_constructs.common.placeholder_pins import refuse_placeholder_pins
from cdk_constructs.image import image_inputs
from cdk_constructs.image.docker_hub_cache import DockerHubCache
from cdk_constructs.image.image_build import ImageBuild, ImageBuildRequest
from cdk_constructs.image.image_buildspec import BuildRecipe, ModelArtifactsFetch
from cdk_constructs.image.image_inputs import ImageInputs


class ServingImages(Construct):
    """One image per variant (``primary``, ``canary``, ``shadow``), tagged by its inputs and built once per tag.

    The tag is a hash of every input (:func:`image_inputs.image_tag`): the sources, the base model,
    the baked artifact pins, the build arguments and the base images. A canary pinned like the
    primary has the same inputs, so the same tag: it shares the primary's image and build.

    A deploy with a placeholder artifact pin is refused by CloudFormation before any resource
    is created: the template carries a rule whose assertion fails and names the keys
    (:func:`app_config.pins.placeholder_pin_problem`), while `make synth` keeps working offline.

    Add it with the id ``"Default"``: CDK leaves that id out of logical ids, so its resources keep
    the ids they had as the stack's own children.

    Attributes:
        image_uris: ``{"primary": uri, "canary": uri, "shadow": uri}``; the canary's and the shadow's equal the
            primary's when they have no artifacts of their own. Known at synth (the tag is).
        image_tags: ``{"primary": tag, "canary": tag, "shadow": tag}``, the same way.
        image_build: the :class:`ImageBuild` construct.
        docker_hub_cache: the :class:`DockerHubCache` the build pulls base images through, or None
            (``image.build.docker_hub_credentials_secret_arn`` unset).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        inputs: ImageInputs,
        repository: ecr.IRepository,
        artifacts_bucket: s3.IBucket,
        source_root: Path,
        log_retention: logs.RetentionDays,
        log_removal_policy: cdk.RemovalPolicy,
    ) -> None:
        """
        Args:
            inputs: what the images are built from (:func:`image_inputs.resolve_inputs`).
            repository: where the images are pushed.
            artifacts_bucket: the model-artifacts bucket the build reads the weights from.
            source_root: the repository root, where the Dockerfile and the image's sources are.
            log_retention / log_removal_policy: for every log group of the build.
        """
        super().__init__(scope, construct_id)
        build = inputs.build
        refuse_placeholder_pins(self, inputs.pin_problem)
        if not (source_root / image_inputs.DOCKERFILE).is_file():
            cdk.Annotations.of(self).add_warning_v2(
                "ImageBuild:NoDockerfile",
                f"{image_inputs.DOCKERFILE} is missing from {source_root}: the build will fail until it exists",
            )
        staged = image_inputs.stage_sources(source_root, Path(cdk.Stage.of(self).outdir) / "image-build-sources")  # type: ignore[union-attr]
        sources = s3_assets.Asset(self, "Sources", path=str(staged))

        self.docker_hub_cache = (
            DockerHubCache(
                self,
                "DockerHubCache",
                prefix=inputs.docker_hub_cache_prefix,
                credential_arn=build.docker_hub_credentials_secret_arn,
            )
            if build.docker_hub_credentials_secret_arn
            else None
        )
        requests = self._requests(inputs, source_root)
        # Same inputs, same tag: a canary pinned like the primary shares its image and build.
        unique: dict[str, tuple[str, ImageBuildRequest]] = {}
        for name, request in requests.items():
            unique.setdefault(request.tag, (name, request))
        self.image_build = ImageBuild(
            self,
            "ImageBuild",
            repository=repository,
            sources=sources,
            artifacts_bucket=artifacts_bucket,
            recipe=BuildRecipe(
                dockerfile=image_inputs.DOCKERFILE,
                build_args=dict(inputs.build_args),
                base_image_args=image_inputs.BASE_IMAGE_ARGS,
                description="Bakes the pinned model artifacts into the vLLM serving image",
                model_artifacts=ModelArtifactsFetch(
                    context_arg=image_inputs.MODEL_CONTEXT_ARG,
                    context_dir=image_inputs.MODEL_CONTEXT_DIR,
                    base_model_name=inputs.base_model_name,
                    base_models_prefix=build.base_models_prefix,
                    adapters_prefix=build.adapters_prefix,
                ),
            ),
            requests=dict(unique.values()),
            compute_type=build.compute_type,
            build_timeout=cdk.Duration.minutes(build.timeout_min),
            poll_interval=cdk.Duration.seconds(build.poll_interval_s),
            log_retention=log_retention,
            log_removal_policy=log_removal_policy,
        )
        if self.docker_hub_cache is not None:
            assert self.image_build.project.role is not None
            self.docker_hub_cache.grant_pull_through(self.image_build.project.role)
        by_tag = {request.tag: self.image_build.image_uris[name] for name, request in unique.values()}
        # A canary or shadow without artifacts of its own runs the primary's image.
        chosen = {key: requests.get(key, requests["primary"]) for key in ("primary", "canary", "shadow")}
        self.image_uris: Mapping[str, str] = {key: by_tag[request.tag] for key, request in chosen.items()}
        self.image_tags: Mapping[str, str] = {key: request.tag for key, request in chosen.items()}

    def _requests(self, inputs: ImageInputs, source_root: Path) -> dict[str, ImageBuildRequest]:
        """The image each artifact set needs, keyed like :attr:`ImageInputs.artifact_sets`."""
        sources_sha256 = image_inputs.sources_sha256(source_root)
        # Where the build pulls them: the tag keeps the references as configured (same digest, same
        # image), the build gets them through the Docker Hub cache when one is configured.
        cache = self.docker_hub_cache
        pulled_from = {arg: cache.cached(ref) if cache else ref for arg, ref in inputs.base_images.items()}
        return {
            name: ImageBuildRequest(
                tag=image_inputs.image_tag(
                    sources_sha256=sources_sha256,
                    base_model_name=inputs.base_model_name,
                    artifacts=artifacts,
                    build_args=inputs.build_args,
                    base_images=inputs.base_images,
                ),
                pins=image_inputs.artifact_pins(artifacts),
                base_images=pulled_from,
            )
            for name, artifacts in inputs.artifact_sets.items()
        }
