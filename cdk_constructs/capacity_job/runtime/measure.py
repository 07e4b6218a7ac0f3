"""The capacity job's entrypoint (issue 46): serve the image's model, sweep it open loop, write the curve.

In the job (``python -m ops throughput measure`` starts it; serving_contract/capacity_job.py has the
layout)::

    /opt/venv/bin/python -m runtime.measure \\
        --environment-file /opt/ml/processing/input/sweep/environment.json \\
        --sweep-file /opt/ml/processing/input/sweep/sweep.json \\
        --output-dir /opt/ml/processing/output --instance-type ml.g6e.xlarge --job-name capacity-...

1. The image's own server starts (``python -m serving_app serve``, the container contract) with
   the model's container environment from ``--environment-file``: the engine argv and the memory
   plan the variant would run with, on the instance type the job runs on. ``/ping`` answers 200
   once the engine is up and every adapter is warm, as on an endpoint.
2. The open-loop sweep of ``sweep.py`` (the code behind the H200 runs the
   engine model was fitted on) drives the engine inside it: conversations arrive at random at each
   offered rate of ``--sweep-file``, users pause between turns; TTFT per request class per rate,
   and vLLM's running requests and KV-cache usage.
3. ``<output-dir>/capacity.json``: the curve as ``throughput.measured.<instance type>`` accepts it
   (app_config/throughput_config.py ``MeasuredCurve``); ``<output-dir>/raw.json``: every request
   (to refit the model without a GPU). SageMaker uploads the folder when the job ends.

Exit status: 0 with a curve written; 1 when the server did not start or the sweep failed (one
``FAIL`` line on stderr, nothing written); 2 for a bad argument or file. The server is stopped in
every case. Standard library + aiohttp only (the serving image's venv).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cli_support.conversation_workload import RequestShape
from cli_support.open_loop import StepSummary
from serving_contract import capacity_job

from .sweep import Sweep, SweepResult, result_json, sweep

SERVER_PORT = 8080
"""The gateway's port (the container contract)."""
ENGINE_PORT = 8081
"""vLLM's port behind it (the container's default)."""
STOP_GRACE_S = 60


def curve(
    result: SweepResult, *, instance_type: str, job_name: str, gpu: str, think_s: float, today: dt.date
) -> capacity_job.CapacityResult:
    """The sweep as ``throughput.measured.<instance type>`` accepts it
    (``serving_contract.capacity_job.CapacityResult``, which ``ops throughput measure`` reads back)."""

    def step(summary: StepSummary) -> capacity_job.StepResult:
        classes = {
            klass: capacity_job.ClassResult(figures.requests, figures.ttft_p50_ms, figures.ttft_p95_ms)
            for klass, figures in summary.classes.items()
        }
        return capacity_job.StepResult(
            requests_per_minute=summary.requests_per_min,
            served_per_minute=summary.served_per_min,
            completed_per_minute=summary.completed_per_min,
            requests=summary.requests,
            errors=summary.errors,
            cold=classes["cold"],
            warm=classes["warm"],
            running_mean=summary.engine.get("running_mean"),
            kv_cache_usage_mean=summary.engine.get("kv_cache_usage_mean"),
        )

    return capacity_job.CapacityResult(
        instance_type=instance_type,
        date=today,
        job=job_name,
        gpu=gpu,
        think_s=think_s,
        engines=1,
        steps=tuple(step(s) for s in result.summaries),
        cliff_per_minute=result.verdict.cliff_per_min,
    )


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """``path`` as a JSON object.

    Raises:
        ValueError: unreadable, not JSON, or not an object (one line naming ``what`` and the path).
    """
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{what} {path}: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{what} {path}: must be a JSON object")
    return data


def sweep_settings(data: Any) -> tuple[Sweep, RequestShape]:
    """The sweep file ``ops throughput measure`` writes (``serving_contract.capacity_job.SweepFile``) as the sweep's
    settings and request shape.

    Raises:
        ValueError: a missing or bad field (one line naming it).
    """
    sweep_file = capacity_job.SweepFile.from_json(data, "--sweep-file")
    settings = Sweep(
        rates_per_min=list(sweep_file.rates_per_minute),
        settle_s=sweep_file.step_s / 4,
        measure_s=sweep_file.step_s * 3 / 4,
        think_s=sweep_file.think_s,
        slo_ms=dict(sweep_file.slo_ms),
        warm_min_cached_fraction=sweep_file.warm_min_cached_fraction,
        drain_s=sweep_file.drain_s,
    )
    return settings, RequestShape(**asdict(sweep_file.shape))


def wait_ready(base_url: str, server: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Poll ``GET /ping`` until 200.

    Raises:
        RuntimeError: the server exited, or ``timeout_s`` passed (one line).
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode} before /ping answered 200")
        try:
            with urllib.request.urlopen(base_url + "/ping", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, TimeoutError, ConnectionError):
            pass
        time.sleep(1)
    raise RuntimeError(f"/ping did not answer 200 within {timeout_s:g} s")


def stop(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the container drains), then SIGKILL after :data:`STOP_GRACE_S`."""
    if server.poll() is not None:
        return
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="runtime.measure", description=__doc__.splitlines()[0])
    p.add_argument("--environment-file", type=Path, required=True, help="the model's container environment (JSON)")
    p.add_argument("--sweep-file", type=Path, required=True, help="the sweep's rates, step seconds, SLOs (JSON)")
    p.add_argument("--output-dir", type=Path, required=True, help="where capacity.json and raw.json go")
    p.add_argument("--instance-type", required=True, help="the instance type the job runs on")
    p.add_argument("--job-name", required=True, help="the processing job's name (recorded in the curve)")
    p.add_argument("--startup-timeout-s", type=float, default=1800.0, help="until /ping answers 200")
    p.add_argument("--port", type=int, default=SERVER_PORT, help="the gateway's port")
    p.add_argument("--engine-port", type=int, default=ENGINE_PORT, help="vLLM's port")
    p.add_argument("--model-dir", type=Path, help="the base model (default: the image's)")
    p.add_argument("--adapter-dir", type=Path, help="one folder per adapter (default: the image's)")
    p.add_argument(
        "--engine-url",
        help="sweep the vLLM engine already at this URL and start no server (the CPU smoke; re-measuring a running "
        "engine)",
    )
    return p


def server_command(args: argparse.Namespace) -> list[str]:
    """The image's server: ``python -m serving_app serve`` on the job's ports."""
    command = [sys.executable, "-m", "serving_app", "serve", "--port", str(args.port)]
    command += ["--engine-port", str(args.engine_port)]
    if args.model_dir:
        command += ["--model-dir", str(args.model_dir)]
    if args.adapter_dir:
        command += ["--adapter-dir", str(args.adapter_dir)]
    return command


def main(argv: Sequence[str] | None = None, *, gpu: str | None = None) -> int:
    """Run the job (module docstring); returns the exit status. ``gpu``: the GPU's name (default: nvidia-smi's)."""
    args = parser().parse_args(argv)
    try:
        environment = read_json_object(args.environment_file, "--environment-file")
        settings, shape = sweep_settings(read_json_object(args.sweep_file, "--sweep-file"))
    except ValueError as error:
        print(f"runtime.measure: {error}", file=sys.stderr, flush=True)
        return 2
    if not all(isinstance(v, str) for v in environment.values()):
        print("runtime.measure: --environment-file: values must be strings", file=sys.stderr, flush=True)
        return 2
    adapters = [a for a in environment.get("LORA_ADAPTERS", "").split(",") if a]
    if not adapters:
        print("runtime.measure: --environment-file: LORA_ADAPTERS names no adapter", file=sys.stderr, flush=True)
        return 2
    server = None if args.engine_url else subprocess.Popen(server_command(args), env={**os.environ, **environment})
    try:
        if server is not None:
            wait_ready(f"http://127.0.0.1:{args.port}", server, args.startup_timeout_s)
        print(f"runtime.measure: serving on {args.instance_type}; sweeping {list(settings.rates_per_min)}", flush=True)
        engine_url = args.engine_url or f"http://127.0.0.1:{args.engine_port}"
        result = sweep(engine_url, shape, adapters, settings, log=lambda line: print(line, flush=True))
    except (RuntimeError, TimeoutError, ValueError, OSError) as error:
        print(f"FAIL runtime.measure: {error}", file=sys.stderr, flush=True)
        return 1
    finally:
        if server is not None:
            stop(server)
    if gpu is None:
        from serving_app.engine.compile_cache import gpu_name  # noqa: PLC0415 (the image's; not on the CLI path)

        gpu = gpu_name()
    measured = curve(
        result,
        instance_type=args.instance_type,
        job_name=args.job_name,
        gpu=gpu,
        think_s=settings.think_s,
        today=dt.datetime.now(dt.UTC).date(),
    )
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "raw.json").write_text(json.dumps(result_json(result)))
    (args.output_dir / capacity_job.RESULT_FILE).write_text(json.dumps(measured.to_json(), indent=1))
    holds = result.verdict.holds_per_min
    print(
        f"runtime.measure: {len(measured.steps)} steps; holds cold {holds['cold']}, warm {holds['warm']} req/min; "
        f"cliff {result.verdict.cliff_per_min} -> {args.output_dir / capacity_job.RESULT_FILE}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
