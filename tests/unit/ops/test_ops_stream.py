"""Stream parsing, isolated from botocore's event stream (which Stubber cannot build).

``read_event_stream`` takes any iterable of events shaped like botocore's parsed
InvokeEndpointWithResponseStream events, so these tests feed it lists of dicts.
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import EventStreamError

from ops.invoke import (
    AnswerError,
    StreamError,
    check_completion,
    content_of,
    read_completion,
    read_event_stream,
)
from tests.unit.ops.ops_stubs import FakeClock, sse_events


def test_chunks_split_anywhere_are_reassembled():
    text = "ワンピースの最新巻は…"  # multi-byte characters split across PayloadParts
    result = read_event_stream(sse_events("ワンピース", "の最新巻は…", split=7), clock=FakeClock(tick=1.0))
    assert result.content == text
    assert result.done
    assert result.chunks == 3  # role chunk + two content chunks


def test_first_content_time_skips_role_only_chunk():
    clock = FakeClock(tick=1.0)
    result = read_event_stream(sse_events("a", "b"), clock=clock)
    assert result.first_content_at == 1001.0  # read once, at the first non-empty delta


def test_several_events_in_one_part_and_crlf():
    raw = b'data: {"choices":[{"text":"x"}]}\r\n\r\ndata: {"choices":[{"text":"y"}]}\r\n\r\ndata: [DONE]\r\n\r\n'
    result = read_event_stream([{"PayloadPart": {"Bytes": raw}}], clock=FakeClock())
    assert result.content == "xy"


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"ModelStreamError": {"Message": "boom", "ErrorCode": "ModelStreamError"}}, "ModelStreamError: boom"),
        ({"InternalStreamFailure": {"Message": "internal"}}, "InternalStreamFailure: internal"),
    ],
)
def test_error_events_raise(event, message):
    events = [*sse_events("partial", done=False), event]
    with pytest.raises(StreamError) as info:
        read_event_stream(events, clock=FakeClock())
    assert message in str(info.value)


def test_botocore_event_stream_error_is_mapped():
    def events() -> Iterator[dict[str, Any]]:
        yield from sse_events("partial", done=False)
        raise EventStreamError(
            {"Error": {"Code": "ModelStreamError", "Message": "container closed the stream"}},
            "InvokeEndpointWithResponseStream",
        )

    with pytest.raises(StreamError) as info:
        read_event_stream(events(), clock=FakeClock())
    assert info.value.kind == "ModelStreamError"
    assert str(info.value) == "ModelStreamError: container closed the stream"


@pytest.mark.parametrize(
    ("events", "message"),
    [
        (sse_events("no end", done=False), "stream ended without [DONE] after 2 chunk(s)"),
        (sse_events("", " "), "stream content is empty (3 chunk(s))"),
        ([{"PayloadPart": {"Bytes": b"data: not json\n\n"}}], "stream chunk is not JSON: 'not json'"),
        (
            [{"PayloadPart": {"Bytes": b'data: {"error": {"message": "adapter not found"}}\n\n'}}],
            "error in answer: adapter not found",
        ),
        (
            [{"PayloadPart": {"Bytes": b'data: {"choices": [{"text": "\xff\xfe"}]}\n\n'}}],
            'stream is not valid UTF-8: b\'data: {"choices": [{"text": "\\xff\\xfe"}]}\'',
        ),
    ],
)
def test_bad_streams_raise(events, message):
    with pytest.raises(AnswerError) as info:
        read_event_stream(events, clock=FakeClock())
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<html>", "answer is not JSON: b'<html>'"),
        (b"[]", "answer is list, expected a JSON object"),
        (b'{"choices": []}', "answer has no choices"),
        (b'{"choices": [{"finish_reason": "stop"}]}', "choice has neither message.content nor text"),
        (b'{"choices": [{"message": {"content": ""}}]}', "answer content is empty"),
    ],
)
def test_bad_completions_raise(body, message):
    with pytest.raises(AnswerError) as info:
        check_completion(body)
    assert str(info.value) == message


def test_completions_api_text_is_accepted():
    assert check_completion(json.dumps({"choices": [{"text": "hello"}]}).encode()) == "hello"
    assert content_of({"choices": [{"delta": {"role": "assistant"}}]}, streaming=True) == ""


def test_invalid_utf8_stream_is_one_bad_answer_not_a_traceback():
    """HttpTarget (what smoke/load use with --url) turns it into a failed Answer."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from ops.invoke import HttpTarget

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            body = b'data: {"choices": [{"text": "\xff"}]}\n\ndata: [DONE]\n\n'
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        target = HttpTarget(f"http://127.0.0.1:{server.server_address[1]}", clock=FakeClock(), timeout_s=5)
        answer = target.invoke(b"{}", stream=True)
    finally:
        server.shutdown()
        server.server_close()
    assert not answer.ok and answer.status == "bad answer"
    assert answer.detail.startswith("stream is not valid UTF-8: ")


def test_the_usage_only_event_gives_the_usage_and_no_content():
    # vLLM's last event with stream_options.include_usage: no choices, the usage with cached tokens.
    usage = {"prompt_tokens": 2200, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 1984}}
    raw = (
        b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
        + f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
        + b"data: [DONE]\n\n"
    )
    result = read_event_stream([{"PayloadPart": {"Bytes": raw}}], clock=FakeClock())
    assert (result.content, result.usage) == ("x", usage)
    body = json.dumps({"choices": [{"message": {"content": "y"}}], "usage": usage}).encode()
    assert read_completion(body) == ("y", usage)
