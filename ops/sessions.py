"""SageMaker stateful sessions as the ops commands see them (AWS docs, "Stateful sessions").

A session opens with ``InvokeEndpoint(SessionId="NEW_SESSION", Body={"requestType": "NEW_SESSION"})``;
the answer's ``NewSessionId`` is ``<id>; Expires=<UTC timestamp>``. Later requests carry
``SessionId=<id>`` (header ``X-Amzn-SageMaker-Session-Id``) and SageMaker sends them to the instance
that opened it, where vLLM's prefix cache still holds the conversation. ``{"requestType": "CLOSE"}``
with the id ends it (``ClosedSessionId``). The container side: container/serving_app/sessions/.
"""

import json
from dataclasses import dataclass

SESSION_HEADER = "X-Amzn-SageMaker-Session-Id"
NEW_SESSION_HEADER = "X-Amzn-SageMaker-New-Session-Id"
CLOSED_SESSION_HEADER = "X-Amzn-SageMaker-Closed-Session-Id"


@dataclass(frozen=True)
class SessionAnswer:
    """Outcome of a NEW_SESSION or CLOSE request: the session id SageMaker returned
    (``NewSessionId`` without its ``; Expires=...`` part, or ``ClosedSessionId``), or why not."""

    ok: bool
    status: str
    session_id: str = ""
    expires: str = ""
    detail: str = ""


def session_body(request_type: str) -> bytes:
    """``{"requestType": "NEW_SESSION" | "CLOSE"}`` (AWS docs, "Stateful sessions")."""
    return json.dumps({"requestType": request_type}).encode()


def session_answer(request_type: str, new_id: str | None, closed_id: str | None) -> SessionAnswer:
    """The SessionAnswer for what came back: ``new_id`` (``NewSessionId``) or ``closed_id``."""
    if request_type == "NEW_SESSION":
        if not new_id:
            return SessionAnswer(False, "bad answer", detail="no NewSessionId in the answer")
        session_id, _, expires = new_id.partition(";")
        return SessionAnswer(True, "ok", session_id.strip(), expires.strip().removeprefix("Expires="))
    if not closed_id:
        return SessionAnswer(False, "bad answer", detail="no ClosedSessionId in the answer")
    return SessionAnswer(True, "ok", closed_id.strip())


SYSTEM_PREFIX = (
    "You are MangaAssist, the support and recommendation assistant of a manga store. Answer in one or two "
    "sentences, recommend only titles the store sells, and never invent prices or release dates."
)
"""The shared system prefix of every conversation: byte-identical across conversations, so its KV
blocks are cached once per instance (docs/sessions.md, "Lay out the prompt")."""

FOLLOW_UPS = (
    "Which volume should I start with?",
    "Is there an anime adaptation?",
    "Recommend something similar but shorter.",
    "Thanks, anything for a younger reader?",
)


def conversation_body(*, model: str, history: list[dict[str, str]], turn: str, max_tokens: int, stream: bool) -> bytes:
    """A chat body laid out for the prefix cache: the shared system prefix, then this
    conversation's earlier turns in order (never rewritten), then the new turn."""
    messages = [{"role": "system", "content": SYSTEM_PREFIX}, *history, {"role": "user", "content": turn}]
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    if stream:  # the usage event carries the cached prompt tokens: the request class
        body["stream_options"] = {"include_usage": True}
    return json.dumps(body).encode()


def follow_up(index: int, first: str) -> str:
    """The user's message of turn ``index`` (0-based): ``first``, then scripted follow-ups."""
    return first if index == 0 else FOLLOW_UPS[(index - 1) % len(FOLLOW_UPS)]
