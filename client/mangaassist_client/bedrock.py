"""Bedrock backends: the BedrockImport stack's imported models (one merged model per adapter), or a
foundation model through Converse.

* :class:`ImportedModelBackend`: ``InvokeModel`` / ``InvokeModelWithResponseStream`` with the same OpenAI
  chat-completions body the endpoint takes (models imported after 2025-11-11 accept it; Bedrock user guide,
  "Invoke your imported model"; docs/bedrock.md), ``modelId`` the adapter's ``ImportedModelArn<Name>``
  output. A streamed answer's ``chunk`` events each carry one ``chat.completion.chunk`` object as their
  bytes (an ``data: {...}`` SSE line is read too). Not checked in an AWS account here: docs/client.md.
* :class:`ConverseBackend`: ``Converse`` / ``ConverseStream`` with a model id (a foundation model such as
  Llama 3.1 8B Instruct, which serves no LoRA adapter: every adapter gets the same model, so it answers an
  adapter's request only where the caller allows a substitute; client module).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from mangaassist_client.backends import BackendStream
from mangaassist_client.errors import AnswerError
from mangaassist_client.model import ChatRequest, Completion, Origin, Usage, openai_usage
from mangaassist_client.sagemaker import chunk_text, read_completion
from mangaassist_client.sse import DONE, SseDecoder


def imported_chunks(events: Iterable[Mapping[str, Any]], stream: BackendStream) -> Iterator[str]:
    """Text pieces of an InvokeModelWithResponseStream body (``{"chunk": {"bytes": ...}}`` events)."""
    decoder = SseDecoder()
    for event in events:
        data: bytes = (event.get("chunk") or {}).get("bytes", b"")
        # An SSE line rather than a bare object: each chunk holds whole events, so end the last one.
        items = decoder.feed(data.rstrip(b"\r\n") + b"\n\n") if data.lstrip().startswith(b"data:") else [data]
        for item in items:
            if item.strip() and item.strip() not in (DONE, DONE.encode()):
                text = chunk_text(item, stream)
                if text:
                    yield text


class ImportedModelBackend:
    """Bedrock imported models, one per adapter (the BedrockImport stack's ``ImportedModelArn<Name>`` outputs).

    Args:
        runtime: a boto3 ``bedrock-runtime`` client in the models' region.
        model_arns: adapter (or base model) name -> imported model ARN; an adapter without one is not served.
    """

    name = "bedrock-import"

    def __init__(self, runtime: Any, model_arns: Mapping[str, str]) -> None:
        self.runtime = runtime
        self.model_arns = dict(model_arns)

    def origin(self, adapter: str) -> Origin | None:
        arn = self.model_arns.get(adapter)
        return None if arn is None else Origin(self.name, arn, adapter)  # the adapter's merged weights

    def complete(self, request: ChatRequest) -> Completion:
        arn = self.model_arns[request.adapter]
        response = self.runtime.invoke_model(
            modelId=arn,
            body=json.dumps(request.openai_body(model=None, stream=False)),
            contentType="application/json",
            accept="application/json",
        )
        text, usage, finish_reason = read_completion(response["body"].read())
        return Completion(text=text, usage=openai_usage(usage), version=arn, finish_reason=finish_reason)

    def stream(self, request: ChatRequest) -> BackendStream:
        arn = self.model_arns[request.adapter]
        response = self.runtime.invoke_model_with_response_stream(
            modelId=arn,
            body=json.dumps(request.openai_body(model=None, stream=True)),
            contentType="application/json",
            accept="application/json",
        )
        return BackendStream(lambda stream: imported_chunks(response["body"], stream), version=arn)


def converse_messages(request: ChatRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(system, messages)`` for Converse: system messages become ``system`` text blocks; consecutive
    messages of one role are joined (Converse wants user and assistant to alternate)."""
    system = [{"text": m["content"]} for m in request.messages if m["role"] == "system"]
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        if message["role"] == "system":
            continue
        if messages and messages[-1]["role"] == message["role"]:
            messages[-1]["content"][0]["text"] += "\n\n" + message["content"]
        else:
            messages.append({"role": message["role"], "content": [{"text": message["content"]}]})
    return system, messages


def _converse_usage(usage: object) -> Usage:
    if not isinstance(usage, Mapping):
        return Usage()
    return Usage(usage.get("inputTokens"), usage.get("outputTokens"), usage.get("cacheReadInputTokens"))


def converse_pieces(events: Iterable[Mapping[str, Any]], stream: BackendStream) -> Iterator[str]:
    """Text pieces of a ConverseStream ``stream`` (``contentBlockDelta`` text; ``metadata`` usage;
    ``messageStop`` stop reason). Raises :class:`AnswerError` when it ends before ``messageStop``."""
    stopped = False
    for event in events:
        if "contentBlockDelta" in event:
            text = event["contentBlockDelta"].get("delta", {}).get("text")
            if text:
                yield text
        elif "messageStop" in event:
            stopped = True
            stream.finish_reason = event["messageStop"].get("stopReason")
        elif "metadata" in event:
            stream.usage = _converse_usage(event["metadata"].get("usage"))
    if not stopped:
        raise AnswerError("IncompleteStream", "ConverseStream ended without messageStop")


class ConverseBackend:
    """A Bedrock model through Converse / ConverseStream (one model for every adapter).

    Args:
        runtime: a boto3 ``bedrock-runtime`` client.
        model_id: the model id, inference profile or ARN (e.g. ``meta.llama3-1-8b-instruct-v1:0``).
    """

    def __init__(self, runtime: Any, model_id: str) -> None:
        self.runtime = runtime
        self.model_id = model_id
        self.name = f"bedrock:{model_id}"

    def origin(self, adapter: str) -> Origin:
        return Origin(self.name, self.model_id, None)  # one model, no LoRA adapter: a substitute

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        system, messages = converse_messages(request)
        config: dict[str, Any] = {"maxTokens": request.max_tokens}
        if request.temperature is not None:
            config["temperature"] = request.temperature
        if request.top_p is not None:
            config["topP"] = request.top_p
        params: dict[str, Any] = {"modelId": self.model_id, "messages": messages, "inferenceConfig": config}
        if system:
            params["system"] = system
        return params

    def complete(self, request: ChatRequest) -> Completion:
        response = self.runtime.converse(**self._params(request))
        blocks = response.get("output", {}).get("message", {}).get("content", [])
        text = "".join(block["text"] for block in blocks if isinstance(block.get("text"), str))
        return Completion(
            text=text,
            usage=_converse_usage(response.get("usage")),
            version=self.model_id,
            finish_reason=response.get("stopReason"),
        )

    def stream(self, request: ChatRequest) -> BackendStream:
        response = self.runtime.converse_stream(**self._params(request))
        return BackendStream(lambda stream: converse_pieces(response["stream"], stream), version=self.model_id)
