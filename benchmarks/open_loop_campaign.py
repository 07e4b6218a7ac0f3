"""Several open-loop ramps in one GPU session: engines started together, ramps run one at a time.

A GPU session is short (docs/performance.md, "How the GPU runs are made"), and every engine start
costs minutes. So a campaign starts all its engines at once, each on its own CPU set with its own
compile cache and a fixed share of the GPU's memory, then runs its ramps one after another against
them: only one engine has load at any moment, so no ramp shares the GPU's compute with another, and
the idle engines only hold memory. The campaign runs in its own process session (it outlives the
device call that started it); ``progress`` waits for it and copies what is done.

A spec is JSON (``"smoke": true`` runs it on vLLM's CPU build with the tiny model, in seconds)::

    {"engines": [{"name": "a10g", "instance": "ml.g5.xlarge", "cpus": "0-3", "util": 0.2},
                 {"name": "l40s-gw", "instance": "ml.g6e.xlarge", "cpus": "cores:2", "util": 0.33,
                  "gateway": true, "extra_vllm_args": "--kv-offloading-size 40"}],
     "ramps": [{"engine": "a10g", "name": "ramp-think30-a10g-kv", "think_s": 30,
                "rates": [300, 360, 420], "first_settle_s": 30, "settle_s": 15, "measure_s": 30}]}

``cpus`` is a CPU list (taskset's) or ``cores:N``: N whole physical cores (every hardware thread
of each, from ``/sys/devices/system/cpu``) that no earlier engine's list touches: an
ml.g6e.xlarge's 4 vCPUs are 2 cores with 2 threads each (docs/sources.md, "Instance vCPUs"). A ramp's
load generator runs on every CPU its engine does not.

Usage (``benchmarks/gpu_session.sh ol-campaign SPEC`` / ``ol-progress`` wrap these)::

    python benchmarks/open_loop_campaign.py run SPEC --model-dir /root/model --work /root/campaign
    python benchmarks/open_loop_campaign.py progress --work /root/campaign --out $OUT --wait-s 540
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DONE = "campaign.done"


def cpu_list(text: str) -> list[int]:
    """``0-3,8`` -> [0, 1, 2, 3, 8] (taskset's list syntax)."""
    cpus: list[int] = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        cpus += range(int(low), int(high or low) + 1)
    return cpus


def physical_cores(root: Path = Path("/sys/devices/system/cpu")) -> list[list[int]]:
    """Each physical core's hardware threads, in order of their first CPU."""
    siblings = (path / "topology" / "thread_siblings_list" for path in root.glob("cpu[0-9]*"))
    cores = {tuple(cpu_list(path.read_text().strip())) for path in siblings}
    return sorted((list(core) for core in cores), key=lambda core: core[0])


def pick_cpus(spec: str, taken: set[int], cores: list[list[int]]) -> list[int]:
    """The CPUs of ``spec`` (a list, or ``cores:N`` whole cores none of whose threads is in ``taken``).

    Raises:
        ValueError: not enough free cores.
    """
    if not spec.startswith("cores:"):
        return cpu_list(spec)
    wanted = int(spec.removeprefix("cores:"))
    free = [core for core in cores if not taken & set(core)]
    if len(free) < wanted:
        raise ValueError(f"cpus {spec!r}: {len(free)} whole cores free of {sorted(taken)}, {wanted} asked")
    return sorted(cpu for core in free[:wanted] for cpu in core)


@dataclass
class Engine:
    name: str
    cpus: list[int]
    info: dict[str, Any] | None = None


def _log(work: Path, line: str) -> None:
    stamped = f"== {time.strftime('%H:%M:%S')} {line}"
    print(stamped, flush=True)
    with (work / "campaign.log").open("a") as handle:
        handle.write(stamped + "\n")


def kv_tokens_of(instance: str) -> int:
    """The KV cache of ``instance``'s memory plan (what the config sizes for it)."""
    from app_config.root import AppConfig  # noqa: PLC0415 (needs the repository on the path)
    from planning.engine_memory import plan_for_instance  # noqa: PLC0415

    config = AppConfig()
    return plan_for_instance(instance, model=config.model, engine=config.engine, memory=config.memory_plan).kv_tokens


def run(args: argparse.Namespace) -> int:
    """Start every engine of the spec, then run its ramps in order."""
    spec = json.loads(Path(args.spec).read_text())
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    (work / DONE).unlink(missing_ok=True)
    cores = physical_cores()
    _log(work, f"physical cores (hardware threads): {cores}")
    engines = start_engines(spec, args, work, cores)
    run_ramps(spec, work, engines, sorted({cpu for core in cores for cpu in core}))
    (work / DONE).write_text("done\n")
    _log(work, "campaign done (engines left running: stop them with ol-stop)")
    return 0


def start_engines(
    spec: dict[str, Any], args: argparse.Namespace, work: Path, cores: list[list[int]]
) -> dict[str, Engine]:
    """Start every engine of ``spec`` at once; wait until each serves or fails (logged)."""
    engines: dict[str, Engine] = {}
    processes: dict[str, subprocess.Popen[bytes]] = {}
    taken: set[int] = set()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for index, item in enumerate(spec["engines"]):
        cpus = pick_cpus(item["cpus"], taken, cores)
        taken |= set(cpus)
        name = item["name"]
        folder = work / name
        folder.mkdir(exist_ok=True)
        (folder / "engine.json").unlink(missing_ok=True)
        kv = int(item.get("kv_cache_tokens") or (kv_tokens_of(item["instance"]) if item.get("instance") else 0))
        command = [
            sys.executable,
            str(HERE / "open_loop.py"),
            "serve",
            "--model-dir",
            item.get("model_dir", args.model_dir),
            "--out-dir",
            str(folder),
            *(["--kv-cache-tokens", str(kv)] if kv else []),
            *(["--smoke"] if spec.get("smoke") else []),
            "--server-cpus",
            ",".join(map(str, cpus)),
            "--port",
            str(args.port + 10 * index),
            "--gpu-memory-utilization",
            str(item["util"]),
        ]
        if item.get("gateway"):
            command.append("--gateway")
        if item.get("extra_vllm_args"):
            command += ["--extra-vllm-args", item["extra_vllm_args"]]
        # Own compile caches: engines starting together would race on one.
        engine_env = {**env, "VLLM_CACHE_ROOT": str(folder / "vllm-cache"), "TRITON_CACHE_DIR": str(folder / "triton")}
        _log(work, f"start {name}: KV {kv} tokens, CPUs {cpus}: {' '.join(command[2:])}")
        handle = (folder / "serve.log").open("wb")
        processes[name] = subprocess.Popen(
            command, env=engine_env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
        engines[name] = Engine(name, cpus)
    deadline = time.monotonic() + args.ready_timeout_s
    waiting = set(engines)
    while waiting and time.monotonic() < deadline:
        for name in sorted(waiting):
            info_path = work / name / "engine.json"
            if info_path.exists():
                info = json.loads(info_path.read_text())
                engines[name].info = info
                _log(work, f"{name} ready after {info.get('ready_s')} s")
                waiting.discard(name)
            elif processes[name].poll() is not None:
                _log(work, f"{name} exited with {processes[name].returncode}: see {name}/serve.log")
                waiting.discard(name)
        time.sleep(2)
    for name in waiting:
        _log(work, f"{name} not ready in {args.ready_timeout_s:g} s")
    return engines


def run_ramps(spec: dict[str, Any], work: Path, engines: dict[str, Engine], every_cpu: list[int]) -> None:
    """The ramps of ``spec`` in order, each on its engine with the load generator on the other CPUs; a
    ramp whose engine does not serve is skipped (logged)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for ramp in spec["ramps"]:
        engine = engines[ramp["engine"]]
        if engine.info is None:
            _log(work, f"skip {ramp['name']}: engine {engine.name} is not serving")
            continue
        client = [cpu for cpu in every_cpu if cpu not in engine.cpus]
        command = [
            sys.executable,
            str(HERE / "open_loop.py"),
            "ramp",
            "--base-url",
            engine.info["base_url"],
            "--engine-info",
            str(work / engine.name / "engine.json"),
            "--out-dir",
            str(work / "results"),
            "--name",
            ramp["name"],
            "--think-s",
            str(ramp["think_s"]),
            "--rates",
            ",".join(str(r) for r in ramp["rates"]),
            "--settle-s",
            str(ramp["settle_s"]),
            "--measure-s",
            str(ramp["measure_s"]),
            "--first-settle-s",
            str(ramp.get("first_settle_s", ramp["settle_s"])),
            "--stop-factor",
            str(ramp.get("stop_factor", 2.0)),
            "--drain-s",
            str(ramp.get("drain_s", 10)),
            *(["--client-cpus", ",".join(map(str, client))] if client else []),
            "--warm-start",
            *(["--smoke"] if spec.get("smoke") else []),
        ]
        if engine.info.get("kind") == "gateway":
            command += ["--invoke-path", "/invocations", "--metrics-url", engine.info["engine_url"] + "/metrics"]
        (work / "results").mkdir(exist_ok=True)
        _log(work, f"ramp {ramp['name']} on {engine.name}: think {ramp['think_s']} s, rates {ramp['rates']}")
        with (work / "results" / f"{ramp['name']}.log").open("wb") as handle:
            code = subprocess.call(command, env=env, stdout=handle, stderr=subprocess.STDOUT)
        _log(work, f"ramp {ramp['name']} exit {code}")


def _campaign_running() -> bool:
    """A campaign's ``run`` process is alive (one that crashed writes no done file: stop waiting)."""
    return (
        subprocess.run(["pgrep", "-f", "open_loop_campaign.py run"], capture_output=True, check=False).returncode == 0
    )


def progress(args: argparse.Namespace) -> int:
    """Wait until the campaign is done or ``--wait-s`` passed; copy its results and logs to ``--out``
    (a device call brings back at most 8 files: the ramps' JSON, the campaign's log, one archive)."""
    work, out = Path(args.work), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.wait_s
    while time.monotonic() < deadline and not (work / DONE).exists() and _campaign_running():
        time.sleep(5)
    results = sorted((work / "results").glob("*.json")) if (work / "results").is_dir() else []
    for path in results[: args.max_results]:
        shutil.copy(path, out / path.name)
    if (work / "campaign.log").exists():
        shutil.copy(work / "campaign.log", out / "campaign.log")
    with tarfile.open(out / "campaign-logs.tgz", "w:gz") as archive:
        for path in sorted({*work.glob("*/engine.json"), *work.glob("*/*.log")}):
            archive.add(path, arcname=str(path.relative_to(work)))
    print((work / "campaign.log").read_text() if (work / "campaign.log").exists() else "no campaign log yet")
    print("done" if (work / DONE).exists() else "still running")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="open_loop_campaign.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    go = sub.add_parser("run")
    go.add_argument("spec")
    go.add_argument("--model-dir", default="/root/model")
    go.add_argument("--work", default="/root/campaign")
    go.add_argument("--port", type=int, default=18200)
    go.add_argument("--ready-timeout-s", type=float, default=600.0)
    wait = sub.add_parser("progress")
    wait.add_argument("--work", default="/root/campaign")
    wait.add_argument("--out", required=True)
    wait.add_argument("--wait-s", type=float, default=540.0)
    wait.add_argument("--max-results", type=int, default=6)
    args = parser.parse_args(argv)
    return run(args) if args.mode == "run" else progress(args)


if __name__ == "__main__":
    raise SystemExit(main())
