"""CloudWatch metric names the container emits as Embedded Metric Format (EMF).

Alarms, dashboards and step-scaling policies reference these names through this module,
so infrastructure can never point at a metric the container does not emit. vLLM's own
``/metrics`` endpoint is not reachable through SageMaker, so the container scrapes it and
republishes what operations need (docs/sources.md, "Metrics").

Units are CloudWatch unit names. Latencies are milliseconds here, unlike SageMaker's own
``ModelLatency``/``OverheadLatency`` in ``AWS/SageMaker``, which are microseconds.
"""

from enum import StrEnum
from typing import Final

DEFAULT_NAMESPACE: Final = "MangaAssist/Inference"
"""Namespace of every custom metric (overridable through ``observability.metrics_namespace``)."""

SAGEMAKER_NAMESPACE: Final = "AWS/SageMaker"
SAGEMAKER_INSTANCE_NAMESPACE: Final = "/aws/sagemaker/Endpoints"
SAGEMAKER_COMPONENT_NAMESPACE: Final = "/aws/sagemaker/InferenceComponents"
"""Per-component utilization (``...Normalized`` metrics, dimension InferenceComponentName)."""


class Dimension(StrEnum):
    """Dimension names. Endpoint and variant match the ``AWS/SageMaker`` dimension names."""

    ENDPOINT = "EndpointName"
    VARIANT = "VariantName"
    ADAPTER = "Adapter"
    COMPONENT = "InferenceComponentName"  # AWS/SageMaker and /aws/sagemaker/InferenceComponents
    # cold | warm (serving_contract.request_classes): the SLO, its alarms and guardrails are per class.
    REQUEST_CLASS = "RequestClass"
    MODEL_VERSION = "ModelVersion"  # the base (+ adapter) versions that answered (container/serving_app/versions.py)


class EngineMetric(StrEnum):
    """Engine gauges and rates scraped from vLLM ``/metrics`` on an interval.

    Dimensions: (EndpointName, VariantName).
    """

    QUEUE_DEPTH = "QueueDepth"  # vllm:num_requests_waiting
    RUNNING_REQUESTS = "RunningRequests"  # vllm:num_requests_running
    KV_CACHE_USAGE = "KvCacheUsagePercent"  # vllm:kv_cache_usage_perc x 100
    PREFIX_CACHE_HIT_RATE = "PrefixCacheHitRatePercent"  # delta hits / delta queries x 100
    PREEMPTIONS = "Preemptions"  # delta of vllm:num_preemptions_total
    PROMPT_TOKENS_PER_SECOND = "PromptTokensPerSecond"  # rate of vllm:prompt_tokens_total
    GENERATION_TOKENS_PER_SECOND = "GenerationTokensPerSecond"  # rate of vllm:generation_tokens_total
    # Mean of the interval's delta of vllm:request_queue_time_seconds _sum/_count, x 1000.
    # Not a p95: vLLM's queue-time buckets start at 300 ms (0.22 and 0.26), too coarse for the 100 ms SLO.
    QUEUE_WAIT_AVERAGE = "QueueWaitAverage"


class RequestMetric(StrEnum):
    """Per-request figures measured at the serving layer.

    Dimensions: (EndpointName, VariantName), (EndpointName, VariantName, Adapter) and, for a
    request whose usage vLLM reported, (EndpointName, VariantName, RequestClass).
    """

    TIME_TO_FIRST_TOKEN = "TimeToFirstToken"  # streaming requests only
    REQUEST_LATENCY = "RequestLatency"
    INPUT_TOKENS = "InputTokens"
    OUTPUT_TOKENS = "OutputTokens"
    REQUESTS = "Requests"
    CLIENT_ERRORS = "ClientErrors"  # 4xx answered by the serving layer
    SERVER_ERRORS = "ServerErrors"  # 5xx answered by the serving layer
    # Streams answered 200 that then ended with an error event (vLLM's, or the relay's own timeout or
    # failure): the caller got no complete answer, yet SageMaker counts a 200. The error-rate alarms
    # and rollback guardrails add these to Invocation5XXErrors (issue 49).
    STREAM_ERRORS = "StreamErrors"
    ENGINE_ERRORS = "EngineErrors"  # upstream engine failed or was unreachable
    OUT_OF_MEMORY_ERRORS = "OutOfMemoryErrors"  # engine reported CUDA OOM


UNITS: Final[dict[str, str]] = {
    EngineMetric.QUEUE_DEPTH: "Count",
    EngineMetric.RUNNING_REQUESTS: "Count",
    EngineMetric.KV_CACHE_USAGE: "Percent",
    EngineMetric.PREFIX_CACHE_HIT_RATE: "Percent",
    EngineMetric.PREEMPTIONS: "Count",
    EngineMetric.PROMPT_TOKENS_PER_SECOND: "Count/Second",
    EngineMetric.GENERATION_TOKENS_PER_SECOND: "Count/Second",
    EngineMetric.QUEUE_WAIT_AVERAGE: "Milliseconds",
    RequestMetric.TIME_TO_FIRST_TOKEN: "Milliseconds",
    RequestMetric.REQUEST_LATENCY: "Milliseconds",
    RequestMetric.INPUT_TOKENS: "Count",
    RequestMetric.OUTPUT_TOKENS: "Count",
    RequestMetric.REQUESTS: "Count",
    RequestMetric.CLIENT_ERRORS: "Count",
    RequestMetric.SERVER_ERRORS: "Count",
    RequestMetric.STREAM_ERRORS: "Count",
    RequestMetric.ENGINE_ERRORS: "Count",
    RequestMetric.OUT_OF_MEMORY_ERRORS: "Count",
}
"""CloudWatch unit of every emitted metric."""


class BudgetMetric(StrEnum):
    """What the context budget and OOM containment did to a request (one EMF line per request they
    changed; container/serving_app/context_budget).

    Dimensions: (EndpointName, VariantName) and (EndpointName, VariantName, Adapter).
    """

    TOKEN_BUDGET_TRIMMED = "TokenBudgetTrimmed"  # requests whose older turns were replaced (seed 002)
    TRIMMED_TOKENS = "TrimmedTokens"  # prompt tokens those requests lost


UNITS.update({BudgetMetric.TOKEN_BUDGET_TRIMMED: "Count", BudgetMetric.TRIMMED_TOKENS: "Count"})

EMITTED: Final[frozenset[str]] = frozenset(UNITS)
"""Every custom metric name the container emits."""


class ClientMetric(StrEnum):
    """What the client library counts (client/mangaassist_client, docs/client.md): one EMF line per call,
    every counter in it (zeros too), in the same namespace as the container's metrics.

    Dimensions: (EndpointName), the endpoint the client calls. The package is installed on its own and
    cannot import this module: it declares the same names (``mangaassist_client.metrics.ClientMetric``) and
    tests/client/test_contract_agreement.py keeps the two equal.
    """

    REQUESTS = "ClientRequests"  # calls, whatever answered
    RETRIES = "ClientRetries"  # retries after throttling or a 503 with Retry-After
    FALLBACKS = "ClientFallbacks"  # calls answered (or tried) by a backend after the first
    CIRCUIT_OPENED = "ClientCircuitOpened"  # a backend's circuit opened
    STREAMS_INTERRUPTED = "ClientStreamsInterrupted"  # streams that failed after their first token
    CANARY_REQUESTS = "ClientCanaryRequests"  # calls sent to the client-side canary first
    # Calls no backend answered (every one failed, was skipped or refused, or an error ended the call): with
    # every call failing and no fallback configured, ClientFallbacks stays 0, and only this shows the outage
    # (issue 53, finding 4).
    UNANSWERED = "ClientUnanswered"
    SHADOW_REQUESTS = "ClientShadowRequests"  # shadow copies made (each one a stored pair)
    SHADOW_ERRORS = "ClientShadowErrors"  # shadow copies that failed
    SHADOW_DROPPED = "ClientShadowDropped"  # copies not made: the queue was full, or one waited past its deadline
    SHADOW_STORE_FAILED = "ClientShadowStoreFailed"  # pairs the store could not write and dropped


CLIENT_UNIT: Final = "Count"
"""The unit of every client metric."""
CLIENT_EMITTED: Final[frozenset[str]] = frozenset(ClientMetric)
"""Every custom metric name the client library emits."""


class SageMakerMetric(StrEnum):
    """AWS-published endpoint metrics (``AWS/SageMaker``) that alarms and scaling use."""

    INVOCATIONS = "Invocations"
    INVOCATIONS_PER_INSTANCE = "InvocationsPerInstance"
    INVOCATION_4XX_ERRORS = "Invocation4XXErrors"
    INVOCATION_5XX_ERRORS = "Invocation5XXErrors"
    MODEL_LATENCY = "ModelLatency"  # microseconds
    OVERHEAD_LATENCY = "OverheadLatency"  # microseconds
    # Inference components: requests SageMaker could not place because no copy exists (scale
    # from zero; dimension InferenceComponentName).
    NO_CAPACITY_INVOCATION_FAILURES = "NoCapacityInvocationFailures"


class SageMakerComponentMetric(StrEnum):
    """Per-component utilization in ``/aws/sagemaker/InferenceComponents`` (percent of what the
    component's copies were given)."""

    GPU_UTILIZATION = "GPUUtilizationNormalized"
    GPU_MEMORY_UTILIZATION = "GPUMemoryUtilizationNormalized"
    CPU_UTILIZATION = "CPUUtilizationNormalized"
    MEMORY_UTILIZATION = "MemoryUtilizationNormalized"


class SageMakerInstanceMetric(StrEnum):
    """Instance metrics in ``/aws/sagemaker/Endpoints`` (percent x device count)."""

    GPU_UTILIZATION = "GPUUtilization"
    GPU_MEMORY_UTILIZATION = "GPUMemoryUtilization"
    CPU_UTILIZATION = "CPUUtilization"
    MEMORY_UTILIZATION = "MemoryUtilization"
    DISK_UTILIZATION = "DiskUtilization"
