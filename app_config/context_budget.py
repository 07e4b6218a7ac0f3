"""The gateway's per-request context budget and OOM containment (``container.context_budget.*``).

Parts and defaults are declared once in ``serving_contract.context_budget`` (seed 002, scenario
5); the container reads the same declarations. The budget's total is ``engine.max_model_len``,
never a copy of it: :func:`check_context_budget` stops synth when the parts leave no generation
reserve.
"""

from typing import TYPE_CHECKING

from app_config.base import ConfigModel, spec_field
from serving_contract import context_budget as spec

if TYPE_CHECKING:
    from app_config.root import AppConfig

SECTION = "container.context_budget"


class ContextBudgetConfig(ConfigModel):
    """How the gateway keeps a long conversation inside ``engine.max_model_len``, and what it does
    when the engine runs out of memory on a request (container/serving_app/context_budget)."""

    enabled: bool = spec_field(spec.ENABLED)
    system_tokens: int = spec_field(spec.SYSTEM)
    retrieval_tokens: int = spec_field(spec.RETRIEVAL)
    recent_turns_tokens: int = spec_field(spec.RECENT_TURNS)
    summary_tokens: int = spec_field(spec.SUMMARY)
    summarize: bool = spec_field(spec.SUMMARIZE)
    summary_timeout_s: float = spec_field(spec.SUMMARY_TIMEOUT)
    oom_retry_after_s: int = spec_field(spec.OOM_RETRY_AFTER)

    def parts(self) -> dict[str, int]:
        """The four shares, key -> tokens."""
        return {part.key: getattr(self, part.key) for part in spec.PARTS}

    def generation_reserve(self, max_model_len: int) -> int:
        """Tokens left for the answer of ``max_model_len``."""
        return spec.generation_reserve(max_model_len, self.parts())

    def environment(self, max_model_len: int) -> dict[str, str]:
        """The section as the container's environment variables; the generation reserve is derived
        from ``max_model_len`` (``engine.max_model_len``) here, so the container holds no copy of the parts."""
        variables = {spec.GENERATION_RESERVE.env_var: str(self.generation_reserve(max_model_len))}
        for setting in spec.CONTAINER_SETTINGS:
            if setting is not spec.GENERATION_RESERVE:
                variables[setting.env_var] = str(setting.to_env(getattr(self, setting.key)))
        return variables


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
