"""The config's checks that need its plan: could vLLM start on each variant's GPU, can the fleet
hold its SLOs, do the schedules and the derived targets make sense.

:func:`planning.make_plan.make_plan` runs :func:`check_plan` once the plan is made; each check raises
``ValueError`` with one line naming the keys, their values and what would be accepted, which
``make_plan`` turns into the config error that stops synth.
"""

from app_config import dated_events
from app_config.engine import EngineConfig
from app_config.llm import ModelConfig
from app_config.root import AppConfig
from app_config.scaling import PROD_WARM_FLOOR
from app_config.variants import VARIANT_KEYS, existing_variant_keys
from planning.dated_schedule import check_dated_events
from planning.engine_memory import engine_memory_inputs, host_tier_for_instance
from planning.gpu_instances import GIB, INSTANCE_GPUS, MIB, instance_gpus
from planning.hardware import Pool
from planning.memory_plan import HostTier, gib, largest_host_offload_gib, minimum_utilization
from planning.plan import Plan
from planning.reservations import check_reservations
from planning.slo_holds import check_holdable
from planning.weekly_plan import check_schedule


def check_plan(config: AppConfig, plan: Plan) -> None:
    """Every check that needs the plan, in order; the first that fails raises.

    Raises:
        ValueError: one line naming the keys, the values and what is allowed.
    """
    _memory_plan_checks(config, plan)
    _shadow_fits(config, plan)
    _host_tier_checks(config, plan)
    check_holdable(config, plan)  # planning/slo_holds.py: only with slo.require_holdable
    if any(unit.is_variant for unit in plan.units):  # copies scale on their own target, with no schedule
        _scaling_checks(config, plan)


def check_before_plan(config: AppConfig) -> None:
    """The variants' reserved capacity against AWS's rules and today's date
    (``planning/reservations.py``), then the engine against the model and the variants'
    instances: what the plan's memory and throughput figures assume (``make_plan`` runs it first, so a
    bad value gets its own line, not the memory plan's).

    Raises:
        ValueError: one line naming the key, the value and what is allowed.
    """
    check_reservations(config, now=dated_events.clock(config.scaling.timezone))
    engine, shape = config.engine, config.model.shape
    if engine.max_model_len > shape.max_position_embeddings:
        raise ValueError(
            f"engine.max_model_len = {engine.max_model_len}: above model.shape.max_position_embeddings = "
            f"{shape.max_position_embeddings}, the longest context the model supports (vLLM refuses to start)"
        )
    if config.memory_plan.typical_sequence_tokens > engine.max_model_len:
        raise ValueError(
            f"memory_plan.typical_sequence_tokens = {config.memory_plan.typical_sequence_tokens}: above "
            f"engine.max_model_len = {engine.max_model_len}, so no request could be that long"
        )
    for key in existing_variant_keys(config.serving):
        shape = getattr(config.serving, key)
        for priority, instance_type in enumerate(shape.instance_types, start=1):
            gpus = instance_gpus(instance_type)
            if engine.tensor_parallel_size > gpus.count:
                raise ValueError(
                    f"engine.tensor_parallel_size = {engine.tensor_parallel_size}: serving.{key}."
                    f"{shape.instance_type_field(priority)} = {instance_type} has {gpus.count} GPU(s) "
                    f"({gpus.gpu.name}); the engine cannot span more GPUs than the instance has"
                )


def _memory_plan_checks(config: AppConfig, planned: Plan) -> None:
    """Stop synth where vLLM could not start (docs/sources.md, "vLLM": it fails at start when one
    max_model_len sequence does not fit, and never when max_num_seqs x max_model_len does not)."""
    for variant in planned.variants():
        for pool in planned.hardware[variant.key].pools:
            _engine_starts(config.engine, config.model, pool)


def _engine_starts(engine: EngineConfig, model: ModelConfig, pool: Pool) -> None:
    """One instance type of a variant: one ``engine.max_model_len`` sequence fits its KV cache."""
    shape = model.shape
    instance_type = pool.instance_type
    where = f"{pool.config_key} = {instance_type}"
    gpus = instance_gpus(instance_type)
    plan = pool.memory
    if plan.fits_one_sequence:
        return
    needed = minimum_utilization(
        shape=shape.to_shape(),
        gpus=gpus,
        engine=engine_memory_inputs(engine, len(model.adapters)),
        runtime_overhead_bytes=plan.overhead_bytes // engine.tensor_parallel_size,
    )
    if plan.kv_tokens == 0 or needed <= 0.98:
        raise ValueError(
            f"engine.gpu_memory_utilization = {engine.gpu_memory_utilization:g}: on {where} "
            f"({gpus.gpu.name}) it leaves {max(plan.kv_tokens, 0):,} KV-cache tokens, fewer than one "
            f"engine.max_model_len = {engine.max_model_len} sequence (budget {gib(plan.budget_bytes)} GiB - "
            f"weights {gib(plan.weights_bytes)} - LoRA slots {gib(plan.lora_bytes)} - runtime "
            f"{gib(plan.overhead_bytes)}); it needs >= {needed:.2f} (vLLM refuses to start)"
        )
    raise ValueError(
        f"engine.max_model_len = {engine.max_model_len}: only {plan.kv_tokens:,} KV-cache tokens fit on "
        f"{where} ({gpus.gpu.name}) even at engine.gpu_memory_utilization = "
        f"{engine.gpu_memory_utilization:g}; lower it to <= {plan.kv_tokens} (vLLM refuses to start)"
    )


def _shadow_fits(config: AppConfig, planned: Plan) -> None:
    """The shadow variant's engine fits on its GPU (``serving.shadow``; app_config/shadow.py checks the rest)."""
    if not config.serving.shadow.enabled:
        return
    for pool in planned.hardware["shadow"].pools:
        plan = pool.memory
        if not plan.fits_one_sequence:
            raise ValueError(
                f"{pool.config_key} = {pool.instance_type}: only {max(plan.kv_tokens, 0):,} KV-cache tokens fit "
                f"({pool.gpu_name}), fewer than one engine.max_model_len = {config.engine.max_model_len} sequence "
                "(vLLM refuses to start); pick a larger GPU"
            )


def _host_tier_checks(config: AppConfig, planned: Plan) -> None:
    """Stop synth where the KV offload (``engine.kv_offloading_size_gib``) cannot start: a backend the image
    cannot run, pinned memory above what a variant's instance has left (primary, canary, shadow), or, in
    inference_components mode, above what SageMaker reserves for a copy. vLLM pins the whole buffer at start,
    and pinned memory cannot be swapped or reclaimed, so an offload that does not fit is killed at start."""
    engine = config.engine
    if engine.kv_offloading_size_gib == 0:
        return
    if engine.kv_offloading_backend == "lmcache":
        raise ValueError(
            "engine.kv_offloading_backend = 'lmcache': vLLM 0.26 then hands the KV blocks to an LMCache server "
            "(LMCacheMPConnector, tcp://localhost:5555 unless configured; vllm/config/vllm.py), which needs the "
            "lmcache package and a running server; the image installs neither (container/requirements.lock) and "
            "the container starts none; use native"
        )
    # Every instance type a unit with instances may run on (a variant's instance_pools included, the shadow's, the
    # copies' host variant's); a component's copy loads its adapters at run time (CPU LoRA slots).
    components = any(unit.is_component for unit in planned.units)
    for unit in (unit for unit in planned.units if unit.role != "adapter_component"):
        for pool in unit.hardware.pools:
            tier = _host_tier(config, pool.instance_type, runtime_adapters=components)
            if not tier.fits:
                raise ValueError(
                    _offload_refusal(config, pool.config_key, pool.instance_type, tier, runtime_adapters=components)
                )
    base = planned.unit("base")
    if base is not None:
        tier = _host_tier(config, base.hardware.own.instance_type, runtime_adapters=True)
        needed = tier.engine_process_bytes + tier.cpu_lora_bytes + tier.offload.pinned_bytes
        reserved = config.serving.inference_components.memory_per_copy_mib
        if needed > reserved * MIB:
            parts = (
                f"its processes {config.memory_plan.host_engine_process_gib:g}, {tier.cpu_lora_slots} CPU LoRA slots "
                f"{gib(tier.cpu_lora_bytes)}, {tier.offload.pinned_bytes / GIB:g} GiB pinned for the offload"
            )
            raise ValueError(
                f"engine.kv_offloading_size_gib = {engine.kv_offloading_size_gib:g}: an inference-component copy then "
                f"needs {needed / GIB:.2f} GiB of host memory ({parts}), above "
                f"serving.inference_components.memory_per_copy_mib = {reserved}; raise it to >= {-(-needed // MIB)}"
            )


def _host_tier(config: AppConfig, instance_type: str, *, runtime_adapters: bool) -> HostTier:
    return host_tier_for_instance(
        instance_type,
        model=config.model,
        engine=config.engine,
        memory=config.memory_plan,
        runtime_adapters=runtime_adapters,
    )


def _offload_refusal(config: AppConfig, key: str, instance_type: str, tier: HostTier, *, runtime_adapters: bool) -> str:
    """One line: the instance's host memory, what is left per engine and why, what vLLM pins, what fits."""
    engine, memory = config.engine, config.memory_plan
    size = engine.kv_offloading_size_gib
    lora = f"{tier.cpu_lora_slots} CPU LoRA slots ({gib(tier.cpu_lora_bytes)})"
    if tier.engines == 1:
        left = (
            f"{tier.available_bytes / GIB:.2f} GiB after the OS ({memory.host_os_reserve_gib:g}), the engine's "
            f"processes ({memory.host_engine_process_gib:g}) and its {lora}"
        )
    else:
        left = (
            f"{tier.available_bytes / GIB:.2f} GiB per engine after the OS ({memory.host_os_reserve_gib:g}) and each "
            f"of its {tier.engines} engines' processes ({memory.host_engine_process_gib:g}) and {lora}"
        )
    pinned = ""
    if tier.offload.pinned_bytes != tier.offload.asked_bytes:
        pinned = (
            f"; vLLM 0.26 pins {tier.offload.pinned_bytes / GIB:g} GiB for it ({tier.offload.buffers} layer buffers, "
            "each rounded up to a power of two)"
        )
    shape = config.model.shape.to_shape()
    largest = largest_host_offload_gib(
        shape,
        available_bytes=tier.available_bytes,
        tensor_parallel_size=engine.tensor_parallel_size,
        block_size=engine.block_size,
        kv_cache_dtype=engine.kv_cache_dtype,
    )
    fits = f"at most {largest:g} GiB fits" if largest > 0 else "none fits (set 0)"
    bigger = _bigger_host(config, instance_type, runtime_adapters=runtime_adapters)
    alternative = f" (or pick {bigger}, {INSTANCE_GPUS[bigger].memory_gib} GiB)" if bigger else ""
    return (
        f"engine.kv_offloading_size_gib = {size:g}: {key} = {instance_type} has {tier.host_bytes // GIB} GiB of host "
        f"memory, {left}{pinned}; {fits}{alternative}"
    )


def _bigger_host(config: AppConfig, instance_type: str, *, runtime_adapters: bool) -> str | None:
    """The instance type of the same family and GPUs with the least host memory that holds the offload, or None."""
    family = instance_type.split(".")[1]
    gpus = instance_gpus(instance_type)
    candidates = sorted(
        (spec.memory_gib, name)
        for name, spec in INSTANCE_GPUS.items()
        if name.split(".")[1] == family
        and spec.gpu == gpus.gpu
        and spec.count == gpus.count
        and spec.memory_gib > gpus.memory_gib
    )
    return next(
        (name for _, name in candidates if _host_tier(config, name, runtime_adapters=runtime_adapters).fits), None
    )


def _scaling_checks(config: AppConfig, plan: Plan) -> None:
    # Copies scale by target tracking; schedules and blue/green are variants-mode features.
    # The warm floor also binds every scheduled floor of the primary.
    warm_floor = PROD_WARM_FLOOR if config.stage == "prod" else None
    for variant in plan.variants():
        check_schedule(
            variant.key,
            variant.scaling,
            variant.serving.min_capacity,
            variant.serving.max_capacity,
            warm_floor if variant.is_primary else None,
        )
        if variant.scaling.dated_events:
            check_dated_events(
                variant.key,
                variant.scaling,
                variant.serving.min_capacity,
                variant.serving.max_capacity,
                now=dated_events.clock(config.scaling.timezone),
                timezone=config.scaling.timezone,
            )
    # Both variants' targets, the canary's even while it is disabled: enabling it must not meet a bad one.
    # Before the scale-in checks, which derive their threshold from the target.
    for key in VARIANT_KEYS:
        variant = plan.variant(key)
        tracking = variant.scaling.target_tracking
        # The metric is per instance; each of its data-parallel engines runs at most max_num_seqs. With
        # instance_pools, the instance with the fewest engines must not queue either.
        fewest = min(plan.hardware[key].pools, key=lambda pool: pool.engines)
        engines = fewest.engines
        ceiling = config.engine.max_num_seqs * engines
        if tracking.metric == "concurrent_requests_high_resolution" and tracking.target_value >= ceiling:
            per_engine = "" if engines == 1 else f" x {engines} engines per {fewest.instance_type}"
            raise ValueError(
                f"scaling.{key}.target_tracking.concurrent_requests_target = "
                f"{tracking.target_value:g} must be below engine.max_num_seqs = "
                f"{config.engine.max_num_seqs}{per_engine}, or the engine queues before the fleet scales"
            )
    _scale_in_below_full_load(config.engine, plan)


def _scale_in_below_full_load(engine: EngineConfig, planned: Plan) -> None:
    """The low-load scale-in must never fire while the engine is full.

    A full engine runs ``concurrency_ceiling`` sequences (the memory plan: what the KV cache
    fits at the typical length, capped by ``engine.max_num_seqs``), so RunningRequests never
    exceeds it; a threshold at or above it would shed an instance every cooldown at full load.
    The bound is half of it: the alarm averages over the variant, and removing one of two
    instances doubles the survivor's sequences, which must still fit.
    """
    for variant in planned.variants():
        step = variant.scaling.step_scaling
        if not (variant.scaling.enabled and step.enabled):
            continue
        target = variant.scaling.target_tracking.target_value
        if variant.scaling.target_tracking.metric == "concurrent_requests_high_resolution" and (
            step.scale_in_threshold >= target
        ):
            raise ValueError(
                f"scaling.{variant.key}.step_scaling.scale_in_running_requests = {step.scale_in_threshold:g}: must "
                f"be below scaling.{variant.key}.target_tracking.concurrent_requests_target = {target:g}, or step "
                "scale-in removes the instances target tracking adds (leave it unset: a quarter of the target)"
            )
        # RunningRequests is the instance's: every data-parallel engine's sequences together; with
        # instance_pools, the smallest instance's must hold the bound.
        pool = min(planned.hardware[variant.key].pools, key=lambda p: p.memory.concurrency_ceiling * p.engines)
        plan, engines = pool.memory, pool.engines
        ceiling = plan.concurrency_ceiling * engines
        bound = ceiling / 2
        if step.scale_in_threshold > bound:
            engines_text = "the engine runs" if engines == 1 else f"its {engines} engines run"
            raise ValueError(
                f"scaling.{variant.key}.step_scaling.scale_in_running_requests = {step.scale_in_threshold:g}: "
                f"must be <= {bound:g}, half the {ceiling} sequences {engines_text} on "
                f"{pool.instance_type} (memory plan at {plan.typical_sequence_tokens:,} tokens, "
                f"engine.max_num_seqs = {engine.max_num_seqs}); removing one of two instances doubles "
                "the survivor's load, and a threshold at the ceiling scales in at full load"
            )
