"""Inputs of the in-account image build, and the image tag derived from them.

The one place that knows how ``container/Dockerfile`` is built: which folders the build
context needs, the Dockerfile path and its build arguments (the container helper's
contract: ``docker build -f container/Dockerfile --build-arg MODEL_CONTEXT=<folder> .``
from the repo root, with ``<folder>/base/`` and ``<folder>/adapters/<name>/``).

The tag is a pure function of everything that goes into the image, computed at synth:
the container sources (file paths and bytes), the Dockerfile path and build arguments, the
base images pinned by digest (``image.build.cuda_base_image``/``uv_image``), and the pinned
model and adapter versions with their sha256. Same inputs, same tag, so
CloudFormation sees no change and nothing rebuilds; any changed input, a new tag, which
the ECR repository (tags immutable) can never confuse with an older image.
"""

import fnmatch
import hashlib
import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from app_config import AppConfig
from app_config.image import ImageConfig
from app_config.image_build import ArtifactSetConfig, ImageBuildConfig, docker_hub_cache_prefix
from app_config.pins import built_artifact_sets, placeholder_pin_problem
from app_config.serving import ServingConfig
from serving_contract.model_artifacts import BASE_MODEL_DIR

DOCKERFILE = "container/Dockerfile"
MODEL_CONTEXT_ARG = "MODEL_CONTEXT"
# Created inside the build's source folder by the fetch step. The Dockerfile's default, and the
# one model folder the repo's .dockerignore lets into the build context.
MODEL_CONTEXT_DIR = "model-artifacts"
# Folders and files of the repo root that form the build context (.dockerignore filters it the
# same way in CodeBuild as on a laptop).
SOURCE_DIRS: tuple[str, ...] = ("container", "serving_contract", ".dockerignore")
# Never part of the image's inputs: caches and local virtualenvs (the vLLM test env is ~9 GB).
SOURCE_EXCLUDES: tuple[str, ...] = ("__pycache__", "*.pyc", ".venv*", ".pytest_cache", ".mypy_cache", ".ruff_cache")
TAG_PREFIX = "build-"
# container/Dockerfile's ARGs naming its base images. They travel per build (the handler passes
# them to StartBuild, and refuses placeholder digests), not in the project's buildspec.
CUDA_BASE_ARG = "CUDA_BASE"
UV_IMAGE_ARG = "UV_IMAGE"
BASE_IMAGE_ARGS: tuple[str, ...] = (CUDA_BASE_ARG, UV_IMAGE_ARG)


def _excluded(relative: Path) -> bool:
    return any(fnmatch.fnmatch(part, pattern) for part in relative.parts for pattern in SOURCE_EXCLUDES)


def source_files(root: Path, dirs: Sequence[str] = SOURCE_DIRS) -> list[Path]:
    """Files of ``dirs`` (folders or single files) under ``root`` that reach the build, relative, sorted."""
    found = []
    for name in dirs:
        base = root / name
        if base.is_file() and not base.is_symlink():
            found.append(base.relative_to(root))
            continue
        if not base.is_dir():
            continue
        for path in base.rglob("*"):
            relative = path.relative_to(root)
            if path.is_file() and not path.is_symlink() and not _excluded(relative):
                found.append(relative)
    return sorted(found, key=lambda p: p.as_posix().encode())


def sources_sha256(root: Path, dirs: Sequence[str] = SOURCE_DIRS) -> str:
    """sha256 over the path and bytes of every source file (sha256sum manifest, like the artifacts)."""
    lines = [
        f"{hashlib.sha256((root / p).read_bytes()).hexdigest()}  {p.as_posix()}\n" for p in source_files(root, dirs)
    ]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def stage_sources(root: Path, destination: Path, dirs: Sequence[str] = SOURCE_DIRS) -> Path:
    """Copy the source files into ``destination`` (replacing it) for a plain directory asset."""
    if destination.exists():
        shutil.rmtree(destination)
    destination.mkdir(parents=True)
    for relative in source_files(root, dirs):
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / relative, target)
    return destination


def baked_adapters(serving: ServingConfig) -> bool:
    """Whether the image bakes the adapters in: yes in variants mode; in inference_components mode
    each adapter ships as its own component, so the image holds the base model only."""
    return not serving.hosts_inference_components


def baked_artifacts(serving: ServingConfig, artifacts: ArtifactSetConfig) -> ArtifactSetConfig:
    """``artifacts`` as the image bakes them (without adapters in inference_components mode, so an
    adapter pin change never rebuilds the image there)."""
    return artifacts if baked_adapters(serving) else artifacts.model_copy(update={"adapters": {}})


def docker_build_args(config: AppConfig) -> dict[str, str]:
    """Build arguments besides ``MODEL_CONTEXT``: what container/Dockerfile's artifact check needs."""
    adapters = [a.name for a in config.model.adapters] if baked_adapters(config.serving) else []
    return {
        "LORA_ADAPTERS": ",".join(adapters),
        "MAX_LORA_RANK": str(config.model.adapter_rank or config.engine.max_lora_rank),
    }


def base_images(image: ImageConfig) -> dict[str, str]:
    """``{"CUDA_BASE": ref, "UV_IMAGE": ref}``: the Dockerfile's base-image ARGs, each pinned by digest."""
    build = image.build
    return {CUDA_BASE_ARG: build.cuda_base_image, UV_IMAGE_ARG: build.uv_image}


@dataclass(frozen=True)
class ImageInputs:
    """What the serving images are built from, resolved from the validated config
    (:class:`~cdk_constructs.image.serving_images.ServingImages` takes it).

    Attributes:
        build: ``image.build`` (CodeBuild settings, S3 prefixes, the Docker Hub credentials).
        base_model_name: ``model.name``.
        artifact_sets: ``{"primary": ..., "canary": ...}`` as the images bake them
            (:func:`app_config.pins.built_artifact_sets`, then :func:`baked_artifacts`).
        build_args: :func:`docker_build_args`.
        base_images: :func:`base_images`, as configured (the tag's input).
        docker_hub_cache_prefix: the repository prefix of the Docker Hub cache, when one is configured.
        pin_problem: the one-line refusal when a pin holds the placeholder, else None
            (:func:`app_config.pins.placeholder_pin_problem`).
    """

    build: ImageBuildConfig
    base_model_name: str
    artifact_sets: Mapping[str, ArtifactSetConfig]
    build_args: Mapping[str, str]
    base_images: Mapping[str, str]
    docker_hub_cache_prefix: str
    pin_problem: str | None


def resolve_inputs(config: AppConfig) -> ImageInputs:
    """The :class:`ImageInputs` of ``config`` (``image.source = build``)."""
    return ImageInputs(
        build=config.image.build,
        base_model_name=config.model.name,
        artifact_sets={name: baked_artifacts(config.serving, s) for name, s in built_artifact_sets(config).items()},
        build_args=docker_build_args(config),
        base_images=base_images(config.image),
        docker_hub_cache_prefix=docker_hub_cache_prefix(config.project_name, config.stage),
        pin_problem=placeholder_pin_problem(config),
    )


def artifact_pins(artifacts: ArtifactSetConfig) -> dict[str, str]:
    """``{"base": pin, "<adapter>": pin}``, the fetch step's input (serving_contract.model_artifacts)."""
    return {BASE_MODEL_DIR: artifacts.base_model, **dict(sorted(artifacts.adapters.items()))}


def image_tag(
    *,
    sources_sha256: str,
    base_model_name: str,
    artifacts: ArtifactSetConfig,
    build_args: Mapping[str, str],
    base_images: Mapping[str, str],
    dockerfile: str = DOCKERFILE,
) -> str:
    """``build-<64 hex>``: sha256 of the canonical JSON of every input of the image (70 characters).

    ``base_images`` (``base_images(config.image)``) is required, not defaulted: a changed base digest
    must give a new tag, or the tag would name an image built from another base.
    """
    inputs = {
        "sources": sources_sha256,
        "dockerfile": dockerfile,
        "build_args": dict(sorted(build_args.items())),
        "base_images": dict(sorted(base_images.items())),
        "base_model": {"name": base_model_name, "pin": artifacts.base_model},
        "adapters": dict(sorted(artifacts.adapters.items())),
    }
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return TAG_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()
