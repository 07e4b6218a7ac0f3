"""Names of the CloudWatch alarms that other parts of the system refer to by name.

The endpoint's deployment guardrails (``AutoRollbackConfiguration``) and the operations
commands (``promote`` stops at the first alarm in ALARM) find these alarms by name, so the
names are derived here from the endpoint and variant, never typed twice.
"""

from serving_contract.request_classes import RequestClass


def canary_error_rate_alarm_name(endpoint_name: str, variant_name: str) -> str:
    """Alarm on a variant's error rate ((Invocation5XXErrors + StreamErrors) / Invocations: 5xx answers
    and streams that failed after their 200), used for rollback."""
    return f"{endpoint_name}-{variant_name}-5xx-rate"


def canary_client_error_rate_alarm_name(endpoint_name: str, variant_name: str) -> str:
    """Alarm on a variant's 4xx rate above the other variants' (the baseline), used for rollback: a
    release that refuses what the baseline serves rolls back (issue 49)."""
    return f"{endpoint_name}-{variant_name}-4xx-rate"


def canary_latency_alarm_name(endpoint_name: str, variant_name: str, request_class: str) -> str:
    """Alarm on a variant's p95 time to first token of one request class (``cold`` or ``warm``,
    serving_contract.request_classes; streaming requests only), used for rollback."""
    return f"{endpoint_name}-{variant_name}-ttft-p95-{request_class}"


def canary_model_latency_alarm_name(endpoint_name: str, variant_name: str) -> str:
    """Alarm on a variant's p99 ModelLatency (every request, sync and streaming), used for rollback."""
    return f"{endpoint_name}-{variant_name}-model-latency-p99"


def rollback_alarm_names(endpoint_name: str, variant_name: str) -> tuple[str, ...]:
    """Every alarm that must roll a deployment back, for the given (canary) variant: the error
    rate, the TTFT p95 of each request class (streaming requests; cold then warm), the
    ModelLatency p99 (every request: a canary that only slows non-streaming calls shows there
    and nowhere else) and the 4xx rate against the baseline. Five per variant: two variants fill
    AutoRollbackConfig's ten (botocore's SageMaker model, ``AlarmList`` max 10)."""
    return (
        canary_error_rate_alarm_name(endpoint_name, variant_name),
        *(canary_latency_alarm_name(endpoint_name, variant_name, klass.value) for klass in RequestClass),
        canary_model_latency_alarm_name(endpoint_name, variant_name),
        canary_client_error_rate_alarm_name(endpoint_name, variant_name),
    )


def alarm_name_prefix(endpoint_name: str) -> str:
    """Prefix shared by every alarm of one endpoint (``DescribeAlarms(AlarmNamePrefix=...)``)."""
    return f"{endpoint_name}-"


CRITICAL_COMPOSITE = "critical"
"""The composite of the endpoint's critical alarms (the one that pages; the client-unanswered rate is one)."""
CLIENT_FALLBACK_RATE = "client-fallback-rate"
"""The share of client calls a backend after the first answered (during the migration's ramp: canary calls the
endpoint failed and Bedrock answered)."""


def endpoint_alarm_name(endpoint_name: str, slug: str) -> str:
    """``<endpoint>-<slug>``: one of the endpoint's alarms (cdk_constructs/observability/endpoint_alarms.py)."""
    return f"{alarm_name_prefix(endpoint_name)}{slug}"


def migration_ramp_alarm_names(endpoint_name: str) -> tuple[str, ...]:
    """The alarms the migration's ramp watches by default: any in ALARM rolls the ramp back (docs/migration.md)."""
    return tuple(endpoint_alarm_name(endpoint_name, slug) for slug in (CRITICAL_COMPOSITE, CLIENT_FALLBACK_RATE))


SHADOW_RULES = (
    "5xx-rate",
    *(f"ttft-p95-{klass.value}" for klass in RequestClass),
    "model-latency-p99",
    "engine-errors",
)
"""The shadow variant's alarms, in order: its 5xx rate, TTFT p95 per request class, ModelLatency p99 and engine
errors (cdk_constructs/observability/shadow_comparison.py)."""


def shadow_alarm_names(endpoint_name: str, shadow_variant: str) -> tuple[str, ...]:
    """``<endpoint>-<shadow variant>-<rule>`` of each of :data:`SHADOW_RULES`: the alarms ``ops shadow promote``
    requires out of ALARM. They page nobody and roll nothing back (the shadow answers no user)."""
    return tuple(f"{endpoint_name}-{shadow_variant}-{rule}" for rule in SHADOW_RULES)
