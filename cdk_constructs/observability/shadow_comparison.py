"""The shadow variant under watch (issue 47): its own alarms, which page nobody, and the dashboard row that
compares it with the primary per request class (seed 002 scenario 6: latency, response length and errors
compared before the canary)."""

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from app_config.monitoring import AlarmWindowConfig, MonitoringConfig
from app_config.slo import SloConfig
from cdk_constructs.common.nag import guard_suppress
from cdk_constructs.observability.endpoint_metrics import EndpointMetrics
from serving_contract import alarms as alarm_names
from serving_contract.metrics import RequestMetric, SageMakerMetric
from serving_contract.outputs import pascal_case
from serving_contract.request_classes import RequestClass

_THIRD_WIDTH = 8
_GRAPH_HEIGHT = 6
NO_PAGE_REASON = (
    "Shadow variant alarm: the shadow answers no user, so nothing about it may page on-call or roll the primary "
    "back (issue 47); `mangaassist-ops shadow report` and `shadow promote` read its state, and promote refuses while "
    "it is in ALARM."
)


class ShadowAlarms(Construct):
    """The shadow variant's alarms, named ``<endpoint>-<shadow>-<rule>`` (``serving_contract.alarms``), with the
    thresholds its production counterparts have: 5xx rate above ``slo.max_error_rate``, each request class's
    p95 TTFT above ``slo.<class>.ttft_p95_ms``, p99 ModelLatency above ``monitoring.canary_model_latency_p99``,
    and any engine or out-of-memory error (``monitoring.engine_errors``' window).

    No action, no composite: they never page, and no deployment names them (the shadow is in no
    ``AutoRollbackConfiguration``). Missing data does not breach: a shadow sampling a quiet hour is silent.

    Attributes:
        alarms: rule -> alarm, in ``serving_contract.alarms.SHADOW_RULES`` order.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        metrics: EndpointMetrics,
        shadow_variant: str,
        slo: SloConfig,
        monitoring: MonitoringConfig,
    ) -> None:
        """
        Args:
            metrics: the endpoint's metric factory (its ``variant_names`` are the production variants; the
                shadow is named here).
            shadow_variant: ``serving.shadow.variant_name``.
            slo: the objectives the shadow is held to, as the canary is.
            monitoring: the windows (``canary_error_rate``, ``canary_ttft_p95``, ``canary_model_latency_p99``,
                ``engine_errors``).
        """
        super().__init__(scope, construct_id)
        names = dict(
            zip(
                alarm_names.SHADOW_RULES,
                alarm_names.shadow_alarm_names(metrics.endpoint_name, shadow_variant),
                strict=True,
            )
        )
        errors = metrics.error_rate(
            SageMakerMetric.INVOCATION_5XX_ERRORS,
            variants=[shadow_variant],
            period_s=monitoring.canary_error_rate.period_s,
            label=f"{shadow_variant} 5xx rate (%)",
        )
        period = monitoring.engine_errors.period_s
        engine = cloudwatch.MathExpression(
            expression="SUM([FILL(oom, 0), FILL(engine, 0)])",
            using_metrics={
                "oom": metrics.custom(
                    RequestMetric.OUT_OF_MEMORY_ERRORS, variant=shadow_variant, statistic="Sum", period_s=period
                ),
                "engine": metrics.custom(
                    RequestMetric.ENGINE_ERRORS, variant=shadow_variant, statistic="Sum", period_s=period
                ),
            },
            period=cdk.Duration.seconds(period),
            label=f"{shadow_variant} OOM + engine errors",
        )
        above = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
        rules: list[tuple[str, cloudwatch.IMetric, AlarmWindowConfig, float, cloudwatch.ComparisonOperator]] = [
            ("5xx-rate", errors, monitoring.canary_error_rate, slo.max_error_rate_percent, above),
            *(
                (
                    f"ttft-p95-{klass.value}",
                    metrics.custom(
                        RequestMetric.TIME_TO_FIRST_TOKEN,
                        variant=shadow_variant,
                        statistic="p95",
                        period_s=monitoring.canary_ttft_p95.period_s,
                        request_class=klass,
                    ),
                    monitoring.canary_ttft_p95,
                    slo.of(klass).ttft_p95_ms,
                    above,
                )
                for klass in RequestClass
            ),
            (
                "model-latency-p99",
                metrics.sagemaker(
                    SageMakerMetric.MODEL_LATENCY,
                    variant=shadow_variant,
                    statistic="p99",
                    period_s=monitoring.canary_model_latency_p99.period_s,
                ),
                monitoring.canary_model_latency_p99,
                monitoring.canary_model_latency_p99.threshold,
                above,
            ),
            (
                "engine-errors",
                engine,
                monitoring.engine_errors,
                monitoring.engine_errors.threshold,
                cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            ),
        ]
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        for rule, metric, window, threshold, comparison in rules:
            alarm = cloudwatch.Alarm(
                self,
                pascal_case(rule.replace("-", "_")),
                alarm_name=names[rule],
                alarm_description=(
                    f"[shadow, pages nobody] {shadow_variant} {rule} past {threshold:g} over {window.window_s} s; "
                    "blocks `mangaassist-ops shadow promote`."
                ),
                metric=metric,
                threshold=threshold,
                comparison_operator=comparison,
                evaluation_periods=window.evaluation_periods,
                datapoints_to_alarm=window.datapoints_to_alarm,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            guard_suppress(alarm, "CT.CLOUDWATCH.PR.1", NO_PAGE_REASON)
            self.alarms[rule] = alarm


def comparison_row(
    metrics: EndpointMetrics, *, primary: str, shadow: str, slo: SloConfig, period_s: int
) -> list[cloudwatch.IWidget]:
    """Dashboard widgets, primary beside shadow: p50/p95 TTFT of each request class against its SLO, the answers'
    length (the container's ``OutputTokens``, average and p90), and requests with 5xx errors."""

    def graph(
        title: str, left: Sequence[cloudwatch.IMetric], lines: Sequence[cloudwatch.HorizontalAnnotation] = ()
    ) -> cloudwatch.GraphWidget:
        return cloudwatch.GraphWidget(
            title=title,
            left=list(left),
            left_annotations=list(lines),
            left_y_axis=cloudwatch.YAxisProps(show_units=False, min=0),
            width=_THIRD_WIDTH,
            height=_GRAPH_HEIGHT,
            period=cdk.Duration.seconds(period_s),
        )

    def custom(
        metric: RequestMetric, variant: str, statistic: str, klass: RequestClass | None = None
    ) -> cloudwatch.IMetric:
        return metrics.custom(
            metric,
            variant=variant,
            statistic=statistic,
            period_s=period_s,
            request_class=klass,
            label=f"{variant} {statistic}",
        )

    ttft = [
        graph(
            f"Shadow vs primary: TTFT, {klass.value} requests (ms)",
            [
                custom(RequestMetric.TIME_TO_FIRST_TOKEN, v, stat, klass)
                for v in (primary, shadow)
                for stat in ("p50", "p95")
            ],
            [cloudwatch.HorizontalAnnotation(value=slo.of(klass).ttft_p95_ms, label="p95 SLO")],
        )
        for klass in RequestClass
    ]
    length = graph(
        "Shadow vs primary: answer length (output tokens)",
        [custom(RequestMetric.OUTPUT_TOKENS, v, stat) for v in (primary, shadow) for stat in ("Average", "p90")],
    )
    traffic = graph(
        "Shadow vs primary: requests and 5xx",
        [
            *(custom(RequestMetric.REQUESTS, v, "Sum") for v in (primary, shadow)),
            *(
                metrics.sagemaker(
                    SageMakerMetric.INVOCATION_5XX_ERRORS,
                    variant=v,
                    statistic="Sum",
                    period_s=period_s,
                    label=f"{v} 5xx",
                )
                for v in (primary, shadow)
            ),
        ],
    )
    return [*ttft, length, traffic]
