"""The CodeBuild buildspec of an image that ImageBuild builds (cdk_constructs/image/image_build.py): the serving
image, which fetches the pinned model artifacts first, or the release tools image (cdk_constructs/release/), which
has none of its own.

Two kinds of ``--build-arg``: those fixed by config for every build of the project (the model
folder, the artifact check's adapters and rank) are written into the buildspec; the base images
(``CUDA_BASE``, ``UV_IMAGE``) arrive per build as environment variables that the image-build
handler sets on StartBuild after refusing placeholder digests (cdk_constructs/image/runtime/index.py).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelArtifactsFetch:
    """The pre-build step that fetches the pinned model artifacts into the build context.

    Attributes:
        context_arg: build argument naming the model folder, e.g. ``MODEL_CONTEXT``.
        context_dir: folder (in the source) the fetch step fills with base/ and adapters/.
        base_model_name: the base model's folder name under ``base_models_prefix``.
        base_models_prefix: S3 key prefix of base models.
        adapters_prefix: S3 key prefix of adapters.
    """

    context_arg: str
    context_dir: str
    base_model_name: str
    base_models_prefix: str
    adapters_prefix: str


@dataclass(frozen=True)
class BuildRecipe:
    """What the build runs: the Dockerfile and its arguments, and, for an image that bakes model
    artifacts in, where they live in S3.

    Attributes:
        dockerfile: path of the Dockerfile in the build source, e.g. ``container/Dockerfile``.
        build_args: further ``--build-arg`` values, fixed for every build of the project.
        base_image_args: build arguments naming base images, e.g. ``("CUDA_BASE", "UV_IMAGE")``; each is
            read from the environment variable of the same name, which StartBuild sets per build.
        description: the CodeBuild project's description.
        model_artifacts: the fetch step of the serving image; None for an image without model artifacts
            of its own (the release tools image, built FROM the serving image).
        pull_registries: ECR registries (``<account>.dkr.ecr.<region>.amazonaws.com``) the build logs in to
            besides the repository's own, to pull a base image from another account's repository.
    """

    dockerfile: str
    build_args: Mapping[str, str]
    base_image_args: Sequence[str]
    description: str
    model_artifacts: ModelArtifactsFetch | None = None
    pull_registries: Sequence[str] = ()


def buildspec(recipe: BuildRecipe) -> dict[str, object]:
    """The buildspec (version 0.2) as an object for ``codebuild.BuildSpec.from_object``."""
    fetch = recipe.model_artifacts
    args = {fetch.context_arg: fetch.context_dir} if fetch else {}
    build_args = " ".join(f"--build-arg {name}={value}" for name, value in {**args, **recipe.build_args}.items())
    base_args = "".join(f' --build-arg {name}="${name}"' for name in recipe.base_image_args)
    # A build started without the handler's overrides (console, CLI) has no base images, or could
    # carry a tag alone: fail before pulling, rather than fall back to the Dockerfile's defaults.
    base_checks = [
        f'[[ "${name}" == *@sha256:* ]] || '
        f"{{ echo \"{name} must be name:tag@sha256:<digest>, got '${name}'\"; exit 1; }}"
        for name in recipe.base_image_args
    ]
    fetch_commands = (
        [
            "python3 -m serving_contract.model_artifacts fetch"
            ' --bucket "$ARTIFACTS_BUCKET" --base-models-prefix "$BASE_MODELS_PREFIX"'
            ' --adapters-prefix "$ADAPTERS_PREFIX" --base-model "$BASE_MODEL"'
            f' --pins "$ARTIFACT_PINS" --dest {fetch.context_dir}'
        ]
        if fetch
        else []
    )
    required = '"$IMAGE_TAG" && test -n "$ARTIFACT_PINS"' if fetch else '"$IMAGE_TAG"'
    return {
        "version": "0.2",
        "env": {"shell": "bash", "variables": {"DOCKER_BUILDKIT": "1"}},
        "phases": {
            "pre_build": {
                "commands": [
                    f"test -n {required}",
                    *base_checks,
                    'aws ecr get-login-password | docker login --username AWS --password-stdin "${REPOSITORY_URI%%/*}"',
                    *(
                        f"aws ecr get-login-password --region {registry.split('.')[3]}"
                        f" | docker login --username AWS --password-stdin {registry}"
                        for registry in recipe.pull_registries
                    ),
                    *fetch_commands,
                ]
            },
            "build": {
                "commands": [
                    f'docker build -f {recipe.dockerfile} {build_args}{base_args} -t "$REPOSITORY_URI:$IMAGE_TAG" .',
                    # Pushed here, not in post_build: post_build also runs after a failed build.
                    'docker push "$REPOSITORY_URI:$IMAGE_TAG"',
                ]
            },
        },
    }
