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

from serving_contract.engine_settings import MAX_MODEL_LEN

SEED = "seed 002, scenario 5 (context budgeting)"


@dataclass(frozen=True, slots=True)
class BudgetPart:
    """One share of ``max_model_len``, in tokens.

    Attributes:
        key: the config key under ``container.context_budget.`` (also the container's field).
        default: tokens when neither config nor environment sets a value.
        label: how messages name the part.
        description: what the part holds and the source of the default.
    """

    key: str
    default: int
    label: str
    description: str


SYSTEM = BudgetPart(
    key="system_tokens",
    default=400,
    label="system",
    description=f"Tokens the system messages are planned to take. Source: {SEED} (system 400).",
)
RETRIEVAL = BudgetPart(
    key="retrieval_tokens",
    default=1400,
    label="retrieval",
    description=(
        "Tokens the latest user turn (the question with its retrieved catalog context) is planned to take. "
        f"Source: {SEED} (retrieval 1,400)."
    ),
)
RECENT_TURNS = BudgetPart(
    key="recent_turns_tokens",
    default=1200,
    label="recent turns",
    description=(
        "Tokens of earlier turns a trimmed request keeps at least, when its system messages and latest turn stay "
        f"within their shares and it asks for no more than the generation reserve. Source: {SEED} (recent 1,200)."
    ),
)
SUMMARY = BudgetPart(
    key="summary_tokens",
    default=400,
    label="older-turn summary",
    description=(
        "Most tokens the summary of the dropped turns may take (its request's max_tokens, when summarize is on). "
        f"Source: {SEED} (older summary 400)."
    ),
)

PARTS: Final[tuple[BudgetPart, ...]] = (SYSTEM, RETRIEVAL, RECENT_TURNS, SUMMARY)

ENABLED_DEFAULT: Final = True
"""On: a request that fits is forwarded untouched, and the budget acts only where vLLM answers 400
for the context length (the failure seed 001 user story 5 is about)."""
SUMMARIZE_DEFAULT: Final = False
"""Off: a summary is one more generation on the request path (up to ``summary_tokens`` decode steps,
~12 s at the ~30 ms a token of an A10G under load); the marker costs nothing."""
SUMMARY_TIMEOUT_DEFAULT_S: Final = 5.0
OOM_RETRY_AFTER_DEFAULT_S: Final = 5
"""``Retry-After`` of the fallback 503: about one SageMaker health-check cycle, after which a
failed instance is out of rotation or the memory spike has passed."""

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


_MAX_MODEL_LEN_DEFAULT = MAX_MODEL_LEN.default
assert isinstance(_MAX_MODEL_LEN_DEFAULT, int)
GENERATION_RESERVE_DEFAULT: Final = _MAX_MODEL_LEN_DEFAULT - sum(part.default for part in PARTS)
"""The reserve with every default (4,096 - 3,400 = 696 tokens, ``engine.max_model_len``'s default
less the four parts): the container's value when the stack sets none."""
