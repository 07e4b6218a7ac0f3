"""Stateful sessions in the ops commands against botocore's real sagemaker-runtime shapes (Stubber):
NEW_SESSION / CLOSE through InvokeEndpoint's SessionId, and a conversation's turns in the session."""

import json
from typing import Any

from ops.cli import main
from ops.conversation import ConversationPlan, run_conversation
from ops.exit_codes import ExitCode
from ops.invoke import SageMakerTarget
from ops.sessions import SYSTEM_PREFIX
from tests.botocore_helpers import streaming_body
from tests.unit.ops.ops_stubs import ENDPOINT, FakeClock, stubbed

SESSION = "7d0c4bb2-6f0e-4c55-9a57-0a1f1f1f1f1f"


class _Body:
    """Matches a request body by a predicate over its JSON."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, check: Any) -> None:
        self.check = check

    def __eq__(self, other: object) -> bool:
        return isinstance(other, bytes) and bool(self.check(json.loads(other)))


def _session_call(
    stubs: Any, request_type: str, response: dict[str, Any], session_id: str, variant: str | None = None
) -> None:
    params = {
        "EndpointName": ENDPOINT,
        "Body": _Body(lambda b: b == {"requestType": request_type}),
        "ContentType": "application/json",
        "SessionId": session_id,
    }
    if variant:
        params["TargetVariant"] = variant
    stubs.runtime.add_response("invoke_endpoint", {"Body": streaming_body(b"ok"), **response}, params)


def _turn(stubs: Any, content: str, check: Any, variant: str | None = None) -> None:
    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
    stubs.runtime.add_response(
        "invoke_endpoint",
        {"Body": streaming_body(body), "ContentType": "application/json"},
        {
            "EndpointName": ENDPOINT,
            "Body": _Body(check),
            "ContentType": "application/json",
            "Accept": "application/json",
            "SessionId": SESSION,
            **({"TargetVariant": variant} if variant else {}),
        },
    )


def test_a_conversation_opens_a_session_sends_every_turn_in_it_and_closes_it() -> None:
    with stubbed() as stubs:
        _session_call(stubs, "NEW_SESSION", {"NewSessionId": f"{SESSION}; Expires=2026-11-25T05:00:00Z"}, "NEW_SESSION")
        # Turn 1: shared system prefix, then the user's message.
        _turn(
            stubs,
            "Try Frieren.",
            lambda b: (
                [m["role"] for m in b["messages"]] == ["system", "user"]
                and b["messages"][0]["content"] == SYSTEM_PREFIX
                and b["model"] == "manga_domain_v3"
            ),
        )
        # Turn 2 resends turn 1 and its answer, unchanged, before the new message.
        _turn(
            stubs,
            "Volume 1.",
            lambda b: (
                [m["role"] for m in b["messages"]] == ["system", "user", "assistant", "user"]
                and b["messages"][1]["content"] == "hello"
                and b["messages"][2]["content"] == "Try Frieren."
            ),
        )
        _session_call(stubs, "CLOSE", {"ClosedSessionId": SESSION}, SESSION)
        target = SageMakerTarget(stubs.clients.runtime, ENDPOINT, clock=FakeClock())
        answers = run_conversation(target, ConversationPlan("manga_domain_v3", 2, "hello", 32, stream=False))
    assert [(a.ok, a.content) for a in answers] == [(True, "Try Frieren."), (True, "Volume 1.")]


def test_a_refused_new_session_is_one_failed_answer_and_no_turn_is_sent() -> None:
    with stubbed() as stubs:
        stubs.runtime.add_client_error(
            "invoke_endpoint",
            service_error_code="ModelError",
            service_message="Received client error (429) from primary with message 'session limit reached'",
            http_status_code=424,
            modeled_fields={"OriginalStatusCode": 429, "OriginalMessage": "session limit reached"},
        )
        target = SageMakerTarget(stubs.clients.runtime, ENDPOINT, clock=FakeClock())
        answers = run_conversation(target, ConversationPlan("manga_domain_v3", 3, "hello", 32, stream=False))
    assert len(answers) == 1 and not answers[0].ok
    assert answers[0].status == "NEW_SESSION ModelError 429"


def test_a_close_without_the_closed_id_is_reported() -> None:
    with stubbed() as stubs:
        _session_call(stubs, "NEW_SESSION", {"NewSessionId": f"{SESSION}; Expires=2026-11-25T05:00:00Z"}, "NEW_SESSION")
        _turn(stubs, "Try Frieren.", lambda b: True)
        _session_call(stubs, "CLOSE", {}, SESSION)
        target = SageMakerTarget(stubs.clients.runtime, ENDPOINT, clock=FakeClock())
        answers = run_conversation(target, ConversationPlan("manga_domain_v3", 1, "hello", 32, stream=False))
    assert [a.status for a in answers] == ["ok", "CLOSE bad answer"]
    assert answers[1].detail == "no ClosedSessionId in the answer"


def test_smoke_with_session_runs_two_turns_in_a_session_per_case() -> None:
    with stubbed() as stubs:
        stubs.describe_endpoint()
        stubs.invoke("primary", "manga_domain_v3")
        new_id = {"NewSessionId": f"{SESSION}; Expires=2026-11-25T05:00:00Z"}
        _session_call(stubs, "NEW_SESSION", new_id, "NEW_SESSION", "primary")
        _turn(stubs, "Try Frieren.", lambda b: len(b["messages"]) == 2, "primary")
        _turn(stubs, "Volume 1.", lambda b: len(b["messages"]) == 4, "primary")
        _session_call(stubs, "CLOSE", {"ClosedSessionId": SESSION}, SESSION, "primary")
        argv = ["smoke", "--endpoint-name", ENDPOINT, "--adapter", "manga_domain_v3", "--variant", "primary"]
        code = main([*argv, "--mode", "sync", "--session"], stubs.deps(FakeClock(tick=0.01)))
    assert code == ExitCode.OK
    rows = [line.split() for line in stubs.output.splitlines() if line.startswith("manga_domain_v3")]
    assert [" ".join(r[2:-3]) for r in rows] == ["sync ok", "session turn 1 ok", "session turn 2 ok"]
    assert stubs.output.endswith("smoke passed: 3 request(s), 1 adapter(s) x 1 variant(s)")
