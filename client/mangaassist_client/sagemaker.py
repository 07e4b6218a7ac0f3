"""The SageMaker endpoint: ``InvokeEndpoint`` and ``InvokeEndpointWithResponseStream`` with the container's
OpenAI chat-completions body, and SageMaker's stateful sessions.

What goes out (sagemaker-runtime API model; the container's side is container/serving_app/):

* the body ``{"model": <adapter>, "messages": [...], "max_tokens": N, ...}``: ``model`` picks the adapter
  (or ``base``); a stream asks for ``stream_options.include_usage`` so its last event carries the counts;
* ``CustomAttributes: context_budget=off`` when the caller opts out of the context budget;
* ``SessionId``: the session's id (``NEW_SESSION`` / the body ``{"requestType": ...}`` to open and close);
* ``PrefixAwareId``: the routing hint of prefix-aware endpoints (``throughput.routing = prefix_aware``);
* ``InferenceId``: the call's ``request_id``; SageMaker writes it into both variants' data-capture records
  (``eventMetadata.inferenceId``; API reference, InvokeEndpoint), which is how ``ops shadow report`` pairs the
  shadow variant's answer with the primary's.

What comes back: the completion (or SSE events ``data: {...}`` ... ``data: [DONE]`` in ``PayloadPart`` events
cut anywhere), ``CustomAttributes`` (the versions that answered and the context-budget report; model module),
``InvokedProductionVariant``. A failure inside a stream arrives as the gateway's
``data: {"error": {...}}`` event, or as SageMaker's ``ModelStreamError`` / ``InternalStreamFailure`` event,
which botocore raises as ``EventStreamError``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

import botocore

from mangaassist_client.backends import BackendStream
from mangaassist_client.errors import AnswerError
from mangaassist_client.model import (
    CONTEXT_BUDGET_ATTRIBUTE,
    CONTEXT_BUDGET_OFF,
    ChatRequest,
    Completion,
    Origin,
    context_budget_report,
    openai_usage,
    parse_custom_attributes,
    served_versions,
)
from mangaassist_client.sse import DONE, SseDecodeError, SseDecoder

PREFIX_AWARE_ID: Final = "PrefixAwareId"
INFERENCE_ID: Final = "InferenceId"
NEW_SESSION: Final = "NEW_SESSION"
CLOSE: Final = "CLOSE"
STREAM_ERROR_EVENTS: Final = ("ModelStreamError", "InternalStreamFailure")


def _choice(payload: object) -> Mapping[str, Any]:
    if not isinstance(payload, Mapping):
        raise AnswerError("BadAnswer", f"answer is {type(payload).__name__}, not a JSON object")
    if "error" in payload:
        error = payload["error"]
        error = error if isinstance(error, Mapping) else {"message": str(error)}
        code = error.get("code")
        status = code if isinstance(code, int) and not isinstance(code, bool) else None
        raise AnswerError(str(error.get("type", "EngineError")), str(error.get("message", "")), status)
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return {}
    return choices[0]


def read_completion(body: bytes) -> tuple[str, Any, str | None]:
    """``(text, usage object, finish_reason)`` of an OpenAI chat-completion body.

    Raises:
        AnswerError: not JSON, an error object, or no ``choices[0].message.content`` string.
    """
    try:
        payload = json.loads(body)
    except ValueError:
        raise AnswerError("BadAnswer", f"answer is not JSON: {body[:80]!r}") from None
    choice = _choice(payload)
    message = choice.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, str):
        raise AnswerError("BadAnswer", "answer has no choices[0].message.content")
    return content, payload.get("usage"), choice.get("finish_reason")


def chunk_text(data: str | bytes, stream: BackendStream) -> str:
    """The text of one OpenAI ``chat.completion.chunk`` (JSON text); fills ``stream.usage`` and
    ``finish_reason`` from it.

    Raises:
        AnswerError: not JSON, or an error object (vLLM's or the gateway's in-stream error).
    """
    try:
        payload = json.loads(data)
    except ValueError:
        raise AnswerError("BadAnswer", f"stream event is not JSON: {data[:80]!r}") from None
    choice = _choice(payload)
    if isinstance(payload.get("usage"), Mapping):
        stream.usage = openai_usage(payload["usage"])
    stream.finish_reason = choice.get("finish_reason") or stream.finish_reason
    delta = choice.get("delta")
    text = delta.get("content") if isinstance(delta, Mapping) else None
    return text if isinstance(text, str) else ""


def sse_text(chunks: Iterable[bytes], stream: BackendStream) -> Iterator[str]:
    """Text pieces of OpenAI SSE ``chunks`` (bytes cut anywhere), through :func:`chunk_text`.

    Raises:
        AnswerError: as :func:`chunk_text`, a stream that is not UTF-8, or no ``[DONE]`` at the end.
    """
    decoder = SseDecoder()
    for chunk in chunks:
        try:
            events = decoder.feed(chunk)
        except SseDecodeError as error:
            raise AnswerError("BadAnswer", str(error)) from None
        for data in events:
            if data.strip() == DONE:
                return
            text = chunk_text(data, stream)
            if text:
                yield text
    raise AnswerError("IncompleteStream", "the stream ended without [DONE]")


def payload_bytes(events: Iterable[Mapping[str, Any]]) -> Iterator[bytes]:
    """The bytes of each ``PayloadPart`` of an InvokeEndpointWithResponseStream body; an error event that
    reaches here as a dict raises :class:`AnswerError` (botocore's EventStream raises its own error)."""
    for event in events:
        for kind in STREAM_ERROR_EVENTS:
            if kind in event:
                info = event[kind] or {}
                raise AnswerError(kind, str(info.get("Message", "")))
        part = event.get("PayloadPart")
        if part is not None:
            yield part.get("Bytes", b"")


class SageMakerBackend:
    """A SageMaker real-time endpoint behind a ``sagemaker-runtime`` client.

    Args:
        runtime: a boto3 ``sagemaker-runtime`` client (this package makes one with botocore's retries off:
            ``client.make_clients``).
        endpoint_name: the Serving stack's ``EndpointName`` output.
        prefix_aware_id: the default ``PrefixAwareId`` (a call's own wins), or None.
    """

    def __init__(self, runtime: Any, endpoint_name: str, *, prefix_aware_id: str | None = None) -> None:
        self.runtime = runtime
        self.endpoint_name = endpoint_name
        self.prefix_aware_id = prefix_aware_id
        self.name = f"sagemaker:{endpoint_name}"
        model = runtime.meta.service_model.operation_model("InvokeEndpoint")
        self._takes_prefix_aware_id = PREFIX_AWARE_ID in model.input_shape.members

    def origin(self, adapter: str) -> Origin:
        # The endpoint serves every adapter it has, and answers an unknown one itself, with a 400 naming it.
        return Origin(self.name, adapter, adapter)

    def _params(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        body = request.openai_body(model=request.adapter, stream=stream)
        params: dict[str, Any] = {
            "EndpointName": self.endpoint_name,
            "Body": json.dumps(body).encode(),
            "ContentType": "application/json",
            "Accept": "text/event-stream" if stream else "application/json",
        }
        if not request.context_budget:
            params["CustomAttributes"] = f"{CONTEXT_BUDGET_ATTRIBUTE}={CONTEXT_BUDGET_OFF}"
        if request.session_id:
            params["SessionId"] = request.session_id
        if request.request_id:
            params[INFERENCE_ID] = request.request_id
        prefix_aware_id = request.prefix_aware_id or self.prefix_aware_id
        if prefix_aware_id:
            if not self._takes_prefix_aware_id:
                raise ValueError(
                    f"prefix_aware_id: botocore {botocore.__version__} has no sagemaker-runtime PrefixAwareId; "
                    "upgrade boto3 (the parameter came out in 2026-08)"
                )
            params[PREFIX_AWARE_ID] = prefix_aware_id
        return params

    def complete(self, request: ChatRequest) -> Completion:
        response = self.runtime.invoke_endpoint(**self._params(request, stream=False))
        text, usage, finish_reason = read_completion(response["Body"].read())
        attributes = response.get("CustomAttributes") or ""
        parsed = parse_custom_attributes(attributes)
        return Completion(
            text=text,
            usage=openai_usage(usage),
            version=attributes,
            finish_reason=finish_reason,
            served=served_versions(parsed),
            context_budget=context_budget_report(parsed),
            variant=response.get("InvokedProductionVariant"),
        )

    def stream(self, request: ChatRequest) -> BackendStream:
        response = self.runtime.invoke_endpoint_with_response_stream(**self._params(request, stream=True))
        attributes = response.get("CustomAttributes") or ""
        parsed = parse_custom_attributes(attributes)
        return BackendStream(
            lambda stream: sse_text(payload_bytes(response["Body"]), stream),
            version=attributes,
            served=served_versions(parsed),
            context_budget=context_budget_report(parsed),
            variant=response.get("InvokedProductionVariant"),
        )

    def open_session(self) -> tuple[str, str]:
        """``(session id, expiry)`` of a new stateful session: ``InvokeEndpoint`` with ``SessionId`` NEW_SESSION
        (a session cannot be opened by the streaming call; API reference). Raises botocore's error, or
        :class:`AnswerError` when the answer names no session."""
        response = self.runtime.invoke_endpoint(
            EndpointName=self.endpoint_name,
            SessionId=NEW_SESSION,
            ContentType="application/json",
            Body=json.dumps({"requestType": NEW_SESSION}).encode(),
        )
        session_id, _, expires = (response.get("NewSessionId") or "").partition(";")
        if not session_id.strip():
            raise AnswerError("BadAnswer", "NEW_SESSION answered without NewSessionId")
        return session_id.strip(), expires.strip().removeprefix("Expires=")

    def close_session(self, session_id: str) -> str:
        """Close ``session_id``; returns the ``ClosedSessionId`` SageMaker answered. Raises botocore's error."""
        response = self.runtime.invoke_endpoint(
            EndpointName=self.endpoint_name,
            SessionId=session_id,
            ContentType="application/json",
            Body=json.dumps({"requestType": CLOSE}).encode(),
        )
        return str(response.get("ClosedSessionId") or "")
