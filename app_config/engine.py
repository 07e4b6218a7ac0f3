"""vLLM engine settings. They reach the container as environment variables, so changing
one needs a context value and a deploy, not an image rebuild."""

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from app_config.base import ConfigModel, IntChoice
from app_config.model_artifacts import LORA_RANKS


def _check_lora_rank(value: int) -> int:
    if value not in LORA_RANKS:
        allowed = ", ".join(str(r) for r in LORA_RANKS)
        raise ValueError(f"must be one of {allowed} (vLLM 0.22 --max-lora-rank)")
    return value


class EngineConfig(ConfigModel):
    """vLLM OpenAI-server settings for one ml.g5.xlarge (A10G, 24 GB).

    Defaults are the seeds' MangaAssist values (seed 003 §10 "Environment Variable
    Reference" and §5 entrypoint); ranges are what vLLM 0.22 accepts or what fits the GPU.
    """

    gpu_memory_utilization: float = Field(
        default=0.92,
        gt=0.0,
        le=0.98,
        description="Fraction of GPU memory vLLM may use. Source: seed 003 (0.95 caused OOM under bursts).",
    )
    max_num_seqs: int = Field(
        default=128,
        ge=1,
        le=1024,
        description="Maximum concurrent sequences per engine. Source: seed 003 (soak-tested at 128).",
    )
    max_model_len: int = Field(
        default=4096,
        ge=256,
        le=131072,
        description="Context window in tokens (prompt + output). Source: seed 003.",
    )
    max_num_batched_tokens: int = Field(
        default=8192,
        ge=256,
        le=131072,
        description="Token budget of one scheduler step. Source: seed 003.",
    )
    block_size: IntChoice[Literal[8, 16, 32, 64, 128]] = Field(
        default=16,
        description="Tokens per KV cache block (vLLM CUDA choices). Source: seed 003.",
    )
    enable_prefix_caching: bool = Field(
        default=True,
        description="Reuse KV cache blocks of shared prompt prefixes (on by default in vLLM V1).",
    )
    tensor_parallel_size: int = Field(default=1, ge=1, le=8, description="GPUs per engine (1 on ml.g5.xlarge).")
    enforce_eager: bool = Field(
        default=False,
        description="Disable CUDA graphs (slower; only for debugging). Source: seed 001.",
    )
    max_loras: int = Field(
        default=4,
        ge=1,
        le=64,
        description="LoRA adapters resident on the GPU at once. Source: seed 003.",
    )
    max_lora_rank: Annotated[int, AfterValidator(_check_lora_rank)] = Field(
        default=16,
        description="Largest LoRA rank the engine allocates slots for; one of vLLM's allowed ranks. Source: seed 003.",
    )
    max_cpu_loras: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description="Adapters cached in CPU memory (None: vLLM default, equal to max_loras).",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info",
        description="Engine log level. Source: seed 003 (debug floods logs in prod).",
    )

    @model_validator(mode="after")
    def _check_vllm_invariants(self) -> "EngineConfig":
        if self.max_num_batched_tokens < self.max_num_seqs:
            # vLLM's SchedulerConfig rejects this combination at engine start.
            raise ValueError(
                f"max_num_batched_tokens = {self.max_num_batched_tokens} must be >= max_num_seqs = {self.max_num_seqs}"
            )
        if self.max_cpu_loras is not None and self.max_cpu_loras < self.max_loras:
            raise ValueError(f"max_cpu_loras = {self.max_cpu_loras} must be >= max_loras = {self.max_loras}")
        return self
