"""Pieces of the botocore responses that the Stubber-based tests queue."""

import base64
import io
import json
import struct
import zlib
from collections.abc import Iterator
from typing import Any

from botocore.eventstream import EventStream
from botocore.parsers import create_parser
from botocore.response import StreamingBody
from botocore.stub import Stubber

__all__ = [
    "add_event_stream_response",
    "bedrock_chunk",
    "event",
    "event_stream",
    "event_stream_message",
    "exception_event",
    "payload_part",
    "streaming_body",
]


def streaming_body(data: bytes | str) -> StreamingBody:
    """A response's streamed body (S3 ``GetObject``, SageMaker ``InvokeEndpoint``, ...) holding ``data``.

    Args:
        data: the body; a ``str`` is encoded as UTF-8.
    """
    raw = data.encode() if isinstance(data, str) else data
    return StreamingBody(io.BytesIO(raw), len(raw))


# ---------------------------------------------------------------------------------------------------
# AWS event streams (InvokeEndpointWithResponseStream, InvokeModelWithResponseStream, ConverseStream)


def event_stream_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One message of the AWS event stream encoding (``application/vnd.amazon.eventstream``): a prelude
    (total length, headers length, CRC32 of those 8 bytes), string headers (name length, name, type 7,
    value length, value), the payload and a CRC32 of everything before it. botocore's own decoder
    (``botocore.eventstream.EventStreamBuffer``) checks both CRCs, so a wrong frame fails where it is read.
    """
    encoded = b"".join(
        struct.pack(">B", len(name.encode()))
        + name.encode()
        + b"\x07"
        + struct.pack(">H", len(value.encode()))
        + value.encode()
        for name, value in headers.items()
    )
    prelude = struct.pack(">II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + encoded + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event(event_type: str, payload: bytes, content_type: str = "application/json") -> bytes:
    """An ``event`` message of ``event_type`` (``PayloadPart``, ``chunk``, ``contentBlockDelta``, ...)."""
    headers = {":message-type": "event", ":event-type": event_type, ":content-type": content_type}
    return event_stream_message(headers, payload)


def exception_event(exception_type: str, members: dict[str, Any]) -> bytes:
    """An ``exception`` message (``ModelStreamError``, ``throttlingException``, ...): botocore raises it as
    ``EventStreamError`` while the stream is read."""
    headers = {":message-type": "exception", ":exception-type": exception_type, ":content-type": "application/json"}
    return event_stream_message(headers, json.dumps(members).encode())


def payload_part(data: bytes) -> bytes:
    """SageMaker's ``PayloadPart`` event: ``data`` is its blob payload, as the service sends it."""
    return event("PayloadPart", data, "application/octet-stream")


def bedrock_chunk(data: bytes) -> bytes:
    """Bedrock InvokeModelWithResponseStream's ``chunk`` event: ``{"bytes": base64}`` in JSON."""
    return event("chunk", json.dumps({"bytes": base64.b64encode(data).decode()}).encode())


class _RawStream:
    """What botocore's parser hands an EventStream: an object whose ``stream()`` yields the body's bytes."""

    def __init__(self, data: bytes, cut: int) -> None:
        self._data, self._cut = data, cut
        self.closed = False

    def stream(self, **_: Any) -> Iterator[bytes]:
        for start in range(0, len(self._data), self._cut):
            yield self._data[start : start + self._cut]

    def close(self) -> None:
        self.closed = True


def event_stream(client: Any, operation: str, messages: list[bytes], *, cut: int = 7) -> EventStream:
    """botocore's own ``EventStream`` over ``messages``, parsed with the operation's own shape and the
    protocol's own event parser, exactly as a live response is; ``cut``: bytes per read (splits messages)."""
    model = client.meta.service_model.operation_model(operation)
    shape = next(member for member in model.output_shape.members.values() if member.serialization.get("eventstream"))
    parser = create_parser(client.meta.service_model.protocol)._event_stream_parser
    return EventStream(_RawStream(b"".join(messages), cut), shape, parser, operation)


def add_event_stream_response(
    stubber: Stubber,
    method: str,
    response: dict[str, Any],
    messages: list[bytes],
    expected_params: dict[str, Any] | None = None,
) -> None:
    """Queue a streaming call's response whose event-stream member is a real botocore ``EventStream`` of
    ``messages`` (the frames a live service sends, decoded and parsed by botocore).

    The Stubber validates a queued response against the output shape, which types the event-stream member
    as a structure, so it cannot queue an ``EventStream`` (tests/unit/ops/test_ops_stream.py says so): the
    response is queued with an empty placeholder in that member, which the validator accepts, and the
    placeholder is swapped for the ``EventStream`` in the queued response itself.
    """
    client = stubber.client
    operation = client.meta.method_to_api_mapping[method]
    model = client.meta.service_model.operation_model(operation)
    member = next(name for name, shape in model.output_shape.members.items() if shape.serialization.get("eventstream"))
    queued = {**response, member: {}}
    stubber.add_response(method, queued, expected_params)
    queued[member] = event_stream(client, operation, messages)
