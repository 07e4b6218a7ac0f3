"""vLLM engine settings. They reach the container as environment variables, so changing
one needs a context value and a deploy, not an image rebuild.

Names, defaults, bounds, allowed values and sources are declared once in
``serving_contract.engine_settings``; the container's settings read the same declarations.
"""

from typing import Annotated, Any

from pydantic import model_validator

from app_config.base import ConfigModel, OneOf, spec_field
from serving_contract import engine_settings as spec


def _one_of(setting: spec.EngineSetting[Any]) -> OneOf:
    assert setting.choices is not None
    return OneOf(setting.choices)


class EngineConfig(ConfigModel):
    """vLLM OpenAI-server settings of one engine (one per instance).

    Defaults are the seeds' MangaAssist values (seed 003 §5 and §10) except where a
    measurement on a real GPU contradicted them (``quantization``: docs/performance.md).
    What they fit on each instance type is the memory plan (``planning.memory_plan``),
    checked at synth.
    """

    gpu_memory_utilization: float = spec_field(spec.GPU_MEMORY_UTILIZATION)
    max_num_seqs: int = spec_field(spec.MAX_NUM_SEQS)
    max_model_len: int = spec_field(spec.MAX_MODEL_LEN)
    max_num_batched_tokens: int = spec_field(spec.MAX_NUM_BATCHED_TOKENS)
    block_size: Annotated[int, _one_of(spec.BLOCK_SIZE)] = spec_field(spec.BLOCK_SIZE)
    enable_prefix_caching: bool = spec_field(spec.ENABLE_PREFIX_CACHING)
    quantization: Annotated[str, _one_of(spec.QUANTIZATION)] = spec_field(spec.QUANTIZATION)
    kv_cache_dtype: Annotated[str, _one_of(spec.KV_CACHE_DTYPE)] = spec_field(spec.KV_CACHE_DTYPE)
    attention_backend: Annotated[str, _one_of(spec.ATTENTION_BACKEND)] = spec_field(spec.ATTENTION_BACKEND)
    tensor_parallel_size: Annotated[int, _one_of(spec.TENSOR_PARALLEL_SIZE)] = spec_field(spec.TENSOR_PARALLEL_SIZE)
    enforce_eager: bool = spec_field(spec.ENFORCE_EAGER)
    max_cudagraph_capture_size: int = spec_field(spec.MAX_CUDAGRAPH_CAPTURE_SIZE)
    cudagraph_memory_estimate: bool = spec_field(spec.CUDAGRAPH_MEMORY_ESTIMATE)
    kv_offloading_size_gib: float = spec_field(spec.KV_OFFLOADING_SIZE)
    kv_offloading_backend: Annotated[str, _one_of(spec.KV_OFFLOADING_BACKEND)] = spec_field(spec.KV_OFFLOADING_BACKEND)
    max_loras: int = spec_field(spec.MAX_LORAS)
    max_lora_rank: Annotated[int, _one_of(spec.MAX_LORA_RANK)] = spec_field(spec.MAX_LORA_RANK)
    max_cpu_loras: int | None = spec_field(spec.MAX_CPU_LORAS)
    specialize_active_lora: bool = spec_field(spec.SPECIALIZE_ACTIVE_LORA)
    log_level: Annotated[str, _one_of(spec.LOG_LEVEL)] = spec_field(spec.LOG_LEVEL)

    @model_validator(mode="after")
    def _check_vllm_invariants(self) -> "EngineConfig":
        if self.max_num_batched_tokens < self.max_num_seqs:
            # vLLM's SchedulerConfig rejects this combination at engine start.
            raise ValueError(
                f"max_num_batched_tokens = {self.max_num_batched_tokens} must be >= max_num_seqs = {self.max_num_seqs}"
            )
        if self.max_cpu_loras is not None and self.max_cpu_loras < self.max_loras:
            # vLLM's LoRAConfig rejects it at start (vllm/config/lora.py).
            raise ValueError(f"max_cpu_loras = {self.max_cpu_loras} must be >= max_loras = {self.max_loras}")
        return self

    def environment(self) -> dict[str, str]:
        """Each setting as the container's environment variable (unset ones omitted)."""
        variables = {}
        for setting in spec.ENGINE_SETTINGS:
            text = setting.to_env(getattr(self, setting.key))
            if text is not None:
                variables[setting.env_var] = text
        return variables
