"""The LoRA levers of issue 35 side by side on one GPU: TTFT and capacity with adapters vs base only.

One bare engine at a time with the container's argv (``gpu_capacity.start_engines``: CPUs of an
ml.g5.xlarge, the memory plan's KV cache for it), plus each configuration's flags and
environment; the same warm-up the container runs before ``/ping`` (short chats through every
adapter, then a prefill-sized prompt through every adapter and the base model); then closed-loop
levels of ``fresh`` requests at MangaAssist's request shape (``RequestShape``), adapters
round-robin and, for configurations named with ``--reference``, every request to the base
model, level by level alternately so drift falls on both alike.

Levers (joined with ``+`` in a configuration's name, e.g. ``max3+tuned``):

``max3``      ``--max-loras 3`` (the adapters served) instead of the config's 4
``tuned``     ``VLLM_TUNED_CONFIG_FOLDER=--tuned-dir`` (``lora_tune.py``'s output)
``spec``      ``--specialize-active-lora`` (kernel grid and CUDA graphs by active adapter count)
``dual``      ``VLLM_LORA_ENABLE_DUAL_STREAM=1`` (LoRA on a second CUDA stream beside the base GEMM)
``base``      nothing: the container's argv as it is

Also recorded per engine: vLLM's "Triton kernel JIT compilation during inference" warnings
logged after the warm-up (issue 35: none may appear once ``/ping`` is green).

Usage (GPU; vLLM 0.26 on PYTHONPATH, model made by ``gpu_session.sh install``)::

    python benchmarks/lora_levers.py --model-dir /root/model --out-dir /root/out --tuned-dir /root/lora \\
        --configs base,max3,max3+tuned --reference base --server-cpus 0-3 --client-cpus 4-15
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for path in (HERE, HERE.parent, HERE.parent / "container", HERE.parent / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from app_config.root import AppConfig  # noqa: E402
from cli_support.argtypes import cpu_set, int_in, non_negative_float, positive_float  # noqa: E402
from cli_support.conversation_workload import RequestShape  # noqa: E402
from conversations import LevelSummary, format_summary, prefill_warm_up, run_level, warm_up  # noqa: E402
from gpu_capacity import at_slo, start_engines  # noqa: E402
from gpu_report import container_environment  # noqa: E402
from gpu_serving import GPU  # noqa: E402
from servers_under_test import ServerRun, jit_lines, start, stop_servers_on_sigterm, triton_cache_entries  # noqa: E402
from serving_contract import env  # noqa: E402

KV_CACHE_BYTES = 14403239936
"""An ml.g5.xlarge's KV cache in the memory plan (109,888 tokens; ../shared/measurements, 2026-11-26)."""
LEVERS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "base": ((), {}),
    "max3": (("--max-loras", "3"), {}),
    "spec": (("--specialize-active-lora",), {}),
    "dual": ((), {"VLLM_LORA_ENABLE_DUAL_STREAM": "1"}),
    "tuned": ((), {"VLLM_TUNED_CONFIG_FOLDER": "<tuned>"}),
}


def lever_setup(name: str, tuned_dir: str | None) -> tuple[list[str], dict[str, str]]:
    """Flags and environment of configuration ``name`` (levers joined with '+')."""
    args: list[str] = []
    environ: dict[str, str] = {}
    for part in name.split("+"):
        if part not in LEVERS:
            raise SystemExit(f"--configs: lever {part!r} in {name!r}; allowed: {', '.join(LEVERS)}")
        flags, env = LEVERS[part]
        args += flags
        for key, value in env.items():
            if value == "<tuned>" and not tuned_dir:
                raise SystemExit(f"--configs: {name!r} needs --tuned-dir")
            environ[key] = tuned_dir if value == "<tuned>" and tuned_dir else value
    return args, environ


def _start_server(args: argparse.Namespace, name: str, kv_args: list[str]) -> tuple[ServerRun, str]:
    """The engine of configuration ``name``, ready, and the URL the load goes to (vLLM itself)."""
    if args.gateway:
        # The container itself: its argv and engine environment, its warm-up (prefill included)
        # before /ping; the load then goes straight to vLLM, as in the bare runs.
        overrides = {env.ENGINE_GPU_MEMORY_UTILIZATION: f"{args.gpu_memory_utilization:g}"}
        if args.tuned_dir and "tuned" in name.split("+"):
            overrides[env.LORA_TUNED_CONFIG_DIR] = args.tuned_dir
        server = start(
            name="gateway",
            kind="gateway",
            settings_env=container_environment(AppConfig(), overrides),
            model_root=Path(args.model_dir),
            port=args.port,
            engine_port=args.port + 1,
            log_dir=Path(args.log_dir),
            cpus=args.server_cpus,
            extra_args=kv_args,
        )
        server.wait_ready(GPU.ready_timeout_s)
        return server, f"http://127.0.0.1:{server.engine_port}"
    ns = argparse.Namespace(
        gpu_memory_utilization=args.gpu_memory_utilization,
        model_dir=args.model_dir,
        out_dir=args.log_dir,
        port=args.port,
    )
    [server] = start_engines(ns, GPU, 1, [args.server_cpus], kv_args)
    return server, server.base_url


def run_config(args: argparse.Namespace, name: str, adapters: list[str], base_name: str) -> dict[str, Any]:
    """Start one engine with configuration ``name``, warm it, sweep the levels; return the results."""
    extra_args, extra_env = lever_setup(name, args.tuned_dir)
    if args.gateway:  # the container passes the tuned folder itself (LORA_TUNED_CONFIG_DIR)
        extra_env.pop("VLLM_TUNED_CONFIG_FOLDER", None)
    os.environ.update(extra_env)  # start() passes os.environ to the engine
    label = name.replace("+", "_")
    result: dict[str, Any] = {"config": name, "extra_args": extra_args, "extra_env": extra_env}
    started = time.monotonic()
    server, url = _start_server(args, name, ["--kv-cache-memory-bytes", str(args.kv_cache_bytes), *extra_args])
    final_log = Path(args.log_dir, f"{label}.log")
    try:
        result["ready_s"] = server.ready_s
        result["vllm"] = server.figures
        result["jit_before_prefill_warmup"] = jit_lines(server.log_path)
        if not args.no_prefill_warmup and not args.gateway:
            result["prefill_warmup"] = prefill_warm_up(url, [*adapters, base_name])
        if not args.gateway:
            warm_up(url, adapters)
        result["jit_at_ready"] = jit_lines(server.log_path)
        result["triton_cache_at_ready"] = triton_cache_entries()
        result["start_s"] = round(time.monotonic() - started, 1)
        sweeps: list[tuple[str, list[str]]] = [("adapters", adapters)]
        if name in args.reference:
            sweeps.append(("base_only", [base_name]))
        for key, _ in sweeps:
            result[key] = []
        for index, concurrency in enumerate(args.levels):
            order = sweeps if index % 2 == 0 else list(reversed(sweeps))
            for key, models in order:
                level = run_level(
                    [url],
                    RequestShape(),
                    models,
                    label=f"{label}:{key}",
                    mode="fresh",
                    route="least_outstanding",
                    concurrency=concurrency,
                    seconds=args.seconds,
                    seed=1000 * (index + 1),
                    warmup_s=args.warmup_s,
                )
                result[key].append(level.to_json())
                print(format_summary(level), flush=True)
                _save(args, name, result)
        for key, _ in sweeps:
            result[f"{key}_at_slo"] = at_slo([LevelSummary(**lv) for lv in result[key]], args.ttft_slo_ms)
        after = jit_lines(server.log_path)
        result["jit_after_ready"] = after[len(result["jit_at_ready"]) :]
        result["triton_compiles_after_ready"] = triton_cache_entries() - result["triton_cache_at_ready"]
    finally:
        server.stop()
        for key in extra_env:
            os.environ.pop(key, None)
        if server.log_path.exists():
            server.log_path.rename(final_log)
    _save(args, name, result)
    return result


def _save(args: argparse.Namespace, name: str, result: dict[str, Any]) -> None:
    path = Path(args.out_dir, "lora-levers.json")
    data = json.loads(path.read_text()) if path.exists() else {"shape": RequestShape().__dict__, "configs": {}}
    data["configs"][name] = result
    data["kv_cache_memory_bytes"] = args.kv_cache_bytes
    path.write_text(json.dumps(data, indent=1))


def summary_line(name: str, result: dict[str, Any]) -> str:
    """``name``: TTFT p50 at c=1, capacity at the SLO, and the ratios to base only where measured."""

    def first(key: str) -> float | None:
        levels = result.get(key) or []
        return levels[0]["ttft_p50_ms"] if levels else None

    parts = [f"{name:<22} ready {result.get('ready_s')} s"]
    if result.get("error"):
        return f"{name:<22} error: {result['error']}"
    for key in ("adapters", "base_only"):
        if result.get(key):
            slo = result.get(f"{key}_at_slo", {})
            parts.append(
                f"{key}: c=1 TTFT p50 {first(key)} ms, "
                f"at SLO c={slo.get('concurrency')} {slo.get('requests_per_min')}/min"
            )
    if result.get("base_only") and result.get("adapters"):
        a, b = first("adapters") or float("nan"), first("base_only") or float("nan")
        ra = result["adapters_at_slo"]["requests_per_min"]
        rb = result["base_only_at_slo"]["requests_per_min"]
        parts.append(f"ratio TTFT {a / b:.2f}x capacity {ra / rb if rb else float('nan'):.2f}x")
    parts.append(
        f"JIT after ready {result.get('jit_after_ready')} "
        f"new Triton kernels {result.get('triton_compiles_after_ready')}"
    )
    return " | ".join(parts)


def main(argv: list[str] | None = None) -> int:
    stop_servers_on_sigterm()
    parser = argparse.ArgumentParser(prog="lora_levers.py", description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--out-dir", required=True, help="lora-levers.json goes here")
    parser.add_argument("--log-dir", help="engine logs (default: --out-dir)")
    parser.add_argument("--tuned-dir", help="lora_tune.py's output folder (lever 'tuned')")
    parser.add_argument("--configs", default="base,max3,max3+tuned", help="comma-separated; levers joined with '+'")
    parser.add_argument("--reference", default="base", help="configs that also run every request to the base model")
    parser.add_argument("--levels", default="1,4,8,12,16", help="concurrency levels, increasing")
    parser.add_argument("--seconds", type=positive_float, default=8.0, help="measured seconds per level")
    parser.add_argument("--warmup-s", type=non_negative_float, default=2.0, help="unmeasured seconds before each level")
    parser.add_argument(
        "--ttft-slo-ms",
        type=positive_float,
        default=AppConfig().slo.cold.ttft_p95_ms,
        help="TTFT p95 objective of the fresh (cold) requests, ms (default: the config's slo.cold.ttft_p95_ms)",
    )
    parser.add_argument("--gpu-memory-utilization", type=positive_float, default=None)
    parser.add_argument("--kv-cache-bytes", type=int_in(1), default=KV_CACHE_BYTES)
    parser.add_argument("--server-cpus", default="0-3")
    parser.add_argument("--client-cpus", type=cpu_set, help="CPU set of this load generator (taskset semantics)")
    parser.add_argument("--no-prefill-warmup", action="store_true", help="the old warm-up only (short chats)")
    parser.add_argument(
        "--gateway",
        action="store_true",
        help="start the container (serving_app serve: its defaults, argv and warm-up) instead of bare vLLM; "
        "'tuned' then sets LORA_TUNED_CONFIG_DIR",
    )
    parser.add_argument("--port", type=int_in(1, 65535), default=18280)
    args = parser.parse_args(argv)
    args.levels = [int(x) for x in args.levels.split(",")]
    args.reference = set(filter(None, args.reference.split(",")))
    args.log_dir = args.log_dir or args.out_dir
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    Path(args.log_dir).mkdir(parents=True, exist_ok=True)
    if args.client_cpus:
        os.sched_setaffinity(0, args.client_cpus)
    config = AppConfig()
    adapters = [a.name for a in config.model.adapters]
    names = [n for n in args.configs.split(",") if n]
    for name in names:
        lever_setup(name, args.tuned_dir)  # refuse a bad name before any engine starts
    results = {}
    for name in names:
        print(f"== {time.strftime('%T')} {name}", flush=True)
        try:
            results[name] = run_config(args, name, adapters, config.model.name)
        except (RuntimeError, TimeoutError, OSError) as exc:  # an engine that fails to start or dies
            results[name] = {"config": name, "error": f"{exc.__class__.__name__}: {exc}"[:500]}
            _save(args, name, results[name])
        print(summary_line(name, results[name]), flush=True)
    print("\nsummary")
    for name, result in results.items():
        print(summary_line(name, result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
