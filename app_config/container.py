"""Serving-process lifecycle settings (startup, warmup, drain, timeouts, metrics cadence).

Names, defaults, bounds and sources are declared once in ``serving_contract.lifecycle`` and
``serving_contract.request_limits``; the container's settings read the same declarations.
"""

from pydantic import Field

from app_config.base import ConfigModel, spec_field
from app_config.context_budget import ContextBudgetConfig
from serving_contract import lifecycle as spec
from serving_contract import request_limits as limits


class ContainerConfig(ConfigModel):
    """How the serving process inside the container behaves over its lifecycle."""

    warmup_num_requests: int = spec_field(spec.WARMUP_NUM_REQUESTS)
    warmup_prefill_tokens: int = spec_field(spec.WARMUP_PREFILL_TOKENS)
    drain_timeout_s: int = spec_field(spec.DRAIN_TIMEOUT)
    request_timeout_s: int = spec_field(spec.REQUEST_TIMEOUT)
    request_read_timeout_s: int = spec_field(spec.REQUEST_READ_TIMEOUT)
    metrics_interval_s: float = spec_field(spec.METRICS_INTERVAL)

    # Per-request limits (declared in serving_contract.request_limits, shared with the container).
    request_max_sequences: int = spec_field(limits.MAX_SEQUENCES)
    request_max_logprobs: int = spec_field(limits.MAX_LOGPROBS)
    request_max_stop_sequences: int = spec_field(limits.MAX_STOP_SEQUENCES)
    request_max_stop_sequence_chars: int = spec_field(limits.MAX_STOP_SEQUENCE_CHARS)
    request_max_token_ids: int = spec_field(limits.MAX_TOKEN_IDS)
    request_max_body_bytes_per_token: int = spec_field(limits.MAX_BODY_BYTES_PER_TOKEN)

    sessions_max: int = spec_field(spec.SESSIONS_MAX)
    session_ttl_s: int = spec_field(spec.SESSION_TTL)
    context_budget: ContextBudgetConfig = Field(
        default=ContextBudgetConfig(),
        description="Per-request context budget and OOM containment in the gateway (seed 002, scenario 5).",
    )

    def environment(self, max_model_len: int) -> dict[str, str]:
        """The section as the container's environment variables (the context budget's reserve is derived
        from ``max_model_len``, ``engine.max_model_len``)."""
        variables: dict[str, str] = {}
        for setting in (*spec.LIFECYCLE_SETTINGS, *limits.REQUEST_LIMITS):
            text = setting.to_env(getattr(self, setting.key))
            if text is not None:
                variables[setting.env_var] = text
        return variables | self.context_budget.environment(max_model_len)
