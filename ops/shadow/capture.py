"""Read what SageMaker captured of the shadow phase: each variant's answers, in its data-capture JSONL format.

The layout and the record format are in serving_contract/data_capture.py. Each record's ``endpointOutput``
is decoded by its ``encoding`` (``JSON``: the text itself; ``BASE64``: bytes; ``CSV``: the text) and read as
the container answers: an OpenAI chat completion (``application/json``), or a ``text/event-stream`` of chunks
(a streamed answer; its content is the chunks' ``delta.content`` joined). A record that is not JSON, or an
answer with neither, counts as an answer without text (it then fails the "answered" guardrail check).

Two sources: a local folder (``aws s3 sync s3://<bucket>/data-capture/<endpoint>/ <dir>``: ``<dir>/<variant>/
yyyy/mm/dd/hh/*.jsonl``) or the bucket itself (ListObjectsV2 per hour of the window, GetObject per file).
"""

import base64
import binascii
import datetime as dt
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cli_support.sse import DONE, SseDecodeError, SseDecoder
from serving_contract.data_capture import variant_prefix

EVENT_STREAM: Final = "text/event-stream"


@dataclass(frozen=True)
class CapturedAnswer:
    """One captured request's answer from one variant.

    Attributes:
        event_id / inference_id: SageMaker's ``eventMetadata`` (``inferenceId`` only when the caller set one).
        text: the answer's content ('' when there was none).
        problem: why the record carried no readable answer, or None.
    """

    event_id: str
    inference_id: str | None
    text: str
    problem: str | None = None


def _decoded(part: dict[str, Any]) -> str:
    data = str(part.get("data", ""))
    if part.get("encoding") == "BASE64":
        return base64.b64decode(data, validate=True).decode("utf-8")
    return data


def _chat_content(answer: Any) -> str:
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    message = choices[0].get("message") or {}
    return str(message.get("content") or "") if isinstance(message, dict) else ""


def _stream_content(text: str) -> str:
    pieces = []
    for data in SseDecoder().feed((text + "\n\n").encode()):
        if data == DONE:
            continue
        chunk = json.loads(data)
        for choice in chunk.get("choices") or []:
            pieces.append(str((choice.get("delta") or {}).get("content") or ""))
    return "".join(pieces)


def answer_text(output: dict[str, Any]) -> str:
    """The answer's content from a record's ``endpointOutput`` (module docstring).

    Raises:
        ValueError: data that does not decode, or JSON that does not parse.
    """
    text = _decoded(output)
    if str(output.get("observedContentType", "")).startswith(EVENT_STREAM):
        return _stream_content(text)
    return _chat_content(json.loads(text))


def parse_record(line: str) -> CapturedAnswer:
    """One JSONL line of SageMaker's data capture.

    Raises:
        ValueError: the line is not a capture record (no ``captureData`` / ``eventMetadata.eventId``).
    """
    record = json.loads(line)
    metadata = record.get("eventMetadata") if isinstance(record, dict) else None
    if not isinstance(metadata, dict) or "eventId" not in metadata or "captureData" not in record:
        raise ValueError(f"not a SageMaker data capture record: {line[:80]!r}")
    output = record["captureData"].get("endpointOutput")
    event, inference = str(metadata["eventId"]), metadata.get("inferenceId")
    if not isinstance(output, dict):
        return CapturedAnswer(event, inference, "", "no endpointOutput captured")
    try:
        return CapturedAnswer(event, inference, answer_text(output))
    except (ValueError, binascii.Error, SseDecodeError, AttributeError) as error:
        return CapturedAnswer(event, inference, "", f"answer not readable ({type(error).__name__})")


def parse_lines(lines: Iterable[str], limit: int) -> list[CapturedAnswer]:
    """Up to ``limit`` records of ``lines`` (blank lines skipped)."""
    answers: list[CapturedAnswer] = []
    for line in lines:
        if len(answers) >= limit:
            break
        if line.strip():
            answers.append(parse_record(line))
    return answers


def hours(start: dt.datetime, end: dt.datetime) -> Iterator[str]:
    """``yyyy/mm/dd/hh`` of every hour from ``start``'s to ``end``'s (UTC), newest first."""
    hour = end.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)
    first = start.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)
    while hour >= first:
        yield hour.strftime("%Y/%m/%d/%H")
        hour -= dt.timedelta(hours=1)


Window = tuple[dt.datetime, dt.datetime]
"""``(start, end)``, aware datetimes."""


def from_folder(folder: Path, variant: str, window: Window, limit: int) -> list[CapturedAnswer]:
    """The newest ``limit`` answers of ``variant`` in a local copy of the endpoint's captures, in the window."""
    lines: list[str] = []
    for hour in hours(*window):
        for path in sorted((folder / variant / hour).glob("*.jsonl"), reverse=True):
            lines += path.read_text(encoding="utf-8").splitlines()
        if sum(1 for line in lines if line.strip()) >= limit:
            break
    return parse_lines(lines, limit)


@dataclass(frozen=True)
class Where:
    """Where an endpoint's captures are: the S3 client, the bucket and the endpoint."""

    s3: Any
    bucket: str
    endpoint: str


def from_bucket(where: Where, variant: str, window: Window, limit: int) -> list[CapturedAnswer]:
    """The newest ``limit`` answers of ``variant`` in the bucket, in the window (ListObjectsV2, GetObject)."""
    lines: list[str] = []
    s3, bucket = where.s3, where.bucket
    for hour in hours(*window):
        prefix = f"{variant_prefix(where.endpoint, variant)}{hour}/"
        keys = [
            item["Key"]
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for item in page.get("Contents", [])
        ]
        for key in sorted(keys, reverse=True):
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            lines += body.decode("utf-8").splitlines()
        if sum(1 for line in lines if line.strip()) >= limit:
            break
    return parse_lines(lines, limit)
