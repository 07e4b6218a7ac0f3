"""benchmarks/local_gateway.PortReservation (issue 44): a reserved port is the server's, and nobody else's.

The kernel behaviour it relies on is checked here, on this kernel: a server that sets
``SO_REUSEADDR`` binds and serves a reserved port; a plain bind is refused; a port a server listens
on cannot be reserved; and, in a private network namespace whose ephemeral range is narrowed to a
few ports, kernel-picked binds and outgoing connections use every other port and never the
reserved one, which is what the helper it replaced (bind, read the port, close) could not promise.
"""

from __future__ import annotations

import errno
import http.server
import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from local_gateway import LOOPBACK, PortReservation, reserve_ports


def test_a_server_that_sets_so_reuseaddr_binds_the_reserved_port_and_serves() -> None:
    with PortReservation() as reservation:
        # http.server sets SO_REUSEADDR (allow_reuse_address), as uvicorn and vLLM's API server do.
        server = http.server.HTTPServer((LOOPBACK, reservation.port), http.server.SimpleHTTPRequestHandler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{reservation.port}/", timeout=10) as answer:
                assert answer.status == 200
        finally:
            server.shutdown()
            server.server_close()


def test_a_plain_bind_of_a_reserved_port_is_refused_until_it_is_released() -> None:
    reservation = PortReservation()
    with socket.socket() as other, pytest.raises(OSError) as refused:
        other.bind((LOOPBACK, reservation.port))
    assert refused.value.errno == errno.EADDRINUSE
    reservation.release()
    reservation.release()  # idempotent
    with socket.socket() as other:
        other.bind((LOOPBACK, reservation.port))


def test_reservations_held_together_are_distinct() -> None:
    held = reserve_ports(8)
    try:
        assert len({r.port for r in held}) == 8
    finally:
        for reservation in held:
            reservation.release()


def test_a_port_a_server_listens_on_cannot_be_reserved_and_the_error_names_it() -> None:
    with socket.socket() as listener:
        listener.bind((LOOPBACK, 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(OSError) as refused:
            PortReservation(port)
    assert refused.value.errno == errno.EADDRINUSE
    assert str(refused.value) == f"[Errno {errno.EADDRINUSE}] port {port} on 127.0.0.1 cannot be reserved: " + (
        "Address already in use"
    )


# Runs inside the namespace: reserve one port, then take every other one the kernel hands out.
_EXHAUST = """
import json, socket, sys
sys.path.insert(0, sys.argv[1])
from local_gateway import LOOPBACK, PortReservation

low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
reservation = PortReservation()
bound, connected, held = [], [], []
while True:  # bind(("", 0)) as a server asking for any port does, SO_REUSEADDR set as most do
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, 0))
    except OSError:
        break
    sock.listen()
    held.append(sock)
    bound.append(sock.getsockname()[1])
target = held[0].getsockname()
for sock in held[1:]:  # free them again, for the connections' turn
    sock.close()
while True:  # outgoing connections pick their local port from the same range
    client = socket.socket()
    try:
        client.connect(target)
    except OSError:
        break
    held.append(client)
    connected.append(client.getsockname()[1])
print(json.dumps({"range": [low, high], "reserved": reservation.port, "bound": bound, "connected": connected}))
"""
_NAMESPACE_RANGE = (40000, 40011)
"""Twelve ports: the kernel gives bind() the odd ones and connect() the even ones first (Linux >= 4.6)."""


def _in_private_network_namespace(script: str) -> subprocess.CompletedProcess[str]:
    low, high = _NAMESPACE_RANGE
    setup = f'ip link set lo up && echo \'{low} {high}\' > /proc/sys/net/ipv4/ip_local_port_range && exec "$0" "$@"'
    benchmarks = str(Path(__file__).resolve().parents[3] / "benchmarks")
    return subprocess.run(
        ["unshare", "--user", "--map-root-user", "--net", "sh", "-c", setup, sys.executable, "-c", script, benchmarks],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _namespace_unavailable() -> str | None:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "needs unshare (util-linux) and ip (iproute2)"
    probe = _in_private_network_namespace("pass")
    if probe.returncode != 0:
        return f"cannot make a private network namespace here: {probe.stderr.strip()[:200]}"
    return None


@pytest.mark.skipif(_namespace_unavailable() is not None, reason=str(_namespace_unavailable()))
def test_the_kernel_hands_every_other_port_out_but_never_the_reserved_one() -> None:
    """The whole ephemeral range, exhausted twice in a namespace of its own (the machine's ports are
    untouched): the race issue 44 saw needs the kernel to hand a freed port to someone else."""
    done = _in_private_network_namespace(_EXHAUST)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    low, high = seen["range"]
    assert (low, high) == _NAMESPACE_RANGE
    everything_else = set(range(low, high + 1)) - {seen["reserved"]}
    assert seen["reserved"] not in seen["bound"] + seen["connected"]
    assert set(seen["bound"]) == everything_else  # every other port was handed out: the range was exhausted
    assert set(seen["connected"]) == everything_else - {seen["bound"][0]}


def test_the_port_churn_serves_on_ports_the_kernel_picks_and_reports_them() -> None:
    """devtools/port_churn.py, the process the issue's CI run keeps beside the suite."""
    done = subprocess.run(
        [sys.executable, "-m", "devtools.port_churn", "--seconds", "1"],
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    cycles, ports = (int(n) for n in re.findall(r"(\d+) ", done.stdout)[:2])
    assert re.fullmatch(r"port churn: \d+ servers on \d+ distinct kernel-picked ports in 1 s\n", done.stdout)
    assert cycles >= ports >= 1
