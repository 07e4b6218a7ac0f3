"""Streamed answers (issue 48): SageMaker's InvokeEndpointWithResponseStream and Bedrock's streams as real
botocore EventStreams (binary event-stream frames, decoded and parsed by botocore), the fallback before the
first token, and the failure after it, which the caller is told about instead of a silent restart."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.stub import ANY

from mangaassist_client import BackendUnavailableError, CallerError, ClientMetric, StreamInterruptedError
from tests.botocore_helpers import add_event_stream_response, bedrock_chunk, event, exception_event
from tests.client.stubs import (
    CALL,
    DOMAIN_ARN,
    IMPORTED,
    SAGEMAKER,
    VERSIONS,
    gateway_error,
    model_error,
    parts,
    rig,
    sse,
)

USAGE = {"prompt_tokens": 40, "completion_tokens": 3, "total_tokens": 43}


def _imported_stream(r: Any, *pieces: str, messages: list[bytes] | None = None) -> None:
    chunks: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {"content": piece}}]} for piece in pieces]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": USAGE})
    frames = messages if messages is not None else [bedrock_chunk(json.dumps(c).encode()) for c in chunks]
    add_event_stream_response(
        r.bedrock, "invoke_model_with_response_stream", {"contentType": "application/json"}, frames
    )


def test_a_stream_cut_anywhere_is_read_whole_with_versions_and_usage() -> None:
    with rig() as r:
        r.stream(sse("ワンピース", "の最新巻は…", usage=USAGE), InvokedProductionVariant="canary")
        stream = r.client.chat_stream(**CALL)
        pieces = list(stream)
        r.pending()
    assert pieces == ["ワンピース", "の最新巻は…"]  # 7-byte PayloadParts cut the characters
    result = stream.result
    assert result is not None
    assert (result.text, result.backend, result.version, result.variant) == (
        "ワンピースの最新巻は…",
        SAGEMAKER,
        VERSIONS,
        "canary",
    )
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (40, 3)
    assert r.lines.last()[ClientMetric.STREAMS_INTERRUPTED] == 0


def test_the_stream_request_asks_for_usage_and_event_stream() -> None:
    with rig() as r:
        body = {
            "model": "manga_domain_v3",
            "messages": CALL["messages"],
            "max_tokens": 180,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        expected = {
            "EndpointName": "mangaassist-vllm-prod",
            "Body": json.dumps(body).encode(),
            "ContentType": "application/json",
            "Accept": "text/event-stream",
            "InferenceId": ANY,  # the call's request_id
        }
        add_event_stream_response(
            r.sagemaker, "invoke_endpoint_with_response_stream", {}, [*parts(sse("ok"))], expected
        )
        assert "".join(r.client.chat_stream(**CALL)) == "ok"
        r.pending()


def test_a_failure_before_the_first_token_falls_back_to_the_imported_models_stream() -> None:
    with rig() as r:
        r.sagemaker.add_client_error(
            "invoke_endpoint_with_response_stream", **model_error(503, gateway_error(503, "engine unavailable"))
        )
        _imported_stream(r, "Try ", "Frieren.")
        stream = r.client.chat_stream(**CALL)
        assert list(stream) == ["Try ", "Frieren."]
        r.pending()
    assert stream.result is not None
    assert (stream.result.backend, stream.result.version) == (IMPORTED, DOMAIN_ARN)
    assert stream.result.usage.completion_tokens == 3
    assert r.lines.last()[ClientMetric.FALLBACKS] == 1


def test_an_error_event_before_any_text_falls_back_too() -> None:
    """The engine failed as the stream started: the gateway's error event comes before any content."""
    with rig() as r:
        r.stream(sse(error="engine stream failed: ClientPayloadError"))
        _imported_stream(r, "Try Frieren.")
        assert "".join(r.client.chat_stream(**CALL)) == "Try Frieren."
        r.pending()
    assert r.lines.last()[ClientMetric.STREAMS_INTERRUPTED] == 0


@pytest.mark.parametrize(
    ("tail", "cause"),
    [
        ("gateway", "EngineError: engine stream failed: ClientPayloadError"),
        ("sagemaker", "ModelStreamError: the model container closed the stream"),
        ("cut", "IncompleteStream: the stream ended without [DONE]"),
    ],
)
def test_a_failure_after_the_first_token_is_told_to_the_caller_and_never_restarted(tail: str, cause: str) -> None:
    with rig() as r:
        if tail == "gateway":  # the engine died mid-stream: the gateway's error event, then [DONE]
            frames = parts(sse("Try ", "Dunge", error="engine stream failed: ClientPayloadError"))
        elif tail == "sagemaker":  # SageMaker's own stream error event
            frames = [
                *parts(sse("Try ", "Dunge", done=False)),
                exception_event(
                    "ModelStreamError",
                    {"Message": "the model container closed the stream", "ErrorCode": "ModelStreamError"},
                ),
            ]
        else:  # the body just ended
            frames = parts(sse("Try ", "Dunge", done=False))
        add_event_stream_response(
            r.sagemaker, "invoke_endpoint_with_response_stream", {"CustomAttributes": VERSIONS}, frames
        )
        stream = r.client.chat_stream(**CALL)
        received = []
        with pytest.raises(StreamInterruptedError) as raised:
            for piece in stream:
                received.append(piece)
        r.pending()  # Bedrock was not called: nothing restarted the answer elsewhere
    assert received == ["Try ", "Dunge"]
    assert raised.value.partial_text == "Try Dunge"
    assert cause in str(raised.value.failure)
    assert stream.result is None
    counts, properties = r.lines.calls()[-1]
    assert counts[ClientMetric.STREAMS_INTERRUPTED] == 1
    assert counts[ClientMetric.FALLBACKS] == 0
    assert properties["Outcome"] == "interrupted"


def test_a_4xx_stream_is_the_callers() -> None:
    with rig() as r:
        r.sagemaker.add_client_error(
            "invoke_endpoint_with_response_stream", **model_error(400, gateway_error(400, "unknown adapter 'ghost'"))
        )
        with pytest.raises(CallerError, match="unknown adapter 'ghost'"):
            list(r.client.chat_stream(**CALL))
        r.pending()


def test_bedrock_stream_events_raise_as_botocore_raises_them() -> None:
    """A throttling event before any text is retried; a validation event is the caller's."""
    with rig() as r:
        r.sagemaker.add_client_error("invoke_endpoint_with_response_stream", "InternalFailure", "failed", 500)
        _imported_stream(r, messages=[exception_event("throttlingException", {"message": "slow down"})])
        _imported_stream(r, "Try Frieren.")
        assert "".join(r.client.chat_stream(**CALL)) == "Try Frieren."
        assert r.clock.sleeps == [0.5]
        r.sagemaker.add_client_error("invoke_endpoint_with_response_stream", "InternalFailure", "failed", 500)
        _imported_stream(r, messages=[exception_event("validationException", {"message": "bad prompt"})])
        with pytest.raises(CallerError, match="bad prompt"):
            list(r.client.chat_stream(**CALL))
        r.pending()


def test_converse_stream_pieces_and_usage() -> None:
    with rig(foundation=True) as r:
        r.sagemaker.add_client_error("invoke_endpoint_with_response_stream", "ServiceUnavailable", "busy", 503)
        r.bedrock.add_client_error("invoke_model_with_response_stream", "InternalServerException", "boom", 500)
        frames = [
            event("messageStart", b'{"role": "assistant"}'),
            event("contentBlockDelta", json.dumps({"delta": {"text": "Try "}, "contentBlockIndex": 0}).encode()),
            event("contentBlockDelta", json.dumps({"delta": {"text": "Blue Giant."}, "contentBlockIndex": 0}).encode()),
            event("contentBlockStop", b'{"contentBlockIndex": 0}'),
            event("messageStop", b'{"stopReason": "end_turn"}'),
            event(
                "metadata",
                json.dumps(
                    {"usage": {"inputTokens": 30, "outputTokens": 5, "totalTokens": 35}, "metrics": {"latencyMs": 300}}
                ).encode(),
            ),
        ]
        add_event_stream_response(r.bedrock, "converse_stream", {}, frames)
        stream = r.client.chat_stream(**CALL, allow_substitute=True)  # Converse serves no adapter
        assert list(stream) == ["Try ", "Blue Giant."]
        r.pending()
    assert stream.result is not None
    assert (stream.result.finish_reason, stream.result.usage.prompt_tokens) == ("end_turn", 30)


def test_no_backend_for_a_stream() -> None:
    with rig() as r:
        r.sagemaker.add_client_error("invoke_endpoint_with_response_stream", "ServiceUnavailable", "busy", 503)
        r.bedrock.add_client_error("invoke_model_with_response_stream", "ServiceUnavailableException", "busy", 503)
        with pytest.raises(BackendUnavailableError):
            next(iter(r.client.chat_stream(**CALL)))
    assert r.lines.calls()[-1][1]["Outcome"] == "unavailable"
