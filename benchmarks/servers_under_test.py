"""The two servers gpu_serving.py compares: bare vLLM with exactly the argv the container builds,
and the container's entrypoint (``serving_app``) in front of it. Start, time, read vLLM's log.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
for path in (REPO, REPO / "container"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from local_gateway import PortReservation, explain_exit, serve_command  # noqa: E402
from serving_app.settings import Settings  # noqa: E402
from serving_app.vllm_args import ENGINE_MODULE, EnginePaths, build_vllm_args  # noqa: E402

# Lines of vLLM's start-up log the report keeps (vllm/v1/worker/gpu_worker.py,
# gpu_model_runner.py, v1/core/kv_cache_utils.py, v1/engine/core.py; the same text in 0.22 and 0.26
# except the AWQ kernel line).
LOG_FIGURES = {
    "kv_cache_tokens": re.compile(r"GPU KV cache size: ([\d,]+) tokens"),
    "max_concurrency": re.compile(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x"),
    "model_loading_gib": re.compile(r"Model loading took ([\d.]+) GiB"),
    "available_kv_gib": re.compile(r"Available KV cache memory: ([\d.]+) GiB"),
    "cudagraph_estimate_gib": re.compile(r"Estimated CUDA graph memory: ([\d.]+) GiB"),
    "init_engine_s": re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"),
    "torch_compile_s": re.compile(r"torch\.compile took ([\d.]+) s in total"),
    # vLLM 0.26 auto_awq.py: "Using MarlinLinearKernel for AutoAWQMarlinLinearMethod" (Machete on
    # Hopper), whether --quantization is unset, awq or awq_marlin. vLLM 0.22's awq_marlin.py logged
    # "... for AWQMarlinLinearMethod", or "... so forcing awq" when --quantization awq was explicit.
    "kernel": re.compile(r"(Using \w+ for (?:Auto)?AWQMarlinLinearMethod|so forcing awq)"),
    # vllm/compilation/backends.py, when the compile cache holds this config's graphs.
    "compile_cache_hit": re.compile(r"(Directly load the compiled graph)"),
}


@dataclass
class ServerRun:
    """One server process: how long it took to answer its readiness route, what vLLM logged."""

    name: str
    kind: str  # "bare" (vLLM's /health) or "gateway" (SageMaker's /ping)
    port: int
    log_path: Path
    process: subprocess.Popen[bytes]
    spawned: float
    ready_s: float | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    engine_port: int = 0
    """vLLM's port: ``port`` itself for ``bare``, the gateway's engine port for ``gateway``."""
    reservations: list[PortReservation] = field(default_factory=list)
    """The server's ports, held from before its start to :meth:`stop` (``local_gateway.PortReservation``)."""

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: where the load generator sends requests."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def chat_url(self) -> str:
        """Where the load goes: vLLM's OpenAI chat route, or the gateway's /invocations."""
        return self.base_url + ("/v1/chat/completions" if self.kind == "bare" else "/invocations")

    def wait_ready(self, timeout_s: float) -> float:
        """Seconds from spawn to readiness (200 from /health or /ping); raises if it exits."""
        route = "/health" if self.kind == "bare" else "/ping"
        deadline = self.spawned + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                lines = self.log_path.read_text(errors="replace").splitlines()
                raise RuntimeError(
                    f"{self.name} exited with {self.process.returncode}; see {self.log_path}\n{explain_exit(lines)}"
                )
            with (
                contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError),
                urllib.request.urlopen(self.base_url + route, timeout=2) as response,
            ):
                if response.status == 200:
                    self.ready_s = round(time.monotonic() - self.spawned, 1)
                    self.figures = read_figures(self.log_path)
                    return self.ready_s
            time.sleep(0.25)
        raise TimeoutError(f"{self.name} not ready in {timeout_s} s; see {self.log_path}")

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it after 30 s (SageMaker's grace)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        for reservation in self.reservations:
            reservation.release()


def stop_servers_on_sigterm() -> None:
    """Turn SIGTERM into KeyboardInterrupt in this process: ``timeout`` (gpu_session.sh) sends
    SIGTERM, and unwinding lets every ``finally`` stop its servers, which run in sessions of their
    own and would otherwise outlive this process."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def read_figures(log_path: Path) -> dict[str, Any]:
    """The start-up figures of :data:`LOG_FIGURES` found in a vLLM log (first match each)."""
    text = log_path.read_text(errors="replace")
    found: dict[str, Any] = {}
    for key, pattern in LOG_FIGURES.items():
        match = pattern.search(text)
        if match:
            value = match.group(1).replace(",", "")
            found[key] = value if key in ("kernel", "compile_cache_hit") else float(value)
    return found


def start(
    *,
    name: str,
    kind: str,
    settings_env: Mapping[str, str],
    model_root: Path,
    port: int,
    engine_port: int,
    log_dir: Path,
    cpus: str | None = None,
    extra_env: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
    gateway_command: Sequence[str] = ("serve",),
) -> ServerRun:
    """Spawn a server; ``settings_env`` is the container environment (as the stack sets it).

    ``port`` (and, for ``gateway``, ``engine_port``) are reserved before the spawn and held until
    :meth:`ServerRun.stop`; 0 lets the kernel pick one (the CPU smoke runs in the test suite). A
    fixed port a server already listens on raises :class:`OSError` naming it.
    ``extra_args`` are vLLM flags appended to the container's argv (for options the config does
    not have yet): directly for ``bare``, through ``benchmarks/vllm_with_args.py`` as the
    gateway's engine command for ``gateway``.
    """
    if kind not in ("bare", "gateway"):
        raise ValueError(f"kind {kind!r}: bare or gateway")
    reservations = [PortReservation(port)] + ([PortReservation(engine_port)] if kind == "gateway" else [])
    port = reservations[0].port
    engine_port = reservations[-1].port
    environ = {**os.environ, **settings_env, **(extra_env or {})}
    environ["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "container"), str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    environ["PYTHONUNBUFFERED"] = "1"
    if kind == "bare":
        settings = Settings.from_env(settings_env)
        paths = EnginePaths(model_dir=model_root / "base", adapter_dir=model_root / "adapters", port=port)
        command: Sequence[str] = [sys.executable, "-m", ENGINE_MODULE, *build_vllm_args(settings, paths), *extra_args]
    else:
        engine_command = None
        if extra_args:
            environ["BENCH_EXTRA_VLLM_ARGS"] = shlex.join(extra_args)
            engine_command = shlex.join([sys.executable, str(REPO / "benchmarks" / "vllm_with_args.py")])
        command = serve_command(
            sys.executable,
            port=port,
            engine_port=engine_port,
            model_root=model_root,
            engine_command=engine_command,
            command=gateway_command,
        )
    if cpus:
        # Every process of the server (API server, engine core, gateway) inherits the set.
        command = ["taskset", "-c", cpus, *command]
    log_path = log_dir / f"{name}.log"
    handle = log_path.open("wb")
    process = subprocess.Popen(
        list(command), env=environ, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
    )
    return ServerRun(
        name=name,
        kind=kind,
        port=port,
        log_path=log_path,
        process=process,
        spawned=time.monotonic(),
        engine_port=engine_port,
        reservations=reservations,
    )


JIT_LINE = re.compile(r"Triton kernel JIT compilation during inference: (\w+)")
"""vLLM's JIT monitor: a Triton kernel compiled while serving (issue 35: none once /ping is green)."""


def triton_cache_entries() -> int:
    """Kernels in Triton's on-disk cache (TRITON_CACHE_DIR, else ~/.triton/cache): one more after
    readiness is a compile that no warm-up and no earlier engine made."""
    root = Path(os.environ.get("TRITON_CACHE_DIR") or Path.home() / ".triton" / "cache")
    return sum(1 for _ in root.iterdir()) if root.is_dir() else 0


def jit_lines(log_path: Path) -> list[str]:
    """Kernel names of vLLM's post-warm-up JIT warnings in the engine log, in order."""
    return JIT_LINE.findall(log_path.read_text(errors="replace"))
