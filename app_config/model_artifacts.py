"""The base model and its LoRA adapters, as baked into the serving image."""

from typing import Literal

from pydantic import Field, model_validator

from app_config.base import AdapterName, ConfigModel

# Ranks vLLM 0.22's --max-lora-rank accepts (CONVENTIONS.md, checked against its parser).
LORA_RANKS: tuple[int, ...] = (1, 8, 16, 32, 64, 128, 256, 320, 512)


class LoraAdapterConfig(ConfigModel):
    """One LoRA adapter served from the shared base model.

    Source: seed 000 §4 "Adapter Inventory" (three rank-16 adapters, alpha 32).
    """

    name: AdapterName = Field(description="Adapter name clients put in the request's `model` field.")
    rank: int = Field(
        default=16,
        ge=1,
        le=512,
        description="LoRA rank `r` the adapter was trained with. Source: seed 000 (rank 16).",
    )


DEFAULT_ADAPTERS = (
    LoraAdapterConfig(name="manga_domain_v3"),
    LoraAdapterConfig(name="general_support_v2"),
    LoraAdapterConfig(name="jp_style_v1"),
)


class ModelConfig(ConfigModel):
    """The base model and adapters inside the image. Source: seeds 000 and 003."""

    name: str = Field(
        default="llama-3-8b-instruct-awq",
        min_length=1,
        max_length=64,
        description="Served model name of the base model (requests with this `model` use no adapter).",
    )
    quantization: Literal["awq", "awq_marlin", "gptq", "fp8"] | None = Field(
        default="awq",
        description=(
            "vLLM --quantization. Source: seed 003 (AWQ INT4); vLLM upgrades awq to awq_marlin kernels where it can."
        ),
    )
    adapters: tuple[LoraAdapterConfig, ...] = Field(
        default=DEFAULT_ADAPTERS,
        max_length=32,
        description=(
            "LoRA adapters served from one engine. Source: seed 002 (manga_domain_v3, general_support_v2, jp_style_v1)."
        ),
    )

    @model_validator(mode="after")
    def _adapters_share_one_rank(self) -> "ModelConfig":
        names = [a.name for a in self.adapters]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"adapters: duplicate adapter name(s) {', '.join(duplicates)}; each name must be unique")
        if self.name in names:
            raise ValueError(f"adapters: adapter name {self.name!r} equals the base model name; pick another")
        ranks = {a.rank for a in self.adapters}
        if len(ranks) > 1:
            detail = ", ".join(f"{a.name}={a.rank}" for a in self.adapters)
            # Seed 000 §7: mixed ranks load "successfully" with the larger one truncated.
            raise ValueError(f"adapters: ranks differ ({detail}); all adapters must share one rank")
        return self

    @property
    def adapter_rank(self) -> int | None:
        """The one rank every adapter shares, or None without adapters."""
        return self.adapters[0].rank if self.adapters else None
