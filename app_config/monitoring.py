"""Alarms, notifications and the SLO dashboard of one endpoint.

Defaults are the seeds' values: seed 002 "Alerting rules" (thresholds, windows, severity),
seed 000 "Quality Gate Details" (canary gates). The SLO figures themselves (TTFT per request
class, error rate, the dashboard's targets) live in one place, ``app_config.slo``; the alarms
here that judge them take only their windows from this section.
Where a seed gives no number (4xx rate, GPU memory), the description says where the
default comes from.
"""

import re

from pydantic import Field, model_validator

from app_config.base import AdapterName, ConfigModel
from app_config.memory_plan_config import SAFETY_PROMPT_TOKENS, TYPICAL_ANSWER_TOKENS, TYPICAL_SEQUENCE_TOKENS
from serving_contract import context_budget as budget
from serving_contract.engine_settings import BLOCK_SIZE

# CloudWatch alarm periods are 10 s, 30 s or a multiple of 60 s (PutMetricAlarm API reference,
# "Period"), and Period x EvaluationPeriods must not exceed one day. 10/30 s only work on
# high-resolution metrics; every metric alarmed here is standard resolution (the container's
# EMF metrics set no StorageResolution; AWS/SageMaker publishes per minute), so a sub-minute
# period would see no datapoints and, with missing data notBreaching, never fire.
_METRIC_RESOLUTION_S = 60
_MAX_ALARM_WINDOW_S = 86_400

SHARED_PREFIX_TOKENS = budget.SYSTEM.default + SAFETY_PROMPT_TOKENS
"""Tokens every prompt starts with: system prompt 400 (the context budget's share) + safety instructions 200
(seed 002 §3)."""
TYPICAL_PROMPT_TOKENS = TYPICAL_SEQUENCE_TOKENS - TYPICAL_ANSWER_TOKENS
"""Prompt of a typical request: memory.typical_sequence_tokens' 2,560 less its 180-token answer (seed 003 median)."""
PREFIX_ALARM_MARGIN = 0.8
"""Alarm below 80 % of the fresh-request floor: room for noise and evictions under KV pressure,
far above what a broken prefix leaves (~0 %)."""


def fresh_prefix_hit_percent(shared_prefix_tokens: int, prompt_tokens: int, block_tokens: int) -> float:
    """Prefix-cache hit rate, percent, of requests that share only the common prefix.

    vLLM caches whole KV blocks, so only ``floor(shared / block) x block`` tokens of a fresh
    request can hit: (600 // 16) x 16 = 592 of 2,380 prompt tokens = 24.9 %. Measured at this
    shape on an H200: 24.8 % for fresh requests, 80-83 % with multi-turn conversations on one
    engine (benchmarks/results/h200-2026-11-25/capacity.json, ``fresh`` / ``conversations``
    ``prefix_cache_hit_rate``). A healthy fleet sits at or above the floor; a template change
    that breaks the prefix (a timestamp or id at the top) drops it to near 0.
    """
    return 100.0 * (shared_prefix_tokens // block_tokens) * block_tokens / prompt_tokens


_DEFAULT_BLOCK_TOKENS = BLOCK_SIZE.default
PREFIX_CACHE_DEGRADED_PERCENT = round(
    PREFIX_ALARM_MARGIN * fresh_prefix_hit_percent(SHARED_PREFIX_TOKENS, TYPICAL_PROMPT_TOKENS, _DEFAULT_BLOCK_TOKENS)
)
"""Default threshold of ``prefix-cache-degraded``: 0.8 x 24.9 % = 20 %. Seed 002's 50 % assumed
most of a prompt was shared; at ~600 of ~2,380 tokens fresh traffic alone would sit in ALARM."""


class AlarmWindowConfig(ConfigModel):
    """The window of one metric alarm whose threshold comes from elsewhere (the ``slo`` section).

    The alarm fires when ``datapoints_to_alarm`` of the last ``evaluation_periods`` periods
    of ``period_s`` seconds breach its threshold ("for 5 min" = 5 periods of 60 s).
    """

    period_s: int = Field(
        gt=0,
        le=86_400,
        description="Length of one evaluated period, in seconds; a multiple of 60 (1-minute metrics).",
    )
    evaluation_periods: int = Field(ge=1, le=1440, description="Number of most recent periods evaluated.")
    datapoints_to_alarm: int | None = Field(
        default=None,
        ge=1,
        description="Breaching periods out of evaluation_periods needed to alarm; None means all of them.",
    )

    @model_validator(mode="after")
    def _window_is_valid(self) -> "AlarmWindowConfig":
        if self.period_s % _METRIC_RESOLUTION_S != 0:
            raise ValueError(
                f"period_s = {self.period_s}: must be a multiple of {_METRIC_RESOLUTION_S} (the alarmed metrics are "
                "standard resolution: 1 datapoint per minute)"
            )
        window = self.period_s * self.evaluation_periods
        if window > _MAX_ALARM_WINDOW_S:
            raise ValueError(
                f"period_s = {self.period_s} x evaluation_periods = {self.evaluation_periods} = {window} s: "
                f"must be <= {_MAX_ALARM_WINDOW_S} s (one day, CloudWatch alarms)"
            )
        if self.datapoints_to_alarm is not None and self.datapoints_to_alarm > self.evaluation_periods:
            raise ValueError(
                f"datapoints_to_alarm = {self.datapoints_to_alarm} must be <= "
                f"evaluation_periods = {self.evaluation_periods}"
            )
        return self

    @property
    def window_s(self) -> int:
        """Seconds covered by the evaluated periods."""
        return self.period_s * self.evaluation_periods


class AlarmRuleConfig(AlarmWindowConfig):
    """Threshold and window of one metric alarm."""

    threshold: float = Field(ge=0, description="Threshold in the unit of the alarm's metric (see each alarm).")


_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


class NotificationsConfig(ConfigModel):
    """Who hears about alarms: optional subscriptions of the alarm topic."""

    emails: tuple[str, ...] = Field(
        default=(), max_length=20, description="Email addresses subscribed to the alarm topic (confirm by mail)."
    )
    https_endpoints: tuple[str, ...] = Field(
        default=(),
        max_length=20,
        description="HTTPS URLs (paging or chat webhooks) subscribed to the alarm topic; https:// only (TLS).",
    )

    @model_validator(mode="after")
    def _shapes(self) -> "NotificationsConfig":
        for email in self.emails:
            if not _EMAIL.match(email):
                raise ValueError(f"emails: {email!r} is not an email address")
        for url in self.https_endpoints:
            if not url.startswith("https://") or len(url) <= len("https://"):
                raise ValueError(f"https_endpoints: {url!r} must be an https:// URL (plain http is not allowed)")
        return self


class MonitoringConfig(ConfigModel):
    """Every alarm of one endpoint, its notifications and its dashboard."""

    high_ttft: AlarmWindowConfig = Field(
        default=AlarmWindowConfig(period_s=60, evaluation_periods=5),
        description=(
            "Window of the TTFT p95 alarms, one per request class (threshold: slo.<class>.ttft_p95_ms); warning. "
            "Source: seed 002 (p95 TTFT > 500 ms for 5 min)."
        ),
    )
    queue_build_up: AlarmRuleConfig = Field(
        default=AlarmRuleConfig(threshold=80, period_s=60, evaluation_periods=2),
        description="Average QueueDepth per engine, requests; critical. Source: seed 002 (> 80 for 2 min).",
    )
    kv_cache_pressure: AlarmRuleConfig = Field(
        default=AlarmRuleConfig(threshold=95, period_s=60, evaluation_periods=5),
        description="Average KvCacheUsagePercent, percent; warning. Source: seed 002 (> 95 % for 5 min).",
    )
    context_budget_drift: AlarmRuleConfig = Field(
        default=AlarmRuleConfig(threshold=10, period_s=300, evaluation_periods=3),
        description=(
            "Share of requests whose older turns the gateway's context budget replaced (TokenBudgetTrimmed / "
            "Requests x 100), percent; warning. Seed 002's 'GPU memory pressure: check for context budget drift' "
            "read as a number: with the default budget a conversation is trimmed only past ~10 turns of ~190 "
            "tokens, and seed 002 puts conversations beyond 8 turns at 12 % of sessions, so more than 10 % of "
            "requests trimmed for 15 minutes means prompts grew (longer retrieval, histories or system prompts)."
        ),
    )
    engine_errors: AlarmRuleConfig = Field(
        default=AlarmRuleConfig(threshold=1, period_s=300, evaluation_periods=1),
        description=(
            "Sum of OutOfMemoryErrors + EngineErrors, count, alarm at >= threshold; critical. "
            "Source: seed 002 (OOM > 0 in a 5 min window)."
        ),
    )
    prefix_cache_degradation: AlarmRuleConfig = Field(
        default=AlarmRuleConfig(threshold=PREFIX_CACHE_DEGRADED_PERCENT, period_s=300, evaluation_periods=3),
        description=(
            "Average PrefixCacheHitRatePercent, alarm below; warning. Threshold derived from the prompt layout: "
            "fresh requests hit only the shared 600-token prefix (block-aligned 592) of ~2,380 prompt tokens, "
            "24.9 % (measured 24.8 %, 80-83 % with multi-turn conversations; benchmarks/results/h200-2026-11-25/"
            "capacity.json), alarm below 80 % of that = 20 %. Window: seed 002 (15 min); its 50 % would sit in ALARM."
        ),
    )
    adapter_latency: AlarmRuleConfig = Field(
        default=AlarmRuleConfig(threshold=2000, period_s=60, evaluation_periods=10),
        description=(
            "p95 RequestLatency per adapter, ms; threshold is the default ceiling; warning. Source: seed 002 "
            "(adapter p95 > 2x baseline for 10 min); the default ceiling is the seed's 2,000 ms p99 SLO, "
            "over 3x the measured p50 of 620 ms (seed 002 results)."
        ),
    )
    adapter_latency_ceilings_ms: dict[AdapterName, float] = Field(
        default={},
        description="Per-adapter p95 RequestLatency ceiling, ms; adapters not listed use adapter_latency.threshold.",
    )
    server_error_rate: AlarmRuleConfig = Field(
        default=AlarmRuleConfig(threshold=0.1, period_s=300, evaluation_periods=3),
        description=(
            "Invocation5XXErrors / Invocations x 100, percent; critical. Source: seed 002 (error rate SLO < 0.1 %)."
        ),
    )
    client_error_rate: AlarmRuleConfig = Field(
        default=AlarmRuleConfig(threshold=5, period_s=300, evaluation_periods=3),
        description=(
            "Invocation4XXErrors / Invocations x 100, percent; warning. No seed value: 5 % flags a client "
            "release sending bad requests without firing on single malformed calls."
        ),
    )
    model_latency_p99: AlarmRuleConfig = Field(
        default=AlarmRuleConfig(threshold=2_000_000, period_s=60, evaluation_periods=5),
        description=(
            "p99 ModelLatency in MICROSECONDS (AWS/SageMaker unit); warning. Source: seed 002 (p99 < 2,000 ms)."
        ),
    )
    gpu_memory_utilization: AlarmRuleConfig = Field(
        default=AlarmRuleConfig(threshold=98, period_s=60, evaluation_periods=5),
        description=(
            "Maximum GPUMemoryUtilization per engine GPU, percent; warning. SageMaker sums the metric over the "
            "instance's GPUs, so the alarm multiplies this by engine.tensor_parallel_size, the GPUs one engine "
            "fills (the others of a larger instance stay near 0 and would put a GPU-count multiple out of reach). "
            "No seed value: vLLM preallocates engine.gpu_memory_utilization (92 %) at "
            "start, so the alarm must sit above it; 98 % leaves only the CUDA context."
        ),
    )
    client_fallback_rate: AlarmRuleConfig = Field(
        default=AlarmRuleConfig(threshold=1, period_s=300, evaluation_periods=3),
        description=(
            "ClientFallbacks / ClientRequests x 100: the share of the client library's calls (client/"
            "mangaassist_client) that another backend than the endpoint answered or tried (a 5xx, a timeout, a "
            "throttled endpoint out of tries, an open circuit), percent; warning. No seed value: the callers still "
            "got answers, so it is not the error-rate SLO (0.1 %, the 5xx-rate alarm); at 1 % for 15 minutes one "
            "answer in a hundred comes from a model the canary gates did not judge (a merged bf16 import, or a "
            "foundation model without the adapters) at Bedrock's price, and the client sees failures the "
            "endpoint's own metrics miss (timeouts, connections, open circuits)."
        ),
    )
    client_unanswered_rate: AlarmRuleConfig = Field(
        default=AlarmRuleConfig(threshold=0.1, period_s=300, evaluation_periods=3),
        description=(
            "ClientUnanswered / ClientRequests x 100: the share of the client library's calls that no backend "
            "answered (every one failed or was skipped, or an error ended the call), percent; critical. Source: "
            "seed 002 (error rate SLO < 0.1 %), as the 5xx-rate alarm: these callers got an error. With every "
            "call failing and no fallback configured, the fallback rate stays 0 and the endpoint's own metrics "
            "may see nothing (an endpoint the callers cannot reach); this alarm sees it (issue 53, finding 4)."
        ),
    )
    canary_error_rate: AlarmWindowConfig = Field(
        default=AlarmWindowConfig(period_s=60, evaluation_periods=5),
        description=(
            "Window of each variant's 5xx-rate rollback alarm (threshold: slo.max_error_rate). Source: seed 000 "
            "canary gate (< 0.5 %)."
        ),
    )
    canary_ttft_p95: AlarmWindowConfig = Field(
        default=AlarmWindowConfig(period_s=60, evaluation_periods=5),
        description=(
            "Window of each variant's TTFT p95 rollback alarms, one per request class (threshold: "
            "slo.<class>.ttft_p95_ms). Source: seed 000 canary gate (TTFT p95 < 500 ms)."
        ),
    )
    canary_client_error_rate: AlarmRuleConfig = Field(
        default=AlarmRuleConfig(threshold=5, period_s=60, evaluation_periods=5),
        description=(
            "Each variant's Invocation4XXErrors rate above the other variants' (the baseline: the same clients, "
            "split by weight), percentage points; rolls a deployment back. A release that refuses what the "
            "baseline serves is broken even when it answers no 5xx (issue 49). 5 points for 5 minutes: a canary at "
            "5 % of traffic sees a few requests a minute, where one stray 4xx is already several points for a "
            "minute. No seed value; the window is the canary gates' (seed 000)."
        ),
    )
    canary_client_error_baseline_cap_percent: float = Field(
        default=50,
        gt=0,
        le=100,
        description=(
            "Highest baseline 4xx rate canary_client_error_rate compares against, percent: when a deployment "
            "changes every variant the baseline breaks too, and a release answering 4xx to most requests must "
            "still roll back. 50: above any client's bad-request share the 4xx-rate warning (5 %) lets pass."
        ),
    )
    canary_model_latency_p99: AlarmRuleConfig = Field(
        default=AlarmRuleConfig(threshold=2_000_000, period_s=60, evaluation_periods=5),
        description=(
            "Canary variant p99 ModelLatency in MICROSECONDS (AWS/SageMaker unit); rolls a deployment back. Every "
            "request has one, sync and streaming, and SageMaker measures it even when the container's own metrics "
            "stop. Source: seed 002 (p99 < 2,000 ms), as model_latency_p99."
        ),
    )
    notifications: NotificationsConfig = Field(
        default=NotificationsConfig(), description="Subscriptions of the alarm topic."
    )
    dashboard_period_s: int = Field(
        default=60, ge=60, le=3600, description="Default period of the dashboard's graphs, in seconds."
    )

    def adapter_ceiling_ms(self, adapter: str) -> float:
        """The p95 latency ceiling of ``adapter`` in ms: its own, else the default."""
        return self.adapter_latency_ceilings_ms.get(adapter, self.adapter_latency.threshold)
