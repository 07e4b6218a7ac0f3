"""A fallback never answers an adapter's request from a model without that adapter unless the caller allows
it, and every answer says which adapter and model gave it, a stream's before its first piece (issue 53,
finding 6: a foundation model through Converse answered ``manga_domain_v3``'s calls as if it were that
adapter, and nothing in the result said so).

A foundation model through Converse serves no LoRA adapter: it is a *substitute*, allowed per call
(``allow_substitute=True``) or for every call (``ClientConfig(allow_substitute=True)``). The endpoint serves
every adapter it has (it answers an unknown one with a 400 itself), and an imported model is one adapter's
merged weights."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mangaassist_client import (
    BackendUnavailableError,
    BedrockFoundationModel,
    BedrockImportedModels,
    ClientConfig,
    ClientMetric,
    Origin,
    SageMakerEndpoint,
)
from tests.botocore_helpers import add_event_stream_response, bedrock_chunk, event
from tests.client.stubs import (
    CALL,
    DOMAIN_ARN,
    FOUNDATION_ID,
    IMPORTED,
    SAGEMAKER,
    gateway_error,
    model_error,
    rig,
    sse,
)
from tests.client.test_sessions import _open

FOUNDATION = f"bedrock:{FOUNDATION_ID}"
ONLY_FOUNDATION = (BedrockFoundationModel(FOUNDATION_ID, region="us-east-1"),)
CONVERSE_ANSWER = {
    "output": {"message": {"role": "assistant", "content": [{"text": "Try Blue Giant."}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 30, "outputTokens": 5, "totalTokens": 35},
    "metrics": {"latencyMs": 300},
}
REFUSAL = (
    f"{FOUNDATION}: not_served NotServed: {FOUNDATION_ID} has no adapter 'manga_domain_v3'; let it answer "
    "without the adapter with allow_substitute=True on the call, or ClientConfig(allow_substitute=True)"
)


def test_a_model_without_the_adapter_is_refused_and_the_error_says_how_to_allow_it() -> None:
    with rig(fallbacks=ONLY_FOUNDATION) as r:
        r.fail(502, gateway_error(502, "engine error 500"))
        with pytest.raises(BackendUnavailableError) as raised:
            r.client.chat(**CALL)
        r.pending()  # Converse was never called: its Stubber would have raised
    assert str(raised.value).endswith(REFUSAL)
    assert r.lines.last()[ClientMetric.UNANSWERED] == 1


def test_allowed_per_call_the_result_says_no_adapter_answered_and_which_model_did() -> None:
    with rig(fallbacks=ONLY_FOUNDATION) as r:
        r.fail(502, gateway_error(502, "engine error 500"))
        r.bedrock.add_response("converse", CONVERSE_ANSWER)
        result = r.client.chat(**CALL, allow_substitute=True)
        r.pending()
    assert (result.backend, result.model, result.adapter) == (FOUNDATION, FOUNDATION_ID, None)
    assert result.origin == Origin(FOUNDATION, FOUNDATION_ID, None)


def test_allowed_in_config_for_every_call() -> None:
    with rig(fallbacks=ONLY_FOUNDATION, allow_substitute=True) as r:
        r.fail(502, gateway_error(502, "engine error 500"))
        r.bedrock.add_response("converse", CONVERSE_ANSWER)
        assert r.client.chat(**CALL).adapter is None
        r.fail(502, gateway_error(502, "engine error 500"))
        with pytest.raises(BackendUnavailableError, match="allow_substitute=True"):
            r.client.chat(**CALL, allow_substitute=False)  # the call's own word wins
        r.pending()


def test_the_endpoint_and_the_adapters_imported_model_answer_with_the_adapter() -> None:
    with rig() as r:
        r.answer()
        endpoint = r.client.chat(**CALL)
        r.fail(502, gateway_error(502, "engine error 500"))
        r.imported_answer()
        imported = r.client.chat(**CALL)
        r.pending()
    assert endpoint.origin == Origin(SAGEMAKER, "manga_domain_v3", "manga_domain_v3")
    assert imported.origin == Origin(IMPORTED, DOMAIN_ARN, "manga_domain_v3")


def _imported_stream(r: Any, *pieces: str) -> None:
    chunks = [{"choices": [{"index": 0, "delta": {"content": piece}}]} for piece in pieces]
    frames = [bedrock_chunk(json.dumps(chunk).encode()) for chunk in chunks]
    head = {"contentType": "application/json"}
    add_event_stream_response(r.bedrock, "invoke_model_with_response_stream", head, frames)


def test_a_stream_says_which_adapter_and_model_answer_before_its_first_piece() -> None:
    """``start()`` makes the call up to its first piece without taking it: the caller can label the answer
    (or refuse it) before showing any text, and iterating still yields every piece."""
    with rig() as r:
        r.sagemaker.add_client_error(
            "invoke_endpoint_with_response_stream", **model_error(503, gateway_error(503, "engine unavailable"))
        )
        _imported_stream(r, "Try ", "Frieren.")
        stream = r.client.chat_stream(**CALL)
        assert stream.origin is None  # nothing sent yet
        assert stream.start() == Origin(IMPORTED, DOMAIN_ARN, "manga_domain_v3")
        assert stream.origin == stream.start()  # once
        assert list(stream) == ["Try ", "Frieren."]
        r.pending()
    assert stream.result is not None and stream.result.origin == stream.origin


def test_a_substitute_stream_is_labelled_before_its_first_piece_and_refused_unless_allowed() -> None:
    with rig(fallbacks=ONLY_FOUNDATION) as r:
        r.sagemaker.add_client_error("invoke_endpoint_with_response_stream", "ServiceUnavailable", "busy", 503)
        with pytest.raises(BackendUnavailableError) as raised:
            r.client.chat_stream(**CALL).start()
        assert str(raised.value).endswith(REFUSAL)
        r.sagemaker.add_client_error("invoke_endpoint_with_response_stream", "ServiceUnavailable", "busy", 503)
        add_event_stream_response(r.bedrock, "converse_stream", {}, _converse_frames("Try ", "Blue Giant."))
        stream = r.client.chat_stream(**CALL, allow_substitute=True)
        assert stream.start() == Origin(FOUNDATION, FOUNDATION_ID, None)
        assert "".join(stream) == "Try Blue Giant."
        r.pending()


def _converse_frames(*pieces: str) -> list[bytes]:
    frames = [event("messageStart", b'{"role": "assistant"}')]
    frames += [
        event("contentBlockDelta", json.dumps({"delta": {"text": p}, "contentBlockIndex": 0}).encode()) for p in pieces
    ]
    frames.append(event("messageStop", b'{"stopReason": "end_turn"}'))
    return frames


def test_a_session_stream_is_labelled_before_its_first_piece_too() -> None:
    with rig() as r:
        _open(r)
        r.stream(sse("ok"))
        stream = r.client.open_session().chat_stream(**CALL)
        assert stream.start() == Origin(SAGEMAKER, "manga_domain_v3", "manga_domain_v3")
        assert list(stream) == ["ok"]
        r.pending()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda r: r.client.chat(**CALL, allow_substitute="yes"),
            "allow_substitute = 'yes': must be True or False",
        ),
        (
            lambda r: r.client.chat_stream(**CALL, allow_substitute=1),
            "allow_substitute = 1: must be True or False",
        ),
    ],
    ids=["chat", "stream"],
)
def test_a_bad_allow_substitute_is_one_line(make: Any, message: str) -> None:
    with rig() as r, pytest.raises(ValueError) as raised:
        make(r)
    assert str(raised.value) == message


def test_a_bad_allow_substitute_in_config_is_one_line() -> None:
    with pytest.raises(ValueError) as raised:
        ClientConfig(SageMakerEndpoint("e"), allow_substitute="no")  # type: ignore[arg-type]
    assert str(raised.value) == "allow_substitute = 'no': must be True or False"


def test_the_imported_models_backend_names_no_model_for_an_adapter_it_lacks() -> None:
    with rig(fallbacks=(BedrockImportedModels({"jp_style_v1": DOMAIN_ARN}),)) as r:
        r.fail(502, gateway_error(502, "engine error 500"))
        with pytest.raises(BackendUnavailableError, match="bedrock-import: not_served NotServed: no model for adapter"):
            r.client.chat(**CALL)
        r.pending()
