"""Where logs and metrics go."""

from typing import Literal

from pydantic import Field

from app_config.base import ConfigModel, IntChoice
from serving_contract.metrics import DEFAULT_NAMESPACE

LogRetentionDays = IntChoice[Literal[1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 3653]]
"""Retention values CloudWatch Logs accepts, in days (PutRetentionPolicy API reference)."""

MetricPublishFrequencyS = IntChoice[Literal[10, 30, 60, 120, 180, 240, 300]]
"""``MetricsConfig.MetricPublishFrequencyInSeconds`` values SageMaker accepts (API reference, MetricsConfig)."""


class ObservabilityConfig(ConfigModel):
    """Log retention and the custom metric namespace."""

    metrics_namespace: str = Field(
        default=DEFAULT_NAMESPACE,
        min_length=1,
        max_length=255,
        description="CloudWatch namespace of the container's EMF metrics.",
    )
    log_retention_days: LogRetentionDays = Field(
        default=365,
        description=(
            "Retention of every log group of the app, in days (CloudWatch's allowed values). 365 is the least "
            "AWS Control Tower's proactive control CT.CLOUDWATCH.PR.2 accepts; a stage that sets less is reasoned "
            "for it (docs/deploy.md)."
        ),
    )
    processing_job_log_retention_days: LogRetentionDays = Field(
        default=365,
        description=(
            "Retention of /aws/sagemaker/ProcessingJobs, in days: SageMaker writes every processing job of the "
            "account and region there (the compile cache's jobs, the release steps), and it kept them forever. "
            "Shared with every stage and app of the region (the last deploy sets it), so not part of "
            "log_retention_days or its stage overlays; always retained, on CloudWatch's default key. 365: Control "
            "Tower's CT.CLOUDWATCH.PR.2."
        ),
    )
    retain_logs_on_delete: bool = Field(
        default=True,
        description=(
            "Keep the log groups (the endpoint's, the build's, the custom resources') when the stack is deleted "
            "(audit trail). Generated-name groups go when a stack's first create rolls back (RetainExceptOnCreate); "
            "the endpoint's fixed-name groups stay and a re-created stage adopts them (docs/deploy.md)."
        ),
    )
    detailed_observability: bool = Field(
        default=True,
        description=(
            "MetricsConfig.EnableDetailedObservability of the endpoint config: SageMaker scrapes the container's "
            "GET /metrics (vLLM and gateway series) into CloudWatch, queried with PromQL (docs/observability.md). "
            "True is SageMaker's default for new endpoint configs since 2026-06; set explicitly so a template says it."
        ),
    )
    metric_publish_frequency_s: MetricPublishFrequencyS = Field(
        default=60,
        description="MetricsConfig.MetricPublishFrequencyInSeconds (SageMaker's default 60; allowed values listed).",
    )
