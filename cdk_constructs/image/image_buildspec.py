"""The CodeBuild buildspec of the serving image (cdk_constructs/image/image_build.py runs it).

Two kinds of ``--build-arg``: those fixed by config for every build of the project (the model
folder, the artifact check's adapters and rank) are written into the buildspec; the base images
(``CUDA_BASE``, ``UV_IMAGE``) arrive per build as environment variables that the image-build
handler sets on StartBuild after refusing placeholder digests (lambdas/image/index.py).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class BuildRecipe:
    """What the build runs: the Dockerfile and its arguments, and where artifacts live in S3.

    Attributes:
        dockerfile: path of the Dockerfile in the build source, e.g. ``container/Dockerfile``.
        model_context_arg: build argument naming the model folder, e.g. ``MODEL_CONTEXT``.
        model_context_dir: folder (in the source) the fetch step fills with base/ and adapters/.
        build_args: further ``--build-arg`` values.
        base_image_args: build arguments naming base images, e.g. ``("CUDA_BASE", "UV_IMAGE")``; each is
            read from the environment variable of the same name, which StartBuild sets per build.
        base_model_name: the base model's folder name under ``base_models_prefix``.
        base_models_prefix: S3 key prefix of base models.
        adapters_prefix: S3 key prefix of adapters.
    """

    dockerfile: str
    model_context_arg: str
    model_context_dir: str
    build_args: Mapping[str, str]
    base_image_args: Sequence[str]
    base_model_name: str
    base_models_prefix: str
    adapters_prefix: str


def buildspec(recipe: BuildRecipe) -> dict[str, object]:
    """The buildspec (version 0.2) as an object for ``codebuild.BuildSpec.from_object``."""
    build_args = " ".join(
        f"--build-arg {name}={value}"
        for name, value in {recipe.model_context_arg: recipe.model_context_dir, **recipe.build_args}.items()
    )
    base_args = "".join(f' --build-arg {name}="${name}"' for name in recipe.base_image_args)
    # A build started without the handler's overrides (console, CLI) has no base images, or could
    # carry a tag alone: fail before pulling, rather than fall back to the Dockerfile's defaults.
    base_checks = [
        f'[[ "${name}" == *@sha256:* ]] || '
        f"{{ echo \"{name} must be name:tag@sha256:<digest>, got '${name}'\"; exit 1; }}"
        for name in recipe.base_image_args
    ]
    return {
        "version": "0.2",
        "env": {"shell": "bash", "variables": {"DOCKER_BUILDKIT": "1"}},
        "phases": {
            "pre_build": {
                "commands": [
                    'test -n "$IMAGE_TAG" && test -n "$ARTIFACT_PINS"',
                    *base_checks,
                    'aws ecr get-login-password | docker login --username AWS --password-stdin "${REPOSITORY_URI%%/*}"',
                    "python3 -m serving_contract.model_artifacts fetch"
                    ' --bucket "$ARTIFACTS_BUCKET" --base-models-prefix "$BASE_MODELS_PREFIX"'
                    ' --adapters-prefix "$ADAPTERS_PREFIX" --base-model "$BASE_MODEL"'
                    f' --pins "$ARTIFACT_PINS" --dest {recipe.model_context_dir}',
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
