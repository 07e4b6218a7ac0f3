"""Where the serving image comes from: built in the account (default) or prebuilt elsewhere."""

import re
from typing import Literal

from pydantic import Field, model_validator

from app_config.base import ConfigModel
from app_config.image_build import ImageBuildConfig

_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")  # Docker/ECR tag grammar
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# <account>.dkr.ecr.<region>.amazonaws.com[.cn]/<repository>@sha256:<64 hex>
_ECR_URI = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/"
    r"(?P<repository>[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)@sha256:[0-9a-f]{64}$"
)


class ImageRefConfig(ConfigModel):
    """A prebuilt image: by tag or digest in the app's ECR repository, or by full URI with a digest.

    A ``uri`` wins over ``tag``/``digest``; a digest wins over a tag.
    """

    tag: str | None = Field(default=None, description="Image tag (tags are immutable in the repository).")
    digest: str | None = Field(default=None, description="Image digest sha256:<64 hex>; wins over a tag for pinning.")
    uri: str | None = Field(
        default=None,
        description=(
            "Full ECR image URI pinned by digest, <account>.dkr.ecr.<region>.amazonaws.com/<repo>@sha256:<64 hex>, "
            "for CI pipelines that build elsewhere; wins over tag and digest."
        ),
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> "ImageRefConfig":
        if self.tag is None and self.digest is None and self.uri is None:
            raise ValueError("tag = None, digest = None, uri = None: set a tag, a digest or a uri")
        if self.tag is not None and not _TAG.match(self.tag):
            raise ValueError(f"tag = {self.tag!r}: must match [A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}")
        if self.digest is not None and not _DIGEST.match(self.digest):
            raise ValueError(f"digest = {self.digest!r}: must be sha256: followed by 64 lowercase hex characters")
        if self.uri is not None and not _ECR_URI.match(self.uri):
            raise ValueError(
                f"uri = {self.uri!r}: must be an ECR image URI pinned by digest, "
                "<account>.dkr.ecr.<region>.amazonaws.com/<repository>@sha256:<64 hex>"
            )
        return self

    @property
    def uri_parts(self) -> tuple[str, str, str] | None:
        """``(account, region, repository)`` of ``uri``, or None when no uri is set."""
        match = _ECR_URI.match(self.uri) if self.uri else None
        return (match["account"], match["region"], match["repository"]) if match else None


_DEFAULT_PRIMARY = ImageRefConfig(tag="vllm0.26.0-llama3-8b-awq-lora3-v1")


class ImageConfig(ConfigModel):
    """ECR repository settings and where each production variant's image comes from."""

    source: Literal["build", "prebuilt"] = Field(
        default="build",
        description=(
            "build: CodeBuild bakes the pinned model artifacts into an image during cdk deploy (image.build); "
            "prebuilt: run the images named by image.primary / image.canary."
        ),
    )
    untagged_image_expiry_days: int = Field(
        default=7,
        ge=1,
        le=3650,
        description=(
            "Lifecycle rule: untagged images (an interrupted push's leftovers, a build whose tag was never "
            "written) expire this many days after their push. Tagged images never expire: every tag is "
            "immutable and names one build's inputs, and any of them may be what a variant runs, what a "
            "rollback returns to or what scale-out pulls (issue 20). Delete a tag by hand once no endpoint "
            "config refers to it (docs/image-build.md)."
        ),
    )
    primary: ImageRefConfig = Field(
        default=_DEFAULT_PRIMARY,
        description="source = prebuilt: image the primary variant runs.",
    )
    canary: ImageRefConfig | None = Field(
        default=None,
        description="source = prebuilt: image the canary variant runs; None runs the primary's image.",
    )
    shadow: ImageRefConfig | None = Field(
        default=None,
        description="source = prebuilt: image the shadow variant runs (serving.shadow); None runs the primary's image.",
    )
    build: ImageBuildConfig = Field(
        default=ImageBuildConfig(),
        description="source = build: CodeBuild settings and the artifact pins of each variant's image.",
    )

    @model_validator(mode="after")
    def _prebuilt_refs_only_when_prebuilt(self) -> "ImageConfig":
        # A prebuilt reference in build mode used to be ignored without a word, so the canary
        # runbook's `-c image.canary.tag=v2` deployed nothing new (issue 21, finding 4).
        if self.source == "prebuilt":
            return self
        # The loader passes every key, so "set" means "differs from the default" (None for the canary).
        unset = ImageRefConfig.model_construct(tag=None)
        defaults = {"primary": _DEFAULT_PRIMARY, "canary": unset, "shadow": unset}
        for variant in ("primary", "canary", "shadow"):
            ref: ImageRefConfig | None = getattr(self, variant)
            if ref is None or ref == defaults[variant]:
                continue
            default = defaults[variant]
            key, value = next(
                (k, getattr(ref, k)) for k in ("uri", "digest", "tag") if getattr(ref, k) != getattr(default, k)
            )
            raise ValueError(
                f"{variant}.{key} = {value!r} is read only with image.source = prebuilt, and source is build (the "
                f"{variant}'s image is built from image.build.{variant}'s artifact pins): set image.source=prebuilt "
                f"to run that image, or pin image.build.{variant}"
            )
        return self

    @property
    def canary_or_primary(self) -> ImageRefConfig:
        """The canary's prebuilt image reference, falling back to the primary's."""
        return self.canary or self.primary
