"""cli_support.sse: the one text/event-stream decoder (ops and the benchmarks read streams with it)."""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from cli_support.sse import DONE, SseDecodeError, SseDecoder, timed_json_events

VLLM_STREAM = (
    b'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\n'
    b'data: {"choices":[{"delta":{"content":"\xe3\x83\xaf\xe3\x83\xb3"}}]}\n\n'
    b"data: [DONE]\n\n"
)
VLLM_EVENTS = ['{"choices":[{"delta":{"role":"assistant"}}]}', '{"choices":[{"delta":{"content":"ワン"}}]}', DONE]


def _feed_all(chunks: list[bytes]) -> list[str]:
    decoder = SseDecoder()
    return [data for chunk in chunks for data in decoder.feed(chunk)]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64])
def test_a_stream_split_into_chunks_of_any_size_gives_the_same_events(size: int) -> None:
    """Chunks split anywhere: inside a field name, a UTF-8 character, the blank line."""
    chunks = [VLLM_STREAM[i : i + size] for i in range(0, len(VLLM_STREAM), size)]
    assert _feed_all(chunks) == VLLM_EVENTS


@pytest.mark.parametrize("line_end", [b"\r\n", b"\r", b"\n"])
def test_every_line_end_of_the_standard_ends_lines(line_end: bytes) -> None:
    stream = VLLM_STREAM.replace(b"\n", line_end)
    assert _feed_all([stream]) == VLLM_EVENTS
    assert _feed_all([stream[i : i + 1] for i in range(len(stream))]) == VLLM_EVENTS


def test_a_crlf_split_between_chunks_is_one_line_end() -> None:
    """CR last in one chunk, LF first in the next: one line end, not an extra blank line."""
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\ndata: b\r") == []
    assert decoder.feed(b"\n\r") == ["a\nb"]
    assert decoder.feed(b"\n") == []  # the LF of the blank line's CRLF, not a second blank line


def test_multi_line_data_is_joined_with_newlines() -> None:
    assert _feed_all([b"data: first\ndata:second\ndata:  third\n\n"]) == ["first\nsecond\n third"]


def test_comments_and_other_fields_are_not_data() -> None:
    stream = b": keep-alive\n\nevent: chunk\nid: 7\nretry: 100\n: note\ndata: x\n\n"
    assert _feed_all([stream]) == ["x"]  # the comment-only event has no data: not dispatched


def test_a_data_line_without_colon_or_value_gives_empty_data() -> None:
    assert _feed_all([b"data\n\ndata:\n\n"]) == ["", ""]


def test_field_names_are_exact() -> None:
    assert _feed_all([b"Data: x\ndata : y\ndatax: z\n\n"]) == []


def test_a_leading_byte_order_mark_is_dropped() -> None:
    assert _feed_all([b"\xef\xbb", b"\xbfdata: x\n\n"]) == ["x"]


def test_done_is_data_like_any_other() -> None:
    assert _feed_all([b"data: [DONE]\n\n"]) == [DONE]


def test_an_unterminated_event_stays_pending() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: {}\n\ndata: {") == ["{}"]
    assert decoder.pending == b"data: {"
    assert decoder.feed(b'"a":\ndata: 1}') == []
    assert decoder.pending == b'data: {"a":\ndata: 1}'
    assert decoder.feed(b"\n\n") == ['{"a":\n1}']
    assert decoder.pending == b""


def test_invalid_utf8_names_the_event_and_the_decoder_goes_on() -> None:
    decoder = SseDecoder()
    with pytest.raises(SseDecodeError) as info:
        decoder.feed(b"data: \xff\xfe\n\n")
    assert str(info.value) == "stream is not valid UTF-8: b'data: \\xff\\xfe'"
    assert decoder.feed(b"data: ok\n\n") == ["ok"]


def test_timed_json_events_stamps_each_payload_with_its_chunks_arrival_and_skips_done() -> None:
    chunks = [b'data: {"n": 1}\r\n\r\ndata: {"n"', b": 2}\r\n\r\n: keep-alive\r\n\r\n", b"data: [DONE]\r\n\r\n"]
    readings = iter([10.0, 20.0, 30.0])

    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    async def collect() -> list[tuple[float, Any]]:
        return [event async for event in timed_json_events(body(), lambda: next(readings))]

    assert asyncio.run(collect()) == [(10.0, {"n": 1}), (20.0, {"n": 2})]


def test_timed_json_events_raises_on_an_event_that_is_not_json() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b"data: oops\n\n"

    async def collect() -> list[tuple[float, Any]]:
        return [event async for event in timed_json_events(body(), lambda: 0.0)]

    with pytest.raises(ValueError, match="Expecting value"):
        asyncio.run(collect())
