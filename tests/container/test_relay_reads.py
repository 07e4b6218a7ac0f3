"""The stream relay over arbitrary read boundaries: what the client gets and what is recorded."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from serving_app.metrics.requests import RequestRecord
from serving_app.sagemaker.relay import relay_events

TOKEN = b'data: {"choices":[{"index":0,"delta":{"content":"tok"}}]}\n\n'
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}\n\n'
DONE = b"data: [DONE]\n\n"


class Reads:
    """An upstream whose body arrives in the given reads."""

    def __init__(self, reads: list[bytes]) -> None:
        self.reads = iter(reads)

    async def read_any(self) -> bytes:
        return next(self.reads, b"")

    def abort(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


def relay(reads: list[bytes], *, strip_usage: bool = True) -> tuple[list[bytes], RequestRecord]:
    record = RequestRecord()

    async def run() -> list[bytes]:
        # Reads has the three methods the relay calls on an UpstreamResponse; read boundaries are
        # what the real upstream cannot be made to choose.
        upstream: Any = Reads(reads)
        events = relay_events(
            upstream, record, time.perf_counter(), timeout_s=30, strip_usage=strip_usage, finish=lambda r, s: None
        )
        return [chunk async for chunk in events]

    return asyncio.run(run()), record


STREAM = TOKEN * 3 + USAGE + DONE


@pytest.mark.parametrize("size", [1, 7, len(TOKEN), len(TOKEN) + 5, len(STREAM)])
def test_any_read_boundaries_give_the_same_stream_and_usage(size: int) -> None:
    reads = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    out, record = relay(reads)
    assert b"".join(out) == TOKEN * 3 + DONE  # the usage-only event the gateway asked for is dropped
    assert (record.input_tokens, record.output_tokens) == (7, 3)
    assert record.ttft_ms is not None


def test_whole_token_reads_go_out_as_read() -> None:
    out, _ = relay([TOKEN, TOKEN * 2, DONE])
    assert out == [TOKEN, TOKEN * 2, DONE]


def test_usage_is_kept_when_the_client_asked_for_it() -> None:
    out, record = relay([TOKEN + USAGE, DONE], strip_usage=False)
    assert b"".join(out) == TOKEN + USAGE + DONE and record.output_tokens == 3


def test_an_error_event_is_recorded_and_relayed() -> None:
    error = b'data: {"error":{"message":"CUDA out of memory","code":500}}\n\n'
    out, record = relay([TOKEN, error, DONE])
    assert b"".join(out) == TOKEN + error + DONE
    assert record.engine_error and record.oom
