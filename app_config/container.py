"""Serving-process lifecycle settings (startup, warmup, drain, timeouts, metrics cadence)."""

from typing import Any

from pydantic import Field

from app_config.base import ConfigModel
from app_config.context_budget import ContextBudgetConfig
from serving_contract import env
from serving_contract import request_limits as limits
from serving_contract.env import DRAIN_TIMEOUT_MAX_S, SAGEMAKER_INVOCATION_TIMEOUT_S


def _limit(limit: limits.RequestLimit) -> Any:
    return Field(default=limit.default, ge=limit.ge, le=limit.le, description=limit.description)


class ContainerConfig(ConfigModel):
    """How the serving process inside the container behaves over its lifecycle."""

    warmup_num_requests: int = Field(
        default=10,
        ge=1,
        le=100,
        description=(
            "Synthetic requests sent through the adapters before /ping turns 200 (at least one per adapter is "
            "always sent). Source: seed 003 §10."
        ),
    )
    warmup_prefill_tokens: int = Field(
        default=env.WARMUP_PREFILL_TOKENS_DEFAULT,
        ge=0,
        description=(
            "Prefill warm-up before /ping turns 200: every model name gets a prompt of this many tokens (rounded "
            "down to a multiple of 16) and one of one fewer, so vLLM compiles its prefill-sized LoRA kernels "
            "before the first user's long prompt (issue 35). 0: off; else at least 128 and at most "
            "engine.max_model_len - 2. Source: MangaAssist's first turn, 2,040 tokens (seed 002)."
        ),
    )
    drain_timeout_s: int = Field(
        default=20,
        ge=1,
        le=DRAIN_TIMEOUT_MAX_S,
        description=(
            "Seconds in-flight requests may finish after SIGTERM. At most 22: with vLLM's 3 s stop grace and "
            "uvicorn's 2 s, shutdown stays inside SageMaker's 30 s SIGKILL (serving_contract.env)."
        ),
    )
    request_timeout_s: int = Field(
        default=55,
        ge=1,
        lt=SAGEMAKER_INVOCATION_TIMEOUT_S,
        description="Upper bound on one /invocations request; below SageMaker's 60 s so the client gets our answer.",
    )
    request_read_timeout_s: int = Field(
        default=10,
        ge=1,
        le=DRAIN_TIMEOUT_MAX_S,
        description=(
            "Seconds a request's line, headers and whole body may take to arrive (408 after). SageMaker buffers "
            "the payload (<= 6 MB) before calling the container; half the drain budget, so a stalled upload "
            "cannot hold the SIGTERM drain (serving_app.transport)."
        ),
    )
    metrics_interval_s: int = Field(
        default=10,
        ge=1,
        le=60,
        description="Seconds between scrapes of vLLM /metrics into EMF lines (10 s matches high-resolution alarms).",
    )

    # Per-request limits (declared in serving_contract.request_limits, shared with the container).
    request_max_sequences: int = _limit(limits.MAX_SEQUENCES)
    request_max_logprobs: int = _limit(limits.MAX_LOGPROBS)
    request_max_stop_sequences: int = _limit(limits.MAX_STOP_SEQUENCES)
    request_max_stop_sequence_chars: int = _limit(limits.MAX_STOP_SEQUENCE_CHARS)
    request_max_token_ids: int = _limit(limits.MAX_TOKEN_IDS)

    def request_limits_environment(self) -> dict[str, str]:
        """Each per-request limit as the container's environment variable."""
        return {limit.env_var: str(getattr(self, limit.key)) for limit in limits.REQUEST_LIMITS}

    sessions_max: int = Field(
        default=env.SESSIONS_MAX_DEFAULT,
        ge=1,
        le=env.SESSIONS_MAX_LIMIT,
        description=(
            "Most live SageMaker stateful sessions per instance; NEW_SESSION past it answers 429. 4096: ~3x the "
            "~1,290 live at the measured per-instance rate with 20-minute sessions (serving_contract.env)."
        ),
    )
    session_ttl_s: int = Field(
        default=env.SESSION_TTL_DEFAULT_S,
        ge=1,
        le=env.SESSION_TTL_MAX_S,
        description=(
            "Lifetime of a stateful session from NEW_SESSION, seconds (the Expires SageMaker is told). 1200 is "
            "model-hosting-container-standards' default, which vLLM's own /invocations uses."
        ),
    )
    context_budget: ContextBudgetConfig = Field(
        default=ContextBudgetConfig(),
        description="Per-request context budget and OOM containment in the gateway (seed 002, scenario 5).",
    )
