"""The context budget's environment variables, as fields the container's ``Settings`` inherits.

Declared here (not in ``serving_app.settings``) so the budget's settings live beside the code that
uses them; ``Settings`` subclasses :class:`BudgetSettings` and parses them with everything else.
Defaults and sources: ``serving_contract.context_budget``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from serving_app.env_values import parse_bool
from serving_contract import context_budget as spec
from serving_contract import env


class BudgetSettings(BaseModel):
    """What the gateway's context budget and OOM containment read from the environment."""

    context_budget_enabled: bool = Field(
        spec.ENABLED_DEFAULT,
        alias=env.CONTEXT_BUDGET_ENABLED,
        description="Trim chat requests vLLM refuses for the context length (serving_app.context_budget).",
    )
    context_budget_generation_reserve_tokens: int = Field(
        spec.GENERATION_RESERVE_DEFAULT,
        alias=env.CONTEXT_BUDGET_GENERATION_RESERVE_TOKENS,
        ge=1,
        description=(
            "Answer tokens a trimmed request without max_tokens is given room for: max_model_len less the "
            "budget's parts (the stack derives it; unset: 4,096 - 3,400 = 696)."
        ),
    )
    context_budget_summary_tokens: int = Field(
        spec.SUMMARY.default,
        alias=env.CONTEXT_BUDGET_SUMMARY_TOKENS,
        ge=0,
        description=spec.SUMMARY.description,
    )
    context_budget_summarize: bool = Field(
        spec.SUMMARIZE_DEFAULT,
        alias=env.CONTEXT_BUDGET_SUMMARIZE,
        description="Summarise dropped turns with the same engine instead of the marker.",
    )
    context_budget_summary_timeout_s: float = Field(
        spec.SUMMARY_TIMEOUT_DEFAULT_S,
        alias=env.CONTEXT_BUDGET_SUMMARY_TIMEOUT_S,
        gt=0,
        le=30,
        description="Seconds the summary request may take; the marker after that.",
    )
    oom_retry_after_s: int = Field(
        spec.OOM_RETRY_AFTER_DEFAULT_S,
        alias=env.OOM_RETRY_AFTER_S,
        ge=1,
        le=3600,
        description="Retry-After of the 503 when an out-of-memory request's compressed retry failed too.",
    )

    @field_validator("context_budget_enabled", "context_budget_summarize", mode="before")
    @classmethod
    def _parse_bool(cls, value: object) -> object:
        return parse_bool(value)
