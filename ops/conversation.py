"""One multi-turn conversation in a SageMaker stateful session: open, N turns, close.

Used by ``load --turns N`` and ``smoke --session``. Every turn resends the conversation so far
(docs/sessions.md, prompt layout); the session only makes SageMaker send it to the instance
whose prefix cache holds it. A failed open or close is reported as an :class:`Answer` with status
``NEW_SESSION <reason>`` / ``CLOSE <reason>``, so error rates count it like a failed request.
"""

from dataclasses import dataclass

from ops.invoke import Answer, Target
from ops.sessions import conversation_body, follow_up


@dataclass(frozen=True)
class ConversationPlan:
    """What one conversation sends: its adapter (``model``), turns (>= 1), first message and limits."""

    model: str
    turns: int
    prompt: str
    max_tokens: int
    stream: bool
    variant: str | None = None
    component: str | None = None


def run_conversation(target: Target, plan: ConversationPlan) -> list[Answer]:
    """Open a session, send ``plan.turns`` turns in it, close it; one Answer per turn, plus one
    failed Answer for a failed open (then no turn is sent) or close."""
    opened = target.session("NEW_SESSION", variant=plan.variant)
    if not opened.ok:
        return [Answer(False, f"NEW_SESSION {opened.status}", 0.0, detail=opened.detail)]
    answers: list[Answer] = []
    history: list[dict[str, str]] = []
    for index in range(plan.turns):
        turn = follow_up(index, plan.prompt)
        body = conversation_body(
            model=plan.model, history=history, turn=turn, max_tokens=plan.max_tokens, stream=plan.stream
        )
        answer = target.invoke(
            body, stream=plan.stream, variant=plan.variant, component=plan.component, session_id=opened.session_id
        )
        answers.append(answer)
        if not answer.ok:
            break  # the conversation cannot go on without the answer it would resend
        history += [{"role": "user", "content": turn}, {"role": "assistant", "content": answer.content}]
    closed = target.session("CLOSE", session_id=opened.session_id, variant=plan.variant)
    if not closed.ok or closed.session_id != opened.session_id:
        reason = closed.status if not closed.ok else f"closed {closed.session_id!r}, not {opened.session_id!r}"
        answers.append(Answer(False, f"CLOSE {reason}", 0.0, detail=closed.detail))
    return answers
