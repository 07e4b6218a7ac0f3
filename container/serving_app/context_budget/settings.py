"""The context budget's environment variables, as fields the container's ``Settings`` inherits.

Declared here (not in ``serving_app.settings``) so the budget's settings live beside the code that
uses them; ``Settings`` subclasses :class:`BudgetSettings` and parses them with everything else.
Names, defaults, bounds and sources: ``serving_contract.context_budget`` (shared with the config's
``container.context_budget`` section).
"""

from __future__ import annotations

from pydantic import BaseModel, field_validator

from serving_app.env_values import env_field, parse_bool
from serving_contract import context_budget as spec


class BudgetSettings(BaseModel):
    """What the gateway's context budget and OOM containment read from the environment."""

    context_budget_enabled: bool = env_field(spec.ENABLED)
    context_budget_generation_reserve_tokens: int = env_field(spec.GENERATION_RESERVE)
    context_budget_summary_tokens: int = env_field(spec.SUMMARY)
    context_budget_summarize: bool = env_field(spec.SUMMARIZE)
    context_budget_summary_timeout_s: float = env_field(spec.SUMMARY_TIMEOUT)
    oom_retry_after_s: int = env_field(spec.OOM_RETRY_AFTER)

    @field_validator("context_budget_enabled", "context_budget_summarize", mode="before")
    @classmethod
    def _parse_bool(cls, value: object) -> object:
        return parse_bool(value)
