"""Deployment unit: builds the serving image(s) in the account during ``cdk deploy``."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from app_config import AppConfig
from app_config.image_build import docker_hub_cache_prefix
from app_config.pins import built_artifact_sets, placeholder_pin_problem
from cdk_constructs.common.log_retention import log_removal_policy, retention_days
from cdk_constructs.common.placeholder_pins import refuse_placeholder_pins
from cdk_constructs.image import image_inputs
from cdk_constructs.image.docker_hub_cache import DockerHubCache
from cdk_constructs.image.image_build import ImageBuild, ImageBuildRequest
from cdk_constructs.image.image_buildspec import BuildRecipe, ModelArtifactsFetch
from serving_contract import outputs

REPO_ROOT = Path(__file__).resolve().parent.parent


class ImageBuildStack(cdk.Stack):
    """CodeBuild project and one image per variant, built from the model-artifacts bucket.

    A deploy with a placeholder artifact pin is refused by CloudFormation before any resource
    is created: the template carries a rule whose assertion fails and names the keys
    (:func:`app_config.pins.placeholder_pin_problem`), while `make synth` keeps working offline.

    Attributes:
        image_uris: ``{"primary": uri, "canary": uri}``; the canary's equals the primary's
            when no canary artifacts are configured. Known at synth (the tag is).
        image_build: the :class:`ImageBuild` construct.
        artifacts_bucket: the model-artifacts bucket (the ModelArtifacts stack's, or the configured one).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        repository: ecr.IRepository,
        artifacts_bucket: s3.IBucket,
        source_root: Path = REPO_ROOT,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        build = config.image.build
        self.artifacts_bucket = artifacts_bucket
        refuse_placeholder_pins(self, placeholder_pin_problem(config))

        if not (source_root / image_inputs.DOCKERFILE).is_file():
            cdk.Annotations.of(self).add_warning_v2(
                "ImageBuild:NoDockerfile",
                f"{image_inputs.DOCKERFILE} is missing from {source_root}: the build will fail until it exists",
            )
        staged = image_inputs.stage_sources(source_root, Path(cdk.Stage.of(self).outdir) / "image-build-sources")  # type: ignore[union-attr]
        sources = s3_assets.Asset(self, "Sources", path=str(staged))

        sources_sha256 = image_inputs.sources_sha256(source_root)
        build_args = image_inputs.docker_build_args(config)
        base_images = image_inputs.base_images(config)
        # Where the build pulls them: the tag keeps the references as configured (same digest, same
        # image), the build gets them through the Docker Hub cache when one is configured.
        self.docker_hub_cache = (
            DockerHubCache(
                self,
                "DockerHubCache",
                prefix=docker_hub_cache_prefix(config.project_name, config.stage),
                credential_arn=build.docker_hub_credentials_secret_arn,
            )
            if build.docker_hub_credentials_secret_arn
            else None
        )
        pulled_from = {
            arg: self.docker_hub_cache.cached(ref) if self.docker_hub_cache else ref for arg, ref in base_images.items()
        }
        artifact_sets = {
            name: image_inputs.baked_artifacts(config, artifacts)
            for name, artifacts in built_artifact_sets(config).items()
        }
        requests = {
            name: ImageBuildRequest(
                tag=image_inputs.image_tag(
                    sources_sha256=sources_sha256,
                    base_model_name=config.model.name,
                    artifacts=artifacts,
                    build_args=build_args,
                    base_images=base_images,
                ),
                pins=image_inputs.artifact_pins(artifacts),
                base_images=pulled_from,
            )
            for name, artifacts in artifact_sets.items()
        }
        # Same inputs, same tag: a canary pinned like the primary shares its image and build.
        unique: dict[str, tuple[str, ImageBuildRequest]] = {}
        for name, request in requests.items():
            unique.setdefault(request.tag, (name, request))
        self.image_build = ImageBuild(
            self,
            "ImageBuild",
            repository=repository,
            sources=sources,
            artifacts_bucket=self.artifacts_bucket,
            recipe=BuildRecipe(
                dockerfile=image_inputs.DOCKERFILE,
                build_args=build_args,
                base_image_args=image_inputs.BASE_IMAGE_ARGS,
                description="Bakes the pinned model artifacts into the vLLM serving image",
                model_artifacts=ModelArtifactsFetch(
                    context_arg=image_inputs.MODEL_CONTEXT_ARG,
                    context_dir=image_inputs.MODEL_CONTEXT_DIR,
                    base_model_name=config.model.name,
                    base_models_prefix=build.base_models_prefix,
                    adapters_prefix=build.adapters_prefix,
                ),
            ),
            requests=dict(unique.values()),
            compute_type=build.compute_type,
            build_timeout=cdk.Duration.minutes(build.timeout_min),
            poll_interval=cdk.Duration.seconds(build.poll_interval_s),
            log_retention=retention_days(config.observability.log_retention_days),
            log_removal_policy=log_removal_policy(config.observability.retain_logs_on_delete),
        )
        if self.docker_hub_cache is not None:
            assert self.image_build.project.role is not None
            self.docker_hub_cache.grant_pull_through(self.image_build.project.role)
        by_tag = {request.tag: self.image_build.image_uris[name] for name, request in unique.values()}
        self.image_uris: Mapping[str, str] = {
            "primary": by_tag[requests["primary"].tag],
            "canary": by_tag[requests.get("canary", requests["primary"]).tag],
        }
        self.image_tags: Mapping[str, str] = {
            "primary": requests["primary"].tag,
            "canary": requests.get("canary", requests["primary"]).tag,
        }

        cdk.CfnOutput(self, outputs.IMAGE_BUILD_PROJECT_NAME, value=self.image_build.project.project_name)
        cdk.CfnOutput(self, outputs.PRIMARY_IMAGE_TAG, value=self.image_tags["primary"])
        cdk.CfnOutput(self, outputs.CANARY_IMAGE_TAG, value=self.image_tags["canary"])
