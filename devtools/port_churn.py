"""Start and stop an HTTP server on ports the kernel picks, over and over, until stopped.

    python -m devtools.port_churn [--seconds N] [--pause-s S]   # Ctrl-C or SIGTERM ends it; prints what it did

Run beside the test suite (issue 44's "done when": a ``.ci/run`` with another process opening and
closing ports for the whole run): each cycle binds port 0, serves one request to itself and closes,
so every port the kernel hands out is taken for a moment. A test that finds a port free, closes it
and expects it to stay free until its server binds (the race ``local_gateway.PortReservation``
closes) loses it to a cycle sooner or later. Ends with one line: cycles, distinct ports, seconds.
"""

from __future__ import annotations

import argparse
import http.server
import signal
import threading
import time
import urllib.request
from collections.abc import Sequence

from cli_support.argtypes import non_negative_float, positive_float


class _Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # one line at the end instead
        pass


def churn(stop: threading.Event, seconds: float | None = None, pause_s: float = 0.0) -> tuple[int, int, float]:
    """Cycles until ``stop`` is set or ``seconds`` pass, ``pause_s`` apart: (cycles, distinct ports, seconds run)."""
    started = time.monotonic()
    cycles, ports = 0, set()
    while not stop.is_set() and (seconds is None or time.monotonic() - started < seconds):
        server = http.server.HTTPServer(("127.0.0.1", 0), _Quiet)
        port = server.server_address[1]
        thread = threading.Thread(target=server.handle_request, daemon=True)
        thread.start()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as answer:
            answer.read()
        thread.join(timeout=10)
        server.server_close()
        cycles += 1
        ports.add(port)
        stop.wait(pause_s)
    return cycles, len(ports), time.monotonic() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.port_churn", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=positive_float, help="stop after this long (default: until signalled)")
    parser.add_argument(
        "--pause-s",
        type=non_negative_float,
        default=0.01,
        help="between cycles (default 0.01: ~50 servers a second, a few percent of one core; 0: back to back)",
    )
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())
    cycles, ports, seconds = churn(stop, args.seconds, args.pause_s)
    print(f"port churn: {cycles} servers on {ports} distinct kernel-picked ports in {seconds:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
