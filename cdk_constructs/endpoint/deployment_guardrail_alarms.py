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
    """Error-rate, p95-TTFT (one per request class), p99-ModelLatency and 4xx-against-the-baseline
    alarms for each guarded variant, named by ``serving_contract.alarms``; their thresholds come from
    the one SLO declaration (``slo``: ``max_error_rate``, ``<class>.ttft_p95_ms``) and ``monitoring``.

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

    Count what callers feel (issue 49, finding 7): the error rate adds the container's
    ``StreamErrors`` (a stream that failed after its 200, a success to SageMaker) to
    ``Invocation5XXErrors``, and a release that answers 4xx where the baseline serves rolls back on
    its own alarm (:meth:`EndpointMetrics.client_error_excess`).

    Missing data BREACHES on every guardrail: each expression has a value in every period (0 for a
    variant without traffic, 100 % errors when SageMaker counted invocations the container never
    reported), so only a metric pipeline that returns nothing at all is missing, and a release
    that stops emitting metrics must not roll forward.

    Attributes:
        alarms: variant name to its (error-rate, TTFT cold, TTFT warm, ModelLatency, 4xx) alarms, the
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
        client_error_rate: AlarmRuleConfig,
        client_error_baseline_cap_percent: float,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """
        Args:
            metrics: metric factory of the endpoint (in inference_components mode it reads the
                variant's base component for ``AWS/SageMaker`` metrics).
            variant_names: variants to guard (the canary; the primary too when it can be the one a
                deployment shifts traffic to). The baseline of one's 4xx rate is the others'.
            labels: variant -> the name its alarms carry (default: the variant name; in
                inference_components mode ``base``, for the base component they guard).
            slo: the thresholds: ``max_error_rate`` (seed 000: 0.5 %) and each class's
                ``ttft_p95_ms`` (seed 000: 500 ms).
            error_rate: the error-rate alarm's window.
            ttft_p95: the window of the per-class p95 TimeToFirstToken alarms.
            model_latency_p99: p99 ModelLatency threshold in microseconds and its window
                (seed 002: 2,000 ms).
            client_error_rate: 4xx percentage points above the baseline and the window
                (``monitoring.canary_client_error_rate``).
            client_error_baseline_cap_percent: the highest baseline compared against
                (``monitoring.canary_client_error_baseline_cap_percent``).
        """
        super().__init__(scope, construct_id)
        self.alarms: dict[str, tuple[cloudwatch.Alarm, ...]] = {}
        endpoint = self._endpoint_name = metrics.endpoint_name
        self._labels = {v: (labels or {}).get(v, v) for v in variant_names}
        for variant in variant_names:
            label = self._labels[variant]
            error_name, *latency_names, model_latency_name, client_name = alarm_names.rollback_alarm_names(
                endpoint, label
            )
            node_id = pascal_case(label)
            error_alarm = self._rollback_alarm(
                f"{node_id}ErrorRate",
                error_name,
                f"{label} error rate (5xx answers and streams that failed after their 200) > "
                f"{slo.max_error_rate_percent:g} % for {error_rate.window_s} s, or its container reported no "
                "request while SageMaker counted some (slo.max_error_rate; seed 000 canary gate)",
                metrics.served_error_rate(
                    variants=[variant], period_s=error_rate.period_s, label=f"{label} error rate (%)", guarded=True
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
                    metrics.filled(
                        metrics.custom(
                            RequestMetric.TIME_TO_FIRST_TOKEN,
                            variant=variant,
                            statistic="p95",
                            period_s=ttft_p95.period_s,
                            request_class=klass,
                        ),
                        period_s=ttft_p95.period_s,
                        label=f"{label} TTFT p95 {klass.value} (ms)",
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
                metrics.filled(
                    metrics.sagemaker(
                        SageMakerMetric.MODEL_LATENCY,
                        variant=variant,
                        statistic="p99",
                        period_s=model_latency_p99.period_s,
                    ),
                    period_s=model_latency_p99.period_s,
                    label=f"{label} ModelLatency p99 (us)",
                ),
                model_latency_p99,
                model_latency_p99.threshold,
            )
            client_alarm = self._rollback_alarm(
                f"{node_id}ClientErrorRate",
                client_name,
                f"{label} 4xx rate > the other variants' (capped at {client_error_baseline_cap_percent:g} %) + "
                f"{client_error_rate.threshold:g} points for {client_error_rate.window_s} s "
                "(monitoring.canary_client_error_rate)",
                metrics.client_error_excess(
                    variant=variant,
                    period_s=client_error_rate.period_s,
                    baseline_cap_percent=client_error_baseline_cap_percent,
                    label=f"{label} 4xx rate above the baseline (points)",
                ),
                client_error_rate,
                client_error_rate.threshold,
            )
            self.alarms[variant] = (error_alarm, *latency_alarms, model_latency_alarm, client_alarm)

    def _rollback_alarm(  # noqa: PLR0917 - one call shape, five call sites in this class
        self,
        node_id: str,
        name: str,
        condition: str,
        metric: cloudwatch.IMetric,
        rule: AlarmWindowConfig,
        threshold: float,
    ) -> cloudwatch.Alarm:
        """One named rollback alarm: above ``threshold`` over ``rule``'s window, missing data breaching (the
        metric has a value in every period; class docstring)."""
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
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
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
