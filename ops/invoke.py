"""Send one OpenAI-shaped request to an endpoint and judge the answer.

Two targets speak the container's ``POST /invocations`` contract: a SageMaker endpoint through
boto3 (``InvokeEndpoint`` / ``InvokeEndpointWithResponseStream``, optionally pinned to one
variant with ``TargetVariant``, or sent to one inference component with
``InferenceComponentName``) and a plain HTTP URL (local tests, a container on a laptop).
Both return an :class:`Answer`; neither raises for a bad answer, so callers can count failures.

Stream parsing is split into pure functions (:func:`read_sse_chunks`, :func:`read_event_stream`, over
the repo's one SSE decoder, :class:`cli_support.sse.SseDecoder`) that take bytes or an iterable of
events shaped like botocore's parsed events
(``{"PayloadPart": {"Bytes": b"..."}}``, ``{"ModelStreamError": {...}}``,
``{"InternalStreamFailure": {...}}``), so they are tested without an AWS event stream.
"""

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from cli_support.sse import DONE, SseDecodeError, SseDecoder
from ops.sessions import (
    CLOSED_SESSION_HEADER,
    NEW_SESSION_HEADER,
    SESSION_HEADER,
    SessionAnswer,
    session_answer,
    session_body,
)

Clock = Callable[[], float]

DEFAULT_PROMPT = "Recommend one manga for a reader who liked Frieren, in one sentence."
STREAM_ERROR_EVENTS = ("ModelStreamError", "InternalStreamFailure")


class AnswerError(Exception):
    """The endpoint answered, but not with a well-formed, non-empty completion."""


@dataclass(frozen=True)
class Answer:
    """Outcome of one request.

    ``status`` is ``ok`` or a short reason (``ModelError 500``, ``stream ModelStreamError``,
    ``bad answer``); ``ttft_s`` is the time to the first non-empty content chunk (streaming
    only, seconds); ``latency_s`` is the time to the complete answer (seconds).
    """

    ok: bool
    status: str
    latency_s: float
    ttft_s: float | None = None
    content: str = ""
    detail: str = ""
    usage: Mapping[str, Any] | None = None
    """vLLM's ``usage`` object (token counts, ``prompt_tokens_details.cached_tokens``): the request
    class (serving_contract.request_classes); None when the answer carried none."""
    versions: str | None = None  # the answer's CustomAttributes: the versions that answered (ops.served_versions)


STREAM_USAGE_OPTION: Final[Mapping[str, Any]] = {"stream_options": {"include_usage": True}}
"""Asks vLLM for the usage event at a stream's end (its cached prompt tokens give the request class)."""


def chat_body(*, model: str, prompt: str, max_tokens: int, stream: bool) -> bytes:
    """An OpenAI chat-completions request body; ``model`` selects the adapter."""
    return json.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": stream,
            **(STREAM_USAGE_OPTION if stream else {}),
        }
    ).encode()


def _content_of_choice(choice: Any, *, streaming: bool) -> str:
    if not isinstance(choice, Mapping):
        raise AnswerError(f"choice is {type(choice).__name__}, expected an object")
    part = choice.get("delta" if streaming else "message")
    if isinstance(part, Mapping):
        content = part.get("content")
        return content if isinstance(content, str) else ""
    text = choice.get("text")  # completions API
    if isinstance(text, str):
        return text
    if streaming:
        return ""  # a role-only or finish-only chunk carries no content
    raise AnswerError("choice has neither message.content nor text")


def content_of(payload: Any, *, streaming: bool) -> str:
    """Content of one OpenAI completion (or one stream chunk); raises AnswerError on a bad shape.

    Accepts chat completions (``choices[0].message.content`` / ``choices[0].delta.content``)
    and completions (``choices[0].text``). An ``error`` object (vLLM's in-stream error) fails.
    """
    if not isinstance(payload, Mapping):
        raise AnswerError(f"answer is {type(payload).__name__}, expected a JSON object")
    if "error" in payload:
        error = payload["error"]
        message = error.get("message") if isinstance(error, Mapping) else error
        raise AnswerError(f"error in answer: {message}")
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices:
        raise AnswerError("answer has no choices")
    return _content_of_choice(choices[0], streaming=streaming)


def check_completion(body: bytes) -> str:
    """Content of a non-streaming answer body; raises AnswerError unless it is non-empty."""
    return read_completion(body)[0]


def read_completion(body: bytes) -> tuple[str, Mapping[str, Any] | None]:
    """(content, ``usage`` or None) of a non-streaming answer body; raises AnswerError unless the
    content is non-empty."""
    try:
        payload = json.loads(body)
    except ValueError as error:
        raise AnswerError(f"answer is not JSON: {body[:80]!r}") from error
    content = content_of(payload, streaming=False)
    if not content.strip():
        raise AnswerError("answer content is empty")
    usage = payload.get("usage")
    return content, usage if isinstance(usage, Mapping) else None


@dataclass(frozen=True)
class StreamResult:
    """A parsed stream: the concatenated content, when its first content arrived, whether [DONE] came."""

    content: str
    first_content_at: float | None
    done: bool
    chunks: int
    usage: Mapping[str, Any] | None = None


def read_sse_chunks(chunks: Iterable[bytes], *, clock: Clock) -> StreamResult:
    """Read OpenAI SSE chunks (``data: {...}`` ... ``data: [DONE]``) from raw byte chunks.

    Raises AnswerError on a chunk that is not JSON or has a bad shape, on an in-stream error
    object, on a stream that ends without ``[DONE]``, and on empty content.
    """
    decoder = SseDecoder()
    parts: list[str] = []
    first_at: float | None = None
    done = False
    count = 0
    usage: Mapping[str, Any] | None = None
    for chunk in chunks:
        try:
            events = decoder.feed(chunk)
        except SseDecodeError as error:  # an answer error (one bad answer), not a traceback
            raise AnswerError(str(error)) from None
        for data in events:
            if data.strip() == DONE:
                done = True
                continue
            try:
                payload = json.loads(data)
            except ValueError as error:
                raise AnswerError(f"stream chunk is not JSON: {data[:80]!r}") from error
            count += 1
            if isinstance(payload, Mapping) and isinstance(payload.get("usage"), Mapping):
                usage = payload["usage"]
                if not payload.get("choices"):
                    continue  # the usage-only event of stream_options.include_usage
            content = content_of(payload, streaming=True)
            if content and first_at is None:
                first_at = clock()
            parts.append(content)
    if not done:
        raise AnswerError(f"stream ended without [DONE] after {count} chunk(s)")
    content = "".join(parts)
    if not content.strip():
        raise AnswerError(f"stream content is empty ({count} chunk(s))")
    return StreamResult(content=content, first_content_at=first_at, done=done, chunks=count, usage=usage)


class StreamError(AnswerError):
    """SageMaker reported an error event in the response stream."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def payload_bytes(events: Iterable[Mapping[str, Any]]) -> Iterator[bytes]:
    """Bytes of every ``PayloadPart`` of an InvokeEndpointWithResponseStream body.

    ``events`` is the response's ``Body`` (botocore's EventStream) or any iterable of the same
    parsed event dicts. ``ModelStreamError`` / ``InternalStreamFailure`` raise StreamError;
    botocore raises those as ``EventStreamError`` while iterating, which is mapped the same way.
    """
    iterator = iter(events)
    while True:
        try:
            event = next(iterator)
        except StopIteration:
            return
        except ClientError as error:  # botocore.exceptions.EventStreamError
            err = error.response.get("Error", {})
            raise StreamError(str(err.get("Code", "EventStreamError")), str(err.get("Message", ""))) from error
        for kind in STREAM_ERROR_EVENTS:
            if kind in event:
                info = event[kind] or {}
                message = info.get("Message", "")
                code = info.get("ErrorCode")
                raise StreamError(kind, f"{message} ({code})" if code else str(message))
        part = event.get("PayloadPart")
        if part is not None:
            yield part.get("Bytes", b"")


def read_event_stream(events: Iterable[Mapping[str, Any]], *, clock: Clock) -> StreamResult:
    """Parse an InvokeEndpointWithResponseStream body (iterable of parsed events) into a StreamResult."""
    return read_sse_chunks(payload_bytes(events), clock=clock)


class Target(Protocol):
    """Something that answers ``/invocations`` requests."""

    def invoke(
        self,
        body: bytes,
        *,
        stream: bool,
        variant: str | None = None,
        component: str | None = None,
        session_id: str | None = None,
    ) -> Answer:
        """Send one request (to ``variant`` or inference ``component`` when given, in the stateful session
        ``session_id`` when given); never raises for a bad answer."""
        ...

    def session(self, request_type: str, *, session_id: str | None = None, variant: str | None = None) -> SessionAnswer:
        """``NEW_SESSION`` or ``CLOSE`` (of ``session_id``); never raises for a bad answer."""
        ...


def _client_error_status(error: ClientError) -> tuple[str, str]:
    response: Mapping[str, Any] = error.response
    code = str(response.get("Error", {}).get("Code", "ClientError"))
    message = str(response.get("Error", {}).get("Message", ""))
    original = response.get("OriginalStatusCode")
    if code == "ModelError" and original is not None:
        return f"ModelError {original}", message
    return code, message


class SageMakerTarget:
    """A SageMaker endpoint reached through a ``sagemaker-runtime`` boto3 client."""

    def __init__(self, runtime: Any, endpoint_name: str, *, clock: Clock) -> None:
        self._runtime = runtime
        self._endpoint = endpoint_name
        self._clock = clock

    def invoke(
        self,
        body: bytes,
        *,
        stream: bool,
        variant: str | None = None,
        component: str | None = None,
        session_id: str | None = None,
    ) -> Answer:
        params: dict[str, Any] = {
            "EndpointName": self._endpoint,
            "Body": body,
            "ContentType": "application/json",
        }
        if variant:
            params["TargetVariant"] = variant
        if component:  # header X-Amzn-SageMaker-Inference-Component
            params["InferenceComponentName"] = component
        if session_id:  # header X-Amzn-SageMaker-Session-Id: SageMaker routes to the session's instance
            params["SessionId"] = session_id
        started = self._clock()
        try:
            if stream:
                response = self._runtime.invoke_endpoint_with_response_stream(**params, Accept="text/event-stream")
                result = read_event_stream(response["Body"], clock=self._clock)
                ended = self._clock()
                ttft = None if result.first_content_at is None else result.first_content_at - started
                return Answer(
                    True,
                    "ok",
                    ended - started,
                    ttft,
                    result.content,
                    usage=result.usage,
                    versions=response.get("CustomAttributes"),
                )
            response = self._runtime.invoke_endpoint(**params, Accept="application/json")
            content, usage = read_completion(response["Body"].read())
            return Answer(
                True,
                "ok",
                self._clock() - started,
                None,
                content,
                usage=usage,
                versions=response.get("CustomAttributes"),
            )
        except StreamError as error:
            return Answer(False, f"stream {error.kind}", self._clock() - started, detail=str(error))
        except AnswerError as error:
            return Answer(False, "bad answer", self._clock() - started, detail=str(error))
        except ClientError as error:
            status, message = _client_error_status(error)
            return Answer(False, status, self._clock() - started, detail=message)
        except BotoCoreError as error:
            return Answer(False, type(error).__name__, self._clock() - started, detail=str(error))

    def session(self, request_type: str, *, session_id: str | None = None, variant: str | None = None) -> SessionAnswer:
        # Sessions open only through InvokeEndpoint (SessionId "NEW_SESSION"), never the streaming call.
        params: dict[str, Any] = {
            "EndpointName": self._endpoint,
            "Body": session_body(request_type),
            "ContentType": "application/json",
            "SessionId": "NEW_SESSION" if request_type == "NEW_SESSION" else session_id,
        }
        if variant:
            params["TargetVariant"] = variant
        try:
            response = self._runtime.invoke_endpoint(**params)
        except ClientError as error:
            status, message = _client_error_status(error)
            return SessionAnswer(False, status, detail=message)
        except BotoCoreError as error:
            return SessionAnswer(False, type(error).__name__, detail=str(error))
        return session_answer(request_type, response.get("NewSessionId"), response.get("ClosedSessionId"))


class HttpTarget:
    """A server speaking the container's contract at ``<base_url>/invocations`` (no AWS)."""

    def __init__(self, base_url: str, *, clock: Clock, timeout_s: float) -> None:
        self._url = base_url.rstrip("/").removesuffix("/invocations") + "/invocations"
        self._clock = clock
        self._timeout_s = timeout_s
        # No proxies: the target is a local container or a host the caller names explicitly.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def invoke(
        self,
        body: bytes,
        *,
        stream: bool,
        variant: str | None = None,
        component: str | None = None,
        session_id: str | None = None,
    ) -> Answer:
        # ``component`` is ignored: SageMaker consumes the component header to route the request,
        # it never reaches the container.
        headers = {"Content-Type": "application/json"}
        if variant:
            headers["X-Amzn-SageMaker-Target-Variant"] = variant
        if session_id:
            headers[SESSION_HEADER] = session_id
        request = urllib.request.Request(self._url, data=body, headers=headers, method="POST")
        started = self._clock()
        try:
            with self._opener.open(request, timeout=self._timeout_s) as response:
                if stream:
                    result = read_sse_chunks(iter(lambda: response.read1(65536), b""), clock=self._clock)
                    ttft = None if result.first_content_at is None else result.first_content_at - started
                    return Answer(True, "ok", self._clock() - started, ttft, result.content, usage=result.usage)
                content, usage = read_completion(response.read())
                return Answer(True, "ok", self._clock() - started, None, content, usage=usage)
        except urllib.error.HTTPError as error:
            return Answer(False, f"HTTP {error.code}", self._clock() - started, detail=str(error.reason))
        except AnswerError as error:
            return Answer(False, "bad answer", self._clock() - started, detail=str(error))
        except (urllib.error.URLError, OSError) as error:
            return Answer(False, "connection error", self._clock() - started, detail=str(error))

    def session(self, request_type: str, *, session_id: str | None = None, variant: str | None = None) -> SessionAnswer:
        headers = {"Content-Type": "application/json"}
        if session_id and request_type != "NEW_SESSION":
            headers[SESSION_HEADER] = session_id
        request = urllib.request.Request(self._url, data=session_body(request_type), headers=headers, method="POST")
        try:
            with self._opener.open(request, timeout=self._timeout_s) as response:
                response.read()
                return session_answer(
                    request_type, response.headers.get(NEW_SESSION_HEADER), response.headers.get(CLOSED_SESSION_HEADER)
                )
        except urllib.error.HTTPError as error:
            return SessionAnswer(False, f"HTTP {error.code}", detail=str(error.reason))
        except (urllib.error.URLError, OSError) as error:
            return SessionAnswer(False, "connection error", detail=str(error))
