"""Capacity of one engine at MangaAssist's request shape, and of several behind a router (issues 23, 26).

Runs on one NVIDIA GPU with the image's vLLM 0.26.0, no network, no model download:

``capacity``
    one bare vLLM with exactly the container's argv (at ``--gpu-memory-utilization`` 0.26 an
    H100's KV budget is an ml.g5.xlarge's), confined to ``--server-cpus`` (an ml.g5.xlarge has
    4 vCPUs); then

    1. the probes of ``engine_probes.py`` (prefill rate; decode step time at several batch
       sizes and contexts), which the GPU model (``devtools/gpu_capacity``) is fitted to;
    2. a closed-loop sweep of concurrency with ``fresh`` requests (only the shared system
       prefix can hit the prefix cache: an engine behind least-outstanding routing over many
       instances) and one with whole ``conversations`` on the engine (session affinity's best
       case), ``conversations.py`` has the request shape;
    3. the largest concurrency whose TTFT p95 holds ``--ttft-slo-ms`` (seed 002: 500 ms) and
       the requests per minute there, for each sweep; and per request class (cold/warm, from
       vLLM's cached prompt tokens, as the gateway classifies) at that class's objective
       (``--cold-ttft-slo-ms``/``--warm-ttft-slo-ms``, defaults from the config's ``slo``).

``sessions``
    ``--engines`` bare engines on the same GPU, each on its own CPU set, loaded with whole
    conversations routed by least outstanding requests, then with session affinity, at the
    same users per engine: prefix-cache hit rate, TTFT of follow-up turns, the share of
    follow-ups that reached their conversation's previous engine, throughput. Each engine's KV
    cache is fixed at the memory plan's for the primary variant's instance type
    (``--kv-cache-memory-bytes``; vLLM's memory profiling would count the other engines'
    allocations as its own when they start together), and users pause ``--think-s`` on average
    between turns (``conversations.py`` says why the comparison needs it).

Every result goes to ``--out-dir/<name>.json`` as soon as it is done.

Usage::

    python benchmarks/gpu_capacity.py capacity --model-dir /root/model --out-dir /root/out
    python benchmarks/gpu_capacity.py sessions --engines 3 --model-dir /root/model --out-dir /root/out
    python benchmarks/gpu_capacity.py capacity --smoke --out-dir /tmp/cap   # vLLM's CPU build, seconds
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "container"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_probes
from app_config.root import AppConfig
from cli_support.argtypes import cpu_set, int_in, int_list, non_negative_float, positive_float
from cli_support.conversation_workload import RequestShape, Route
from conversations import LevelSummary, Mode, format_summary, prefill_warm_up, run_level, warm_up
from gpu_report import container_environment
from gpu_serving import GPU, SMOKE, Profile, gpu_total_mib, prepare_model, use_cpu_engine_shim
from planning.planner import Planner
from servers_under_test import ServerRun, jit_lines, start, stop_servers_on_sigterm
from serving_app.lifecycle.warmup import prefill_sizes
from serving_app.settings import Settings
from serving_contract import env, lifecycle
from serving_contract.request_classes import RequestClass

SLO = AppConfig().slo
"""The SLO the alarms hold, from the one declaration (config ``slo``; seed 002: TTFT p95 <= 500 ms)."""
THINK_S = 4.0
"""Mean pause between turns in ``sessions``, seconds: about one answer's own time (180 tokens at
the 20-25 ms per token three engines on one GPU measured), so other conversations' turns reach
the engines in between. Compressed: a real user reads and types for longer, which only spreads
follow-ups further under least outstanding; no seed gives a figure."""

FRESH_LEVELS = (1, 2, 4, 6, 8, 12, 16, 24, 32, 41)
CONVERSATION_LEVELS = (1, 4, 8, 12, 16, 24, 32)
SMOKE_LEVELS = (1, 2)
SMOKE_SHAPE = RequestShape(shared_prefix_tokens=32, conversation_tokens=48, turn_tokens=8, output_tokens=8)


def start_engines(
    args: argparse.Namespace,
    profile: Profile,
    count: int,
    cpu_sets: Sequence[str | None],
    extra_args: Sequence[str] = (),
    *,
    kind: str = "bare",
) -> list[ServerRun]:
    """``count`` engines with the container's argv (plus ``extra_args``), one port pair each; waits for all.

    ``kind`` ``gateway`` puts the container's entrypoint in front of each (the gateway and its
    engine share the CPU set, as they share an instance's vCPUs); the warm-ups then go straight to
    the engine's port."""
    config = AppConfig()
    overrides = dict(profile.engine_env)
    if args.gpu_memory_utilization:
        overrides[env.ENGINE_GPU_MEMORY_UTILIZATION] = f"{args.gpu_memory_utilization:g}"
    settings_env = container_environment(config, overrides)
    Settings.from_env(settings_env)
    servers = []
    for index in range(count):
        servers.append(
            start(
                name=f"engine-{index}",
                kind=kind,
                settings_env=settings_env,
                model_root=Path(args.model_dir),
                # 0: ports the kernel picks, reserved until the engine stops (local_gateway.PortReservation).
                port=args.port + 2 * index if args.port else 0,
                engine_port=args.port + 2 * index + 1 if args.port else 0,
                log_dir=Path(args.out_dir),
                cpus=cpu_sets[index],
                extra_args=extra_args,
            )
        )
        if index == 0 and count > 1:
            # The first start writes the compile cache; the others then load it instead of racing.
            servers[0].wait_ready(profile.ready_timeout_s)
    for server in servers:
        server.wait_ready(profile.ready_timeout_s)
        adapters = [a.name for a in config.model.adapters]
        engine_url = f"http://127.0.0.1:{server.engine_port}"
        warm_up(engine_url, adapters)
        # The container's warm-up reaches prefill-sized LoRA batches before /ping (issue 35);
        # without this the first measured level pays Triton's JIT compile.
        tokens = int(settings_env.get(env.WARMUP_PREFILL_TOKENS) or lifecycle.WARMUP_PREFILL_TOKENS.default)
        if sizes := prefill_sizes(tokens):  # as the container sends them; () when off
            server.figures["prefill_warmup"] = prefill_warm_up(engine_url, [*adapters, config.model.name], sizes)
        server.figures["jit_at_ready"] = jit_lines(server.log_path)
        print(
            f"{server.name}: ready after {server.ready_s} s, KV tokens {server.figures.get('kv_cache_tokens')}",
            flush=True,
        )
    return servers


def at_slo(levels: Sequence[LevelSummary], slo_ms: float, request_class: str | None = None) -> dict[str, Any]:
    """The largest measured concurrency whose TTFT p95 is within ``slo_ms``, and its throughput.

    ``request_class`` (``cold`` or ``warm``): that class's TTFT p95 (a level without requests of
    the class does not limit it); None: every turn's. Levels are in increasing concurrency; the
    first level above the SLO ends the search (a noisy level further up does not count).
    """
    best: LevelSummary | None = None
    for level in levels:
        p95 = level.ttft_p95_ms if request_class is None else getattr(level, f"{request_class}_ttft_p95_ms")
        if level.errors or (p95 is not None and p95 > slo_ms):
            break
        best = level
    if best is None:
        return {"concurrency": 0, "requests_per_min": 0.0, "ttft_p95_ms": None}
    p95 = best.ttft_p95_ms if request_class is None else getattr(best, f"{request_class}_ttft_p95_ms")
    return {"concurrency": best.concurrency, "requests_per_min": best.requests_per_min, "ttft_p95_ms": p95}


def at_class_slos(levels: Sequence[LevelSummary], args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """:func:`at_slo` per request class, each at its own objective (``--cold/--warm-ttft-slo-ms``)."""
    return {klass: at_slo(levels, getattr(args, f"{klass}_ttft_slo_ms"), klass) for klass in ("cold", "warm")}


def capacity(args: argparse.Namespace, profile: Profile, shape: RequestShape, adapters: list[str]) -> dict[str, Any]:
    """Probes, then the fresh and conversation sweeps on one engine."""
    [server] = start_engines(args, profile, 1, [args.server_cpus])
    url = server.base_url
    result: dict[str, Any] = {
        "kind": "capacity",
        "shape": shape.__dict__,
        "mean_prompt_tokens": shape.mean_prompt_tokens,
        "gpu_memory_mib": None if args.smoke else gpu_total_mib(),
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "server_cpus": args.server_cpus,
        "ready_s": server.ready_s,
        "vllm": server.figures,
        # Tuned LoRA kernel configs (issue 35), when the session exported the folder.
        "tuned_config_folder": os.environ.get("VLLM_TUNED_CONFIG_FOLDER"),
        "ttft_slo_ms": args.ttft_slo_ms,
        "class_ttft_slo_ms": {"cold": args.cold_ttft_slo_ms, "warm": args.warm_ttft_slo_ms},
        "probes": [],
        "fresh": [],
        "conversations": [],
    }
    out = Path(args.out_dir, f"{args.name}.json")
    try:
        if not args.smoke:
            probes = [
                engine_probes.prefill(url + "/v1/completions", adapters, batch=32, prompt_tokens=2048),
                *(engine_probes.decode(url + "/v1/completions", adapters, batch=b) for b in (1, 16, 64)),
                engine_probes.decode(url + "/v1/completions", adapters, batch=32, prompt_tokens=2048),
            ]
            for probe in probes:
                result["probes"].append(probe.to_json())
                print(f"probe {probe}", flush=True)
        sweeps: tuple[tuple[Mode, list[int]], ...] = (
            ("fresh", args.fresh_levels),
            ("conversations", args.conversation_levels),
        )
        for mode, levels in sweeps:
            for index, concurrency in enumerate(levels):
                level = run_level(
                    [url],
                    shape,
                    adapters,
                    label=mode,
                    mode=mode,
                    route="least_outstanding",
                    concurrency=concurrency,
                    seconds=args.seconds,
                    seed=1000 * (index + 1) + (0 if mode == "fresh" else 500),
                    warmup_s=args.warmup_s,
                )
                result[mode].append(level.to_json())
                print(format_summary(level), flush=True)
                out.write_text(json.dumps(result, indent=2))
        for mode in ("fresh", "conversations"):
            summaries = [LevelSummary(**lv) for lv in result[mode]]
            result[f"{mode}_at_slo"] = at_slo(summaries, args.ttft_slo_ms)
            result[f"{mode}_at_class_slo"] = at_class_slos(summaries, args)
            print(f"{mode}: at TTFT p95 <= {args.ttft_slo_ms:g} ms: {result[f'{mode}_at_slo']}", flush=True)
            print(f"{mode}: per class at its SLO: {result[f'{mode}_at_class_slo']}", flush=True)
    finally:
        result["jit_after_ready"] = jit_lines(server.log_path)[len(server.figures["jit_at_ready"]) :]
        server.stop()
        out.write_text(json.dumps(result, indent=2))
    return result


def sessions(args: argparse.Namespace, profile: Profile, shape: RequestShape, adapters: list[str]) -> dict[str, Any]:
    """Conversations over ``--engines`` engines: least outstanding vs session affinity, per level."""
    cpu_sets = args.engine_cpus.split(";") if args.engine_cpus else [None] * args.engines
    if len(cpu_sets) != args.engines:
        raise SystemExit(f"--engine-cpus: {len(cpu_sets)} CPU sets for {args.engines} engines")
    kv_bytes = None if args.smoke else planned_kv_cache_bytes(AppConfig())
    servers = start_engines(
        args, profile, args.engines, cpu_sets, ("--kv-cache-memory-bytes", str(kv_bytes)) if kv_bytes else ()
    )
    urls = [s.base_url for s in servers]
    result: dict[str, Any] = {
        "kind": "sessions",
        "engines": args.engines,
        "engine_cpus": cpu_sets,
        "kv_cache_memory_bytes": kv_bytes,
        "think_s": args.think_s,
        "shape": shape.__dict__,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "vllm": [s.figures for s in servers],
        "ttft_slo_ms": args.ttft_slo_ms,
        "class_ttft_slo_ms": {"cold": args.cold_ttft_slo_ms, "warm": args.warm_ttft_slo_ms},
        "least_outstanding": [],
        "affinity": [],
    }
    out = Path(args.out_dir, f"{args.name}.json")
    try:
        for index, per_engine in enumerate(args.conversation_levels):
            # Alternate the order per level so drift in the GPU state falls on both routes alike.
            routes: tuple[Route, Route] = (
                ("least_outstanding", "affinity") if index % 2 == 0 else ("affinity", "least_outstanding")
            )
            for route in routes:
                level = run_level(
                    urls,
                    shape,
                    adapters,
                    label=route,
                    mode="conversations",
                    route=route,
                    concurrency=per_engine * args.engines,
                    seconds=args.seconds,
                    seed=7000 + 100 * index + (0 if route == "affinity" else 50),
                    warmup_s=args.warmup_s,
                    think_s=args.think_s,
                )
                result[route].append(level.to_json())
                print(format_summary(level), flush=True)
                out.write_text(json.dumps(result, indent=2))
        for route in ("least_outstanding", "affinity"):
            levels = [LevelSummary(**lv) for lv in result[route]]
            slo = at_slo(levels, args.ttft_slo_ms)
            slo["concurrency_per_engine"] = slo["concurrency"] / args.engines
            slo["requests_per_min_per_engine"] = slo["requests_per_min"] / args.engines
            result[f"{route}_at_slo"] = slo
            result[f"{route}_at_class_slo"] = at_class_slos(levels, args)
            print(f"{route}: at TTFT p95 <= {args.ttft_slo_ms:g} ms: {slo}", flush=True)
            print(f"{route}: per class at its SLO: {result[f'{route}_at_class_slo']}", flush=True)
    finally:
        for server in servers:
            server.stop()
        out.write_text(json.dumps(result, indent=2))
    return result


def planned_kv_cache_bytes(config: AppConfig) -> int:
    """KV-cache bytes of one engine on the primary variant's instance type (ml.g6.xlarge by
    default, 109,936 tokens; the seeds' ml.g5.xlarge plans 109,888): the memory plan's KV tokens
    x bytes per token, which the plan keeps within 10 % of what vLLM reported on the GPU
    (tests/unit/planning/test_gpu_bench_results.py)."""
    plan = Planner.of(config).memory_plan(config.serving.primary.instance_type)
    return plan.kv_tokens * plan.kv_bytes_per_token


def main(argv: list[str] | None = None) -> int:
    stop_servers_on_sigterm()
    parser = argparse.ArgumentParser(prog="gpu_capacity.py", description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("capacity", "sessions"))
    parser.add_argument("--smoke", action="store_true", help="vLLM's CPU build, tiny model, seconds of load")
    parser.add_argument("--out-dir", default="gpu-bench-results")
    parser.add_argument("--name", help="result file name (default: the mode)")
    parser.add_argument("--model-dir", help="reuse a model made earlier (default: <out-dir>/model, made if absent)")
    parser.add_argument(
        "--gpu-memory-utilization", type=positive_float, help="0.26 on an H100 = an ml.g5.xlarge's KV budget"
    )
    parser.add_argument("--server-cpus", help="CPU set of the engine (capacity), e.g. 0-3")
    parser.add_argument("--engines", type=int_in(1), default=3, help="engines on the GPU (sessions)")
    parser.add_argument("--engine-cpus", help="CPU set per engine, ';'-separated (sessions), e.g. '0-3;4-7;8-11'")
    parser.add_argument(
        "--fresh-levels", type=int_list(1, increasing=True), help=f"default {','.join(map(str, FRESH_LEVELS))}"
    )
    parser.add_argument(
        "--conversation-levels",
        type=int_list(1, increasing=True),
        help=f"per engine; default {','.join(map(str, CONVERSATION_LEVELS))}",
    )
    parser.add_argument("--seconds", type=positive_float, default=20.0, help="measured seconds per level")
    parser.add_argument("--warmup-s", type=non_negative_float, default=3.0, help="unmeasured seconds before each level")
    parser.add_argument(
        "--ttft-slo-ms",
        type=positive_float,
        default=min(SLO.cold.ttft_p95_ms, SLO.warm.ttft_p95_ms),
        help="every turn's TTFT p95 objective, ms (default: the stricter of the config's slo.<class>.ttft_p95_ms)",
    )
    for klass in ("cold", "warm"):
        parser.add_argument(
            f"--{klass}-ttft-slo-ms",
            type=positive_float,
            default=SLO.of(RequestClass(klass)).ttft_p95_ms,
            help=f"{klass} requests' TTFT p95 objective, ms (default: the config's slo.{klass}.ttft_p95_ms)",
        )
    parser.add_argument(
        "--think-s",
        type=non_negative_float,
        default=THINK_S,
        help=f"sessions: mean pause between a conversation's turns (default {THINK_S:g})",
    )
    parser.add_argument("--client-cpus", type=cpu_set, help="CPU set of this load generator (taskset semantics)")
    parser.add_argument(
        "--port",
        type=int_in(0, 65535),
        default=18180,
        help="engine i's port is PORT + 2i; 0: ports the kernel picks (the test suite's smoke)",
    )
    args = parser.parse_args(argv)

    profile = SMOKE if args.smoke else GPU
    shape = SMOKE_SHAPE if args.smoke else RequestShape()
    if args.smoke:
        use_cpu_engine_shim()
        args.seconds, args.warmup_s, args.think_s = min(args.seconds, 4.0), 0.0, min(args.think_s, 0.2)
    args.name = args.name or args.mode
    args.fresh_levels = args.fresh_levels or list(SMOKE_LEVELS if args.smoke else FRESH_LEVELS)
    args.conversation_levels = args.conversation_levels or list(SMOKE_LEVELS if args.smoke else CONVERSATION_LEVELS)
    if args.client_cpus:
        import os  # noqa: PLC0415

        os.sched_setaffinity(0, args.client_cpus)
    prepare_model(args, profile)
    adapters = [a.name for a in AppConfig().model.adapters]
    print(f"request shape {shape}: mean prompt {shape.mean_prompt_tokens:.0f} tokens", flush=True)
    started = time.monotonic()
    (capacity if args.mode == "capacity" else sessions)(args, profile, shape, adapters)
    print(f"{args.mode}: done in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
