"""The alarms that roll a deployment back (seed 000 canary gates): a blue/green endpoint update
in variants mode, the base component's rolling update in inference_components mode."""

from collections.abc import Mapping, Sequence

from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from app_config.monitoring import AlarmRuleConfig, AlarmWindowConfig
from app_config.slo import SloConfig
from cdk_constructs.common.nag import guard_suppress
from cdk_constructs.observability.endpoint_metrics import EndpointMetrics
from serving_contract import alarms as alarm_names
from serving_contract.metrics import RequestMetric, SageMakerMetric
from serving_contract.outputs import pascal_case
from serving_contract.request_classes import RequestClass


class DeploymentGuardrailAlarms(Construct):
    """5xx-rate, p95-TTFT (one per request class) and p99-ModelLatency alarms for each guarded
    variant, named by ``serving_contract.alarms``; their thresholds come from the one SLO
    declaration (``slo``: ``max_error_rate``, ``<class>.ttft_p95_ms``).

    A canary whose first turns slow down hides in a p95 over both classes when most traffic is
    warm, and a warm p95 threshold fires on every cold burst: each class has its own alarm on
    the ``RequestClass`` dimension (serving_contract.request_classes). TTFT exists only for
    streaming requests; ModelLatency (``AWS/SageMaker``, microseconds)
    for every request, so a canary that slows only non-streaming calls still rolls back.

    The endpoint's ``DeploymentConfig.AutoRollbackConfiguration`` lists alarms by NAME,
    and the ops ``promote`` command looks them up by name too, so these alarms set
    ``AlarmName`` explicitly to ``rollback_alarm_names(endpoint, variant)`` instead of
    letting CloudFormation generate one. They carry no actions: the observability stack's
    guardrail composite alarm notifies when one trips.

    Missing data is ``notBreaching`` for all three: a variant with no traffic has no errors and
    no latency. A silent (crashed) canary container does not hide here, because SageMaker
    itself counts the requests it cannot serve in ``Invocation5XXErrors``.

    Attributes:
        alarms: variant name to its (error-rate, TTFT cold, TTFT warm, ModelLatency) alarms, the
            names of ``rollback_alarm_names`` in that order.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        metrics: EndpointMetrics,
        variant_names: Sequence[str],
        slo: SloConfig,
        error_rate: AlarmWindowConfig,
        ttft_p95: AlarmWindowConfig,
        model_latency_p99: AlarmRuleConfig,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """
        Args:
            metrics: metric factory of the endpoint (in inference_components mode it reads the
                variant's base component for ``AWS/SageMaker`` metrics).
            variant_names: variants to guard (the canary; the primary too when it can be
                the one a deployment shifts traffic to).
            labels: variant -> the name its alarms carry (default: the variant name; in
                inference_components mode ``base``, for the base component they guard).
            slo: the thresholds: ``max_error_rate`` (seed 000: 0.5 %) and each class's
                ``ttft_p95_ms`` (seed 000: 500 ms).
            error_rate: the 5xx-rate alarm's window.
            ttft_p95: the window of the per-class p95 TimeToFirstToken alarms.
            model_latency_p99: p99 ModelLatency threshold in microseconds and its window
                (seed 002: 2,000 ms).
        """
        super().__init__(scope, construct_id)
        self.alarms: dict[str, tuple[cloudwatch.Alarm, ...]] = {}
        endpoint = self._endpoint_name = metrics.endpoint_name
        self._labels = {v: (labels or {}).get(v, v) for v in variant_names}
        for variant in variant_names:
            label = self._labels[variant]
            error_name, *latency_names, model_latency_name = alarm_names.rollback_alarm_names(endpoint, label)
            node_id = pascal_case(label)
            error_alarm = self._rollback_alarm(
                f"{node_id}ErrorRate",
                error_name,
                f"{label} 5xx rate > {slo.max_error_rate_percent:g} % for {error_rate.window_s} s "
                "(slo.max_error_rate; seed 000 canary gate)",
                metrics.error_rate(
                    SageMakerMetric.INVOCATION_5XX_ERRORS,
                    variants=[variant],
                    period_s=error_rate.period_s,
                    label=f"{label} 5xx rate (%)",
                ),
                error_rate,
                slo.max_error_rate_percent,
            )
            latency_alarms = [
                self._rollback_alarm(
                    f"{node_id}TtftP95{pascal_case(klass.value)}",
                    name,
                    f"{label} p95 time to first token of {klass.value} requests > {slo.of(klass).ttft_p95_ms:g} ms "
                    f"for {ttft_p95.window_s} s (slo.{klass.value}.ttft_p95_ms; seed 000 canary gate)",
                    metrics.custom(
                        RequestMetric.TIME_TO_FIRST_TOKEN,
                        variant=variant,
                        statistic="p95",
                        period_s=ttft_p95.period_s,
                        request_class=klass,
                    ),
                    ttft_p95,
                    slo.of(klass).ttft_p95_ms,
                )
                for klass, name in zip(RequestClass, latency_names, strict=True)
            ]
            model_latency_alarm = self._rollback_alarm(
                f"{node_id}ModelLatencyP99",
                model_latency_name,
                f"{label} p99 ModelLatency > {model_latency_p99.threshold:g} us for {model_latency_p99.window_s} s, "
                "every request (seed 002 p99 latency SLO)",
                metrics.sagemaker(
                    SageMakerMetric.MODEL_LATENCY, variant=variant, statistic="p99", period_s=model_latency_p99.period_s
                ),
                model_latency_p99,
                model_latency_p99.threshold,
            )
            self.alarms[variant] = (error_alarm, *latency_alarms, model_latency_alarm)

    def _rollback_alarm(  # noqa: PLR0917 - one call shape, six call sites in this class
        self,
        node_id: str,
        name: str,
        condition: str,
        metric: cloudwatch.IMetric,
        rule: AlarmWindowConfig,
        threshold: float,
    ) -> cloudwatch.Alarm:
        """One named rollback alarm: above ``threshold`` over ``rule``'s window, missing data not breaching."""
        alarm = cloudwatch.Alarm(
            self,
            node_id,
            alarm_name=name,
            alarm_description=f"Rolls back deployments: {condition}.",
            metric=metric,
            threshold=threshold,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=rule.evaluation_periods,
            datapoints_to_alarm=rule.datapoints_to_alarm,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        guard_suppress(
            alarm,
            "CT.CLOUDWATCH.PR.1",
            "Deployment guardrail: SageMaker's AutoRollbackConfiguration acts on it by name; the observability "
            "stack's deployment-rollback composite alarm notifies for every guardrail alarm at once.",
        )
        return alarm

    @property
    def alarm_names(self) -> list[str]:
        """Every guardrail alarm name (plain strings, known at synth), variant by variant."""
        return [
            name
            for variant in self.alarms
            for name in alarm_names.rollback_alarm_names(self._endpoint_name, self._labels[variant])
        ]
