"""``serve``: the container entrypoint.

``docker run <image> serve`` (the SageMaker contract) lands here. Order: parse and validate
the environment (exit 2 with one line on a bad value), check the baked adapters against
LORA_ADAPTERS / LORA_MAX_RANK, then run the gateway, whose lifespan starts vLLM, waits for
``/health`` within STARTUP_TIMEOUT_S, warms every adapter and only then reports ready.
SIGTERM drains (see :mod:`serving_app.lifecycle.drain`) and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import shlex
import signal
import sys
from collections.abc import Generator, Sequence
from pathlib import Path

import uvicorn

from serving_app.app import create_app
from serving_app.artifacts import ArtifactError, check_adapters, check_base_model
from serving_app.engine.process import EngineProcess
from serving_app.gateway import Gateway
from serving_app.settings import Settings, SettingsError
from serving_app.transport import KEEP_ALIVE_S, LIMIT_CONCURRENCY, TransportLimits, limited_protocol
from serving_app.vllm_args import (
    ENGINE_HOST,
    EnginePaths,
    build_vllm_args,
    default_engine_command,
    engine_environment,
)
from serving_contract import env

log = logging.getLogger("serving_app")

EXIT_CONFIG = 2
"""Exit status for a bad environment variable or a missing baked artifact."""


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
        choices=["serve"],
        help="SageMaker runs the image with 'serve'",
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
    args = _parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        settings = Settings.from_env(os.environ)
    except SettingsError as exc:
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
    engine = EngineProcess(
        [*command, *build_vllm_args(settings, paths)],
        engine_environment(settings, dict(os.environ)),
    )
    return _run(settings, engine, args.host, args.port, f"http://{ENGINE_HOST}:{args.engine_port}")


def _run(settings: Settings, engine: EngineProcess, host: str, port: int, upstream_url: str) -> int:
    exit_code: list[int] = []
    server: list[_Server] = []

    def request_exit(code: int) -> None:
        if not exit_code:
            exit_code.append(code)
        if server:
            server[0].should_exit = True

    gateway = Gateway(settings, upstream_url=upstream_url, engine=engine, request_exit=request_exit)
    config = uvicorn.Config(
        create_app(gateway),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=env.UVICORN_SHUTDOWN_GRACE_S,
        timeout_keep_alive=KEEP_ALIVE_S,
        # Header caps, the request read deadline and the early 413 (serving_app.transport).
        http=limited_protocol(TransportLimits(request_read_timeout_s=settings.request_read_timeout_s)),
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
