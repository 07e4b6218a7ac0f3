"""Each retry and fallback rule of the client (issue 48), against botocore's Stubber with the real response
shapes of sagemaker-runtime and bedrock-runtime: SageMaker's ``ModelError`` carrying the container's status
and body, its throttling and service errors, botocore's own timeout, Bedrock's answers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

from mangaassist_client import (
    BackendUnavailableError,
    CallerError,
    ClientMetric,
    FailureKind,
    RetryPolicy,
)
from tests.botocore_helpers import streaming_body
from tests.client.stubs import CALL, DOMAIN_ARN, IMPORTED, SAGEMAKER, VERSIONS, completion, gateway_error, rig

OOM_503 = gateway_error(
    503, "engine out of memory on this request, also after compressing the older turns; retry later", retry_after_s=5
)


def test_the_endpoint_answers_and_nothing_else_is_called() -> None:
    with rig() as r:
        r.answer("Try Delicious in Dungeon.")
        result = r.client.chat(**CALL)
        r.pending()
    assert (result.text, result.backend, result.version, result.variant) == (
        "Try Delicious in Dungeon.",
        SAGEMAKER,
        VERSIONS,
        "primary",
    )
    assert result.fallback_from == ()
    assert r.lines.last() == {
        ClientMetric.REQUESTS: 1,
        ClientMetric.RETRIES: 0,
        ClientMetric.FALLBACKS: 0,
        ClientMetric.CIRCUIT_OPENED: 0,
        ClientMetric.STREAMS_INTERRUPTED: 0,
        ClientMetric.CANARY_REQUESTS: 0,
        ClientMetric.UNANSWERED: 0,
    }


def test_a_503_with_retry_after_is_retried_after_that_wait_on_the_same_endpoint() -> None:
    """The container's OOM 503 (Retry-After 5, and retry_after_s in its body, which ModelError carries): the
    wait is the 5 s plus jitter of up to 5 s more (rand 0.5 here; tests/client/test_drain_and_jitter.py)."""
    with rig() as r:
        r.fail(503, OOM_503)
        r.answer()
        result = r.client.chat(**CALL)
        r.pending()
    assert result.backend == SAGEMAKER
    assert r.clock.sleeps == [7.5]
    assert r.lines.last()[ClientMetric.RETRIES] == 1
    assert r.lines.last()[ClientMetric.FALLBACKS] == 0


def test_a_retry_after_beyond_the_deadline_falls_back_at_once() -> None:
    with rig() as r:
        r.fail(503, OOM_503)
        r.imported_answer("Try Frieren.")
        result = r.client.chat(**CALL, deadline_s=4)
        r.pending()
    assert (result.backend, result.version, result.text) == (IMPORTED, DOMAIN_ARN, "Try Frieren.")
    assert r.clock.sleeps == []  # no wait that would end past the deadline
    assert result.fallback_from[0].startswith(f"{SAGEMAKER}: retry_after 503 ModelError: engine out of memory")
    assert r.lines.last()[ClientMetric.FALLBACKS] == 1
    assert r.lines.last()[ClientMetric.RETRIES] == 0


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (
            {"service_error_code": "ThrottlingException", "service_message": "Rate exceeded", "http_status_code": 400},
            "code",
        ),
        (
            {"service_error_code": "ModelNotReadyException", "service_message": "not ready", "http_status_code": 429},
            "429",
        ),
    ],
    ids=["throttling-code", "model-not-ready-429"],
)
def test_throttling_is_retried_with_backoff(error: dict[str, Any], kind: str) -> None:
    with rig() as r:
        r.sagemaker.add_client_error("invoke_endpoint", **error)
        r.sagemaker.add_client_error("invoke_endpoint", **error)
        r.answer()
        result = r.client.chat(**CALL)
        r.pending()
    assert result.backend == SAGEMAKER
    # botocore's standard mode: rand x min(1 s x 2^i, 20 s), rand = 0.5 here
    assert r.clock.sleeps == [0.5, 1.0]
    assert r.lines.last()[ClientMetric.RETRIES] == 2


def test_the_containers_429_through_model_error_is_throttling() -> None:
    """NEW_SESSION past the instance's session cap answers 429 (docs/sessions.md): "not now", not a 4xx."""
    with rig() as r:
        r.fail(429, gateway_error(429, "session limit reached: 4096 live sessions"))
        r.answer()
        assert r.client.chat(**CALL).backend == SAGEMAKER
    assert r.clock.sleeps == [0.5]


def test_throttling_out_of_tries_falls_back() -> None:
    with rig(retry=RetryPolicy(max_attempts=2)) as r:
        for _ in range(2):
            r.sagemaker.add_client_error("invoke_endpoint", "ThrottlingException", "Rate exceeded", 400)
        r.imported_answer()
        result = r.client.chat(**CALL)
        r.pending()
    assert result.backend == IMPORTED
    assert r.clock.sleeps == [0.5]
    assert r.lines.last()[ClientMetric.RETRIES] == 1
    assert r.lines.last()[ClientMetric.FALLBACKS] == 1


@pytest.mark.parametrize(
    "failure",
    [
        {"status": 503, "body": gateway_error(503, "engine unavailable")},  # no Retry-After: instance down
        {"status": 502, "body": gateway_error(502, "engine error 500")},
        {"code": "InternalFailure", "http": 500},
        {"code": "ServiceUnavailable", "http": 503},
        {"code": "InternalDependencyException", "http": 530},
    ],
    ids=["engine-503", "engine-502", "internal-failure", "service-unavailable", "dependency-530"],
)
def test_a_5xx_goes_to_the_fallback_without_a_retry(failure: dict[str, Any]) -> None:
    with rig() as r:
        if "status" in failure:
            r.fail(failure["status"], failure["body"])
        else:
            r.sagemaker.add_client_error("invoke_endpoint", failure["code"], "failed", failure["http"])
        r.imported_answer("Try Frieren.")
        result = r.client.chat(**CALL)
        r.pending()
    assert (result.backend, result.text) == (IMPORTED, "Try Frieren.")
    assert r.clock.sleeps == []
    assert r.lines.last()[ClientMetric.FALLBACKS] == 1
    assert r.lines.calls()[-1][1]["Backend"] == IMPORTED


def test_a_drain_503_of_a_container_before_issue_53_is_retried_after_1_s_too() -> None:
    """Its message, without InstanceDraining or Retry-After: still a drain (1 s, plus jitter), never a
    circuit failure."""
    with rig(retry=RetryPolicy(max_attempts=2)) as r:
        r.fail(503, gateway_error(503, "instance is draining (SIGTERM); retry elsewhere"))
        r.answer()
        assert r.client.chat(**CALL).backend == SAGEMAKER
        r.fail(503, gateway_error(503, "instance is draining (SIGTERM); retry elsewhere"))
        r.fail(503, gateway_error(503, "instance is draining (SIGTERM); retry elsewhere"))
        r.imported_answer()
        result = r.client.chat(**CALL)
        r.pending()
    assert r.clock.sleeps == [1.5, 1.5]
    assert result.fallback_from[0].startswith(f"{SAGEMAKER}: draining 503 ModelError: instance is draining")
    assert r.client.circuit(SAGEMAKER).state == "closed"


def test_a_timeout_goes_to_the_fallback() -> None:
    """botocore's read timeout, raised from its HTTP layer (the Stubber answers before sending, so a
    ``before-send`` handler plays the socket that never answers)."""
    with rig() as r:
        runtime = r.client.backends[0].runtime  # type: ignore[attr-defined]

        def hang(request: Any, **_: Any) -> None:
            raise ReadTimeoutError(endpoint_url=request.url)

        r.sagemaker.deactivate()  # let the call reach the HTTP layer
        runtime.meta.events.register("before-send.sagemaker-runtime.InvokeEndpoint", hang)
        r.imported_answer()
        result = r.client.chat(**CALL)
        r.bedrock.assert_no_pending_responses()
    assert result.backend == IMPORTED
    assert result.fallback_from[0].startswith(f"{SAGEMAKER}: timeout ReadTimeoutError")


@pytest.mark.parametrize(
    ("queue", "status", "message"),
    [
        (lambda r: r.fail(400, gateway_error(400, "unknown adapter 'ghost'")), 400, "unknown adapter 'ghost'"),
        (
            lambda r: r.fail(400, {"error": {"message": "This model's maximum context length is 4096 tokens."}}),
            400,
            "maximum context length",
        ),
        (lambda r: r.fail(422, gateway_error(422, "invalid request: max_tokens")), 422, "invalid request"),
        (
            lambda r: r.sagemaker.add_client_error("invoke_endpoint", "ValidationError", "Endpoint x not found.", 400),
            400,
            "not found",
        ),
    ],
    ids=["unknown-adapter", "context-length", "invalid-body", "no-such-endpoint"],
)
def test_a_4xx_is_the_callers_and_never_falls_back(queue: Any, status: int, message: str) -> None:
    with rig() as r:
        queue(r)
        with pytest.raises(CallerError) as raised:
            r.client.chat(**CALL)
        r.pending()  # Bedrock was never called: its Stubber would have raised on an unqueued call
    assert raised.value.status == status
    assert message in str(raised.value)
    assert raised.value.failure.kind is FailureKind.CALLER
    assert r.lines.last()[ClientMetric.FALLBACKS] == 0
    assert r.lines.calls()[-1][1]["Outcome"] == "caller_error"
    assert not r.client.circuit(SAGEMAKER).is_open


def test_a_4xx_from_the_fallback_is_raised_too() -> None:
    with rig() as r:
        r.fail(502, gateway_error(502, "engine error 500"))
        r.bedrock.add_client_error("invoke_model", "ValidationException", "prompt too long", 400)
        with pytest.raises(CallerError, match="bedrock-import: caller 400 ValidationException: prompt too long"):
            r.client.chat(**CALL)
        r.pending()


def test_when_every_backend_fails_the_error_says_why_for_each() -> None:
    with rig() as r:
        r.fail(502, gateway_error(502, "engine error 500"))
        r.bedrock.add_client_error("invoke_model", "ServiceUnavailableException", "busy", 503)
        with pytest.raises(BackendUnavailableError) as raised:
            r.client.chat(**CALL)
    assert str(raised.value) == (
        f"no backend answered: {SAGEMAKER}: server 502 ModelError: engine error 500; "
        "bedrock-import: server 503 ServiceUnavailableException: busy"
    )
    assert r.lines.last()[ClientMetric.FALLBACKS] == 1
    assert r.lines.calls()[-1][1]["Outcome"] == "unavailable"


def test_an_adapter_without_an_imported_model_is_not_sent_to_bedrock() -> None:
    call = {**CALL, "adapter": "jp_style_v1"}
    with rig() as r:
        r.fail(502, gateway_error(502, "engine error 500"))
        with pytest.raises(BackendUnavailableError, match="bedrock-import: not_served NotServed: no model for adapter"):
            r.client.chat(**call)
        r.pending()


def test_the_foundation_model_answers_through_converse_when_the_imported_model_fails_too() -> None:
    with rig(foundation=True) as r:
        r.fail(502, gateway_error(502, "engine error 500"))
        r.bedrock.add_client_error("invoke_model", "ModelTimeoutException", "too slow", 408)
        r.bedrock.add_response(
            "converse",
            {
                "output": {"message": {"role": "assistant", "content": [{"text": "Try Witch Hat Atelier."}]}},
                "stopReason": "end_turn",
                "usage": {"inputTokens": 30, "outputTokens": 7, "totalTokens": 37},
                "metrics": {"latencyMs": 420},
            },
        )
        result = r.client.chat(**CALL, allow_substitute=True)  # a model without the adapter (test_substitutes.py)
        r.pending()
    assert (result.backend, result.text, result.finish_reason, result.adapter) == (
        "bedrock:meta.llama3-1-8b-instruct-v1:0",
        "Try Witch Hat Atelier.",
        "end_turn",
        None,
    )
    assert [f.split(":")[0] for f in result.fallback_from] == ["sagemaker", "bedrock-import"]
    assert "timeout 408 ModelTimeoutException" in result.fallback_from[1]


def test_the_request_the_endpoint_gets() -> None:
    with rig() as r:
        body = {
            "model": "manga_domain_v3",
            "messages": CALL["messages"],
            "max_tokens": 180,
            "temperature": 0.2,
        }
        params = r.invoke_params(
            Body=json.dumps(body).encode(), CustomAttributes="context_budget=off", PrefixAwareId="storefront-jp"
        )
        response = {"Body": streaming_body(completion("ok")), "CustomAttributes": VERSIONS}
        r.sagemaker.add_response("invoke_endpoint", response, params)
        r.client.chat(**CALL, temperature=0.2, context_budget=False, prefix_aware_id="storefront-jp")
        r.pending()
