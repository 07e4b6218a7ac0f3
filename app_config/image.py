"""The ECR repository and which image each production variant runs."""

import re

from pydantic import Field, model_validator

from app_config.base import ConfigModel

_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")  # Docker/ECR tag grammar
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


class ImageRefConfig(ConfigModel):
    """An image in the app's ECR repository, by tag or by digest (a digest wins when both are set)."""

    tag: str | None = Field(default=None, description="Image tag (tags are immutable in the repository).")
    digest: str | None = Field(default=None, description="Image digest sha256:<64 hex>; wins over a tag for pinning.")

    @model_validator(mode="after")
    def _exactly_one(self) -> "ImageRefConfig":
        if self.tag is None and self.digest is None:
            raise ValueError("tag = None, digest = None: set a tag or a digest")
        if self.tag is not None and not _TAG.match(self.tag):
            raise ValueError(f"tag = {self.tag!r}: must match [A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}")
        if self.digest is not None and not _DIGEST.match(self.digest):
            raise ValueError(f"digest = {self.digest!r}: must be sha256: followed by 64 lowercase hex characters")
        return self


class ImageConfig(ConfigModel):
    """ECR repository settings and the image references the serving stack consumes."""

    keep_last_images: int = Field(
        default=10,
        ge=1,
        le=1000,
        description="Lifecycle rule: keep this many most recent images, expire older ones.",
    )
    primary: ImageRefConfig = Field(
        default=ImageRefConfig(tag="vllm0.22.0-llama3-8b-awq-lora3-v1"),
        description="Image the primary variant runs.",
    )
    canary: ImageRefConfig | None = Field(
        default=None,
        description="Image the canary variant runs; None runs the primary's image.",
    )

    @property
    def canary_or_primary(self) -> ImageRefConfig:
        """The canary's image reference, falling back to the primary's."""
        return self.canary or self.primary
