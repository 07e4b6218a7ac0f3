"""The memory plan of each production variant, as ``make synth`` and the capacity plan print it.

``app.py`` writes the plan of the synthesized config to ``cdk.out/memory-plan.json`` (the
summary reads templates and this file, never the config); ``planning.cost_plan`` builds the
same report from the config it loads. Both print it with :func:`render`.
"""

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app_config.root import AppConfig
from app_config.serving import ServingConfig, VariantConfig
from app_config.variants import Variant
from planning.engine_memory import host_tier_for_instance
from planning.gpu_instances import GIB, instance_gpus
from planning.hardware import Pool
from planning.memory_plan import largest_host_offload_gib
from planning.plan import Plan
from planning.slo_holds import ClassHold, class_holds, measure_line

REPORT_FILE = "memory-plan.json"


@dataclass(frozen=True)
class VariantMemory:
    """One variant's engine: where its GPU memory goes and what its KV cache holds.

    GiB figures are for the whole engine (all ``tensor_parallel_size`` GPUs).
    """

    variant_name: str
    instance_type: str
    gpu_name: str
    gpu_memory_gib: float
    tensor_parallel_size: int
    gpu_memory_utilization: float
    budget_gib: float
    weights_gib: float
    lora_gib: float
    runtime_gib: float
    kv_gib: float
    kv_tokens: int
    kv_kib_per_token: float
    max_model_len: int
    sequences_at_max_len: int
    typical_sequence_tokens: int
    sequences_at_typical_len: int
    max_num_seqs: int
    concurrency_ceiling: int
    concurrency_target: float
    concurrency_target_key: str
    concurrency_target_active: bool
    ttft_slo_ms: float
    """The stricter class objective (the capacity holds both; slo.cold / slo.warm .ttft_p95_ms)."""
    slo_concurrency: int
    slo_requests_per_minute: float
    slo_base_ttft_ms: float
    slo_holds: bool
    slo_source: str
    engines_per_instance: int = 1
    class_slo_lines: tuple[str, ...] = ()
    """Per request class: holds ``slo.<class>.ttft_p95_ms`` or a WARNING (planning/slo_holds.py)."""
    ttft_slo_label: str = ""
    """``cold <= 500 ms, warm <= 500 ms``: the objectives the capacity is sized at."""
    measure_line: str | None = None
    """The command that would measure a figure the engine model projected (planning/slo_holds.py)."""
    comparison_warning: str | None = None
    """The canary on another instance type than the primary: it measures another GPU (issue 40 item 6)."""
    kv_offloading_size_gib: float = 0.0
    """``engine.kv_offloading_size_gib`` (0: off, and the host-tier fields below are not printed)."""
    kv_offloading_backend: str = "native"
    host_memory_gib: int = 0
    """The instance's host memory (planning/gpu_instances.py)."""
    host_os_reserve_gib: float = 0.0
    host_engines: int = 1
    """Engines sharing the host memory: one per tensor_parallel_size GPUs (a copy each in inference_components mode)."""
    host_engine_process_gib: float = 0.0
    host_cpu_lora_slots: int = 0
    host_cpu_lora_gib: float = 0.0
    host_available_gib: float = 0.0
    """Host memory left for one engine's offload (planning.memory_plan.HostTier.available_bytes)."""
    kv_offloading_pinned_gib: float = 0.0
    """What vLLM 0.26 pins for the offload (each layer's buffer rounded up to a power of two)."""
    kv_offloading_tokens: int = 0
    """Tokens the offload holds: whole blocks of block_size."""
    kv_offloading_fits_gib: float = 0.0
    """The largest engine.kv_offloading_size_gib whose pinned memory fits host_available_gib."""
    priority: int = 1
    """The instance type's pool: 1 for the variant's ``instance_type``, 2-5 for ``instance_pools``' fallbacks."""

    @property
    def warning(self) -> str | None:
        """Set when the scaling target is above the requests whose KV cache fits at the typical length
        (on every engine of the instance together; the target is per instance)."""
        fits = self.sequences_at_typical_len * self.engines_per_instance
        if self.concurrency_target <= fits:
            return None
        state = "the active target-tracking metric" if self.concurrency_target_active else "not the active metric"
        return (
            f"{self.concurrency_target_key} = {self.concurrency_target:g} ({state}) is above the "
            f"{fits} requests of {self.typical_sequence_tokens:,} tokens whose KV cache "
            f"fits on {self.instance_type}: vLLM preempts and queues before the fleet scales out"
        )


def _concurrency_target(plan: Plan, variant: Variant) -> tuple[float, str, bool]:
    """(target, its config key, whether it is the active target-tracking metric) of a variant."""
    if plan.instance_unit(variant.name).role == "base_component":
        scaling = plan.inference_components.scaling
        return (
            scaling.target_value,
            ("serving.inference_components.scaling.concurrent_requests_per_copy_target"),
            True,
        )
    tracking = variant.scaling.target_tracking
    target = tracking.concurrent_requests_target
    assert target is not None  # the plan derives it when unset
    return (
        target,
        f"scaling.{variant.key}.target_tracking.concurrent_requests_target",
        tracking.enabled and tracking.metric == "concurrent_requests_high_resolution",
    )


def build(config: AppConfig, planned: Plan) -> list[VariantMemory]:
    """The report of every production variant of ``config``, primary first, and of each of its instance
    types in priority order (``instance_pools``); inference_components mode: the one variant, where each
    copy of the base component is one engine."""
    holds = class_holds(config, planned)
    return [
        _report(config, planned, deployed, pool, holds)
        for deployed in planned.deployed_variants()
        for pool in planned.hardware[deployed.key].pools
    ]


def _report(config: AppConfig, planned: Plan, deployed: Variant, pool: Pool, holds: list[ClassHold]) -> VariantMemory:
    """One variant on one of its instance types."""
    variant = deployed.serving
    plan = pool.memory
    gpus = instance_gpus(pool.instance_type)
    target, target_key, active = _concurrency_target(planned, deployed)
    capacity = pool.throughput
    components = planned.instance_unit(variant.variant_name).is_component
    return VariantMemory(
        variant_name=variant.variant_name,
        instance_type=pool.instance_type,
        gpu_name=gpus.gpu.name,
        gpu_memory_gib=round(gpus.gpu.memory_bytes / GIB, 2),
        tensor_parallel_size=config.engine.tensor_parallel_size,
        gpu_memory_utilization=config.engine.gpu_memory_utilization,
        budget_gib=round(plan.budget_bytes / GIB, 2),
        weights_gib=round(plan.weights_bytes / GIB, 2),
        lora_gib=round(plan.lora_bytes / GIB, 2),
        runtime_gib=round(plan.overhead_bytes / GIB, 2),
        kv_gib=round(plan.kv_bytes / GIB, 2),
        kv_tokens=plan.kv_tokens,
        kv_kib_per_token=plan.kv_bytes_per_token / 1024,
        max_model_len=plan.max_model_len,
        sequences_at_max_len=plan.sequences_at_max_len,
        typical_sequence_tokens=plan.typical_sequence_tokens,
        sequences_at_typical_len=plan.sequences_at_typical_len,
        max_num_seqs=config.engine.max_num_seqs,
        concurrency_ceiling=plan.concurrency_ceiling,
        concurrency_target=target,
        concurrency_target_key=target_key,
        concurrency_target_active=active,
        ttft_slo_ms=min(config.slo.cold.ttft_p95_ms, config.slo.warm.ttft_p95_ms),
        ttft_slo_label=(f"cold <= {config.slo.cold.ttft_p95_ms:g} ms, warm <= {config.slo.warm.ttft_p95_ms:g} ms"),
        slo_concurrency=capacity.concurrency,
        slo_requests_per_minute=capacity.requests_per_minute,
        slo_base_ttft_ms=capacity.base_ttft_ms,
        slo_holds=capacity.holds_slo,
        slo_source=capacity.source,
        # A component's copy is one engine (the report is per copy).
        engines_per_instance=1 if components else pool.engines,
        class_slo_lines=tuple(
            h.line for h in holds if h.variant_name == variant.variant_name and h.priority == pool.priority
        ),
        measure_line=measure_line(capacity),
        comparison_warning=_canary_comparison(config.serving, variant) if pool.priority == 1 else None,
        priority=pool.priority,
        **_host_tier_fields(config, pool.instance_type, runtime_adapters=components),
    )


def _host_tier_fields(config: AppConfig, instance_type: str, *, runtime_adapters: bool) -> dict[str, Any]:
    """The host-tier fields of :class:`VariantMemory` on ``instance_type`` (``engine.kv_offloading_size_gib``);
    ``runtime_adapters``: the engine is a component's copy, which loads its adapters at run time."""
    tier = host_tier_for_instance(
        instance_type,
        model=config.model,
        engine=config.engine,
        memory=config.memory_plan,
        runtime_adapters=runtime_adapters,
    )
    return {
        "kv_offloading_size_gib": config.engine.kv_offloading_size_gib,
        "kv_offloading_backend": config.engine.kv_offloading_backend,
        "host_memory_gib": tier.host_bytes // GIB,
        "host_os_reserve_gib": config.memory_plan.host_os_reserve_gib,
        "host_engines": tier.engines,
        "host_engine_process_gib": config.memory_plan.host_engine_process_gib,
        "host_cpu_lora_slots": tier.cpu_lora_slots,
        "host_cpu_lora_gib": round(tier.cpu_lora_bytes / GIB, 2),
        "host_available_gib": round(tier.available_bytes / GIB, 2),
        "kv_offloading_pinned_gib": round(tier.offload.pinned_bytes / GIB, 2),
        "kv_offloading_tokens": tier.offload.tokens,
        "kv_offloading_fits_gib": largest_host_offload_gib(
            config.model.shape.to_shape(),
            available_bytes=tier.available_bytes,
            tensor_parallel_size=config.engine.tensor_parallel_size,
            block_size=config.engine.block_size,
            kv_cache_dtype=config.engine.kv_cache_dtype,
        ),
    }


def _canary_comparison(serving: ServingConfig, variant: VariantConfig) -> str | None:
    """A line when the canary runs on another instance type than the primary, else None.

    A canary stands in for the primary's next version on a small share of traffic; on another GPU
    its TTFT, errors and rollback guardrails measure the GPU as much as the version.
    """
    primary = serving.primary.instance_type
    if variant is serving.primary or variant.instance_type == primary:
        return None
    return (
        f"serving.canary.instance_type = {variant.instance_type} differs from serving.primary.instance_type = "
        f"{primary}: the canary's TTFT, errors and guardrails would measure another GPU than the fleet it stands in "
        "for; set both to the same type"
    )


def write(reports: list[VariantMemory], outdir: str | Path) -> Path:
    """Write ``reports`` as JSON into the cloud assembly ``outdir``; return the file."""
    path = Path(outdir) / REPORT_FILE
    path.write_text(json.dumps([asdict(report) for report in reports], indent=2) + "\n")
    return path


def read(outdir: str | Path) -> list[VariantMemory] | None:
    """The reports ``app.py`` wrote into ``outdir``, or None when there are none."""
    path = Path(outdir) / REPORT_FILE
    if not path.exists():
        return None
    return [VariantMemory(**item) for item in json.loads(path.read_text())]


def render(reports: list[VariantMemory]) -> list[str]:
    """Human-readable lines: the memory split, the KV-cache fit and any scaling warning."""
    lines = ["Memory plan per engine (planning/memory_plan.py, as vLLM 0.22 sizes its KV cache):"]
    for r in reports:
        gpus = f"{r.tensor_parallel_size} x {r.gpu_name} {r.gpu_memory_gib:.2f} GiB"
        hardware = f"{r.instance_type} (pool {r.priority})" if r.priority > 1 else r.instance_type
        lines += [
            f"  variant {r.variant_name:<10} {hardware:<14} {gpus} at {r.gpu_memory_utilization:g} "
            f"= {r.budget_gib:.2f} GiB: weights {r.weights_gib:.2f} + LoRA slots {r.lora_gib:.2f} + runtime "
            f"{r.runtime_gib:.2f} + KV cache {r.kv_gib:.2f}",
            f"    KV cache {r.kv_tokens:,} tokens ({r.kv_kib_per_token:g} KiB each): {r.sequences_at_max_len} "
            f"sequences of {r.max_model_len:,} (max_model_len), {r.sequences_at_typical_len} of "
            f"{r.typical_sequence_tokens:,} (typical); max_num_seqs {r.max_num_seqs}",
            f"    engines per instance: {r.engines_per_instance} (vLLM data parallel, one per "
            f"{r.tensor_parallel_size} GPU(s)); KV cache per instance {r.kv_tokens * r.engines_per_instance:,} tokens",
            f"    concurrency without preemption: {r.concurrency_ceiling} per engine; concurrency target "
            f"{r.concurrency_target:g} ({'active' if r.concurrency_target_active else 'inactive'})",
        ]
        if r.slo_holds:
            lines.append(
                f"    capacity at TTFT p95 {r.ttft_slo_label}: {r.slo_concurrency} concurrent, "
                f"{r.slo_requests_per_minute:,.0f} req/min per instance ({r.slo_source})"
            )
        else:
            lines.append(
                f"    sized at 1 concurrent request per instance ({r.slo_requests_per_minute:,.0f} req/min, TTFT p50 "
                f"{r.slo_base_ttft_ms:,.0f} ms): it cannot hold TTFT p95 {r.ttft_slo_label} at MangaAssist's "
                "request shape; make plan ranks the instance types, python -m ops throughput measure measures them"
            )
        if r.kv_offloading_size_gib > 0:
            lines.append(f"    {host_tier_line(r)}")
        lines += [f"    {line}" for line in r.class_slo_lines]
        if r.measure_line:
            lines.append(f"    {r.measure_line}")
        if r.warning:
            lines.append(f"    WARNING: {r.warning}")
        if r.comparison_warning:
            lines.append(f"    WARNING: {r.comparison_warning}")
    return lines


def host_tier_line(r: VariantMemory) -> str:
    """The host tier of one variant with KV offload on: the instance's host memory, what each engine has
    left, what the offload pins and holds, and the largest offload that fits."""
    engines = "the engine's" if r.host_engines == 1 else f"{r.host_engines} engines x"
    return (
        f"host tier: {r.host_memory_gib} GiB - OS {r.host_os_reserve_gib:g} - {engines} (processes "
        f"{r.host_engine_process_gib:g} + {r.host_cpu_lora_slots} CPU LoRA slots {r.host_cpu_lora_gib:.2f}) = "
        f"{r.host_available_gib:.2f} GiB per engine; KV offload ({r.kv_offloading_backend}) "
        f"{r.kv_offloading_size_gib:g} GiB pins {r.kv_offloading_pinned_gib:g} GiB and holds "
        f"{r.kv_offloading_tokens:,} tokens (the GPU's: {r.kv_tokens:,}); at most {r.kv_offloading_fits_gib:g} GiB fits"
    )
