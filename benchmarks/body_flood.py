"""What a 6 MB ``/invocations`` body of tiny messages costs the gateway and everyone else (issue 49, finding 4).

Sends ``--messages`` one-character user messages in one chat body (174,000 is ~5.9 MB, under SageMaker's
6 MB) while a thread polls ``GET /ping`` back to back, and prints, over ``--rounds``, the median time to the
answer and the median of each round's worst ``/ping`` wait: ``/ping`` never awaits the engine, so its wait is
the event loop's stall. On 7e6fc9b the body was parsed and validated on the event loop; now the transport
refuses it from its ``Content-Length`` (413).

    python benchmarks/body_flood.py                        # a gateway in front of the scripted engine
    python benchmarks/body_flood.py --gateway-url http://127.0.0.1:8080   # one already running

The scripted engine is ``tests/container/fake_vllm.py`` through the tests' ``Serve`` harness (run from the
repository root). Timings depend on the machine: compare two revisions on the same one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from cli_support.argtypes import int_in  # noqa: E402


@contextlib.contextmanager
def gateway(url: str | None) -> Iterator[str]:
    """``url``, or a gateway started in front of the scripted engine for the run."""
    if url:
        yield url
        return
    from tests.container.conftest import Serve  # noqa: PLC0415 - only without --gateway-url

    server = Serve(Path(tempfile.mkdtemp(prefix="body-flood-")))
    try:
        server.wait_ready()
        yield server.url
    finally:
        server.stop()


def one_round(url: str, body: bytes) -> tuple[int, float, float]:
    """``(status, seconds to the answer, worst /ping wait in seconds)`` of one flood."""
    waits: list[float] = []
    stop = threading.Event()

    def poll() -> None:
        with httpx.Client(timeout=30) as client:
            while not stop.is_set():
                started = time.perf_counter()
                client.get(url + "/ping")
                waits.append(time.perf_counter() - started)

    poller = threading.Thread(target=poll)
    poller.start()
    while not waits:  # the poller is under way before the flood
        time.sleep(0.01)
    started = time.perf_counter()
    response = httpx.post(url + "/invocations", content=body, headers={"content-type": "application/json"}, timeout=120)
    answered = time.perf_counter() - started
    stop.set()
    poller.join()
    return response.status_code, answered, max(waits)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateway-url", default=None, help="a running gateway (default: start one, scripted engine)")
    parser.add_argument("--messages", type=int_in(1, 200_000), default=174_000, help="messages in the body")
    parser.add_argument("--rounds", type=int_in(1, 100), default=5, help="floods sent")
    args = parser.parse_args(argv)
    body = json.dumps({"messages": [{"role": "user", "content": "a"}] * args.messages}).encode()
    with gateway(args.gateway_url) as url:
        rounds = [one_round(url, body) for _ in range(args.rounds)]
    statuses = sorted({status for status, _, _ in rounds})
    answer_ms = statistics.median(r[1] for r in rounds) * 1000
    stall_ms = statistics.median(r[2] for r in rounds) * 1000
    print(
        f"{len(body):,} bytes, {args.messages:,} messages, {args.rounds} rounds: status {statuses}; "
        f"answer median {answer_ms:.0f} ms; worst /ping wait during it, median {stall_ms:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
