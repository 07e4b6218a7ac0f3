"""What the serving gateway costs: the same load sent to the upstream directly and through
the gateway, in one run.

Starts the real entrypoint (``python -m serving_app serve``) with ``fast_upstream.py`` as its
engine, waits for ``/ping`` 200, then alternates direct and gateway phases at each
concurrency and reports added latency p50/p99, the throughput ratio, added time to first
chunk for streams, and the gateway's CPU time per request.

Targets (issue 3): p50 added <= 1 ms, p99 added <= 5 ms, throughput >= 0.9x direct.
Note: client, gateway and upstream share this machine's cores, so at high concurrency the
gateway's own CPU use shows up as queueing for everyone. On an endpoint it does too: an
ml.g5.xlarge's 4 vCPUs are shared by the gateway, vLLM's API server (HTTP, detokenisation)
and its engine core (scheduling). benchmarks/gpu_serving.py measures the gateway in front of
the real engine with every server process confined to 4 CPUs (docs/performance.md).

    /work/main/.venv/bin/python benchmarks/serving_overhead.py [--seconds 3] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from local_gateway import explain_exit, reserve_ports, serve_command

REPO = Path(__file__).resolve().parents[1]

UPSTREAM = Path(__file__).with_name("fast_upstream.py")
TARGETS = {"p50_added_ms": 1.0, "p99_added_ms": 5.0, "throughput_ratio": 0.9}
BODY = {
    "model": "base",
    "messages": [
        {"role": "system", "content": "You are MangaAssist, a manga shopping assistant."},
        {"role": "user", "content": "Recommend three action manga for a new reader."},
    ],
    "max_tokens": 64,
}


def tiny_model(root: Path) -> Path:
    """The smallest folder the entrypoint's artifact check accepts (no real weights)."""
    base = root / "base"
    base.mkdir(parents=True)
    (root / "adapters").mkdir()
    for name in ("config.json", "tokenizer_config.json", "tokenizer.json"):
        (base / name).write_text("{}")
    header = json.dumps({"w": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}}).encode()
    (base / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0\0")
    return root


def request_bytes(path: str, stream: bool) -> bytes:
    body = json.dumps({**BODY, "stream": True} if stream else BODY).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, raw: bytes) -> tuple[float, float]:
    """One keep-alive HTTP/1.1 exchange; returns (latency, time to first body chunk) in s."""
    started = time.perf_counter()
    writer.write(raw)
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(head.split(b"\r\n", 1)[0].decode())
    lower = head.lower()
    first = None
    if b"transfer-encoding: chunked" in lower:
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            await reader.readexactly(size + 2)
            if first is None:
                first = time.perf_counter()
    else:
        length = int(lower.split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
        await reader.readexactly(length)
    ended = time.perf_counter()
    return ended - started, (first or ended) - started


async def phase(port: int, raw: bytes, concurrency: int, seconds: float) -> dict[str, Any]:
    """``concurrency`` connections send back-to-back requests for ``seconds``."""
    latencies: list[float] = []
    firsts: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.perf_counter() < deadline:
                latency, first = await call(reader, writer, raw)
                latencies.append(latency)
                firsts.append(first)
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {"latencies": latencies, "firsts": firsts, "elapsed": elapsed}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(gateway_port: int, upstream_port: int, gateway_pid: int, args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    cases = [(c, False) for c in args.concurrency] + [(c, True) for c in args.stream_concurrency]
    for concurrency, stream in cases:
        direct = request_bytes("/v1/chat/completions", stream)
        via = request_bytes("/invocations", stream)
        await phase(upstream_port, direct, concurrency, 0.3)  # open pools, warm caches
        await phase(gateway_port, via, concurrency, 0.3)
        merged: dict[str, dict[str, Any]] = {
            k: {"latencies": [], "firsts": [], "elapsed": 0.0} for k in ("direct", "gateway")
        }
        cpu = 0.0
        for _ in range(args.rounds):
            for name, port, raw in (
                ("direct", upstream_port, direct),
                ("gateway", gateway_port, via),
            ):
                before = cpu_seconds(gateway_pid)
                result = await phase(port, raw, concurrency, args.seconds)
                if name == "gateway":
                    cpu += cpu_seconds(gateway_pid) - before
                for key in ("latencies", "firsts"):
                    merged[name][key] += result[key]
                merged[name]["elapsed"] += result["elapsed"]
        d, g = merged["direct"], merged["gateway"]
        key = "latencies" if not stream else "firsts"
        row = {
            "requests_direct": len(d["latencies"]),
            "requests_gateway": len(g["latencies"]),
            "direct_p50_ms": pct(d[key], 0.50),
            "direct_p99_ms": pct(d[key], 0.99),
            "gateway_p50_ms": pct(g[key], 0.50),
            "gateway_p99_ms": pct(g[key], 0.99),
            "throughput_direct_rps": len(d["latencies"]) / d["elapsed"],
            "throughput_gateway_rps": len(g["latencies"]) / g["elapsed"],
            "gateway_cpu_us_per_request": 1e6 * cpu / max(1, len(g["latencies"])),
        }
        row["p50_added_ms"] = row["gateway_p50_ms"] - row["direct_p50_ms"]
        row["p99_added_ms"] = row["gateway_p99_ms"] - row["direct_p99_ms"]
        row["throughput_ratio"] = row["throughput_gateway_rps"] / row["throughput_direct_rps"]
        results[f"{'stream_ttfc' if stream else 'unary'}_c{concurrency}"] = row
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=3.0, help="per phase")
    parser.add_argument("--rounds", type=int, default=2, help="direct/gateway alternations")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32, 128])
    parser.add_argument("--stream-concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--upstream-delay-ms",
        type=float,
        default=0.0,
        help="emulated engine time per completion (0: pure CPU race between the processes)",
    )
    parser.add_argument(
        "--stream-chunks", type=int, default=8, help="SSE events per streamed answer (the upstream's, default 8)"
    )
    parser.add_argument(
        "--chunk-interval-ms",
        type=float,
        default=0.0,
        help="pause between a stream's events (0: back to back; ~8 = one A10G-sized decode step per token)",
    )
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="serving-bench-"))
    model = tiny_model(tmp)
    reservations = reserve_ports(2)  # held while the servers run (local_gateway.PortReservation)
    gateway_port, upstream_port = (r.port for r in reservations)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "container")]),
        "WARMUP_NUM_REQUESTS": "1",
        "REQUEST_TIMEOUT_S": "30",
        "ENDPOINT_NAME": "bench",
        "BENCH_UPSTREAM_DELAY_MS": str(args.upstream_delay_ms),
        "BENCH_STREAM_CHUNKS": str(args.stream_chunks),
        "BENCH_CHUNK_INTERVAL_MS": str(args.chunk_interval_ms),
    }
    # stdout (one EMF line per request) goes to /dev/null, as cheap as the log pipe allows.
    command = serve_command(
        sys.executable,
        port=gateway_port,
        engine_port=upstream_port,
        model_root=model,
        engine_command=f"{sys.executable} {UPSTREAM}",
    )
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=(tmp / "serve.log").open("w"))
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", gateway_port), timeout=1) as sock:
                    sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    if sock.recv(64).startswith(b"HTTP/1.1 200"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                print(explain_exit((tmp / "serve.log").read_text().splitlines()), file=sys.stderr)
                return 1
            time.sleep(0.1)
        results = uvloop.run(measure(gateway_port, upstream_port, proc.pid, args))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        for reservation in reservations:
            reservation.release()

    print(f"cpus={os.cpu_count()} seconds/phase={args.seconds} rounds={args.rounds} "
          f"upstream_delay_ms={args.upstream_delay_ms:g} "
          "(client, gateway and upstream share the cores)")  # fmt: skip
    header = (
        f"{'case':<16}{'n direct/gw':>14}{'direct p50':>11}{'p99':>8}{'gw p50':>9}{'p99':>8}"
        f"{'+p50 ms':>9}{'+p99 ms':>9}{'rps direct':>11}{'rps gw':>9}{'ratio':>7}"
        f"{'gw cpu us/req':>15}"
    )
    print(header)
    for case, r in results.items():
        print(
            f"{case:<16}{r['requests_direct']:>7}/{r['requests_gateway']:<6}"
            f"{r['direct_p50_ms']:>11.3f}{r['direct_p99_ms']:>8.3f}{r['gateway_p50_ms']:>9.3f}"
            f"{r['gateway_p99_ms']:>8.3f}{r['p50_added_ms']:>9.3f}{r['p99_added_ms']:>9.3f}"
            f"{r['throughput_direct_rps']:>11.0f}{r['throughput_gateway_rps']:>9.0f}"
            f"{r['throughput_ratio']:>7.2f}{r['gateway_cpu_us_per_request']:>15.0f}"
        )
    verdicts = []
    for case, r in results.items():
        for metric, target in TARGETS.items():
            if case.startswith("stream") and metric == "throughput_ratio":
                continue
            ok = r[metric] >= target if metric == "throughput_ratio" else r[metric] <= target
            verdicts.append(f"{case}.{metric}={r[metric]:.3f} {'PASS' if ok else 'MISS'}")
    print("targets: " + "; ".join(verdicts))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(f"median of direct p50 across cases: "
          f"{statistics.median(r['direct_p50_ms'] for r in results.values()):.3f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
