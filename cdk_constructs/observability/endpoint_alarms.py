"""The seeds' alerting rules for one endpoint, a composite alarm for the critical set, notifications."""

from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from app_config.monitoring import AlarmRuleConfig, AlarmWindowConfig, MonitoringConfig
from app_config.slo import SloConfig
from cdk_constructs.common.nag import guard_suppress
from cdk_constructs.observability.endpoint_metrics import EndpointMetrics, PerVariant
from serving_contract import alarms as alarm_names
from serving_contract.metrics import (
    BudgetMetric,
    ClientMetric,
    EngineMetric,
    RequestMetric,
    SageMakerInstanceMetric,
    SageMakerMetric,
)
from serving_contract.outputs import pascal_case
from serving_contract.request_classes import RequestClass

Missing = cloudwatch.TreatMissingData
Comparison = cloudwatch.ComparisonOperator

SILENT_FACTOR = 10
"""A latency alarm's value in a period when SageMaker counted invocations but the container reported no request:
this many times its threshold, a breach that stands apart from a slow period on a graph (issue 53, finding 15)."""


@dataclass(frozen=True)
class _Rule:
    """One alarm to build: what it watches, how it compares and what missing data means."""

    construct_id: str
    slug: str
    description: str
    metric: cloudwatch.IMetric
    rule: AlarmWindowConfig
    comparison: cloudwatch.ComparisonOperator
    missing: cloudwatch.TreatMissingData
    critical: bool
    # Overrides rule.threshold (unit conversions, per-adapter ceilings); required when the rule is a
    # window only (the threshold is an SLO, from the slo section).
    threshold: float | None = None

    @property
    def alarm_threshold(self) -> float:
        if self.threshold is not None:
            return self.threshold
        if not isinstance(self.rule, AlarmRuleConfig):
            raise TypeError(f"{self.slug}: a window-only rule needs a threshold")
        return self.rule.threshold


class EndpointAlarms(Construct):
    """Every alerting rule of seed 002 plus SageMaker's endpoint errors, latency and GPU memory.

    Alarm names are set explicitly to ``<endpoint>-<rule>``: operations tooling finds all
    alarms of an endpoint with ``DescribeAlarms(AlarmNamePrefix=alarm_name_prefix(...))``
    and composite alarm rules name them, so the names must be known at synth.

    Notifications: warning alarms notify the topic directly (ALARM and OK); critical
    alarms carry no action of their own and page through one composite alarm (any
    critical child in ALARM), so an incident that trips several of them pages once. The
    guardrail alarms (in the serving stack, found by name) get a composite of their own
    so a rolled-back deployment is announced too.

    Missing data: a silent container must not look healthy, and an idle endpoint must not page.
    Each rule states its treatment of missing data and why, beside it (:meth:`_rules`).

    Attributes:
        alarms: slug to alarm, every metric alarm created here.
        critical: the alarms behind the critical composite.
        critical_composite: pages when any critical alarm is in ALARM.
        guardrail_composite: notifies when any deployment-guardrail alarm is in ALARM.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        metrics: EndpointMetrics,
        config: MonitoringConfig,
        slo: SloConfig,
        adapters: Sequence[str],
        gpus_per_instance: int,
        topic: sns.ITopic,
        guardrail_alarm_names: Sequence[str],
        idle_may_be_silent: bool = False,
    ) -> None:
        """
        Args:
            metrics: metric factory of the endpoint (names from ``serving_contract.metrics``).
            config: thresholds and windows (defaults from seed 002).
            slo: the objectives whose alarms take their thresholds from it (TTFT p95 per
                request class: one ``ttft-p95-high-<class>`` alarm each).
            adapters: LoRA adapter names; one latency alarm each.
            gpus_per_instance: GPUs per instance; SageMaker reports GPU memory as percent x
                device count, so the per-GPU threshold is multiplied by it.
            topic: where notifications go.
            guardrail_alarm_names: names of the deployment-guardrail alarms (serving stack).
            idle_may_be_silent: True when no container may run while idle (inference
                components with scale to zero); missing queue data is then not breaching.
        """
        super().__init__(scope, construct_id)
        prefix = alarm_names.alarm_name_prefix(metrics.endpoint_name)
        action = cloudwatch_actions.SnsAction(topic)
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        self.critical: list[cloudwatch.Alarm] = []
        self._metrics = metrics
        self._config = config
        for rule in self._rules(slo, adapters, gpus_per_instance, idle_may_be_silent=idle_may_be_silent):
            threshold = rule.alarm_threshold
            alarm = cloudwatch.Alarm(
                self,
                rule.construct_id,
                alarm_name=f"{prefix}{rule.slug}",
                alarm_description=f"[{'critical' if rule.critical else 'warning'}] {rule.description}",
                metric=rule.metric,
                threshold=threshold,
                comparison_operator=rule.comparison,
                evaluation_periods=rule.rule.evaluation_periods,
                datapoints_to_alarm=rule.rule.datapoints_to_alarm,
                treat_missing_data=rule.missing,
            )
            self.alarms[rule.slug] = alarm
            if rule.critical:
                self.critical.append(alarm)
                guard_suppress(
                    alarm,
                    "CT.CLOUDWATCH.PR.1",
                    f"Critical alarm: pages through the composite alarm {prefix}critical, which carries the action, "
                    "so an incident that trips several critical alarms pages once; an action here would page again.",
                )
            else:
                alarm.add_alarm_action(action)
                alarm.add_ok_action(action)

        self.critical_composite = cloudwatch.CompositeAlarm(
            self,
            "Critical",
            composite_alarm_name=alarm_names.endpoint_alarm_name(metrics.endpoint_name, alarm_names.CRITICAL_COMPOSITE),
            alarm_description="[critical] Pages when any critical alarm of the endpoint is in ALARM.",
            alarm_rule=cloudwatch.AlarmRule.any_of(
                *(cloudwatch.AlarmRule.from_alarm(a, cloudwatch.AlarmState.ALARM) for a in self.critical)
            ),
        )
        self.guardrail_composite = cloudwatch.CompositeAlarm(
            self,
            "DeploymentRollback",
            composite_alarm_name=f"{prefix}deployment-rollback",
            alarm_description=(
                "[warning] A rollback alarm (a variant's error rate, p95 TTFT, p99 ModelLatency or 4xx rate above the "
                "baseline) is in ALARM. "
                "During a blue/green deployment SageMaker rolls that deployment back; outside one nothing rolls "
                "back: live traffic on that variant breaches its canary gate (check `mangaassist-ops promote`/"
                "`rollback`)."
            ),
            # The guardrail alarms live in the serving stack; a rule can name them directly.
            alarm_rule=cloudwatch.AlarmRule.any_of(
                *(cloudwatch.AlarmRule.from_string(f'ALARM("{name}")') for name in guardrail_alarm_names)
            ),
        )
        for composite in (self.critical_composite, self.guardrail_composite):
            composite.add_alarm_action(action)
            composite.add_ok_action(action)

    def _rules(
        self, slo: SloConfig, adapters: Sequence[str], gpus_per_instance: int, *, idle_may_be_silent: bool
    ) -> list[_Rule]:
        """Every rule, in the order their alarms are made (the metrics' expression ids follow it)."""
        return [
            *(self._ttft_rule(slo, klass) for klass in RequestClass),
            self._queue_rule(idle_may_be_silent=idle_may_be_silent),
            *self._engine_rules(),
            *self._endpoint_rules(gpus_per_instance),
            *(self._adapter_rule(adapter) for adapter in adapters),
            self._client_fallback_rule(),
            self._client_unanswered_rule(),
        ]

    def _ttft_rule(self, slo: SloConfig, klass: RequestClass) -> _Rule:
        config = self._config
        hint = {
            RequestClass.COLD: "First turns prefill their whole history: check queueing and the instance type.",
            RequestClass.WARM: "Follow-ups should hit the prefix cache: check the prefix cache hit rate and routing.",
        }[klass]
        return _Rule(
            construct_id=f"HighTtft{pascal_case(klass.value)}",
            slug=f"ttft-p95-high-{klass.value}",
            description=f"p95 time to first token of {klass.value} requests > {slo.of(klass).ttft_p95_ms:g} ms "
            f"(slo.{klass.value}.ttft_p95_ms) for {config.high_ttft.window_s} s. {hint}",
            metric=self._worst_or_silent(
                RequestMetric.TIME_TO_FIRST_TOKEN,
                "p95",
                config.high_ttft,
                f"TTFT p95 {klass.value} (ms)",
                threshold=slo.of(klass).ttft_p95_ms,
                request_class=klass,
            ),
            rule=config.high_ttft,
            comparison=Comparison.GREATER_THAN_THRESHOLD,
            # Exists only when requests arrive: no traffic is healthy. A container that stops reporting while
            # SageMaker counts invocations reads SILENT_FACTOR x the threshold (_worst_or_silent): a breach.
            missing=Missing.NOT_BREACHING,
            critical=False,
            threshold=slo.of(klass).ttft_p95_ms,  # the SLO is the threshold (window-only rule)
        )

    def _queue_rule(self, *, idle_may_be_silent: bool) -> _Rule:
        rule = self._config.queue_build_up
        return _Rule(
            construct_id="QueueBuildUp",
            slug="queue-build-up",
            description=f"Queue depth > {rule.threshold:g} for {rule.window_s} s"
            + (
                " (no data = scaled to zero, not breaching). Scale out now."
                if idle_may_be_silent
                else ", or no variant's container publishing metrics at all. Scale out now."
            ),
            metric=self._worst(EngineMetric.QUEUE_DEPTH, "Average", rule, "Queue depth"),
            rule=rule,
            comparison=Comparison.GREATER_THAN_THRESHOLD,
            # Every running container publishes QueueDepth on an interval, traffic or not, so no
            # datapoint for the whole window means no container is publishing: the endpoint is down or
            # its metrics pipeline is broken. The metric is the MAXIMUM over variants, so silence pages
            # only when EVERY container is silent. With idle_may_be_silent (inference components scaled
            # to zero, the dev overlay) zero copies publish nothing by design, or idle dev pages all night.
            missing=Missing.NOT_BREACHING if idle_may_be_silent else Missing.BREACHING,
            critical=True,
        )

    def _engine_rules(self) -> list[_Rule]:
        """KV cache pressure, context budget drift, OOM and engine errors, prefix cache degradation."""
        config, metrics = self._config, self._metrics
        drift = config.context_budget_drift
        return [
            _Rule(
                construct_id="KvCachePressure",
                slug="kv-cache-pressure",
                description=f"KV cache usage > {config.kv_cache_pressure.threshold:g} % for "
                f"{config.kv_cache_pressure.window_s} s. Check for context budget drift (context-budget-drift, "
                "TokenBudgetTrimmed).",
                metric=self._worst(
                    EngineMetric.KV_CACHE_USAGE, "Average", config.kv_cache_pressure, "KV cache usage (%)"
                ),
                rule=config.kv_cache_pressure,
                comparison=Comparison.GREATER_THAN_THRESHOLD,
                # The same always-on gauge as the queue: that alarm already pages on silence, and
                # INSUFFICIENT_DATA (not OK) keeps this one's state honest.
                missing=Missing.MISSING,
                critical=False,
            ),
            _Rule(
                construct_id="ContextBudgetDrift",
                slug="context-budget-drift",
                description=f"GPU memory pressure: the context budget trimmed > {drift.threshold:g} % of requests "
                f"for {drift.window_s} s. Check for context budget drift: prompts "
                "(retrieval, history, system) grew past engine.max_model_len.",
                metric=metrics.request_share(
                    BudgetMetric.TOKEN_BUDGET_TRIMMED,
                    period_s=drift.period_s,
                    label="Requests trimmed by the context budget (%)",
                ),
                rule=drift,
                comparison=Comparison.GREATER_THAN_THRESHOLD,
                missing=Missing.NOT_BREACHING,  # a share of requests: no traffic, no datapoint
                critical=False,
            ),
            _Rule(
                construct_id="EngineErrors",
                slug="engine-errors",
                description=f"OOM or engine errors >= {config.engine_errors.threshold:g} in "
                f"{config.engine_errors.window_s} s. Investigate a request spike or a context-budget bypass.",
                metric=self._errors_sum(config.engine_errors),
                rule=config.engine_errors,
                comparison=Comparison.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                missing=Missing.NOT_BREACHING,  # event counts: no event means no error
                critical=True,
            ),
            _Rule(
                construct_id="PrefixCacheDegradation",
                slug="prefix-cache-degraded",
                description=f"Prefix cache hit rate < {config.prefix_cache_degradation.threshold:g} % for "
                f"{config.prefix_cache_degradation.window_s} s. Check for prompt template changes.",
                metric=self._worst(
                    EngineMetric.PREFIX_CACHE_HIT_RATE,
                    "Average",
                    config.prefix_cache_degradation,
                    "Prefix cache hit rate (%)",
                ),
                rule=config.prefix_cache_degradation,
                comparison=Comparison.LESS_THAN_THRESHOLD,
                # Defined only when the engine saw prefix queries in the interval (hits / queries):
                # idle is not degraded.
                missing=Missing.NOT_BREACHING,
                critical=False,
            ),
        ]

    def _endpoint_rules(self, gpus_per_instance: int) -> list[_Rule]:
        """What SageMaker measures: 5xx and 4xx rates, p99 ModelLatency, GPU memory."""
        config, metrics = self._config, self._metrics
        gpu_memory, model_latency = config.gpu_memory_utilization, config.model_latency_p99
        return [
            _Rule(
                construct_id="ServerErrorRate",
                slug="5xx-rate",
                description=f"Error rate (5xx answers and streams that failed after their 200) > "
                f"{config.server_error_rate.threshold:g} % for {config.server_error_rate.window_s} s (error-rate SLO).",
                # StreamErrors: a stream that ends in an error event is a 200 to SageMaker (issue 49).
                metric=metrics.served_error_rate(
                    variants=metrics.variant_names,
                    period_s=config.server_error_rate.period_s,
                    label="Error rate (%)",
                ),
                rule=config.server_error_rate,
                comparison=Comparison.GREATER_THAN_THRESHOLD,
                missing=Missing.NOT_BREACHING,  # a rate of requests: no traffic is healthy
                critical=True,
            ),
            _Rule(
                construct_id="ClientErrorRate",
                slug="4xx-rate",
                description=f"Invocation 4xx rate > {config.client_error_rate.threshold:g} % for "
                f"{config.client_error_rate.window_s} s. A client is sending bad requests.",
                metric=metrics.error_rate(
                    SageMakerMetric.INVOCATION_4XX_ERRORS,
                    variants=metrics.variant_names,
                    period_s=config.client_error_rate.period_s,
                    label="4xx rate (%)",
                ),
                rule=config.client_error_rate,
                comparison=Comparison.GREATER_THAN_THRESHOLD,
                missing=Missing.NOT_BREACHING,  # a rate of requests: no traffic is healthy
                critical=False,
            ),
            _Rule(
                construct_id="ModelLatencyP99",
                slug="model-latency-p99",
                description=f"p99 ModelLatency > {model_latency.threshold:g} us for {model_latency.window_s} s "
                "(p99 latency SLO).",
                metric=metrics.across_variants(
                    lambda v: metrics.sagemaker(
                        SageMakerMetric.MODEL_LATENCY, variant=v, statistic="p99", period_s=model_latency.period_s
                    ),
                    combine="MAX",
                    period_s=model_latency.period_s,
                    label="ModelLatency p99 (us)",
                ),
                rule=model_latency,
                comparison=Comparison.GREATER_THAN_THRESHOLD,
                missing=Missing.NOT_BREACHING,  # exists only when requests arrive
                critical=False,
            ),
            _Rule(
                construct_id="GpuMemory",
                slug="gpu-memory-high",
                description=f"GPU memory > {gpu_memory.threshold:g} % per GPU for {gpu_memory.window_s} s "
                "(above vLLM's preallocation).",
                metric=metrics.across_variants(
                    lambda v: metrics.instance(
                        SageMakerInstanceMetric.GPU_MEMORY_UTILIZATION,
                        variant=v,
                        statistic="Maximum",
                        period_s=gpu_memory.period_s,
                    ),
                    combine="MAX",
                    period_s=gpu_memory.period_s,
                    label="GPU memory (% x GPUs)",
                ),
                rule=gpu_memory,
                comparison=Comparison.GREATER_THAN_THRESHOLD,
                # SageMaker's host agent publishes it independent of the container: no data means no
                # instance, which the queue alarm pages on.
                missing=Missing.MISSING,
                critical=False,
                # SageMaker reports percent x device count; the configured threshold is per GPU.
                threshold=gpu_memory.threshold * gpus_per_instance,
            ),
        ]

    def _adapter_rule(self, adapter: str) -> _Rule:
        config = self._config
        ceiling = config.adapter_ceiling_ms(adapter)
        return _Rule(
            construct_id=f"AdapterLatency{pascal_case(adapter)}",
            slug=f"adapter-{adapter}-latency-p95",
            description=f"Adapter {adapter} p95 request latency > {ceiling:g} ms for "
            f"{config.adapter_latency.window_s} s. Check the adapter version; roll back if needed.",
            metric=self._worst_or_silent(
                RequestMetric.REQUEST_LATENCY,
                "p95",
                config.adapter_latency,
                f"{adapter} latency p95 (ms)",
                threshold=ceiling,
                adapter=adapter,
            ),
            rule=config.adapter_latency,
            comparison=Comparison.GREATER_THAN_THRESHOLD,
            # Exists only when requests for the adapter arrive; a container silent while invoked breaches.
            missing=Missing.NOT_BREACHING,
            critical=False,
            threshold=ceiling,  # the adapter's own ceiling, or the shared default
        )

    def _client_fallback_rule(self) -> _Rule:
        rule = self._config.client_fallback_rate
        return _Rule(
            construct_id="ClientFallbackRate",
            slug=alarm_names.CLIENT_FALLBACK_RATE,
            description=f"Client fallback rate > {rule.threshold:g} % for {rule.window_s} s: that share of the client "
            "library's calls went to Bedrock (the endpoint answered 5xx, timed out, throttled past the deadline or "
            "had its circuit open). Check the 5xx-rate and engine-errors alarms and the clients' EMF lines "
            "(Failures).",
            metric=self._metrics.client_share(
                ClientMetric.FALLBACKS, period_s=rule.period_s, label="Client calls answered by a fallback (%)"
            ),
            rule=rule,
            comparison=Comparison.GREATER_THAN_THRESHOLD,
            missing=Missing.NOT_BREACHING,  # a share of calls: no client calls, no datapoint
            critical=False,
        )

    def _client_unanswered_rule(self) -> _Rule:
        rule = self._config.client_unanswered_rate
        return _Rule(
            construct_id="ClientUnansweredRate",
            slug="client-unanswered-rate",
            description=f"Client calls no backend answered > {rule.threshold:g} % for {rule.window_s} s "
            "(error-rate SLO): the client library's callers got errors, the endpoint and every fallback failed, "
            "were skipped or are not configured. The endpoint's own metrics may show nothing when the callers "
            "cannot reach it. Read the clients' EMF lines (Failures, Outcome) and the 5xx-rate alarm.",
            metric=self._metrics.client_share(
                ClientMetric.UNANSWERED, period_s=rule.period_s, label="Client calls no backend answered (%)"
            ),
            rule=rule,
            comparison=Comparison.GREATER_THAN_THRESHOLD,
            missing=Missing.NOT_BREACHING,  # a share of calls: no client calls, no datapoint
            critical=True,
        )

    def _worst(
        self,
        metric: EngineMetric | RequestMetric,
        statistic: str,
        rule: AlarmWindowConfig,
        label: str,
        *,
        adapter: str | None = None,
        request_class: RequestClass | None = None,
    ) -> cloudwatch.IMetric:
        """The worst variant's ``statistic`` of ``metric`` over the rule's period (MAX across variants)."""
        return self._metrics.across_variants(
            self._per_variant(metric, statistic, rule, adapter=adapter, request_class=request_class),
            combine="MAX",
            period_s=rule.period_s,
            label=label,
        )

    def _worst_or_silent(
        self,
        metric: RequestMetric,
        statistic: str,
        rule: AlarmWindowConfig,
        label: str,
        *,
        threshold: float,
        adapter: str | None = None,
        request_class: RequestClass | None = None,
    ) -> cloudwatch.IMetric:
        """:meth:`_worst`, reading ``SILENT_FACTOR`` x ``threshold`` in a period when a variant was invoked and its
        container reported no request (``EndpointMetrics.worst_or_silent``)."""
        return self._metrics.worst_or_silent(
            self._per_variant(metric, statistic, rule, adapter=adapter, request_class=request_class),
            period_s=rule.period_s,
            label=label,
            silent_value=SILENT_FACTOR * threshold,
        )

    def _per_variant(
        self,
        metric: EngineMetric | RequestMetric,
        statistic: str,
        rule: AlarmWindowConfig,
        *,
        adapter: str | None,
        request_class: RequestClass | None,
    ) -> PerVariant:
        """One variant's ``statistic`` of ``metric`` over the rule's period, for ``_worst`` and ``_worst_or_silent``."""
        metrics = self._metrics
        return lambda variant: metrics.custom(
            metric,
            variant=variant,
            statistic=statistic,
            period_s=rule.period_s,
            adapter=adapter,
            request_class=request_class,
        )

    def _errors_sum(self, rule: AlarmWindowConfig) -> cloudwatch.IMetric:
        """OOM plus engine errors, summed over every variant (a missing count reads as 0)."""
        using: dict[str, cloudwatch.IMetric] = {}
        for i, variant in enumerate(self._metrics.variant_names):
            using[f"o{i}"] = self._metrics.custom(
                RequestMetric.OUT_OF_MEMORY_ERRORS, variant=variant, statistic="Sum", period_s=rule.period_s
            )
            using[f"g{i}"] = self._metrics.custom(
                RequestMetric.ENGINE_ERRORS, variant=variant, statistic="Sum", period_s=rule.period_s
            )
        return cloudwatch.MathExpression(
            expression="SUM([" + ", ".join(f"FILL({key}, 0)" for key in using) + "])",
            using_metrics=using,
            period=cdk.Duration.seconds(rule.period_s),
            label="OOM + engine errors",
        )
