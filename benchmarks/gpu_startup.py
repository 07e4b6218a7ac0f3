"""Engine start-up levers and the engine-option matrix on one NVIDIA GPU (issues 24, 25).

``startup``
    starts the engine once per lever, one after another on ``--server-cpus`` (an ml.g5.xlarge
    has 4 vCPUs), times spawn -> ready (vLLM's ``/health``, or the gateway's ``/ping`` after its
    warmup), reads vLLM's start-up log (engine init, torch.compile, CUDA-graph capture, weight
    loading, KV tokens, compile-cache hit), then drives ``--load-seconds`` of MangaAssist-shaped
    requests (``conversations.py``, ``fresh``, concurrency 8) so a lever's cost in speed shows
    next to its gain in start-up. The compile cache is the one vLLM keeps in
    ``VLLM_CACHE_ROOT``; a lever that changes its key (a ``VLLM_*`` variable, the compilation
    config) misses it on its first start.
    ``gateway-make`` runs the container's ``make-compile-cache`` (the cache-making job's command)
    and ``gateway-made-hit`` then starts the gateway with only that made cache, copied read-only
    to where SageMaker puts model data (``COMPILE_CACHE_DIR``) and an empty ``VLLM_CACHE_ROOT``:
    the path a SageMaker instance takes. ``-tuned`` variants do the same with the tuned levers.
    ``gateway-make-lora`` adds the job's LoRA kernel tuning step (``--lora-tuning-budget-s``,
    issue 35) and ``gateway-made-hit-lora`` starts from that cache; each result's ``start`` then
    holds ``lora_tuning`` (the job's line: tuned, skipped or failed) and ``lora_kernel_configs``
    (what vLLM logged: tuned from which file, or its defaults).
``matrix``
    starts the engine once per value of every option that changes what vLLM builds, one at a
    time over the default, and records started / failed (vLLM's error line) / KV tokens /
    attention backend / a short throughput figure. Engines start ``--parallel`` at a time on one
    GPU, each with a fixed KV-cache size (``--kv-cache-memory-bytes``): with vLLM's own memory
    profiling, engines starting side by side would count each other's allocations as their own
    and under-size (or fail) their KV caches. The load runs on one engine at a time.

Usage::

    python benchmarks/gpu_startup.py startup --levers cold,hit,gateway-hit --model-dir /root/model
    python benchmarks/gpu_startup.py matrix --entries quantization=awq,kv_cache_dtype=fp8 --parallel 6
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "container"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from app_config.root import AppConfig
from cli_support.argtypes import int_in, positive_float
from cli_support.conversation_workload import RequestShape
from conversations import format_summary, run_level
from gpu_report import container_environment
from gpu_serving import COMPILE_CACHE, GPU, SMOKE, Profile, prepare_model, use_cpu_engine_shim
from servers_under_test import ServerRun, read_figures, start, stop_servers_on_sigterm
from serving_app.settings import Settings
from serving_contract import compile_cache as cache_contract
from serving_contract import env

CACHE_VERDICT = re.compile(r"compile cache: (hit|miss|cold|made) after ([\d.]+) s")
LORA_TUNING = re.compile(r"lora tuning: ((?:tuned|skipped|failed): .+?)(?:; the compile cache is published .*)?$", re.M)
"""The job's LoRA tuning step's result line (serving_app.lora_tuning.job_step)."""
LORA_KERNEL_CONFIGS = re.compile(r"Using (tuned LoRA kernel configs from \S+?|default LoRA kernel configs)\.?$", re.M)
"""vLLM 0.26's line at the first LoRA kernel launch (vllm/lora/ops/triton_ops/utils.py)."""

START_FIGURES = {
    "weights_load_s": re.compile(r"Loading weights took ([\d.]+) seconds"),
    "model_loading_s": re.compile(r"Model loading took [\d.]+ GiB(?: memory)? and ([\d.]+) seconds"),
    "graph_capture_s": re.compile(r"Graph capturing finished in ([\d.]+) secs"),
    "graph_capture_gib": re.compile(r"Graph capturing finished in [\d.]+ secs, took ([\d.]+) GiB"),
    "attention_backend": re.compile(r"Using (\w+) (?:attention )?backend"),
}
ERROR_LINE = re.compile(r"^.*\b(\w+(?:Error|Exception)): (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class Variant:
    """One engine start: container settings over the default, extra vLLM flags and environment."""

    kind: str = "bare"  # or "gateway"
    settings: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    engine_env: dict[str, str] = field(default_factory=dict)
    clear_cache: bool = False
    made_cache: str = ""  # "make": run make-compile-cache into <out>/made-<config>; "read": start from it
    config: str = "default"  # names the made cache a "make" lever writes and its "read" lever starts from
    lora_tuning_budget_s: int = 0  # "make": the job's LoRA tuning step; both: part of the cache key


COMPILED = {env.ENGINE_ENFORCE_EAGER: "false"}
TUNED_ARGS = ("--max-cudagraph-capture-size", "64", "--load-format", "fastsafetensors")
TUNED_ENV = {"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0"}
# vLLM 0.26 can save the whole compiled model as one artifact (torch's standalone_compile with
# aot=True) and rebuild it on load instead of splitting the traced graph again and loading each
# piece from Inductor's cache; on by default only from torch 2.12 (vllm/envs.py,
# use_mega_aot_artifact), so with the image's torch 2.11 it is an opt-in to measure.
MEGA_AOT_ENV = {"VLLM_USE_MEGA_AOT_ARTIFACT": "1"}
LORA_TUNING_BUDGET_S = AppConfig().serving.compile_cache.lora_tuning_budget_s
"""The job's LoRA tuning budget as the stack passes it (serving.compile_cache.lora_tuning_budget_s)."""
LEVERS: dict[str, Variant] = {
    "cold": Variant(clear_cache=True),
    "hit": Variant(),
    "hit-fastsafetensors": Variant(args=("--load-format", "fastsafetensors")),
    "gateway-hit": Variant(kind="gateway"),
    # Graph capture up to 64 sequences (vLLM: min(2 x max_num_seqs, 512) = 256) and no CUDA-graph
    # memory estimate (vLLM's own suggestion for the warm-cache KV loss): both change the
    # compile-cache key, so the first start with them is a miss.
    "tuned-miss": Variant(args=TUNED_ARGS, engine_env=TUNED_ENV),
    "tuned-hit": Variant(args=TUNED_ARGS, engine_env=TUNED_ENV),
    "gateway-tuned-hit": Variant(kind="gateway", args=TUNED_ARGS, engine_env=TUNED_ENV),
    # ENGINE_ENFORCE_EAGER=false is the GPU default; the CPU smoke profile sets it true, and
    # an eager engine compiles nothing to cache.
    "gateway-make": Variant(kind="gateway", settings=COMPILED, made_cache="make"),
    "gateway-made-hit": Variant(kind="gateway", settings=COMPILED, made_cache="read"),
    "gateway-make-tuned": Variant(
        kind="gateway", args=TUNED_ARGS, engine_env=TUNED_ENV, made_cache="make", config="tuned"
    ),
    "gateway-made-hit-tuned": Variant(
        kind="gateway", args=TUNED_ARGS, engine_env=TUNED_ENV, made_cache="read", config="tuned"
    ),
    "gateway-make-lora": Variant(
        kind="gateway", settings=COMPILED, made_cache="make", config="lora", lora_tuning_budget_s=LORA_TUNING_BUDGET_S
    ),
    "gateway-made-hit-lora": Variant(
        kind="gateway", settings=COMPILED, made_cache="read", config="lora", lora_tuning_budget_s=LORA_TUNING_BUDGET_S
    ),
    "gateway-make-mega": Variant(
        kind="gateway", settings=COMPILED, engine_env=MEGA_AOT_ENV, made_cache="make", config="mega"
    ),
    "gateway-made-hit-mega": Variant(
        kind="gateway", settings=COMPILED, engine_env=MEGA_AOT_ENV, made_cache="read", config="mega"
    ),
    "O0": Variant(args=("-O0",)),
    "O1-miss": Variant(args=("-O1",)),
    "O1-hit": Variant(args=("-O1",)),
    "eager": Variant(settings={env.ENGINE_ENFORCE_EAGER: "true"}),
}


def matrix_entry(text: str) -> Variant:
    """``key=value`` of an engine setting (``quantization=awq``), or ``--flag=value`` of vLLM; ``+`` joins several."""
    settings: dict[str, str] = {}
    args: list[str] = []
    from serving_contract.engine_settings import BY_KEY  # noqa: PLC0415

    for part in text.split("+"):
        key, _, value = part.partition("=")
        if key.startswith("--"):
            args += [key, value] if value else [key]
        elif key in BY_KEY:
            settings[BY_KEY[key].env_var] = value
        else:
            raise argparse.ArgumentTypeError(f"{part!r}: not an engine setting ({', '.join(BY_KEY)}) or a --flag")
    return Variant(settings=settings, args=tuple(args))


MATRIX = (
    "default",
    "quantization=awq_marlin",
    "quantization=awq",
    "quantization=gptq_marlin",
    "quantization=gptq",
    "quantization=fp8",
    "kv_cache_dtype=fp8",
    "--attention-backend=FLASH_ATTN",
    "--attention-backend=TRITON_ATTN",
    "--attention-backend=FLASHINFER",
    "kv_cache_dtype=fp8+--attention-backend=TRITON_ATTN",
    "kv_cache_dtype=fp8+--attention-backend=FLASHINFER",
    "enforce_eager=true",
    "block_size=32",
    "block_size=128",
    "max_model_len=256",
    "max_model_len=8192",
    "max_num_batched_tokens=256",
    "max_num_seqs=1",
    "max_num_seqs=1024",
    "max_loras=1",
    "max_loras=64",
    "max_lora_rank=8",
    "max_lora_rank=64",
)
"""Every value the config accepts of the options that change what vLLM builds, one at a time
over the default (``serving_contract/engine_settings.py`` has the accepted values and bounds),
plus the attention backends vLLM 0.26 offers for this model (``--attention-backend``)."""


def settings_env(profile: Profile, args: argparse.Namespace, variant: Variant) -> dict[str, str]:
    overrides = {**profile.engine_env, **variant.settings}
    if args.gpu_memory_utilization:
        overrides[env.ENGINE_GPU_MEMORY_UTILIZATION] = f"{args.gpu_memory_utilization:g}"
    return container_environment(AppConfig(), overrides)


def read_start(server: ServerRun) -> dict[str, Any]:
    text = server.log_path.read_text(errors="replace")
    found: dict[str, Any] = dict(server.figures or read_figures(server.log_path))
    verdict = CACHE_VERDICT.search(text)
    if verdict:
        found["compile_cache"], found["gateway_ready_s"] = verdict.group(1), float(verdict.group(2))
    for key, pattern in START_FIGURES.items():
        match = pattern.search(text)
        if match:
            found[key] = match.group(1) if key == "attention_backend" else float(match.group(1))
    for key, pattern in (("lora_tuning", LORA_TUNING), ("lora_kernel_configs", LORA_KERNEL_CONFIGS)):
        match = pattern.search(text)
        if match:
            found[key] = match.group(1)
    return found


GENERIC_ERRORS = ("Engine core initialization failed", "See root cause above", "exited with")
"""vLLM's wrapper errors: the line worth keeping is the cause logged before them."""


def error_line(log_path: Path) -> str | None:
    """The last ``SomethingError: message`` line vLLM (or the gateway) logged, its wrappers
    skipped; a pydantic ``ValidationError`` keeps the line that says what failed."""
    lines = [re.sub(r"^\([\w ]+pid=\d+\)\s*", "", line) for line in log_path.read_text(errors="replace").splitlines()]
    found = None
    for index, line in enumerate(lines):
        match = ERROR_LINE.match(line)
        if not match or any(g in match.group(2) for g in GENERIC_ERRORS):
            continue
        found = f"{match.group(1)}: {match.group(2).strip()}"
        if match.group(1) == "ValidationError" and index + 1 < len(lines):
            found += " " + lines[index + 1].strip().split(" [type=")[0]
    return found[:400] if found else None


def short_load(
    server: ServerRun, args: argparse.Namespace, shape: RequestShape, adapters: list[str], seed: int
) -> dict[str, Any]:
    level = run_level(
        [f"http://127.0.0.1:{server.engine_port}"],
        shape,
        adapters,
        label=server.name,
        mode="fresh",
        route="least_outstanding",
        concurrency=args.load_concurrency,
        seconds=args.load_seconds,
        seed=seed,
        warmup_s=0 if args.smoke else 2.0,
    )
    print(f"  {format_summary(level)}", flush=True)
    return level.to_json()


def made_cache_setup(
    name: str, variant: Variant, environ: dict[str, str], out_dir: Path
) -> tuple[tuple[str, ...], dict[str, str]]:
    """The gateway command and extra environment of a ``made_cache`` lever.

    ``make`` writes the model's environment file and makes the cache in ``out_dir/made-<config>``
    from an empty ``VLLM_CACHE_ROOT``; ``read`` copies that folder read-only to
    ``out_dir/model-data-<config>`` (SageMaker's /opt/ml/model) and starts from an empty cache root.
    """
    config = variant.config
    made, model_data, root = out_dir / f"made-{config}", out_dir / f"model-data-{config}", out_dir / f"root-{name}"
    shutil.rmtree(root, ignore_errors=True)
    key = cache_contract.cache_key(
        image_uri="bench",
        instance_type="bench-gpu",
        environment=environ,
        lora_tuning_budget_s=variant.lora_tuning_budget_s,
    )
    extra = {"VLLM_CACHE_ROOT": str(root), cache_contract.COMPILE_CACHE_KEY: key}
    if variant.made_cache == "make":
        shutil.rmtree(made, ignore_errors=True)
        made.mkdir(parents=True)
        env_file = out_dir / f"environment-{config}.json"
        env_file.write_text(json.dumps({**environ, **variant.engine_env, cache_contract.COMPILE_CACHE_KEY: key}))
        command: tuple[str, ...] = (
            "make-compile-cache",
            "--environment-file",
            str(env_file),
            "--output-dir",
            str(made),
        )
        if variant.lora_tuning_budget_s:
            command += (cache_contract.LORA_TUNING_BUDGET_ARG, str(variant.lora_tuning_budget_s))
        return command, extra
    shutil.rmtree(model_data, ignore_errors=True)
    shutil.copytree(made, model_data)
    for path in [model_data, *model_data.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    return ("serve",), {**extra, cache_contract.COMPILE_CACHE_DIR: str(model_data)}


def wait_made(server: ServerRun, timeout_s: float) -> float:
    """Seconds from spawn to the exit of ``make-compile-cache``; raises unless it exits 0."""
    code = server.process.wait(timeout=timeout_s)
    if code != 0:
        raise RuntimeError(f"{server.name} exited with {code}; see {server.log_path}")
    return round(time.monotonic() - server.spawned, 1)


def startup(
    args: argparse.Namespace, profile: Profile, shape: RequestShape, adapters: list[str]
) -> list[dict[str, Any]]:
    results = []
    for index, name in enumerate(args.levers):
        variant = LEVERS[name]
        if variant.clear_cache:
            shutil.rmtree(COMPILE_CACHE, ignore_errors=True)
        environ = settings_env(profile, args, variant)
        Settings.from_env(environ)
        gateway_command: tuple[str, ...] = ("serve",)
        extra_env = dict(variant.engine_env)
        if variant.made_cache:
            gateway_command, made_env = made_cache_setup(name, variant, environ, Path(args.out_dir))
            extra_env.update(made_env)
        server = start(
            name=name,
            kind=variant.kind,
            settings_env=environ,
            model_root=Path(args.model_dir),
            port=args.port,
            engine_port=args.port and args.port + 1,  # 0: the kernel picks both
            log_dir=Path(args.out_dir),
            cpus=args.server_cpus,
            extra_env=extra_env,
            extra_args=variant.args,
            gateway_command=gateway_command,
        )
        result: dict[str, Any] = {
            "lever": name,
            "kind": variant.kind,
            "args": list(variant.args),
            "env": variant.engine_env,
        }
        try:
            if variant.made_cache == "make":
                result["made_s"] = wait_made(server, profile.ready_timeout_s)
            else:
                result["ready_s"] = server.wait_ready(profile.ready_timeout_s)
            result["start"] = read_start(server)
            print(f"{name}: {result.get('ready_s') or result.get('made_s')} s {result['start']}", flush=True)
            if variant.made_cache != "make":
                result["load"] = short_load(server, args, shape, adapters, seed=100 + index)
        except (RuntimeError, TimeoutError, subprocess.TimeoutExpired) as exc:
            # The result keeps one line; the log's first error block goes to the console (ServerRun.wait_ready).
            result["error"] = f"{str(exc).splitlines()[0]}; {error_line(server.log_path)}"
            print(f"{name}: FAILED {exc}", flush=True)
        finally:
            server.stop()
        results.append(result)
        Path(args.out_dir, f"{args.name}.json").write_text(json.dumps(results, indent=2))
    return results


def matrix(
    args: argparse.Namespace, profile: Profile, shape: RequestShape, adapters: list[str]
) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    entries = list(args.entries)
    for wave_start in range(0, len(entries), args.parallel):
        wave = entries[wave_start : wave_start + args.parallel]
        servers: list[tuple[str, ServerRun]] = []
        for offset, name in enumerate(wave):
            variant = matrix_entry(name) if name != "default" else Variant()
            extra = list(variant.args)
            if args.kv_cache_memory_bytes:
                extra += ["--kv-cache-memory-bytes", str(args.kv_cache_memory_bytes)]
            port = args.port and args.port + 2 * offset  # 0: the kernel picks
            server = start(
                name=re.sub(r"[^\w.=+-]", "_", name),
                kind="bare",
                settings_env=settings_env(profile, args, variant),
                model_root=Path(args.model_dir),
                port=port,
                engine_port=port and port + 1,
                log_dir=Path(args.out_dir),
                extra_args=extra,
            )
            servers.append((name, server))
            time.sleep(2)
        started: list[tuple[str, ServerRun, dict[str, Any]]] = []
        for name, server in servers:
            result: dict[str, Any] = {"entry": name}
            try:
                result["ready_s"] = server.wait_ready(profile.ready_timeout_s)
                result["status"] = "started"
                result["start"] = read_start(server)
                started.append((name, server, result))
            except (RuntimeError, TimeoutError) as exc:
                result["status"] = "failed"
                result["error"] = error_line(server.log_path) or str(exc).splitlines()[0]
                result["start"] = read_start(server)
                server.stop()
            print(f"{name}: {result['status']} {result.get('error', '')} {result['start']}", flush=True)
            results.append(result)
        for index, (_name, server, result) in enumerate(started):
            try:
                result["load"] = short_load(server, args, shape, adapters, seed=500 + index)
            finally:
                server.stop()
        Path(args.out_dir, f"{args.name}.json").write_text(json.dumps(results, indent=2))
    return results


def main(argv: list[str] | None = None) -> int:
    stop_servers_on_sigterm()
    parser = argparse.ArgumentParser(prog="gpu_startup.py", description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("startup", "matrix"))
    parser.add_argument("--levers", default="cold,hit,gateway-hit", help=f"comma-separated, of {', '.join(LEVERS)}")
    parser.add_argument("--entries", help="'|'-separated matrix entries (default: every entry of MATRIX)")
    parser.add_argument("--parallel", type=int_in(1), default=1, help="matrix engines started side by side")
    parser.add_argument("--kv-cache-memory-bytes", type=int_in(1), help="matrix: fixed KV cache per engine")
    parser.add_argument("--smoke", action="store_true", help="vLLM's CPU build, tiny model, seconds of load")
    parser.add_argument("--out-dir", default="gpu-bench-results")
    parser.add_argument("--name", help="result file name (default: the mode)")
    parser.add_argument("--model-dir", help="reuse a model made earlier (default: <out-dir>/model, made if absent)")
    parser.add_argument("--gpu-memory-utilization", type=positive_float)
    parser.add_argument("--server-cpus", help="CPU set of each server (startup), e.g. 0-3")
    parser.add_argument("--load-seconds", type=positive_float, default=10.0)
    parser.add_argument("--load-concurrency", type=int_in(1), default=8)
    parser.add_argument(
        "--port", type=int_in(0, 65535), default=18280, help="first server's port; 0: ports the kernel picks"
    )
    args = parser.parse_args(argv)

    profile = SMOKE if args.smoke else GPU
    shape = RequestShape(32, 48, 8, 8) if args.smoke else RequestShape()
    if args.smoke:
        use_cpu_engine_shim()
        args.load_seconds, args.load_concurrency = min(args.load_seconds, 3.0), 2
    args.name = args.name or args.mode
    args.levers = args.levers.split(",")
    unknown = [lever for lever in args.levers if lever not in LEVERS]
    if unknown:
        parser.error(f"--levers: unknown {', '.join(unknown)}; allowed: {', '.join(LEVERS)}")
    args.entries = args.entries.split("|") if args.entries else list(MATRIX)
    for entry in args.entries:
        if entry != "default":
            try:
                matrix_entry(entry)
            except argparse.ArgumentTypeError as exc:
                parser.error(f"--entries: {exc}")
    prepare_model(args, profile)
    adapters = [a.name for a in AppConfig().model.adapters]
    began = time.monotonic()
    (startup if args.mode == "startup" else matrix)(args, profile, shape, adapters)
    print(f"{args.mode}: done in {time.monotonic() - began:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
