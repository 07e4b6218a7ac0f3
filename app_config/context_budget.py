"""The gateway's per-request context budget and OOM containment (``container.context_budget.*``).

Parts and defaults are declared once in ``serving_contract.context_budget`` (seed 002, scenario
5); the container reads the same declarations. The budget's total is ``engine.max_model_len``,
never a copy of it: :func:`check_context_budget` stops synth when the parts leave no generation
reserve.
"""

from typing import TYPE_CHECKING, Any

from pydantic import Field

from app_config.base import ConfigModel
from serving_contract import context_budget as spec
from serving_contract import env

if TYPE_CHECKING:
    from app_config.root import AppConfig

SECTION = "container.context_budget"


def _part(part: spec.BudgetPart) -> Any:
    return Field(default=part.default, ge=0, description=part.description)


class ContextBudgetConfig(ConfigModel):
    """How the gateway keeps a long conversation inside ``engine.max_model_len``, and what it does
    when the engine runs out of memory on a request (container/serving_app/context_budget)."""

    enabled: bool = Field(
        default=spec.ENABLED_DEFAULT,
        description=(
            "Trim a chat request's older turns when vLLM refuses it for the context length (prompt + max_tokens "
            "above engine.max_model_len), instead of answering that 400. On by default: a request that fits is "
            "forwarded byte for byte and costs nothing extra. A caller opts one request out with "
            "CustomAttributes 'context_budget=off'."
        ),
    )
    system_tokens: int = _part(spec.SYSTEM)
    retrieval_tokens: int = _part(spec.RETRIEVAL)
    recent_turns_tokens: int = _part(spec.RECENT_TURNS)
    summary_tokens: int = _part(spec.SUMMARY)
    summarize: bool = Field(
        default=spec.SUMMARIZE_DEFAULT,
        description=(
            "Replace the dropped turns with a summary from the same engine (at most summary_tokens, within "
            "summary_timeout_s; the marker when it fails or is late) instead of the truncation marker. Off by "
            "default: the summary is one more generation on the request's path."
        ),
    )
    summary_timeout_s: float = Field(
        default=spec.SUMMARY_TIMEOUT_DEFAULT_S,
        gt=0,
        le=30,
        description="Seconds the summary request may take before the marker is used instead.",
    )
    oom_retry_after_s: int = Field(
        default=spec.OOM_RETRY_AFTER_DEFAULT_S,
        ge=1,
        le=3600,
        description=(
            "Retry-After of the 503 answered when a request hit an engine out-of-memory error and its retry with "
            "the older half of the history compressed failed too (or nothing could be compressed)."
        ),
    )

    def parts(self) -> dict[str, int]:
        """The four shares, key -> tokens."""
        return {part.key: getattr(self, part.key) for part in spec.PARTS}

    def generation_reserve(self, max_model_len: int) -> int:
        """Tokens left for the answer of ``max_model_len``."""
        return spec.generation_reserve(max_model_len, self.parts())

    def environment(self, max_model_len: int) -> dict[str, str]:
        """The section as the container's environment variables; the generation reserve is derived
        from ``max_model_len`` (``engine.max_model_len``) here, so the container holds no copy of the parts."""
        return {
            env.CONTEXT_BUDGET_ENABLED: "true" if self.enabled else "false",
            env.CONTEXT_BUDGET_GENERATION_RESERVE_TOKENS: str(self.generation_reserve(max_model_len)),
            env.CONTEXT_BUDGET_SUMMARY_TOKENS: str(self.summary_tokens),
            env.CONTEXT_BUDGET_SUMMARIZE: "true" if self.summarize else "false",
            env.CONTEXT_BUDGET_SUMMARY_TIMEOUT_S: f"{self.summary_timeout_s:g}",
            env.OOM_RETRY_AFTER_S: str(self.oom_retry_after_s),
        }


def check_context_budget(config: "AppConfig") -> None:
    """The budget's parts against ``engine.max_model_len``.

    Raises:
        ValueError: one line naming the key: a part above ``engine.max_model_len``, or parts that
            leave a generation reserve below 1 token.
    """
    budget = config.container.context_budget
    message = spec.budget_error(
        config.engine.max_model_len,
        budget.parts(),
        name=lambda part: f"{SECTION}.{part.key}",
        section=SECTION,
        length_key="engine.max_model_len",
    )
    if message is not None:
        raise ValueError(message)
