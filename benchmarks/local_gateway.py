"""Running the serving container's entrypoint on this machine: a free port, its command line, its output.

The container tests (scripted engine), the real-engine tests and the benchmarks all start
``python -m serving_app serve`` as the image's ENTRYPOINT does, with their own model folders and
ports; this module is the one place that spells that command.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it; racy but fine for tests)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_command(
    python: str | Path,
    *,
    port: int,
    engine_port: int,
    model_root: Path,
    engine_command: str | None = None,
    command: Sequence[str] = ("serve",),
) -> list[str]:
    """argv of the gateway: ``python -m serving_app serve`` on 127.0.0.1:``port``, vLLM on ``engine_port``.

    ``model_root`` holds ``base/`` and ``adapters/`` (the image's /opt/model layout).
    ``engine_command`` replaces vLLM (the container tests' scripted engine); None runs vLLM.
    ``command`` is the entrypoint's command and its own arguments, e.g. ``("make-compile-cache",
    "--environment-file", F, "--output-dir", D)``.
    """
    argv = [
        str(python),
        "-m",
        "serving_app",
        command[0],
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--engine-port",
        str(engine_port),
        "--model-dir",
        str(model_root / "base"),
        "--adapter-dir",
        str(model_root / "adapters"),
    ]
    if engine_command is not None:
        argv += ["--engine-command", engine_command]
    argv += command[1:]
    return argv


def collect_lines(process: subprocess.Popen[str]) -> tuple[list[str], list[str]]:
    """Lists that fill with ``process``'s stdout and stderr lines (newline stripped) as it writes.

    Daemon threads read both pipes so the process never blocks on a full one; the process must
    have been started with ``stdout=PIPE, stderr=PIPE, text=True``.
    """
    stdout: list[str] = []
    stderr: list[str] = []
    for stream, sink in ((process.stdout, stdout), (process.stderr, stderr)):
        assert stream is not None, "start the process with stdout=PIPE and stderr=PIPE"
        threading.Thread(target=_pump, args=(stream, sink), daemon=True).start()
    return stdout, stderr


def wait_for_line(lines: list[str], *fragments: str, timeout_s: float) -> str:
    """The first of ``lines`` (a list ``collect_lines`` fills) holding every fragment, waited for.

    The reading thread can trail the HTTP answer or the exit that caused the line, most on a
    loaded machine. Raises AssertionError naming the fragments and the last lines after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        for line in list(lines):
            if all(fragment in line for fragment in fragments):
                return line
        if time.monotonic() > deadline:
            raise AssertionError(f"no log line with {fragments!r} in {timeout_s:g} s; last: {lines[-15:]}")
        time.sleep(0.05)


def _pump(stream: Iterable[str], sink: list[str]) -> None:
    for line in stream:
        sink.append(line.rstrip("\n"))
