"""A fast stand-in for vLLM used by serving_overhead.py: fixed OpenAI-shaped answers.

Raw ASGI on uvicorn (httptools + uvloop) so the upstream costs as little CPU as possible
and the benchmark measures the gateway. Accepts vLLM's argv (only ``--host``/``--port``
matter) so the real ``serve`` entrypoint can start it as its engine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

import uvicorn

parser = argparse.ArgumentParser()
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, required=True)
ARGS, _ = parser.parse_known_args()

DELAY_S = float(os.environ.get("BENCH_UPSTREAM_DELAY_MS", "0")) / 1000.0
"""Emulated engine time per completion (0: answer at once, a pure CPU race)."""

STREAM_CHUNKS = int(os.environ.get("BENCH_STREAM_CHUNKS", "8"))
"""SSE events per streamed answer (role chunk, tokens, finish, usage)."""

CHUNK_INTERVAL_S = float(os.environ.get("BENCH_CHUNK_INTERVAL_MS", "0")) / 1000.0
"""Pause between a stream's events (0: back to back). A decode step of the A10G-sized engine is
~6-9 ms (benchmarks/results/h200-2026-11-25/capacity.json, decode probes), so 8 ms makes the
gateway relay each token as its own read, as it does in front of vLLM."""

BODY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "base",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "One Piece is a good start. " * 4},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 42, "completion_tokens": 24, "total_tokens": 66},
    }
).encode()


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    payload = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "base",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


USAGE = (
    b"data: "
    + json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "base",
            "choices": [],
            "usage": {"prompt_tokens": 42, "completion_tokens": 6, "total_tokens": 48},
        }
    ).encode()
    + b"\n\n"
)
STREAM = [_chunk({"role": "assistant", "content": ""})]
STREAM += [_chunk({"content": f"tok{i} "}) for i in range(STREAM_CHUNKS - 3)]
STREAM += [_chunk({}, "stop")]
METRICS = b'vllm:num_requests_waiting{engine="0",model_name="base"} 0.0\n'


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    path = scope["path"]
    if path in ("/v1/chat/completions", "/v1/completions"):
        if DELAY_S:
            await asyncio.sleep(DELAY_S)
        if b'"stream":true' in body or b'"stream": true' in body:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")],
                }
            )
            events = [*STREAM]
            if b"include_usage" in body:
                events.append(USAGE)
            events.append(b"data: [DONE]\n\n")
            for event in events:
                await send({"type": "http.response.body", "body": event, "more_body": True})
                if CHUNK_INTERVAL_S:
                    await asyncio.sleep(CHUNK_INTERVAL_S)
            await send({"type": "http.response.body", "body": b""})
            return
        content, kind = BODY, b"application/json"
    elif path == "/metrics":
        content, kind = METRICS, b"text/plain"
    else:
        content, kind = b"", b"text/plain"
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", kind), (b"content-length", str(len(content)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": content})


if __name__ == "__main__":
    uvicorn.run(
        app,
        host=ARGS.host,
        port=ARGS.port,
        log_level="warning",
        access_log=False,
        loop="uvloop",
        http="httptools",
        lifespan="off",
    )
