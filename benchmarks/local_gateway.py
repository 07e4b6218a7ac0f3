"""Running the serving container's entrypoint on this machine: its ports, its command line, its output.

The container tests (scripted engine), the real-engine tests and the benchmarks all start
``python -m serving_app serve`` as the image's ENTRYPOINT does, with their own model folders and
ports; this module is the one place that spells that command, reserves those ports
(:class:`PortReservation`) and reads a failed start's log (:func:`first_error`).
"""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType

LOOPBACK = "127.0.0.1"


class PortReservation:
    """A TCP port on 127.0.0.1 held for a server this process starts, until :meth:`release`.

    A port found free and closed before its server binds it can be taken in between by any
    process that binds port 0 (issue 44: the fake engine's port answered with another server's
    404). A reservation keeps its socket bound, with ``SO_REUSEADDR`` and never listening, for
    the server's whole life. Linux then never hands the port to another ``bind(("", 0))`` nor
    to an outgoing connection, while a server that sets ``SO_REUSEADDR`` (uvicorn, vLLM's API
    server, asyncio, ``http.server``: all of ours) can still bind it and listen, because no
    socket listens there yet (``inet_csk_bind_conflict``, net/ipv4/inet_connection_sock.c;
    tests/unit/devtools/test_port_reservation.py shows both in a private network namespace).
    Connections reach the listener only; the held socket takes none.

    ``port`` 0 (the default) lets the kernel pick one; a fixed port is reserved as it is, and
    raises :class:`OSError` naming it when a server already listens there. The socket is not
    inherited by child processes (PEP 446).
    """

    def __init__(self, port: int = 0) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((LOOPBACK, port))
        except OSError as error:
            self._socket.close()
            raise OSError(error.errno, f"port {port} on {LOOPBACK} cannot be reserved: {error.strerror}") from None
        self.port: int = self._socket.getsockname()[1]

    def release(self) -> None:
        """Close the held socket (idempotent); the port is anyone's again."""
        self._socket.close()

    def __enter__(self) -> PortReservation:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.release()


def reserve_ports(count: int) -> list[PortReservation]:
    """``count`` kernel-picked reservations, all held at once (so all distinct)."""
    return [PortReservation() for _ in range(count)]


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


def collect_lines(
    process: subprocess.Popen[str],
    merged: list[str] | None = None,
    readers: list[threading.Thread] | None = None,
) -> tuple[list[str], list[str]]:
    """Lists that fill with ``process``'s stdout and stderr lines (newline stripped) as it writes.

    Daemon threads read both pipes so the process never blocks on a full one; the process must
    have been started with ``stdout=PIPE, stderr=PIPE, text=True``. ``merged``, when given, also
    gets every line of both, in the order they were read: vLLM logs to stdout and the gateway
    to stderr, and a failure reads best in one sequence (:func:`explain_exit`). ``readers``, when
    given, gets the two reading threads: joined, every line written before the pipes closed is in.
    """
    stdout: list[str] = []
    stderr: list[str] = []
    for stream, sink in ((process.stdout, stdout), (process.stderr, stderr)):
        assert stream is not None, "start the process with stdout=PIPE and stderr=PIPE"
        sinks = (sink,) if merged is None else (sink, merged)
        reader = threading.Thread(target=_pump, args=(stream, sinks), daemon=True)
        reader.start()
        if readers is not None:
            readers.append(reader)
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


_PROCESS_TAG = re.compile(r"^(\(\w+ pid=\d+\) )")
"""vLLM's prefix on a child process's line: ``(EngineCore pid=12)``, ``(Worker pid=9)``, ``(APIServer pid=7)``."""
_ERROR_HEADER = re.compile(
    r"^(?:(?:ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d \[[^\]]+\] "  # vLLM's logger (vllm/logger.py)
    r"|\S+ \S+ (?:ERROR|CRITICAL) \S+: )"  # the gateway's (serving_app.main: time, level, logger)
)
_LOG_HEADER = re.compile(r"^(?:[A-Z]+ \d\d-\d\d \d\d:\d\d:\d\d \[[^\]]+\] ?)")
TRACEBACK = "Traceback (most recent call last):"
FRAMES_KEPT = 2
"""Innermost frames of the first traceback that :func:`first_error` keeps (the raise and its caller)."""


def _parts(line: str) -> tuple[str, str]:
    """(process tag or '', the line's text without the tag and vLLM's log header)."""
    tag = _PROCESS_TAG.match(line)
    prefix = tag.group(1) if tag else ""
    return prefix, _LOG_HEADER.sub("", line[len(prefix) :], count=1)


def _starts_error(line: str) -> bool:
    tag, text = _parts(line)
    return text.startswith(TRACEBACK) or _ERROR_HEADER.match(line[len(tag) :]) is not None


def first_error(lines: Sequence[str]) -> tuple[int, list[str]] | None:
    """The first error block of a server's log: (its index in ``lines``, its lines, shortened), or None.

    A block starts at the first ERROR/CRITICAL line of vLLM's or the gateway's logger, or at the
    first ``Traceback``; when a traceback follows, it runs through it (lines with the same
    ``(Name pid=N)`` tag; other processes' lines interleave) to the exception line, which names
    the root cause. vLLM's engine core logs it first and the API server's "Engine core
    initialization failed. See root cause above" last (issue 44), so a log's tail alone hides
    it. Frames between the first and the :data:`FRAMES_KEPT` innermost become one ``... N frames
    ...`` line.
    """
    start = next((i for i, line in enumerate(lines) if _starts_error(line)), None)
    if start is None:
        return None
    tag, text = _parts(lines[start])
    block = [lines[start]]
    in_traceback = text.startswith(TRACEBACK)
    for line in lines[start + 1 :]:
        other, text = _parts(line)
        if other != tag or not text.strip():
            continue
        if not in_traceback and not text.startswith(TRACEBACK):
            break  # an error line with no traceback after it: that line is the block
        block.append(line)
        if in_traceback and not text[0].isspace():
            break  # ``SomeError: message``, the end of the traceback
        in_traceback = True
    frames = [i for i, line in enumerate(block) if _parts(line)[1].lstrip().startswith('File "')]
    if len(frames) > FRAMES_KEPT:
        cut_from, cut_to = frames[0], frames[-FRAMES_KEPT]
        block = [*block[:cut_from], f"... {len(frames) - FRAMES_KEPT} frames ...", *block[cut_to:]]
    return start, block


def explain_exit(lines: Sequence[str], tail: int = 15) -> str:
    """What a failed start printed, for an assertion message: :func:`first_error` and the last ``tail`` lines."""
    found = first_error(lines)
    last = "\n".join(lines[-tail:])
    if found is None:
        return f"no error block in {len(lines)} lines; last {min(tail, len(lines))}:\n{last}"
    start, block = found
    first = "\n".join(block)
    return f"first error (line {start + 1} of {len(lines)}):\n{first}\nlast {min(tail, len(lines))} lines:\n{last}"


def _pump(stream: Iterable[str], sinks: Sequence[list[str]]) -> None:
    for line in stream:
        for sink in sinks:
            sink.append(line.rstrip("\n"))
