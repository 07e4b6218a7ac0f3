"""The alarms that roll a deployment back (seed 000 canary gates): a blue/green endpoint update
in variants mode, the base component's rolling update in inference_components mode."""

from collections.abc import Mapping, Sequence

from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from app_config.monitoring import AlarmRuleConfig
from cdk_constructs.common.nag import guard_suppress
from cdk_constructs.observability.endpoint_metrics import EndpointMetrics
from serving_contract import alarms as alarm_names
from serving_contract.metrics import RequestMetric, SageMakerMetric
from serving_contract.outputs import pascal_case


class DeploymentGuardrailAlarms(Construct):
    """5xx-rate, p95-TTFT and p99-ModelLatency alarms for each guarded variant, named by
    ``serving_contract.alarms``.

    TTFT exists only for streaming requests; ModelLatency (``AWS/SageMaker``, microseconds)
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
        alarms: variant name to its (error-rate, TTFT, ModelLatency) alarms, the names of
            ``rollback_alarm_names`` in that order.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        metrics: EndpointMetrics,
        variant_names: Sequence[str],
        error_rate: AlarmRuleConfig,
        ttft_p95: AlarmRuleConfig,
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
            error_rate: 5xx rate threshold in percent and its window (seed 000: 0.5 %).
            ttft_p95: p95 TimeToFirstToken threshold in ms and its window (seed 000: 500 ms).
            model_latency_p99: p99 ModelLatency threshold in microseconds and its window
                (seed 002: 2,000 ms).
        """
        super().__init__(scope, construct_id)
        self.alarms: dict[str, tuple[cloudwatch.Alarm, cloudwatch.Alarm, cloudwatch.Alarm]] = {}
        endpoint = self._endpoint_name = metrics.endpoint_name
        self._labels = {v: (labels or {}).get(v, v) for v in variant_names}
        for variant in variant_names:
            label = self._labels[variant]
            error_name, latency_name, model_latency_name = alarm_names.rollback_alarm_names(endpoint, label)
            node_id = pascal_case(label)
            error_alarm = self._rollback_alarm(
                f"{node_id}ErrorRate",
                error_name,
                f"{label} 5xx rate > {error_rate.threshold:g} % for {error_rate.window_s} s (seed 000 canary gate)",
                metrics.error_rate(
                    SageMakerMetric.INVOCATION_5XX_ERRORS,
                    variants=[variant],
                    period_s=error_rate.period_s,
                    label=f"{label} 5xx rate (%)",
                ),
                error_rate,
            )
            latency_alarm = self._rollback_alarm(
                f"{node_id}TtftP95",
                latency_name,
                f"{label} p95 time to first token > {ttft_p95.threshold:g} ms for {ttft_p95.window_s} s "
                "(seed 000 canary gate)",
                metrics.custom(
                    RequestMetric.TIME_TO_FIRST_TOKEN, variant=variant, statistic="p95", period_s=ttft_p95.period_s
                ),
                ttft_p95,
            )
            model_latency_alarm = self._rollback_alarm(
                f"{node_id}ModelLatencyP99",
                model_latency_name,
                f"{label} p99 ModelLatency > {model_latency_p99.threshold:g} us for {model_latency_p99.window_s} s, "
                "every request (seed 002 p99 latency SLO)",
                metrics.sagemaker(
                    SageMakerMetric.MODEL_LATENCY, variant=variant, statistic="p99", period_s=model_latency_p99.period_s
                ),
                model_latency_p99,
            )
            self.alarms[variant] = (error_alarm, latency_alarm, model_latency_alarm)

    def _rollback_alarm(
        self, node_id: str, name: str, condition: str, metric: cloudwatch.IMetric, rule: AlarmRuleConfig
    ) -> cloudwatch.Alarm:
        """One named rollback alarm: above ``rule.threshold``, missing data not breaching."""
        alarm = cloudwatch.Alarm(
            self,
            node_id,
            alarm_name=name,
            alarm_description=f"Rolls back deployments: {condition}.",
            metric=metric,
            threshold=rule.threshold,
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
