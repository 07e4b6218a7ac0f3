"""``serve`` and ``make-compile-cache``: the container entrypoint.

``docker run <image> serve`` (the SageMaker contract) lands here. Order: parse and validate
the environment (exit 2 with one line on a bad value), check the baked adapters against
LORA_ADAPTERS / LORA_MAX_RANK, load a made compile cache if the model has one
(:mod:`serving_app.engine.compile_cache`), then run the gateway, whose lifespan starts vLLM,
waits for ``/health`` within STARTUP_TIMEOUT_S, warms every adapter and only then reports
ready. SIGTERM drains (see :mod:`serving_app.lifecycle.drain`) and exits 0.

``make-compile-cache`` (the cache-making job's command) starts the same way with the model's
environment read from ``--environment-file`` (a JSON object: a processing job's own
environment values stop at 256 characters), and once ready copies the engine's compile cache
and a manifest to ``--output-dir`` and exits 0 (1 when the copy fails). With
``--lora-tuning-budget-s N`` (N > 0) it then, once the engine has stopped and the GPU is free,
tunes vLLM's LoRA kernels on that GPU within N seconds into ``--output-dir``/lora-configs
(:mod:`serving_app.lora_tuning.job_step`). That step never changes the exit status: without
tuned configs models use vLLM's defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shlex
import shutil
import signal
import sys
from collections.abc import Callable, Generator, Sequence
from pathlib import Path

import uvicorn

from serving_app.app import create_app
from serving_app.artifacts import ArtifactError, check_adapters, check_base_model
from serving_app.engine import compile_cache
from serving_app.engine.process import EngineProcess
from serving_app.gateway import Gateway
from serving_app.lora_tuning import job_step
from serving_app.settings import Settings, SettingsError
from serving_app.transport import KEEP_ALIVE_S, LIMIT_CONCURRENCY, TransportLimits, limited_protocol
from serving_app.versions import ModelVersions
from serving_app.vllm_args import (
    ENGINE_HOST,
    EnginePaths,
    build_vllm_args,
    default_engine_command,
    engine_environment,
)
from serving_contract import compile_cache as cache_contract
from serving_contract import env

log = logging.getLogger("serving_app")

EXIT_CONFIG = 2
"""Exit status for a bad environment variable or a missing baked artifact."""

MAKE_COMPILE_CACHE = "make-compile-cache"


class _Server(uvicorn.Server):
    """uvicorn server that leaves SIGTERM/SIGINT to us: uvicorn's own handler would stop
    listening at once, but the drain must keep answering ``/ping`` and refusals with 503."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="serve", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "command",
        nargs="?",
        default="serve",
        choices=["serve", MAKE_COMPILE_CACHE],
        help="SageMaker runs the image with 'serve'; the cache-making job with 'make-compile-cache'",
    )
    parser.add_argument(
        "--environment-file",
        type=Path,
        help="make-compile-cache: JSON object of the model's container environment, applied before anything is read",
    )
    parser.add_argument("--output-dir", type=Path, help="make-compile-cache: where the cache and its manifest go")
    parser.add_argument(
        cache_contract.LORA_TUNING_BUDGET_ARG,
        dest="lora_tuning_budget_s",
        type=int,
        default=0,
        help="make-compile-cache: after the engine stops, tune vLLM's LoRA kernels within this many seconds (0: no)",
    )
    parser.add_argument(
        "--tuner-command",
        default=None,
        help="make-compile-cache: tuner executable + leading args (default: python -m serving_app.lora_tuning); "
        "tests point it at a fake",
    )
    parser.add_argument("--host", default="0.0.0.0", help="gateway bind address")
    parser.add_argument("--port", type=int, default=8080, help="SageMaker contract port")
    parser.add_argument("--engine-port", type=int, default=8081, help="vLLM's port on 127.0.0.1")
    parser.add_argument("--model-dir", type=Path, default=Path("/opt/model/base"))
    parser.add_argument("--adapter-dir", type=Path, default=Path("/opt/model/adapters"))
    parser.add_argument(
        "--engine-command",
        default=None,
        help="engine executable + leading args (default: python -m "
        "vllm.entrypoints.openai.api_server); tests point it at a fake",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    making = args.command == MAKE_COMPILE_CACHE
    if making and (args.environment_file is None or args.output_dir is None):
        parser.error(f"{MAKE_COMPILE_CACHE} needs --environment-file and --output-dir")
    if args.lora_tuning_budget_s < 0:
        parser.error(
            f"{cache_contract.LORA_TUNING_BUDGET_ARG} {args.lora_tuning_budget_s}: must be >= 0 (0: no tuning)"
        )
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if making:
        try:
            os.environ.update(_environment_file(args.environment_file))
        except ValueError as exc:
            print(f"serve: configuration error: {exc}", file=sys.stderr, flush=True)
            return EXIT_CONFIG
        # The job compiles from nothing: a cache named by the model's environment is the one
        # being made, so it is never read here.
        os.environ.pop(cache_contract.COMPILE_CACHE_DIR, None)
    try:
        settings = Settings.from_env(os.environ)
    except SettingsError as exc:
        print(f"serve: configuration error: {exc}", file=sys.stderr, flush=True)
        return EXIT_CONFIG
    try:
        ModelVersions.from_env(os.environ, settings.served_model_name)  # the gateway reads it again, valid
    except ValueError as exc:
        print(f"serve: configuration error: {exc}", file=sys.stderr, flush=True)
        return EXIT_CONFIG
    try:
        check_base_model(args.model_dir)
        check_adapters(args.adapter_dir, settings.lora_adapters, settings.max_lora_rank)
    except ArtifactError as exc:
        print(f"serve: artifact error: {exc}", file=sys.stderr, flush=True)
        return EXIT_CONFIG
    paths = EnginePaths(model_dir=args.model_dir, adapter_dir=args.adapter_dir, port=args.engine_port)
    command = shlex.split(args.engine_command) if args.engine_command else default_engine_command()
    environ = engine_environment(settings, dict(os.environ))
    plan = compile_cache.prepare(environ)
    engine = EngineProcess([*command, *build_vllm_args(settings, paths)], environ)
    on_ready = _make_cache(plan, args.output_dir) if making else plan.report_after_ready
    code = _run(settings, engine, args.host, args.port, f"http://{ENGINE_HOST}:{args.engine_port}", on_ready=on_ready)
    if making and code == 0:
        # The engine has stopped (the gateway's lifespan waits for its exit): the GPU is the tuner's.
        _tune_lora_kernels(settings, args.output_dir, args.lora_tuning_budget_s, args.tuner_command)
    return code


def _tune_lora_kernels(settings: Settings, output_dir: Path, budget_s: int, tuner_command: str | None) -> None:
    """The job's LoRA tuning step and its line in the manifest; any failure is logged, never raised:
    the compile cache is already made and is published either way."""
    try:
        outcome = job_step.run(
            output_dir,
            budget_s=budget_s,
            serves_lora=bool(settings.lora_adapters or settings.lora_runtime_adapters),
            max_loras=settings.max_loras,
            gpu_name=compile_cache.gpu_name(),
            command=shlex.split(tuner_command) if tuner_command else None,
        )
        compile_cache.record_lora_tuning(output_dir, files=outcome.files, line=outcome.line)
    except Exception as exc:  # an optimisation: nothing here may cost the job its cache
        # Configs the manifest does not name would make every model reject the whole cache.
        shutil.rmtree(output_dir / cache_contract.LORA_CONFIGS_SUBDIR, ignore_errors=True)
        log.exception("lora tuning: failed (%s); the compile cache is published without tuned configs", exc)


def _environment_file(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"--environment-file {path}: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise ValueError(f"--environment-file {path}: must be a JSON object of strings to strings")
    return data


def _make_cache(plan: compile_cache.CachePlan, output_dir: Path) -> Callable[[float], int | None]:
    def on_ready(ready_s: float) -> int | None:
        try:
            compile_cache.write_made_cache(
                plan.root,
                output_dir,
                key=os.environ.get(cache_contract.COMPILE_CACHE_KEY, ""),
                gpu_name=compile_cache.gpu_name(),
            )
        except (OSError, ValueError) as exc:
            log.error("compile cache: not made: %s", exc)
            return 1
        log.info("compile cache: made after %.1f s to ready", ready_s)
        return 0

    return on_ready


def _run(
    settings: Settings,
    engine: EngineProcess,
    host: str,
    port: int,
    upstream_url: str,
    *,
    on_ready: Callable[[float], object] | None = None,
) -> int:
    exit_code: list[int] = []
    server: list[_Server] = []

    def request_exit(code: int) -> None:
        if not exit_code:
            exit_code.append(code)
        if server:
            server[0].should_exit = True

    def ready(ready_s: float) -> None:
        # on_ready returns an exit status when the process has done its job (make-compile-cache).
        if on_ready is not None and isinstance(code := on_ready(ready_s), int):
            request_exit(code)

    gateway = Gateway(settings, upstream_url=upstream_url, engine=engine, request_exit=request_exit, on_ready=ready)
    limits = gateway.invocations.limits
    transport = TransportLimits(
        request_read_timeout_s=settings.request_read_timeout_s,
        max_body_bytes=limits.max_body_bytes,
        body_bound=limits.body_bound,
    )
    config = uvicorn.Config(
        create_app(gateway),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=env.UVICORN_SHUTDOWN_GRACE_S,
        timeout_keep_alive=KEEP_ALIVE_S,
        # Header caps, the request read deadline and the early 413 (serving_app.transport): a body
        # over /invocations' bound is refused from its Content-Length, never read or parsed.
        http=limited_protocol(transport),
        limit_concurrency=LIMIT_CONCURRENCY,
        proxy_headers=False,  # SageMaker is the only client; no X-Forwarded-* rewriting
    )
    server.append(_Server(config))

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, gateway.begin_drain)
        await server[0].serve()

    try:
        import uvloop  # noqa: PLC0415  (optional speed-up; pinned in requirements.txt)
    except ImportError:  # pragma: no cover - the image and the dev env both have it
        asyncio.run(serve())
    else:
        uvloop.run(serve())
    log.info("serve: exiting with %d", exit_code[0] if exit_code else 0)
    return exit_code[0] if exit_code else 0
