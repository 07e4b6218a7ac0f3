"""The base model and its LoRA adapters, as baked into the serving image."""

from typing import Literal

from pydantic import Field, model_validator

from app_config.base import AdapterName, ConfigModel
from planning.gpu_instances import GIB
from planning.memory_plan import ModelShape


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


_LLAMA3_8B = "Llama-3-8B-Instruct's config.json"


class ModelShapeConfig(ConfigModel):
    """The base model's decoder shape and checkpoint size: what the memory plan needs.

    Defaults: meta-llama/Meta-Llama-3-8B-Instruct ``config.json`` (head_dim = hidden_size /
    num_attention_heads).
    """

    num_hidden_layers: int = Field(default=32, ge=1, le=512, description=f"Decoder layers. Source: {_LLAMA3_8B}.")
    hidden_size: int = Field(default=4096, ge=64, le=65536, description=f"Model width. Source: {_LLAMA3_8B}.")
    intermediate_size: int = Field(default=14336, ge=64, le=262144, description=f"MLP width. Source: {_LLAMA3_8B}.")
    num_attention_heads: int = Field(default=32, ge=1, le=512, description=f"Query heads. Source: {_LLAMA3_8B}.")
    num_key_value_heads: int = Field(
        default=8, ge=1, le=512, description=f"KV heads (grouped-query attention). Source: {_LLAMA3_8B}."
    )
    head_dim: int = Field(default=128, ge=8, le=1024, description="Width of one attention head: 4096 / 32.")
    vocab_size: int = Field(default=128256, ge=256, le=1048576, description=f"Vocabulary. Source: {_LLAMA3_8B}.")
    max_position_embeddings: int = Field(
        default=8192,
        ge=256,
        le=1048576,
        description=(
            f"Longest context the model supports; engine.max_model_len may not exceed it. Source: {_LLAMA3_8B}."
        ),
    )
    weights_gib: float = Field(
        default=5.33,
        gt=0,
        le=2048,
        description=(
            "GPU memory of the checkpoint, GiB. Source: Llama-3-8B-Instruct in AWQ-INT4 GEMM format, group 128: "
            "5,727,854,592 bytes (planning.memory_plan.awq_checkpoint_bytes; the published AWQ checkpoint "
            "is 5.73 GB)."
        ),
    )

    @model_validator(mode="after")
    def _heads_divide(self) -> "ModelShapeConfig":
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads = {self.num_attention_heads} must be a multiple of "
                f"num_key_value_heads = {self.num_key_value_heads}"
            )
        return self

    def to_shape(self) -> ModelShape:
        """The plain-data shape ``planning.memory_plan`` works on."""
        return ModelShape(
            num_hidden_layers=self.num_hidden_layers,
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads,
            head_dim=self.head_dim,
            vocab_size=self.vocab_size,
            max_position_embeddings=self.max_position_embeddings,
            weights_bytes=round(self.weights_gib * GIB),
        )


class ModelConfig(ConfigModel):
    """The base model and adapters inside the image. Source: seeds 000 and 003."""

    name: str = Field(
        default="llama-3-8b-instruct-awq",
        min_length=1,
        max_length=64,
        description="Served model name of the base model (requests with this `model` use no adapter).",
    )
    quantization: Literal["awq", "gptq", "fp8"] | None = Field(
        default="awq",
        description=(
            "Quantization format of the checkpoint (its config.json quantization_config; null = unquantized). "
            "Not a vLLM flag: engine.quantization picks the kernel, and must suit this format. Source: seed 003 "
            "(AWQ INT4)."
        ),
    )
    shape: ModelShapeConfig = Field(
        default=ModelShapeConfig(), description="Decoder shape and checkpoint size (sizes the memory plan)."
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
