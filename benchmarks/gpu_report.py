"""What gpu_serving.py prints and compares: the result tables, gateway/bare ratios, and the memory
plan's KV-cache tokens for a recorded run (so saved results are re-checked against today's plan).
"""

from __future__ import annotations

from typing import Any

from app_config.root import AppConfig
from planning.engine_memory import runtime_overhead_bytes
from planning.gpu_instances import Gpu, InstanceGpus
from planning.memory_plan import EngineMemoryInputs, ModelShape, plan_engine_memory
from serving_app.settings import Settings
from serving_contract import env


def container_environment(config: AppConfig, overrides: dict[str, str]) -> dict[str, str]:
    """The environment the stack sets on a SageMaker model for ``config`` (the parts that do not
    need CDK; ``cdk_constructs.endpoint.container_environment`` adds only names and timeouts)."""
    variables = {
        **config.engine.environment(),
        env.ENGINE_SERVED_MODEL_NAME: config.model.name,
        env.LORA_ADAPTERS: ",".join(a.name for a in config.model.adapters),
        env.WARMUP_NUM_REQUESTS: str(config.container.warmup_num_requests),
        env.REQUEST_TIMEOUT_S: str(config.container.request_timeout_s),
        env.DRAIN_TIMEOUT_S: str(config.container.drain_timeout_s),
        env.STARTUP_TIMEOUT_S: "900",
        env.ENDPOINT_NAME: "gpu-bench",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    return {**variables, **overrides}


VLLM_CUDAGRAPH_DEFAULTS = {
    env.ENGINE_CUDAGRAPH_MEMORY_ESTIMATE: "true",
    # min(2 x max_num_seqs, 512) with the default 128 sequences (vllm/config/vllm.py).
    env.ENGINE_MAX_CUDAGRAPH_CAPTURE_SIZE: "256",
}
"""The engine's CUDA-graph settings before they became settings of ours: vLLM 0.22's defaults.
A result without ``"engine_defaults": "container"`` was recorded with these."""


def plan_of(result: dict[str, Any]) -> int | None:
    """The current memory plan for a recorded run's GPU, model and settings (None on a CPU)."""
    if "gpu_memory_mib" not in result or "model" not in result:
        return None
    config = AppConfig()
    overrides = result["env"]
    if result.get("engine_defaults") != "container":
        # Recorded before 2026-11-25, when the container passed vLLM's own CUDA-graph defaults.
        overrides = {**VLLM_CUDAGRAPH_DEFAULTS, **overrides}
    settings = Settings.from_env(container_environment(config, overrides))
    return planned_kv_tokens(result["model"], settings, result["gpu_memory_mib"], config)


def planned_kv_tokens(model: dict[str, Any], settings: Settings, memory_mib: int, config: AppConfig) -> int:
    """The memory plan's KV tokens for this GPU, model and engine settings."""
    shape = model["shape"]
    plan = plan_engine_memory(
        shape=ModelShape(
            **shape, head_dim=shape["hidden_size"] // shape["num_attention_heads"], weights_bytes=model["weights_bytes"]
        ),
        gpus=InstanceGpus(Gpu("bench", memory_mib, (9, 0), "nvidia-smi", 0.0, 0.0, 0.0, (0.0, 0.0)), 1),
        engine=EngineMemoryInputs(
            gpu_memory_utilization=settings.gpu_memory_utilization,
            tensor_parallel_size=settings.tensor_parallel_size,
            max_model_len=settings.max_model_len,
            max_num_seqs=settings.max_num_seqs,
            block_size=settings.block_size,
            kv_cache_dtype=settings.kv_cache_dtype,
            lora_enabled=bool(settings.lora_adapters),
            max_loras=settings.max_loras,
            max_lora_rank=settings.max_lora_rank,
        ),
        runtime_overhead_bytes=runtime_overhead_bytes(
            config.memory_plan, cudagraph_memory_estimate=settings.cudagraph_memory_estimate
        ),
        typical_sequence_tokens=config.memory_plan.typical_sequence_tokens,
    )
    return plan.kv_tokens


def _ms(value: float | None, spec: str = ",.1f") -> str:
    """A figure in ms; ``-`` where the level had no sample for it (serving_load's percentiles are then null)."""
    return "-" if value is None else format(value, spec)


def format_level(level: dict[str, Any]) -> str:
    """One level (``LevelResult.to_json()``) on one line: req/s, tok/s, latency and TTFT in ms, errors."""

    mode = "stream" if level["stream"] else "sync"
    return (
        f"c={level['concurrency']:<4} {mode:<6} {level['requests_per_s']:8.2f} req/s "
        f"{level['output_tokens_per_s']:9,.0f} tok/s  p50 {_ms(level['latency_p50_ms'])} "
        f"p99 {_ms(level['latency_p99_ms'])} ms  TTFT p50 {_ms(level['ttft_p50_ms'])} "
        f"p99 {_ms(level['ttft_p99_ms'])} ms  ITL {_ms(level['itl_mean_ms'])} ms  "
        f"errors {level['errors']}/{level['requests']}"
    )


def _split_ab(results: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """A/B results as two virtual setups each (``<setup>:direct``, ``<setup>:gateway``)."""
    out: list[dict[str, Any]] = []
    pairs: list[tuple[str, str]] = [("gateway", "bare"), ("gateway-4cpu", "bare-4cpu")]
    for result in results:
        if not any("target" in lv for lv in result["levels"]):
            out.append(result)
            continue
        for target in ("direct", "gateway"):
            levels = [lv for lv in result["levels"] if lv["target"] == target]
            out.append({**result, "setup": f"{result['setup']}:{target}", "levels": levels})
        pairs.append((f"{result['setup']}:gateway", f"{result['setup']}:direct"))
    return out, pairs


def report(results: list[dict[str, Any]]) -> str:
    """Markdown tables: per-level results, start-up and KV cache, and gateway/bare ratios."""
    results, pairs = _split_ab(results)
    lines = [
        "| setup | conc. | mode | req/s | out tok/s | latency p50 / p99 ms | TTFT p50 / p99 ms | ITL ms | errors |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        for lv in result["levels"]:
            ttft = "-" if lv["ttft_p50_ms"] is None else f"{lv['ttft_p50_ms']:,.1f} / {lv['ttft_p99_ms']:,.1f}"
            itl = "-" if lv["itl_mean_ms"] is None else f"{lv['itl_mean_ms']:.2f}"
            lines.append(
                f"| {result['setup']} | {lv['concurrency']} | {'stream' if lv['stream'] else 'sync'} | "
                f"{lv['requests_per_s']:.2f} | {lv['output_tokens_per_s']:,.0f} | "
                f"{_ms(lv['latency_p50_ms'], ',.0f')} / {_ms(lv['latency_p99_ms'], ',.0f')} | {ttft} | {itl} | "
                f"{lv['errors']}/{lv['requests']} |"
            )
    lines += [
        "",
        "| setup | compile cache (vLLM) | ready s | vLLM init s | torch.compile s | kernel | KV tokens (vLLM) "
        "| KV tokens (plan) | plan / vLLM |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    for result in results:
        vllm = result.get("vllm", {})
        reported, planned = vllm.get("kv_cache_tokens"), plan_of(result)
        ratio = f"{planned / reported:.3f}" if reported and planned else "-"
        cache = "hit" if vllm.get("compile_cache_hit") else "miss" if "torch_compile_s" in vllm else "-"
        lines.append(
            f"| {result['setup']} | {cache} | {result.get('ready_s', '-')} | "
            f"{vllm.get('init_engine_s', '-')} | {vllm.get('torch_compile_s', '-')} | {vllm.get('kernel', '-')} | "
            f"{_count(reported)} | {_count(planned)} | {ratio} |"
        )
    by_name = {r["setup"]: r for r in results}
    for gateway_name, bare_name in pairs:
        gateway, bare = by_name.get(gateway_name), by_name.get(bare_name)
        if not gateway or not bare:
            continue
        lines += [
            "",
            f"{gateway_name} vs {bare_name}: throughput ratio and TTFT p50 difference",
            "",
            "| conc. | mode | req/s ratio | TTFT p50 +ms |",
            "|---:|---|---:|---:|",
        ]
        bare_levels = {(lv["concurrency"], lv["stream"]): lv for lv in bare["levels"]}
        for lv in gateway["levels"]:
            base = bare_levels.get((lv["concurrency"], lv["stream"]))
            if not base:
                continue
            throughput = lv["requests_per_s"] / base["requests_per_s"] if base["requests_per_s"] else float("nan")
            ttft = (
                f"{lv['ttft_p50_ms'] - base['ttft_p50_ms']:+.2f}"
                if lv["ttft_p50_ms"] is not None and base["ttft_p50_ms"] is not None
                else "-"
            )
            lines.append(
                f"| {lv['concurrency']} | {'stream' if lv['stream'] else 'sync'} | {throughput:.3f} | {ttft} |"
            )
    return "\n".join(lines)


def _count(value: float | None) -> str:
    return "-" if value is None else f"{int(value):,}"
