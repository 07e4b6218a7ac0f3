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
from cdk_constructs.observability.endpoint_metrics import EndpointMetrics
from serving_contract import alarms as alarm_names
from serving_contract.metrics import (
    BudgetMetric,
    EngineMetric,
    RequestMetric,
    SageMakerInstanceMetric,
    SageMakerMetric,
)
from serving_contract.outputs import pascal_case
from serving_contract.request_classes import RequestClass

Missing = cloudwatch.TreatMissingData
Comparison = cloudwatch.ComparisonOperator


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

    Missing data, per alarm (a silent container must not look healthy):
    * queue build-up: ``breaching``. Every running container publishes ``QueueDepth`` on
      an interval whether or not there is traffic, so no datapoint for the whole window
      means no container is publishing: the endpoint is down or its metrics pipeline is
      broken. The metric is the MAXIMUM over variants, so silence pages only when EVERY
      container is silent (one silent variant beside a publishing one does not).
      With ``idle_may_be_silent`` (inference_components scaled to zero, the dev overlay)
      zero copies publish nothing by design: ``notBreaching``, or idle dev pages all night.
    * KV cache pressure: ``missing``. The same always-on gauge; the queue alarm already
      pages on silence, and INSUFFICIENT_DATA (not OK) keeps the state honest.
    * GPU memory: ``missing``. SageMaker's host agent publishes it independent of the
      container; no data means no instance, which the queue alarm pages on.
    * TTFT, model latency, adapter latency, 4xx/5xx rates: ``notBreaching``. They exist
      only when requests arrive: no traffic is healthy, and a dead container with traffic
      shows up as SageMaker 5xx errors.
    * OOM / engine errors: ``notBreaching``. Event counts: no event means no error.
    * context budget drift: ``notBreaching``. A share of requests: no traffic, no datapoint.
    * prefix cache hit rate: ``notBreaching``. Only defined when the engine saw prefix
      queries in the interval (hits / queries); idle is not degraded.

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
        rules = self._rules(metrics, config, slo, adapters, gpus_per_instance, idle_may_be_silent=idle_may_be_silent)
        for rule in rules:
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
            composite_alarm_name=f"{prefix}critical",
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
                "[warning] A rollback alarm (a variant's 5xx rate, p95 TTFT or p99 ModelLatency) is in ALARM. "
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

    @staticmethod
    def _rules(
        metrics: EndpointMetrics,
        config: MonitoringConfig,
        slo: SloConfig,
        adapters: Sequence[str],
        gpus_per_instance: int,
        *,
        idle_may_be_silent: bool,
    ) -> list[_Rule]:
        variants = metrics.variant_names

        def worst(
            metric: EngineMetric | RequestMetric,
            statistic: str,
            rule: AlarmWindowConfig,
            label: str,
            *,
            adapter: str | None = None,
            request_class: RequestClass | None = None,
        ) -> cloudwatch.IMetric:
            return metrics.across_variants(
                lambda v: metrics.custom(
                    metric,
                    variant=v,
                    statistic=statistic,
                    period_s=rule.period_s,
                    adapter=adapter,
                    request_class=request_class,
                ),
                combine="MAX",
                period_s=rule.period_s,
                label=label,
            )

        def errors_sum(rule: AlarmWindowConfig) -> cloudwatch.IMetric:
            using: dict[str, cloudwatch.IMetric] = {}
            for i, variant in enumerate(variants):
                using[f"o{i}"] = metrics.custom(
                    RequestMetric.OUT_OF_MEMORY_ERRORS, variant=variant, statistic="Sum", period_s=rule.period_s
                )
                using[f"g{i}"] = metrics.custom(
                    RequestMetric.ENGINE_ERRORS, variant=variant, statistic="Sum", period_s=rule.period_s
                )
            return cloudwatch.MathExpression(
                expression="SUM([" + ", ".join(f"FILL({key}, 0)" for key in using) + "])",
                using_metrics=using,
                period=cdk.Duration.seconds(rule.period_s),
                label="OOM + engine errors",
            )

        ttft_hints = {
            RequestClass.COLD: "First turns prefill their whole history: check queueing and the instance type.",
            RequestClass.WARM: "Follow-ups should hit the prefix cache: check the prefix cache hit rate and routing.",
        }
        rules = [
            _Rule(
                f"HighTtft{pascal_case(klass.value)}",
                f"ttft-p95-high-{klass.value}",
                f"p95 time to first token of {klass.value} requests > {slo.of(klass).ttft_p95_ms:g} ms "
                f"(slo.{klass.value}.ttft_p95_ms) for {config.high_ttft.window_s} s. {ttft_hints[klass]}",
                worst(
                    RequestMetric.TIME_TO_FIRST_TOKEN,
                    "p95",
                    config.high_ttft,
                    f"TTFT p95 {klass.value} (ms)",
                    request_class=klass,
                ),
                config.high_ttft,
                Comparison.GREATER_THAN_THRESHOLD,
                Missing.NOT_BREACHING,
                critical=False,
                threshold=slo.of(klass).ttft_p95_ms,
            )
            for klass in RequestClass
        ]
        rules += [
            _Rule(
                "QueueBuildUp",
                "queue-build-up",
                f"Queue depth > {config.queue_build_up.threshold:g} for {config.queue_build_up.window_s} s"
                + (
                    " (no data = scaled to zero, not breaching). Scale out now."
                    if idle_may_be_silent
                    else ", or no variant's container publishing metrics at all. Scale out now."
                ),
                worst(EngineMetric.QUEUE_DEPTH, "Average", config.queue_build_up, "Queue depth"),
                config.queue_build_up,
                Comparison.GREATER_THAN_THRESHOLD,
                Missing.NOT_BREACHING if idle_may_be_silent else Missing.BREACHING,
                critical=True,
            ),
            _Rule(
                "KvCachePressure",
                "kv-cache-pressure",
                f"KV cache usage > {config.kv_cache_pressure.threshold:g} % for "
                f"{config.kv_cache_pressure.window_s} s. Check for context budget drift (context-budget-drift, "
                "TokenBudgetTrimmed).",
                worst(EngineMetric.KV_CACHE_USAGE, "Average", config.kv_cache_pressure, "KV cache usage (%)"),
                config.kv_cache_pressure,
                Comparison.GREATER_THAN_THRESHOLD,
                Missing.MISSING,
                critical=False,
            ),
            _Rule(
                "ContextBudgetDrift",
                "context-budget-drift",
                f"GPU memory pressure: the context budget trimmed > {config.context_budget_drift.threshold:g} % of "
                f"requests for {config.context_budget_drift.window_s} s. Check for context budget drift: prompts "
                "(retrieval, history, system) grew past engine.max_model_len.",
                metrics.request_share(
                    BudgetMetric.TOKEN_BUDGET_TRIMMED,
                    period_s=config.context_budget_drift.period_s,
                    label="Requests trimmed by the context budget (%)",
                ),
                config.context_budget_drift,
                Comparison.GREATER_THAN_THRESHOLD,
                Missing.NOT_BREACHING,
                critical=False,
            ),
            _Rule(
                "EngineErrors",
                "engine-errors",
                f"OOM or engine errors >= {config.engine_errors.threshold:g} in {config.engine_errors.window_s} s. "
                "Investigate a request spike or a context-budget bypass.",
                errors_sum(config.engine_errors),
                config.engine_errors,
                Comparison.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                Missing.NOT_BREACHING,
                critical=True,
            ),
            _Rule(
                "PrefixCacheDegradation",
                "prefix-cache-degraded",
                f"Prefix cache hit rate < {config.prefix_cache_degradation.threshold:g} % for "
                f"{config.prefix_cache_degradation.window_s} s. Check for prompt template changes.",
                worst(
                    EngineMetric.PREFIX_CACHE_HIT_RATE,
                    "Average",
                    config.prefix_cache_degradation,
                    "Prefix cache hit rate (%)",
                ),
                config.prefix_cache_degradation,
                Comparison.LESS_THAN_THRESHOLD,
                Missing.NOT_BREACHING,
                critical=False,
            ),
            _Rule(
                "ServerErrorRate",
                "5xx-rate",
                f"Invocation 5xx rate > {config.server_error_rate.threshold:g} % for "
                f"{config.server_error_rate.window_s} s (error-rate SLO).",
                metrics.error_rate(
                    SageMakerMetric.INVOCATION_5XX_ERRORS,
                    variants=variants,
                    period_s=config.server_error_rate.period_s,
                    label="5xx rate (%)",
                ),
                config.server_error_rate,
                Comparison.GREATER_THAN_THRESHOLD,
                Missing.NOT_BREACHING,
                critical=True,
            ),
            _Rule(
                "ClientErrorRate",
                "4xx-rate",
                f"Invocation 4xx rate > {config.client_error_rate.threshold:g} % for "
                f"{config.client_error_rate.window_s} s. A client is sending bad requests.",
                metrics.error_rate(
                    SageMakerMetric.INVOCATION_4XX_ERRORS,
                    variants=variants,
                    period_s=config.client_error_rate.period_s,
                    label="4xx rate (%)",
                ),
                config.client_error_rate,
                Comparison.GREATER_THAN_THRESHOLD,
                Missing.NOT_BREACHING,
                critical=False,
            ),
            _Rule(
                "ModelLatencyP99",
                "model-latency-p99",
                f"p99 ModelLatency > {config.model_latency_p99.threshold:g} us for "
                f"{config.model_latency_p99.window_s} s (p99 latency SLO).",
                metrics.across_variants(
                    lambda v: metrics.sagemaker(
                        SageMakerMetric.MODEL_LATENCY,
                        variant=v,
                        statistic="p99",
                        period_s=config.model_latency_p99.period_s,
                    ),
                    combine="MAX",
                    period_s=config.model_latency_p99.period_s,
                    label="ModelLatency p99 (us)",
                ),
                config.model_latency_p99,
                Comparison.GREATER_THAN_THRESHOLD,
                Missing.NOT_BREACHING,
                critical=False,
            ),
            _Rule(
                "GpuMemory",
                "gpu-memory-high",
                f"GPU memory > {config.gpu_memory_utilization.threshold:g} % per GPU for "
                f"{config.gpu_memory_utilization.window_s} s (above vLLM's preallocation).",
                metrics.across_variants(
                    lambda v: metrics.instance(
                        SageMakerInstanceMetric.GPU_MEMORY_UTILIZATION,
                        variant=v,
                        statistic="Maximum",
                        period_s=config.gpu_memory_utilization.period_s,
                    ),
                    combine="MAX",
                    period_s=config.gpu_memory_utilization.period_s,
                    label="GPU memory (% x GPUs)",
                ),
                config.gpu_memory_utilization,
                Comparison.GREATER_THAN_THRESHOLD,
                Missing.MISSING,
                critical=False,
                threshold=config.gpu_memory_utilization.threshold * gpus_per_instance,
            ),
        ]
        for adapter in adapters:
            ceiling = config.adapter_ceiling_ms(adapter)
            rules.append(
                _Rule(
                    f"AdapterLatency{pascal_case(adapter)}",
                    f"adapter-{adapter}-latency-p95",
                    f"Adapter {adapter} p95 request latency > {ceiling:g} ms for "
                    f"{config.adapter_latency.window_s} s. Check the adapter version; roll back if needed.",
                    worst(
                        RequestMetric.REQUEST_LATENCY,
                        "p95",
                        config.adapter_latency,
                        f"{adapter} latency p95 (ms)",
                        adapter=adapter,
                    ),
                    config.adapter_latency,
                    Comparison.GREATER_THAN_THRESHOLD,
                    Missing.NOT_BREACHING,
                    critical=False,
                    threshold=ceiling,
                )
            )
        return rules
