"""The in-account image build: CodeBuild settings and the model artifacts baked into each image.

Artifacts are pinned here, in config, as the exact text of their S3 ``CURRENT`` pointer
(``{version}/{sha256}``, seed 000 "Adapter Versioning Strategy"). A synth has no AWS access,
so the pins are what make the image tag computable at synth: the same pins and container
sources always give the same tag (no rebuild), and any changed pin gives a new one. Copy a
pointer into config with ``python -m ops.pin_artifacts`` (docs/image-build.md).

The two base images of ``container/Dockerfile`` are pinned the same way, by digest
(``name:tag@sha256:<64 hex>``): the tag says what it is, the digest is what is pulled, and
both are inputs of the image tag (cdk_constructs/image/image_inputs.py). Where each default digest comes
from is in docs/sources.md, "Base image digests".
"""

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from app_config.base import AdapterName, ConfigModel
from app_config.cloudformation_limits import PROVIDER_MAX_WAIT_S

BUILD_QUEUE_HEADROOM_MIN = 5
"""Minutes the deploy waits beyond the build's own timeout: time queued in CodeBuild and for the
pushed image to show in ECR."""
MAX_BUILD_TIMEOUT_MIN = PROVIDER_MAX_WAIT_S // 60 - BUILD_QUEUE_HEADROOM_MIN
"""Longest build timeout: the build and its queue time end inside the provider's longest wait (50 min)."""

# A pin is the pointer text: version, '/', the lowercase hex sha256 defined in
# serving_contract/model_artifacts.py (artifact_sha256).
_PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}/[0-9a-f]{64}$")

PLACEHOLDER_SHA256 = "0" * 64
"""The seeds name versions but no digests: defaults carry this placeholder, and the build
handler refuses to start a build for a pin that still holds it."""


# An image reference pinned by digest: [registry[:port]/]path:tag@sha256:<64 lowercase hex>.
# Path components and the tag follow the OCI distribution spec's grammar (lowercase path
# components separated by '.', '_', '__' or '-'; a tag of at most 128 [A-Za-z0-9_.-]).
_IMAGE_REF = re.compile(
    r"^(?:[a-z0-9][a-z0-9.-]*(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r":[A-Za-z0-9_][A-Za-z0-9._-]{0,127}@sha256:[0-9a-f]{64}$"
)

CUDA_BASE_IMAGE = (
    "nvidia/cuda:12.4.1-base-ubuntu22.04@sha256:0f6bfcbf267e65123bcc2287e2153dedfc0f24772fb5ce84afe16ac4b2fada95"
)
"""Default CUDA base: the multi-platform index digest that ``docker pull`` reports for the tag
(docs/sources.md, "Base image digests", which also lists the linux/amd64 manifest digest other
sources pin, ``sha256:8767a245...``).
Docker Hub, not ECR Public: no source here confirms this tag in ECR Public's ``nvidia/cuda``."""


def _check_pin(value: str) -> str:
    if not _PIN.match(value):
        raise ValueError(
            "must be a CURRENT pointer '{version}/{sha256}': a version of [A-Za-z0-9._-] (1-64, starting with a "
            "letter or digit), '/', and 64 lowercase hex characters"
        )
    return value


ArtifactPin = Annotated[str, AfterValidator(_check_pin)]
"""``{version}/{sha256}``, the content of an artifact's ``CURRENT`` pointer in S3."""


def _check_image_ref(value: str) -> str:
    if not _IMAGE_REF.match(value):
        raise ValueError(
            "must be an image reference pinned by digest, name:tag@sha256:<64 lowercase hex> (a tag alone is "
            "refused; get the digest with docker buildx imagetools inspect name:tag)"
        )
    return value


PinnedImage = Annotated[str, AfterValidator(_check_image_ref)]
"""``name:tag@sha256:<64 hex>``, a base image pinned by digest."""


def placeholder_image(name_tag: str) -> str:
    """``name:tag@sha256:<placeholder>``: a default that synth accepts and the build handler refuses."""
    return f"{name_tag}@sha256:{PLACEHOLDER_SHA256}"


UV_IMAGE = placeholder_image("ghcr.io/astral-sh/uv:0.13.8")
"""Default uv image: the tag container/Dockerfile used, with the placeholder digest, because no
source found here records the digest of 0.13.8 (docs/sources.md, "Base image digests")."""


PULL_THROUGH_PREFIX_MAX = 30
"""ECR's limit on a pull-through cache rule's repository prefix (CreatePullThroughCacheRule,
``ecrRepositoryPrefix``: 2-30 characters)."""


def docker_hub_cache_prefix(project_name: str, stage: str) -> str:
    """``<project>-<stage>-hub`` in lowercase: the repository prefix of the Docker Hub cache, one per stage
    (a rule's prefix is unique in the account's registry)."""
    return f"{project_name.lower()}-{stage}-hub"


def pin_version(pin: str) -> str:
    """The version part of a pin, e.g. ``v3`` for ``v3/<sha256>``."""
    return pin.split("/", 1)[0]


def pin_sha256(pin: str) -> str:
    """The sha256 part of a pin."""
    return pin.split("/", 1)[1]


def placeholder_pin(version: str) -> str:
    """``{version}/<placeholder sha256>``: a default pin that still has to be set."""
    return f"{version}/{PLACEHOLDER_SHA256}"


class ArtifactSetConfig(ConfigModel):
    """The base model and adapter versions one image bakes in."""

    base_model: ArtifactPin = Field(
        default=placeholder_pin("v1"),
        description=(
            "Pin of the base model ({version}/{sha256}) under <base_models_prefix>/<model.name>/. "
            "Source: seed 003 (one AWQ INT4 base model, rebuilt monthly); the digest is a placeholder until pinned."
        ),
    )
    adapters: dict[AdapterName, ArtifactPin] = Field(
        default={
            "manga_domain_v3": placeholder_pin("v3"),
            "general_support_v2": placeholder_pin("v2"),
            "jp_style_v1": placeholder_pin("v1"),
        },
        description=(
            "Pin per adapter name ({version}/{sha256}) under <adapters_prefix>/<name>/; the names must equal "
            "model.adapters. Source: seed 000 (CURRENT pointer format); digests are placeholders until pinned."
        ),
    )


class ImageBuildConfig(ConfigModel):
    """CodeBuild project and artifact pins for ``image.source = build`` (the default)."""

    compute_type: Literal[
        "BUILD_GENERAL1_MEDIUM", "BUILD_GENERAL1_LARGE", "BUILD_GENERAL1_XLARGE", "BUILD_GENERAL1_2XLARGE"
    ] = Field(
        default="BUILD_GENERAL1_LARGE",
        description=(
            "CodeBuild compute type. LARGE (8 vCPU, 15 GB, 128 GB disk) holds the ~8.2 GB image (seed 003) "
            "plus the weights it copies; SMALL (64 GB disk) is too small and is not offered."
        ),
    )
    timeout_min: int = Field(
        default=MAX_BUILD_TIMEOUT_MIN,
        ge=10,
        le=MAX_BUILD_TIMEOUT_MIN,
        description=(
            f"CodeBuild build timeout in minutes. At most {MAX_BUILD_TIMEOUT_MIN}: the deploy waits for the build plus "
            f"{BUILD_QUEUE_HEADROOM_MIN} min queued, inside CloudFormation's 3600 s wait for a custom resource "
            "(ServiceTimeout) less the provider's 5 min head room (app_config/cloudformation_limits.py), so the "
            "build's failure (build id, log link) reaches the deploy."
        ),
    )
    cuda_base_image: PinnedImage = Field(
        default=CUDA_BASE_IMAGE,
        description=(
            "CUDA base of the image (container/Dockerfile's CUDA_BASE), name:tag@sha256:<digest>. Default: the "
            "index digest of nvidia/cuda:12.4.1-base-ubuntu22.04 on Docker Hub (docs/sources.md, 'Base image "
            "digests')."
        ),
    )
    uv_image: PinnedImage = Field(
        default=UV_IMAGE,
        description=(
            "uv image the build copies uv from (container/Dockerfile's UV_IMAGE), name:tag@sha256:<digest>. The "
            "default digest is a placeholder (0 x 64): synth accepts it, the image build refuses it; set it from "
            "docker buildx imagetools inspect ghcr.io/astral-sh/uv:0.13.8 (docs/image-build.md)."
        ),
    )
    docker_hub_credentials_secret_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:ecr-pullthroughcache/[A-Za-z0-9/_+=.@-]+$",
        description=(
            "ARN of a Secrets Manager secret named ecr-pullthroughcache/<name> holding Docker Hub username and "
            "accessToken. Set: the build pulls Docker Hub base images (cuda_base_image) through an ECR "
            "pull-through cache in this account, same digest; None: anonymously from Docker Hub, which "
            "rate-limits anonymous pulls per address (Amazon ECR user guide, pull-through cache; "
            "docs/image-build.md)."
        ),
    )
    poll_interval_s: int = Field(
        default=60,
        ge=10,
        le=300,
        description="Seconds between build-status checks while the deploy waits for a build.",
    )
    artifacts_bucket_name: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
        description=(
            "Existing S3 bucket holding the model artifacts (e.g. mangaassist-model-artifacts, seed 000); "
            "None creates an encrypted, versioned, TLS-only, access-logged bucket in the image build stack."
        ),
    )
    base_models_prefix: str = Field(
        default="base-models",
        pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$",
        description="Key prefix of base models: <prefix>/<model.name>/<version>/... and .../CURRENT.",
    )
    adapters_prefix: str = Field(
        default="adapters",
        pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$",
        description="Key prefix of adapters: <prefix>/<adapter>/<version>/... and .../CURRENT. Source: seed 000.",
    )
    primary: ArtifactSetConfig = Field(
        default=ArtifactSetConfig(), description="Artifacts of the image the primary variant runs."
    )
    canary: ArtifactSetConfig | None = Field(
        default=None,
        description="Artifacts of the canary's image (a second build); None runs the primary's image.",
    )
    shadow: ArtifactSetConfig | None = Field(
        default=None,
        description=(
            "Artifacts of the shadow's image (serving.shadow; a build of its own); None runs the primary's image. "
            "`ops shadow promote` moves them to canary."
        ),
    )
