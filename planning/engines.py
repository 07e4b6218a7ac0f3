"""The engine model fed from the config: which shape, which KV cache, which GPU.

The one bridge between the config's sections (``traffic``, ``engine``, ``model``,
``memory_plan``) and ``planning/engine_model.py``, so synth, ``make plan``, ``make capacity``,
``make simulate`` and ``ops`` solve the same engine.
"""

from __future__ import annotations

from functools import cache

from app_config.engine import EngineConfig
from app_config.llm import ModelConfig
from app_config.memory_plan_config import MemoryPlanConfig
from app_config.traffic import TrafficConfig
from planning.engine_fit import Fit, load_fit
from planning.engine_memory import plan_for_instance
from planning.engine_model import ConversationShape, host_scale
from planning.gpu_instances import INSTANCE_GPUS, Gpu, engines_per_instance, instance_gpus
from planning.gpu_projection import ProjectedEngine, project


@cache
def reference_fit() -> Fit:
    """``planning/engine_fit.json``, read once."""
    return load_fit()


def conversation_shape(traffic: TrafficConfig, engine: EngineConfig, adapters: int) -> ConversationShape:
    """The conversations the config plans for: ``traffic.request_shape``, ``traffic.turns_per_conversation``,
    ``traffic.think_s``, ``engine.block_size`` and the configured adapters (at least one: requests to
    the base model share its prefix the same way)."""
    shape = traffic.request_shape
    return ConversationShape(
        system_prefix_tokens=shape.system_prefix_tokens,
        conversation_tokens=shape.conversation_tokens,
        turn_tokens=shape.turn_tokens,
        output_tokens=shape.output_tokens,
        mean_turns=traffic.turns_per_conversation,
        think_s=traffic.think_s,
        block_size=engine.block_size,
        adapters=max(adapters, 1),
    )


def engine_on(
    instance_type: str, *, model: ModelConfig, engine: EngineConfig, memory: MemoryPlanConfig
) -> ProjectedEngine:
    """One engine of this config on ``instance_type``: its GPU's parts (measured or projected)
    with the memory plan's KV cache.

    Raises:
        ValueError: the instance type is unknown, or the model does not fit its GPU (one line).
    """
    plan = plan_for_instance(instance_type, model=model, engine=engine, memory=memory)
    return project(
        reference_fit(),
        instance_gpus(instance_type).gpu,
        plan.kv_tokens,
        max_num_seqs=engine.max_num_seqs,
        host_scale=instance_host_scale(instance_type, engine.tensor_parallel_size),
    )


def instance_cores_per_engine(instance_type: str, tensor_parallel_size: int) -> float:
    """Physical cores each engine of ``instance_type`` has: its vCPUs are 2 hardware threads per
    core (EC2's instance types, docs/sources.md "Instance vCPUs"), shared by its engines.

    Raises:
        ValueError: the instance type is unknown.
    """
    spec = instance_gpus(instance_type)
    return spec.vcpus / 2 / engines_per_instance(instance_type, tensor_parallel_size)


def instance_host_scale(instance_type: str, tensor_parallel_size: int) -> float:
    """``engine_model.host_scale`` of one engine on ``instance_type``, behind the container's gateway
    (the endpoint always runs it): 1.0 from 2 cores up (``engine_model.GATEWAY_BUSY_THREADS``, measured), 2.0 on one."""
    return host_scale(instance_cores_per_engine(instance_type, tensor_parallel_size), gateway=True)


def gpu_named(name: str) -> Gpu:
    """The catalogue's GPU whose name starts with ``name`` (case-insensitive: ``h100``, ``L40S``, ``a10g``).

    Raises:
        ValueError: no GPU, or several, match (one line listing the names).
    """
    gpus = {gpu.name: gpu for gpu in (i.gpu for i in INSTANCE_GPUS.values())}
    exact = [gpu for gpu_name, gpu in gpus.items() if gpu_name.lower() == name.lower()]
    matches = exact or [gpu for gpu_name, gpu in gpus.items() if gpu_name.lower().startswith(name.lower())]
    if len(matches) != 1:
        known = ", ".join(sorted(gpus))
        raise ValueError(f"--gpu {name!r}: {'ambiguous' if matches else 'unknown'}; known GPUs: {known}")
    return matches[0]


def smallest_instance_with(gpu: Gpu) -> str:
    """The instance type with one ``gpu`` and the fewest vCPUs: what the model's host figures describe."""
    candidates = [(spec.vcpus, name) for name, spec in INSTANCE_GPUS.items() if spec.gpu == gpu]
    return min(candidates)[1]
