"""Serving-process lifecycle settings (startup, warmup, drain, timeouts, metrics cadence)."""

from pydantic import Field

from app_config.base import ConfigModel

SAGEMAKER_SIGKILL_AFTER_S = 30
"""SageMaker sends SIGKILL this long after SIGTERM on scale-in or update (CONVENTIONS.md)."""

SAGEMAKER_INVOCATION_TIMEOUT_S = 60
"""A real-time endpoint must answer /invocations within this (CONVENTIONS.md)."""


class ContainerConfig(ConfigModel):
    """How the serving process inside the container behaves over its lifecycle."""

    warmup_num_requests: int = Field(
        default=10,
        ge=0,
        le=100,
        description="Synthetic requests sent through the adapters before /ping turns 200. Source: seed 003 §10.",
    )
    drain_timeout_s: int = Field(
        default=25,
        ge=0,
        le=SAGEMAKER_SIGKILL_AFTER_S - 1,
        description="Seconds in-flight requests may finish after SIGTERM; must stay below SageMaker's 30 s SIGKILL.",
    )
    request_timeout_s: int = Field(
        default=55,
        ge=1,
        le=SAGEMAKER_INVOCATION_TIMEOUT_S,
        description="Upper bound on one /invocations request; SageMaker gives up after 60 s.",
    )
    metrics_interval_s: int = Field(
        default=10,
        ge=1,
        le=60,
        description="Seconds between scrapes of vLLM /metrics into EMF lines (10 s matches high-resolution alarms).",
    )
