"""The per-request context budget and OOM containment, declared once for both sides.

``app_config.context_budget.ContextBudgetConfig`` (keys under ``container.context_budget.``,
validated at synth) and the container's ``serving_app.context_budget.settings`` (validated at
start from the environment) read these declarations; the gateway applies them
(``container/serving_app/context_budget/``).

The budget splits ``engine.max_model_len`` the way seed 002 (scenario 5) does: system 400,
retrieval 1,400, recent turns 1,200, older-turn summary 400, and the generation reserve is the
rest (696 of the default 4,096). The total is never a second copy of ``max_model_len``: the
reserve is derived from it (:func:`generation_reserve`), and a budget whose parts leave no
reserve stops synth (:func:`budget_error`).

Standard library only: the image copies this package as it is (``container/Dockerfile``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from serving_contract import env
from serving_contract.engine_settings import MAX_MODEL_LEN
from serving_contract.setting import Setting

SEED = "seed 002, scenario 5 (context budgeting)"


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetPart(Setting[int]):
    """One share of ``max_model_len``, in tokens (key under ``container.context_budget.``; ``env_var``
    "" where the container does not read it).

    Attributes:
        label: how messages name the part.
    """

    label: str
    ge: float | None = 0


SYSTEM: Final = BudgetPart(
    env_var="",
    key="system_tokens",
    default=400,
    label="system",
    description=f"Tokens the system messages are planned to take. Source: {SEED} (system 400).",
)
RETRIEVAL: Final = BudgetPart(
    env_var="",
    key="retrieval_tokens",
    default=1400,
    label="retrieval",
    description=(
        "Tokens the latest user turn (the question with its retrieved catalog context) is planned to take. "
        f"Source: {SEED} (retrieval 1,400)."
    ),
)
RECENT_TURNS: Final = BudgetPart(
    env_var="",
    key="recent_turns_tokens",
    default=1200,
    label="recent turns",
    description=(
        "Tokens of earlier turns a trimmed request keeps at least, when its system messages and latest turn stay "
        f"within their shares and it asks for no more than the generation reserve. Source: {SEED} (recent 1,200)."
    ),
)
SUMMARY: Final = BudgetPart(
    env_var=env.CONTEXT_BUDGET_SUMMARY_TOKENS,
    key="summary_tokens",
    default=400,
    label="older-turn summary",
    description=(
        "Most tokens the summary of the dropped turns may take (its request's max_tokens, when summarize is on). "
        f"Source: {SEED} (older summary 400)."
    ),
)

PARTS: Final[tuple[BudgetPart, ...]] = (SYSTEM, RETRIEVAL, RECENT_TURNS, SUMMARY)

ENABLED: Final = Setting(
    key="enabled",
    env_var=env.CONTEXT_BUDGET_ENABLED,
    default=True,
    description=(
        "Trim a chat request's older turns when vLLM refuses it for the context length (prompt + max_tokens "
        "above engine.max_model_len), instead of answering that 400. On by default: a request that fits is "
        "forwarded byte for byte and costs nothing extra, and the budget acts only where the failure seed 001 "
        "user story 5 is about occurs. A caller opts one request out with CustomAttributes 'context_budget=off'."
    ),
)
SUMMARIZE: Final = Setting(
    key="summarize",
    env_var=env.CONTEXT_BUDGET_SUMMARIZE,
    default=False,
    description=(
        "Replace the dropped turns with a summary from the same engine (at most summary_tokens, within "
        "summary_timeout_s; the marker when it fails or is late) instead of the truncation marker. Off by "
        "default: a summary is one more generation on the request's path (up to summary_tokens decode steps, "
        "~12 s at the ~30 ms a token of an A10G under load); the marker costs nothing."
    ),
)
SUMMARY_TIMEOUT: Final = Setting(
    key="summary_timeout_s",
    env_var=env.CONTEXT_BUDGET_SUMMARY_TIMEOUT_S,
    default=5.0,
    gt=0,
    le=30,
    description=(
        "Seconds the summary request may take before the marker is used instead. At most 30: half of "
        "SageMaker's 60 s for the whole /invocations call, which still has the answer to generate."
    ),
)
OOM_RETRY_AFTER: Final = Setting(
    key="oom_retry_after_s",
    env_var=env.OOM_RETRY_AFTER_S,
    default=5,
    ge=1,
    le=3600,
    description=(
        "Retry-After of the 503 answered when a request hit an engine out-of-memory error and its retry with "
        "the older half of the history compressed failed too (or nothing could be compressed). 5: about one "
        "SageMaker health-check cycle, after which a failed instance is out of rotation or the memory spike "
        "has passed. At most an hour."
    ),
)

OPT_OUT_ATTRIBUTE: Final = "context_budget"
"""``X-Amzn-SageMaker-Custom-Attributes: context_budget=off`` (the only request header SageMaker
passes from the client to the container) sends the request as it is."""
OPT_OUT_VALUE: Final = "off"

MARKER_TEMPLATE: Final = "[Earlier conversation truncated \u2014 {turns} turns not shown]"
"""The visible truncation marker: seed 001 (user story 5, ``build_context_window``), word for word."""
SUMMARY_PREFIX_TEMPLATE: Final = "[Summary of {turns} earlier turns] "


def marker_text(turns: int) -> str:
    """The marker message's content for ``turns`` dropped turns."""
    return MARKER_TEMPLATE.format(turns=turns)


def parts_total(values: dict[str, int]) -> int:
    """Sum of the four parts in ``values`` (key -> tokens)."""
    return sum(values[part.key] for part in PARTS)


def generation_reserve(max_model_len: int, values: dict[str, int]) -> int:
    """Tokens left for the answer: ``max_model_len`` less the four parts (may be negative)."""
    return max_model_len - parts_total(values)


def budget_error(
    max_model_len: int, values: dict[str, int], *, name: Callable[[BudgetPart], str], section: str, length_key: str
) -> str | None:
    """One line saying why the budget cannot work with ``max_model_len``, or None.

    ``name(part)`` is how a part's key is written (``container.context_budget.system_tokens`` at
    synth, ``CONTEXT_BUDGET_SYSTEM_TOKENS`` in the container), ``section`` names the budget as a
    whole and ``length_key`` names ``max_model_len``.
    """
    for part in PARTS:
        value = values[part.key]
        if value > max_model_len:
            return (
                f"{name(part)} = {value}: above {length_key} = {max_model_len}; "
                f"the {part.label} share must fit the context window"
            )
    reserve = generation_reserve(max_model_len, values)
    if reserve < 1:
        sums = " + ".join(f"{name(part)} {values[part.key]:,}" for part in PARTS)
        return (
            f"{section}: {sums} = {parts_total(values):,} leave a generation reserve of {reserve:,} tokens of "
            f"{length_key} = {max_model_len:,}; it must be at least 1 (lower a part or raise {length_key})"
        )
    return None


GENERATION_RESERVE: Final = Setting(
    key="generation_reserve_tokens",
    env_var=env.CONTEXT_BUDGET_GENERATION_RESERVE_TOKENS,
    default=MAX_MODEL_LEN.default - sum(part.default for part in PARTS),
    ge=1,
    description=(
        "Answer tokens a trimmed request without max_tokens is given room for: engine.max_model_len less the "
        "budget's parts. Not a config key: the stack derives it (generation_reserve); unset, the defaults' "
        "4,096 - 3,400 = 696."
    ),
)
"""Container-only: the stack sends the derived reserve, never the parts."""

CONTAINER_SETTINGS: Final[tuple[Setting[bool] | Setting[int] | Setting[float], ...]] = (
    ENABLED,
    GENERATION_RESERVE,
    SUMMARY,
    SUMMARIZE,
    SUMMARY_TIMEOUT,
    OOM_RETRY_AFTER,
)
"""Every setting the container reads from its environment, in its settings' order."""
