"""The engine memory plan of a config: ``memory_plan.*``, ``engine.*`` and the model's shape fed to
:func:`planning.memory_plan.plan_engine_memory`."""

from app_config.engine import EngineConfig
from app_config.llm import ModelConfig
from app_config.memory_plan_config import MemoryPlanConfig
from planning.gpu_instances import GIB, instance_gpus
from planning.memory_plan import EngineMemoryInputs, HostTier, MemoryPlan, plan_engine_memory, plan_host_tier
from serving_contract.engine_settings import effective_max_cpu_loras


def runtime_overhead_bytes(memory: MemoryPlanConfig, *, cudagraph_memory_estimate: bool) -> int:
    """Per-GPU bytes vLLM's profile takes besides weights and LoRA slots: the measured overhead,
    plus vLLM's CUDA-graph estimate when the engine reserves it (``engine.cudagraph_memory_estimate``)."""
    estimate = memory.cudagraph_estimate_gib if cudagraph_memory_estimate else 0.0
    return round((memory.runtime_overhead_gib + estimate) * GIB)


def engine_memory_inputs(engine: EngineConfig, adapter_count: int) -> EngineMemoryInputs:
    """The engine settings the plan reads, from ``engine.*`` and the configured adapters."""
    return EngineMemoryInputs(
        gpu_memory_utilization=engine.gpu_memory_utilization,
        tensor_parallel_size=engine.tensor_parallel_size,
        max_model_len=engine.max_model_len,
        max_num_seqs=engine.max_num_seqs,
        block_size=engine.block_size,
        kv_cache_dtype=engine.kv_cache_dtype,
        lora_enabled=adapter_count > 0,
        max_loras=engine.max_loras,
        max_lora_rank=engine.max_lora_rank,
    )


def plan_for_instance(
    instance_type: str, *, model: ModelConfig, engine: EngineConfig, memory: MemoryPlanConfig
) -> MemoryPlan:
    """The memory plan of one engine on ``instance_type`` (raises ValueError as ``plan_engine_memory``)."""
    return plan_engine_memory(
        shape=model.shape.to_shape(),
        gpus=instance_gpus(instance_type),
        engine=engine_memory_inputs(engine, len(model.adapters)),
        runtime_overhead_bytes=runtime_overhead_bytes(
            memory, cudagraph_memory_estimate=engine.cudagraph_memory_estimate
        ),
        typical_sequence_tokens=memory.typical_sequence_tokens,
    )


def cpu_lora_slots(engine: EngineConfig, adapter_count: int, *, runtime_adapters: bool) -> int:
    """The ``--max-cpu-loras`` the container passes (``serving_app.vllm_args``): in
    inference_components mode the runtime-adapter capacity (``engine.max_cpu_loras``, else
    ``engine.max_loras``); with baked adapters room for every one; 0 without LoRA."""
    if runtime_adapters:
        return engine.max_cpu_loras or engine.max_loras
    if adapter_count == 0:
        return 0
    return effective_max_cpu_loras(engine.max_cpu_loras, engine.max_loras, adapter_count)


def host_tier_for_instance(
    instance_type: str,
    *,
    model: ModelConfig,
    engine: EngineConfig,
    memory: MemoryPlanConfig,
    runtime_adapters: bool,
) -> HostTier:
    """The host tier of ``instance_type`` (:func:`planning.memory_plan.plan_host_tier`) with this config's
    engines, offload and reserves; ``runtime_adapters``: inference_components mode (every copy runs LoRA)."""
    return plan_host_tier(
        shape=model.shape.to_shape(),
        gpus=instance_gpus(instance_type),
        engine=engine_memory_inputs(engine, len(model.adapters)),
        kv_offloading_size_gib=engine.kv_offloading_size_gib,
        cpu_lora_slots=cpu_lora_slots(engine, len(model.adapters), runtime_adapters=runtime_adapters),
        os_reserve_bytes=round(memory.host_os_reserve_gib * GIB),
        engine_process_bytes=round(memory.host_engine_process_gib * GIB),
    )
