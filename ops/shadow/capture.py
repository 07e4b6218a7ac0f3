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
        streamed: the answer was captured as ``text/event-stream`` (an InvokeEndpointWithResponseStream call).
        session_unknown: the variant answered ``session not found``: a turn of a session it never opened.
    """

    event_id: str
    inference_id: str | None
    text: str
    problem: str | None = None
    streamed: bool = False
    session_unknown: bool = False


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


def error_message(output: dict[str, Any]) -> str | None:
    """The gateway's error message when the captured answer is an error object, else None."""
    try:
        answer = json.loads(_decoded(output))
    except (ValueError, binascii.Error):
        return None
    error = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(error, dict):
        return str(error.get("message", ""))
    return None if error is None else str(error)


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
    streamed = str(output.get("observedContentType", "")).startswith(EVENT_STREAM)
    message = None if streamed else error_message(output)
    if message is not None:
        unknown = message.startswith("session not found")
        return CapturedAnswer(event, inference, "", f"error: {message[:120]}", session_unknown=unknown)
    try:
        return CapturedAnswer(event, inference, answer_text(output), streamed=streamed)
    except (ValueError, binascii.Error, SseDecodeError, AttributeError) as error:
        return CapturedAnswer(event, inference, "", f"answer not readable ({type(error).__name__})", streamed=streamed)


def parse_lines(lines: Iterable[str], limit: int) -> list[CapturedAnswer]:
    """Up to ``limit`` records of ``lines`` (blank lines skipped)."""
    answers: list[CapturedAnswer] = []
    if limit <= 0:
        return answers
    for line in lines:  # a generator of files: stop at the limit, before it lists the next hour
        if line.strip():
            answers.append(parse_record(line))
            if len(answers) >= limit:
                break
    return answers


def read_matching(lines: Iterable[str], inference_ids: set[str]) -> dict[str, CapturedAnswer]:
    """inferenceId -> the first record of ``lines`` (newest first) with each of ``inference_ids``; stops reading
    once every id is found."""
    found: dict[str, CapturedAnswer] = {}
    wanted = set(inference_ids)
    if not wanted:
        return found
    for line in lines:
        if not line.strip():
            continue
        answer = parse_record(line)
        if answer.inference_id in wanted:
            found[answer.inference_id] = answer
            wanted.discard(answer.inference_id)
            if not wanted:
                break
    return found


def hours(start: dt.datetime, end: dt.datetime) -> Iterator[str]:
    """``yyyy/mm/dd/hh`` of every hour from ``start``'s to ``end``'s (UTC), newest first."""
    hour = end.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)
    first = start.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)
    while hour >= first:
        yield hour.strftime("%Y/%m/%d/%H")
        hour -= dt.timedelta(hours=1)


Window = tuple[dt.datetime, dt.datetime]
"""``(start, end)``, aware datetimes."""


def folder_lines(folder: Path, variant: str, window: Window) -> Iterator[str]:
    """The lines of ``variant``'s capture files in a local copy of the endpoint's captures, newest hour first."""
    for hour in hours(*window):
        for path in sorted((folder / variant / hour).glob("*.jsonl"), reverse=True):
            yield from path.read_text(encoding="utf-8").splitlines()


@dataclass(frozen=True)
class Where:
    """Where an endpoint's captures are: the S3 client, the bucket and the endpoint."""

    s3: Any
    bucket: str
    endpoint: str


def bucket_lines(where: Where, variant: str, window: Window) -> Iterator[str]:
    """The lines of ``variant``'s capture files in the bucket, newest hour first (ListObjectsV2, GetObject)."""
    s3, bucket = where.s3, where.bucket
    for hour in hours(*window):
        prefix = f"{variant_prefix(where.endpoint, variant)}{hour}/"
        keys = [
            item["Key"]
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for item in page.get("Contents", [])
        ]
        for key in sorted(keys, reverse=True):
            yield from s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8").splitlines()


@dataclass(frozen=True)
class Paired:
    """The shadow's newest captured answers and the primary's answers of the same requests.

    Attributes:
        pairs: (primary, shadow) per request both answered for, newest first.
        shadow_read: the shadow's records read (at most the limit).
        without_id: shadow records without an ``inferenceId`` (their caller set none): never pairable.
        unmatched: shadow records whose ``inferenceId`` no primary record in the window carries.
    """

    pairs: list[tuple[CapturedAnswer, CapturedAnswer]]
    shadow_read: list[CapturedAnswer]
    without_id: int
    unmatched: int


def pair_by_inference_id(primary: Iterable[str], shadow: Iterable[str], limit: int) -> Paired:
    """Pair the newest ``limit`` shadow records with the primary's records of the same ``inferenceId``."""
    shadow_answers = parse_lines(shadow, limit)
    ids = {a.inference_id for a in shadow_answers if a.inference_id}
    matched = read_matching(primary, ids)
    pairs = [(matched[a.inference_id], a) for a in shadow_answers if a.inference_id in matched]
    without_id = sum(1 for a in shadow_answers if not a.inference_id)
    return Paired(pairs, shadow_answers, without_id, len(shadow_answers) - without_id - len(pairs))
