"""GPU benchmark of the serving container against bare vLLM: throughput, TTFT, start-up, KV cache.

Runs on any Linux machine with one NVIDIA GPU and the image's pinned vLLM 0.26.0, with no
network and no model download (issue 14):

1. makes a random-weight model with Llama-3-8B-Instruct's decoder shapes in AWQ-INT4 GEMM
   format (group 128) and three rank-16 adapters with our adapter names, on the GPU
   (``synthetic_model.py``; ``--vocab-size`` cuts the 128,256-token vocabulary);
2. starts, one after another on the same GPU and model, the setups asked for: bare vLLM with
   exactly the argv the container builds (``bare``), the container's entrypoint in front of it
   (``gateway``), bare vLLM with each quantization kernel the config allows for an AWQ
   checkpoint (``bare-awq_marlin``, ``bare-awq``), and any of them confined to a CPU set
   (``bare-4cpu``, ``gateway-4cpu``: an ml.g5.xlarge has 4 vCPUs);
3. drives the OpenAI chat API (adapters round-robin, fixed prompt, exactly the profile's ``output_tokens``)
   at each concurrency, sync and streaming, bounded in requests and seconds, 127.0.0.1 only;
4. prints one table per run: requests/s, output tokens/s, p50/p99 latency and TTFT, mean
   inter-token latency, errors; time from spawn to ``/health`` (bare) or ``/ping`` (gateway);
   and the KV-cache tokens vLLM reported next to the memory plan's for the same GPU and settings.

Every setup's result is written to ``--out-dir/<setup>.json`` as soon as it is done, so a long
run can be split over several invocations; ``--report DIR`` prints the tables of saved results.
``--smoke`` runs the same code on vLLM's CPU build with a tiny model in seconds of load (the
test suite runs it, tests/engine/test_gpu_bench_smoke.py).

Usage::

    python benchmarks/gpu_serving.py --setups bare,gateway --out-dir /tmp/bench
    python benchmarks/gpu_serving.py --report /tmp/bench
    python benchmarks/gpu_serving.py --smoke --out-dir /tmp/smoke
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

# Run as a script: the benchmark's modules, then the repository and the container's code.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "container"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from app_config.root import AppConfig
from cli_support.argtypes import cpu_set, int_in, int_list, positive_float
from gpu_report import container_environment, format_level, report
from planning.gpu_instances import GIB
from servers_under_test import ServerRun, start
from serving_app.settings import Settings
from serving_contract import env
from serving_load import PROMPT, run_ab_level, run_level
from synthetic_model import PRESETS, make_model

COMPILE_CACHE = Path.home() / ".cache" / "vllm" / "torch_compile_cache"
"""vLLM 0.26's torch.compile cache (VLLM_CACHE_ROOT default, vllm/envs.py)."""


@dataclass(frozen=True)
class Setup:
    """One server configuration to measure.

    ``ab``: a gateway whose load alternates, round by round, between the gateway and its own
    vLLM (same engine, same GPU state): the gateway's cost, side by side in one run.
    """

    kind: str
    env: dict[str, str] = field(default_factory=dict)
    four_cpus: bool = False
    ab: bool = False


SETUPS = {
    "bare": Setup("bare"),
    "gateway": Setup("gateway"),
    "bare-awq_marlin": Setup("bare", {env.ENGINE_QUANTIZATION: "awq_marlin"}),
    "bare-awq": Setup("bare", {env.ENGINE_QUANTIZATION: "awq"}),
    "bare-4cpu": Setup("bare", four_cpus=True),
    "gateway-4cpu": Setup("gateway", four_cpus=True),
    "gateway-ab": Setup("gateway", ab=True),
    "gateway-ab-4cpu": Setup("gateway", four_cpus=True, ab=True),
}

AB_ROUNDS = 4
"""Rounds per level of an A/B setup (direct, gateway, gateway, direct, ...)."""


@dataclass(frozen=True)
class Profile:
    """What a run drives: GPU defaults, or the CPU smoke test's seconds of load."""

    preset: str
    vocab_size: int | None
    concurrency: tuple[int, ...]
    output_tokens: int
    requests_per_level: int
    min_requests: int
    seconds_per_level: float
    ready_timeout_s: float
    engine_env: dict[str, str]


GPU = Profile(
    preset="llama3-8b-awq",
    vocab_size=None,
    concurrency=(1, 8, 32, 128),
    output_tokens=128,
    requests_per_level=4,  # x concurrency
    min_requests=16,
    seconds_per_level=20.0,
    ready_timeout_s=600.0,
    engine_env={},
)
SMOKE = Profile(
    preset="tiny",
    vocab_size=None,
    concurrency=(1, 4),
    output_tokens=16,
    requests_per_level=2,
    min_requests=4,
    seconds_per_level=5.0,
    # A liveness bound: in CI the smoke starts beside two engines and the synth tests on 2 cores.
    ready_timeout_s=900.0,
    # vLLM's CPU build, sized like tests/engine/real_engine.py (eager: no torch.compile).
    engine_env={
        "ENGINE_ENFORCE_EAGER": "true",
        "ENGINE_MAX_NUM_BATCHED_TOKENS": "512",
        "ENGINE_MAX_NUM_SEQS": "16",
        "ENGINE_MAX_MODEL_LEN": "2048",
        # The prefill warm-up (issue 35's 2,048 tokens by default) must fit the 2,048-token context.
        "WARMUP_PREFILL_TOKENS": "256",
        "VLLM_CPU_KVCACHE_SPACE": "1",
    },
)


CPU_ENGINE_SHIM = Path(__file__).resolve().parents[1] / "tests" / "engine" / "engine_shim"
"""The ``sitecustomize`` that lets vLLM's CPU build run LoRA batches with torch's CUDA wheel
(docs/sources.md, "vLLM": no pinned memory without an NVIDIA driver); ``--smoke`` puts it on the servers' path."""


def use_cpu_engine_shim() -> None:
    """Put :data:`CPU_ENGINE_SHIM` on ``PYTHONPATH`` for every server this process starts (``--smoke``)."""
    import os  # noqa: PLC0415

    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(CPU_ENGINE_SHIM) not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([*parts, str(CPU_ENGINE_SHIM)])


def gpu_total_mib() -> int | None:
    """The GPU's total memory as the driver reports it (what vLLM multiplies), or None."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return int(out.splitlines()[0].strip())


def measure(
    name: str, setup: Setup, args: argparse.Namespace, profile: Profile, model: dict[str, Any]
) -> dict[str, Any]:
    """Start one setup, time its readiness, drive every level, stop it; return the result."""
    config = AppConfig()
    overrides = {**profile.engine_env, **setup.env}
    if args.gpu_memory_utilization:
        overrides[env.ENGINE_GPU_MEMORY_UTILIZATION] = f"{args.gpu_memory_utilization:g}"
    settings_env = container_environment(config, overrides)
    Settings.from_env(settings_env)  # a bad override stops here, with the container's own message
    cache_warm = COMPILE_CACHE.is_dir() and any(COMPILE_CACHE.iterdir())
    server: ServerRun = start(
        name=name,
        kind=setup.kind,
        settings_env=settings_env,
        model_root=Path(args.model_dir),
        port=args.port,
        engine_port=args.port and args.port + 1,  # 0: the kernel picks both
        log_dir=Path(args.out_dir),
        cpus=args.server_cpus if setup.four_cpus else None,
    )
    result: dict[str, Any] = {
        "setup": name,
        "kind": setup.kind,
        "env": overrides,
        # The container's engine defaults at the time (gpu_report.plan_of reads it).
        "engine_defaults": "container",
        "cpus": args.server_cpus if setup.four_cpus else "all",
        "compile_cache": "warm" if cache_warm else "empty",
        "output_tokens": profile.output_tokens,
        "model": model,
        "levels": [],
    }
    try:
        result["ready_s"] = server.wait_ready(profile.ready_timeout_s)
        result["vllm"] = server.figures
        if setup.kind == "gateway":
            result["gateway"] = gateway_startup(server.log_path)
        memory_mib = gpu_total_mib()
        if memory_mib is not None and not args.smoke:
            result["gpu_memory_mib"] = memory_mib
        print(f"{name}: ready after {result['ready_s']} s ({result['compile_cache']} compile cache)", flush=True)
        models = [a.name for a in config.model.adapters]
        if setup.ab:
            result["levels"] = ab_levels(server, args, profile, models)
            return result
        for concurrency in args.concurrency:
            for stream in (False, True):
                level = asyncio.run(
                    run_level(
                        server.chat_url,
                        models,
                        concurrency=concurrency,
                        requests=max(profile.min_requests, profile.requests_per_level * concurrency),
                        time_limit_s=profile.seconds_per_level,
                        stream=stream,
                        output_tokens=profile.output_tokens,
                        warmup_requests=min(concurrency, 8),
                    )
                )
                result["levels"].append(level.to_json())
                print(f"  {format_level(level.to_json())}", flush=True)
    finally:
        server.stop()
        Path(args.out_dir, f"{name}.json").write_text(json.dumps(result, indent=2))
    return result


def ab_levels(server: ServerRun, args: argparse.Namespace, profile: Profile, models: list[str]) -> list[dict[str, Any]]:
    """Each level twice, interleaved: straight to the gateway's vLLM, and through the gateway."""
    urls = {"direct": f"http://127.0.0.1:{server.engine_port}/v1/chat/completions", "gateway": server.chat_url}
    levels = []
    for concurrency in args.concurrency:
        for stream in (False, True):
            results = asyncio.run(
                run_ab_level(
                    urls,
                    models,
                    rounds=AB_ROUNDS,
                    concurrency=concurrency,
                    requests=max(2 * profile.min_requests, profile.requests_per_level * concurrency),
                    time_limit_s=2 * profile.seconds_per_level,
                    stream=stream,
                    output_tokens=profile.output_tokens,
                )
            )
            for target, level in results.items():
                levels.append({**level.to_json(), "target": target})
                print(f"  {target:<8} {format_level(level.to_json())}", flush=True)
    return levels


def gateway_startup(log_path: Path) -> dict[str, float]:
    """The gateway's own start-up log: when vLLM turned healthy, when warmup finished."""
    import re  # noqa: PLC0415

    text = log_path.read_text(errors="replace")
    found = {}
    for key, pattern in (
        ("engine_healthy_s", r"startup: engine healthy after ([\d.]+) s"),
        ("ready_s", r"startup: ready after ([\d.]+) s"),
    ):
        match = re.search(pattern, text)
        if match:
            found[key] = float(match.group(1))
    return found


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_serving.py", description=__doc__.splitlines()[0])
    parser.add_argument("--setups", default="bare,gateway", help=f"comma-separated, of {', '.join(SETUPS)}")
    parser.add_argument("--smoke", action="store_true", help="vLLM's CPU build, tiny model, seconds of load")
    parser.add_argument("--out-dir", default="gpu-bench-results", help="per-setup JSON and server logs")
    parser.add_argument("--model-dir", help="reuse a model made earlier (default: <out-dir>/model, made if absent)")
    parser.add_argument("--vocab-size", type=int_in(1), help="vocabulary of the model (default: the preset's)")
    parser.add_argument("--gpu-memory-utilization", type=positive_float, help="override the config's 0.92")
    parser.add_argument(
        "--concurrency", type=int_list(1), help="comma-separated levels (default 1,8,32,128; smoke 1,4)"
    )
    parser.add_argument("--server-cpus", default="0-3", help="CPU set of the *-4cpu setups (taskset -c)")
    parser.add_argument(
        "--client-cpus", type=cpu_set, help="CPU set of this load generator (taskset semantics, e.g. 4-15)"
    )
    parser.add_argument("--clear-compile-cache", action="store_true", help=f"empty {COMPILE_CACHE} first")
    parser.add_argument(
        "--port",
        type=int_in(0, 65535),
        default=18080,
        help="the gateway's (or bare vLLM's) port, vLLM's the next; 0: ports the kernel picks (the test suite's smoke)",
    )
    parser.add_argument("--report", nargs="*", help="print the tables of saved results (dirs or files) and exit")
    args = parser.parse_args(argv)

    if args.report is not None:
        files = [p for d in args.report for p in (sorted(Path(d).glob("*.json")) if Path(d).is_dir() else [Path(d)])]
        results = [json.loads(f.read_text()) for f in files if f.name != "model.json"]
        print(report(results))
        return 0

    profile = SMOKE if args.smoke else GPU
    if args.smoke:
        use_cpu_engine_shim()
    if args.vocab_size:
        profile = replace(profile, vocab_size=args.vocab_size)
    args.concurrency = args.concurrency or list(profile.concurrency)
    unknown = [s for s in args.setups.split(",") if s not in SETUPS]
    if unknown:
        parser.error(f"--setups: unknown {', '.join(unknown)}; allowed: {', '.join(SETUPS)}")
    if args.client_cpus:
        import os  # noqa: PLC0415

        os.sched_setaffinity(0, args.client_cpus)
    model = prepare_model(args, profile)
    print(
        f"model: {profile.preset}, vocabulary {model['shape']['vocab_size']:,}, "
        f"{model['weights_bytes'] / GIB:.2f} GiB of weights; prompt {PROMPT[:40]!r}..., "
        f"{profile.output_tokens} output tokens per request",
        flush=True,
    )
    if args.clear_compile_cache:
        shutil.rmtree(COMPILE_CACHE, ignore_errors=True)
    results = []
    for name in args.setups.split(","):
        started = time.monotonic()
        results.append(measure(name, SETUPS[name], args, profile, model))
        print(f"{name}: done in {time.monotonic() - started:.0f} s", flush=True)
    print(report(results))
    return 0


def prepare_model(args: argparse.Namespace, profile: Profile) -> dict[str, Any]:
    """Make ``--out-dir``; the model at ``--model-dir`` (default and stored in ``args``:
    ``<out-dir>/model``), made first if absent, on the CPU with ``--smoke``. Returns its summary."""
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    args.model_dir = args.model_dir or str(out / "model")
    return ensure_model(Path(args.model_dir), profile, device="cpu" if args.smoke else "cuda")


def ensure_model(root: Path, profile: Profile, device: str) -> dict[str, Any]:
    """The model at ``root`` (its summary in ``root/model.json``), made first if absent."""
    summary_path = root / "model.json"
    if summary_path.exists():
        return dict(json.loads(summary_path.read_text()))
    shape = PRESETS[profile.preset]
    if profile.vocab_size:
        shape = replace(shape, vocab_size=profile.vocab_size)
    summary = make_model(
        root,
        shape,
        adapters=[a.name for a in AppConfig().model.adapters],
        awq=profile.preset.endswith("-awq"),
        device=device,
    )
    summary_path.write_text(json.dumps(summary))
    print(f"made the model in {summary['seconds']} s", flush=True)
    return summary


if __name__ == "__main__":
    raise SystemExit(main())
