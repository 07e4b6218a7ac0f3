"""Open-loop conversations against one bare vLLM engine with the container's argv (issue 45).

Conversations of MangaAssist's shape (``conversations.RequestShape``: 600 shared + 1,400
conversation tokens, 40 per user turn, 180-token answers, 4.2 turns) arrive as a Poisson process
at stepped request rates; between a turn's answer and the next turn the user pauses an
exponential time of mean ``--think-s``. The schedule is ``cli_support/open_loop.py``; here are
the engine, the transport (vLLM's ``/v1/completions`` with token ids, the history carried
exactly) and the engine's own gauges and counters, read from ``/metrics`` every second: KV-cache
usage, requests running and waiting, preemptions, prefix-cache queries and hits.

Per step the result holds TTFT p50/p95 per request class (cold/warm by vLLM's cached-token
count, as the gateway classifies), the cold share, the prefix-cache hit rate, KV usage,
preemptions and the conversations alive; per ramp the highest rate at which each class held its
SLO (config ``slo``) and the rate of the collapse. Raw requests go into the JSON too, so the
capacity model (``planning/engine_model.py``) can be refitted without a GPU.

Modes::

    # one engine, kept running in its own session (drive it from later device calls)
    setsid python benchmarks/open_loop.py serve --model-dir /root/model --out-dir /root/ol \\
        --kv-cache-tokens 111104 --server-cpus 0-3 &
    python benchmarks/open_loop.py probes --base-url http://127.0.0.1:18180 --out-dir /root/ol
    python benchmarks/open_loop.py ramp --base-url http://127.0.0.1:18180 --out-dir /root/ol \\
        --think-s 4 --rates 240,320,400,480 --settle-s 15 --measure-s 25 --name think4
    # vLLM's CPU build and the tiny model, seconds (CI: tests/engine/test_open_loop_smoke.py)
    python benchmarks/open_loop.py ramp --smoke --out-dir /tmp/ol
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "container"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp

from app_config.root import AppConfig
from cdk_constructs.capacity_job.runtime.sweep import Sweep, result_json, sweep, wait_idle
from cli_support.argtypes import cpu_set, int_in, non_negative_float, positive_float, positive_float_list
from cli_support.conversation_workload import TOKEN_ID_RANGE, RequestShape, completion_body
from cli_support.open_loop import (
    format_step,
)
from cli_support.sse import timed_json_events
from gpu_serving import GPU, SMOKE, prepare_model, use_cpu_engine_shim
from serving_contract.request_classes import RequestClass

SLO = AppConfig().slo
SMOKE_SHAPE = RequestShape(shared_prefix_tokens=32, conversation_tokens=48, turn_tokens=8, output_tokens=8)
KV_BYTES_PER_TOKEN = 32 * 8 * 128 * 2 * 2
"""Llama-3-8B's fp16 KV cache per token (CONVENTIONS.md: 32 layers x 8 KV heads x 128 x K,V x 2
bytes = 128 KiB): ``--kv-cache-tokens`` becomes ``--kv-cache-memory-bytes`` with it."""

PROBE_SIZES = [64, 512, 1024, 2048, 3072]
"""Uncached prompt tokens of the one-request probes: a follow-up's new turn up to a long history."""
SMOKE_PROBE_SIZES = [64, 256]


def run_ramp(args: argparse.Namespace, base_url: str, shape: RequestShape, adapters: list[str]) -> dict[str, Any]:
    """One ramp on the engine at ``base_url``; the result (also written to ``--out-dir/<name>.json``)."""
    slo = {"cold": args.cold_ttft_slo_ms, "warm": args.warm_ttft_slo_ms}
    settings = Sweep(
        rates_per_min=args.rates,
        settle_s=args.settle_s,
        measure_s=args.measure_s,
        think_s=args.think_s,
        slo_ms=slo,
        warm_min_cached_fraction=SLO.warm_min_cached_fraction,
        stop_factor=args.stop_factor,
        drain_s=args.drain_s,
        seed=args.seed,
        warm_start=args.warm_start,
        first_settle_s=args.first_settle_s,
        invoke_path=args.invoke_path,
        metrics_url=args.metrics_url,
    )
    partial = Path(args.out_dir, f"{args.name}.partial.json")

    def keep_steps(summaries: list[Any]) -> None:
        # The steps measured so far, rewritten after each but the last (the ramp ends there and
        # writes the final JSON, with every request): a ramp the device call's end cuts off still
        # leaves its finished steps.
        steps = {"kind": "open_loop_partial", "think_s": args.think_s, "kv_cache_tokens": args.kv_cache_tokens}
        partial.write_text(json.dumps({**steps, "slo_ms": slo, "summaries": [s.to_json() for s in summaries]}))

    swept = sweep(base_url, shape, adapters, settings, log=lambda line: print(line, flush=True), on_step=keep_steps)
    result = {
        "kind": "open_loop",
        "invoke_path": args.invoke_path,
        "warm_start": args.warm_start,
        "kv_cache_tokens": args.kv_cache_tokens,
        "shape": shape.__dict__,
        "mean_prompt_tokens": shape.mean_prompt_tokens,
        "adapters": adapters,
        "slo_ms": slo,
        "warm_min_cached_fraction": settings.warm_min_cached_fraction,
        **result_json(swept),
    }
    if args.engine_info:
        result["engine"] = json.loads(Path(args.engine_info).read_text())
    out = Path(args.out_dir, f"{args.name}.json")
    out.write_text(json.dumps(result))
    for summary in swept.summaries:
        print(format_step(summary), flush=True)
    print(f"{args.name}: verdict {result['verdict']} -> {out}", flush=True)
    return result


def one_request_ttft(base_url: str, adapters: list[str], sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    """TTFT of one request at a time with ``size`` uncached prompt tokens, per adapter round-robin:
    the fixed part and the per-token prefill (+ LoRA) cost on this GPU, nothing queued."""
    rng = random.Random(5)
    rows = []

    async def go() -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
            for size in sizes:
                for index in range(repeats):
                    body = completion_body(
                        adapters[index % len(adapters)], [rng.randrange(*TOKEN_ID_RANGE) for _ in range(size)], 2
                    )
                    started = time.perf_counter()
                    ttft = None
                    async with session.post(base_url + "/v1/completions", json=body) as response:
                        async for arrived, payload in timed_json_events(response.content.iter_any(), time.perf_counter):
                            if ttft is None and any(c.get("token_ids") for c in payload.get("choices") or ()):
                                ttft = arrived - started
                    rows.append({"prompt_tokens": size, "ttft_ms": None if ttft is None else round(ttft * 1000, 2)})

    asyncio.run(go())
    return rows


def probes(args: argparse.Namespace, base_url: str, adapters: list[str]) -> dict[str, Any]:
    """The model's parts on this GPU: one-request TTFT against uncached tokens, prefill rate, decode steps."""
    import engine_probes  # noqa: PLC0415 (imports conversations' aiohttp stack; only here)

    url = base_url + "/v1/completions"
    wait_idle(base_url + "/metrics")
    result: dict[str, Any] = {
        "kind": "open_loop_probes",
        "one_request": one_request_ttft(
            base_url, adapters, SMOKE_PROBE_SIZES if args.smoke else PROBE_SIZES, args.repeats
        ),
        "probes": [],
    }
    prompt = SMOKE_PROBE_SIZES[-1] if args.smoke else 2048
    for probe in (
        engine_probes.prefill(url, adapters, batch=16, prompt_tokens=prompt),
        *(engine_probes.decode(url, adapters, batch=b, prompt_tokens=prompt, output_tokens=128) for b in (1, 8, 32)),
    ):
        result["probes"].append(probe.to_json())
        print(f"probe {probe}", flush=True)
    if args.engine_info:
        result["engine"] = json.loads(Path(args.engine_info).read_text())
    Path(args.out_dir, f"{args.name}.json").write_text(json.dumps(result, indent=1))
    return result


def serve(args: argparse.Namespace, profile: Any) -> None:
    """Start one engine with the container's argv and a fixed KV cache, warm it up, write its
    figures to ``--out-dir/engine.json``, then hold it until SIGTERM."""
    from gpu_capacity import start_engines  # noqa: PLC0415 (gpu_capacity parses its own CLI constants)

    [server] = start_engines(args, profile, 1, [args.server_cpus], engine_args(args), kind=server_kind(args))
    info = {
        "base_url": server.base_url,
        "engine_url": f"http://127.0.0.1:{server.engine_port}",
        "kind": server.kind,
        "server_cpus": args.server_cpus,
        "extra_vllm_args": args.extra_vllm_args,
        "pid": server.process.pid,
        "ready_s": server.ready_s,
        **server.figures,
    }
    Path(args.out_dir, "engine.json").write_text(json.dumps(info, indent=1))
    print(f"engine ready: {info}", flush=True)

    def stop(*_: object) -> None:
        server.stop()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        while server.process.poll() is None:
            time.sleep(1)
    finally:
        server.stop()


def engine_args(args: argparse.Namespace) -> list[str]:
    """vLLM flags beyond the container's argv: the fixed KV cache and ``--extra-vllm-args``."""
    extra = ["--kv-cache-memory-bytes", str(args.kv_cache_tokens * KV_BYTES_PER_TOKEN)] if args.kv_cache_tokens else []
    return extra + shlex.split(args.extra_vllm_args or "")


def server_kind(args: argparse.Namespace) -> str:
    """``gateway`` (the container's entrypoint in front of the engine) or ``bare``."""
    return "gateway" if args.gateway else "bare"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="open_loop.py", description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=("serve", "ramp", "probes"))
    p.add_argument("--smoke", action="store_true", help="vLLM's CPU build, tiny model, seconds of load")
    p.add_argument("--out-dir", default="open-loop-results")
    p.add_argument("--name", help="result file name (default: the mode)")
    p.add_argument("--model-dir", help="reuse a model made earlier (default: <out-dir>/model, made if absent)")
    p.add_argument("--base-url", help="drive this running engine (default: start one for the run)")
    p.add_argument("--engine-info", help="the serve mode's engine.json, copied into the result")
    p.add_argument("--kv-cache-tokens", type=int_in(1), help="fix the KV cache (default: vLLM's own sizing)")
    p.add_argument("--gpu-memory-utilization", type=positive_float)
    p.add_argument("--server-cpus", help="CPU set of the engine, e.g. 0-3 (an ml.g5.xlarge has 4 vCPUs)")
    p.add_argument("--client-cpus", type=cpu_set, help="CPU set of this load generator")
    p.add_argument("--port", type=int_in(1, 65535), default=18180)
    p.add_argument(
        "--gateway", action="store_true", help="the container's gateway in front of the engine, on the same CPU set"
    )
    p.add_argument(
        "--extra-vllm-args", help="vLLM flags appended to the container's argv, e.g. '--kv-offloading-size 40'"
    )
    p.add_argument(
        "--invoke-path",
        default="/v1/completions",
        choices=("/v1/completions", "/invocations"),
        help="ramp: where turns go (/invocations through a gateway)",
    )
    p.add_argument("--metrics-url", help="ramp: the engine's Prometheus text (default <base-url>/metrics)")
    p.add_argument(
        "--warm-start",
        action="store_true",
        help="ramp: start with the conversations a steady past at the first rate leaves alive",
    )
    p.add_argument("--think-s", type=non_negative_float, default=4.0, help="mean pause between turns, s")
    p.add_argument("--rates", type=positive_float_list(increasing=True), help="offered requests per minute, per step")
    p.add_argument("--settle-s", type=non_negative_float, default=15.0, help="unmeasured seconds per step")
    p.add_argument("--measure-s", type=positive_float, default=25.0, help="measured seconds per step")
    p.add_argument("--first-settle-s", type=non_negative_float, help="the first step's unmeasured seconds")
    p.add_argument("--drain-s", type=non_negative_float, default=20.0, help="seconds in-flight requests get at the end")
    p.add_argument("--stop-factor", type=positive_float, default=4.0, help="stop past p95 >= this x the highest SLO")
    p.add_argument("--repeats", type=int_in(1), default=6, help="probes: requests per prompt size")
    p.add_argument("--seed", type=int, default=45)
    for klass in ("cold", "warm"):
        p.add_argument(f"--{klass}-ttft-slo-ms", type=positive_float, default=SLO.of(RequestClass(klass)).ttft_p95_ms)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    profile = SMOKE if args.smoke else GPU
    shape = SMOKE_SHAPE if args.smoke else RequestShape()
    if args.smoke:
        use_cpu_engine_shim()
        args.rates = args.rates or [30.0, 60.0]
        args.settle_s, args.measure_s = min(args.settle_s, 2.0), min(args.measure_s, 6.0)
        args.think_s, args.drain_s = min(args.think_s, 0.5), min(args.drain_s, 60.0)
    args.rates = args.rates or [240.0, 320.0, 400.0, 480.0, 560.0, 640.0]
    args.name = args.name or args.mode
    if args.client_cpus:
        os.sched_setaffinity(0, args.client_cpus)
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    adapters = [a.name for a in AppConfig().model.adapters]
    if args.mode == "serve":
        prepare_model(args, profile)
        serve(args, profile)
        return 0
    if args.base_url:
        (run_ramp if args.mode == "ramp" else lambda a, u, s, ad: probes(a, u, ad))(
            args, args.base_url, shape, adapters
        )
        return 0
    from gpu_capacity import start_engines  # noqa: PLC0415

    prepare_model(args, profile)
    [server] = start_engines(args, profile, 1, [args.server_cpus], engine_args(args), kind=server_kind(args))
    try:
        if args.mode == "ramp":
            if args.gateway:
                args.invoke_path = "/invocations"
                args.metrics_url = f"http://127.0.0.1:{server.engine_port}/metrics"
            run_ramp(args, server.base_url, shape, adapters)
        else:
            probes(args, server.base_url, adapters)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
