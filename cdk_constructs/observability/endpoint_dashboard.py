"""One CloudWatch dashboard per endpoint: the seeds' SLOs, per-variant and per-adapter views."""

from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from app_config.monitoring import MonitoringConfig
from app_config.slo import SloConfig
from cdk_constructs.observability.endpoint_metrics import EndpointMetrics
from serving_contract.metrics import (
    EngineMetric,
    RequestMetric,
    SageMakerInstanceMetric,
    SageMakerMetric,
)
from serving_contract.request_classes import RequestClass

_FULL_WIDTH = 24
_HALF_WIDTH = 12
_THIRD_WIDTH = 8
_GRAPH_HEIGHT = 6


@dataclass(frozen=True)
class BoundsLine:
    """Autoscaling bounds drawn on the capacity graph: a variant's instances, or (inference_components
    mode) the copies of the component behind ``variant_name``, shown as ``label``."""

    variant_name: str
    min_capacity: int
    max_capacity: int
    label: str | None = None
    unit: str = "instances"

    @property
    def shown_as(self) -> str:
        """The name the dashboard shows: the label when set, else the variant name."""
        return self.label or self.variant_name


def _line(value: float, label: str) -> cloudwatch.HorizontalAnnotation:
    return cloudwatch.HorizontalAnnotation(value=value, label=label)


class EndpointDashboard(Construct):
    """The endpoint's dashboard: SLO graphs with threshold lines, then per-variant and per-adapter rows.

    Instance count: SageMaker publishes no instance-count metric for real-time endpoint
    variants, so the graph uses the ``SampleCount`` of ``/aws/sagemaker/Endpoints``
    ``CPUUtilization`` per minute; every InService instance reports one datapoint per
    minute (the default publishing frequency), so the count equals the instances.

    Attributes:
        dashboard: the ``AWS::CloudWatch::Dashboard``.
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
        fleet_bounds: Sequence[BoundsLine],
        gpus_per_instance: int,
        alarms: Sequence[cloudwatch.IAlarm],
        shadow_row: Sequence[cloudwatch.IWidget] = (),
    ) -> None:
        """
        Args:
            metrics: metric factory of the endpoint.
            config: alarm thresholds (drawn as lines) and the graph period.
            slo: the SLO targets (lines; TTFT per request class, one graph each).
            adapters: LoRA adapter names (one line each on the per-adapter graphs).
            fleet_bounds: min/max instances of each variant.
            gpus_per_instance: GPU memory is percent x device count; the line is scaled by it.
            alarms: alarms shown in the alarm-status widget.
            shadow_row: the shadow variant beside the primary (``shadow_comparison.comparison_row``), after the
                SLO row; empty without a shadow.
        """
        super().__init__(scope, construct_id)
        self._metrics = metrics
        self._config = config
        self._slo = slo
        self._adapters = list(adapters)
        self._period = config.dashboard_period_s
        # Built in this order (the rows' metrics, then the dashboard), as the widgets are laid out.
        rows = [
            self._slo_row(),
            *([list(shadow_row)] if shadow_row else []),
            self._fleet_bounds_row(fleet_bounds),
            self._engine_row(gpus_per_instance),
            self._adapter_row(),
        ]
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            default_interval=cdk.Duration.hours(3),
            widgets=[
                [self._header()],
                [cloudwatch.AlarmStatusWidget(alarms=list(alarms), title="Alarms", width=_FULL_WIDTH, height=4)],
                *rows,
            ],
        )

    def _header(self) -> cloudwatch.TextWidget:
        """The endpoint's name and its SLOs, in words."""
        slo = self._slo
        ttft = ", ".join(
            f"{k.value} TTFT p50 < {slo.of(k).ttft_p50_ms:g} ms, p95 < {slo.of(k).ttft_p95_ms:g} ms"
            for k in RequestClass
        )
        return cloudwatch.TextWidget(
            markdown=(
                f"# {self._metrics.endpoint_name}\n"
                f"SLOs (config slo; seeds 000, 002): availability {slo.availability_percent:g} %, {ttft}"
                f", p99 latency < {slo.latency_p99_ms:g} ms, "
                f"queue wait p95 < {slo.queue_wait_p95_ms:g} ms, error rate < {slo.error_rate_percent:g} %."
                " Runbook: docs/observability.md."
            ),
            width=_FULL_WIDTH,
            height=2,
        )

    def _slo_row(self) -> list[cloudwatch.IWidget]:
        """Availability, error rate, TTFT per request class, latency, queue wait and ModelLatency, with SLO lines."""
        metrics, config, slo, variants = self._metrics, self._config, self._slo, self._metrics.variant_names
        # What the error-rate alarm reads: 5xx answers and streams that failed after their 200.
        five_xx_rate = metrics.served_error_rate(
            variants=variants, period_s=self._period, label="5xx + stream error rate (%)"
        )
        four_xx_rate = metrics.error_rate(
            SageMakerMetric.INVOCATION_4XX_ERRORS, variants=variants, period_s=self._period, label="4xx rate (%)"
        )
        availability = cloudwatch.MathExpression(
            expression="100 - rate5xx",
            using_metrics={"rate5xx": five_xx_rate},
            period=cdk.Duration.seconds(self._period),
            label="availability (%)",
        )
        model_latency = [
            metrics.sagemaker(
                SageMakerMetric.MODEL_LATENCY, variant=v, statistic="p99", period_s=self._period, label=f"{v} p99"
            )
            for v in variants
        ]
        return [
            self._graph("Availability (%)", [availability], [_line(slo.availability_percent, "SLO")], left_label="%"),
            self._graph(
                "Error rate (%)",
                [five_xx_rate, four_xx_rate],
                [_line(slo.error_rate_percent, "5xx SLO"), _line(config.server_error_rate.threshold, "5xx alarm")],
                left_label="%",
            ),
            *(self._ttft_graph(klass) for klass in RequestClass),
            self._graph(
                "Request latency p99 (ms)",
                self._per_variant(RequestMetric.REQUEST_LATENCY, "p99"),
                [_line(slo.latency_p99_ms, "p99 SLO")],
                left_label="ms",
            ),
            # vLLM's queue-time histogram cannot resolve a p95 under 300 ms (its first bucket),
            # so the worst per-interval mean is drawn against the seed's p95 SLO line.
            self._graph(
                "Queue wait, worst interval mean (ms)",
                self._per_variant(EngineMetric.QUEUE_WAIT_AVERAGE, "Maximum"),
                [_line(slo.queue_wait_p95_ms, "p95 SLO")],
                left_label="ms",
            ),
            self._graph(
                "ModelLatency p99 (us, SageMaker)",
                model_latency,
                [_line(config.model_latency_p99.threshold, "alarm")],
                left_label="us",
            ),
        ]

    def _ttft_graph(self, klass: RequestClass) -> cloudwatch.GraphWidget:
        """TTFT p50 and p95 of one request class, against that class's SLO."""
        return self._graph(
            f"Time to first token, {klass.value} requests (ms)",
            self._per_variant(RequestMetric.TIME_TO_FIRST_TOKEN, "p50", klass)
            + self._per_variant(RequestMetric.TIME_TO_FIRST_TOKEN, "p95", klass),
            [
                _line(self._slo.of(klass).ttft_p50_ms, "p50 SLO"),
                _line(self._slo.of(klass).ttft_p95_ms, "p95 SLO = alarm"),
            ],
            left_label="ms",
        )

    def _fleet_bounds_row(self, fleet_bounds: Sequence[BoundsLine]) -> list[cloudwatch.IWidget]:
        """Instances (or copies) against their autoscaling bounds, queue depth, invocations."""
        metrics, period = self._metrics, self._period
        units = fleet_bounds[0].unit if fleet_bounds else "instances"
        counts = [
            metrics.instance(
                SageMakerInstanceMetric.CPU_UTILIZATION,
                variant=c.variant_name,
                statistic="SampleCount",
                period_s=period,
                label=f"{c.shown_as} {c.unit}",
            )
            for c in fleet_bounds
        ]
        bounds = [
            line
            for c in fleet_bounds
            for line in (_line(c.min_capacity, f"{c.shown_as} min"), _line(c.max_capacity, f"{c.shown_as} max"))
        ]
        queue = self._per_variant(EngineMetric.QUEUE_DEPTH, "Average") + self._per_variant(
            EngineMetric.RUNNING_REQUESTS, "Average"
        )
        invocations = [
            metrics.sagemaker(SageMakerMetric.INVOCATIONS, variant=v, statistic="Sum", period_s=period, label=f"{v}")
            for v in metrics.variant_names
        ]
        per = "variant" if units == "instances" else "component"
        return [
            self._graph(f"{units.capitalize()} per {per} (min/max)", counts, bounds, left_label=units),
            self._graph(
                "Queue depth and running requests",
                queue,
                [_line(self._config.queue_build_up.threshold, "queue alarm")],
                left_label="requests",
            ),
            self._graph("Invocations per variant", invocations, left_label="requests"),
        ]

    def _engine_row(self, gpus_per_instance: int) -> list[cloudwatch.IWidget]:
        """KV cache, prefix cache, token throughput, GPU memory and the engine's errors."""
        config, per_variant = self._config, self._per_variant
        gpu = [
            self._metrics.instance(m, variant=v, statistic="Maximum", period_s=self._period, label=f"{v} {m.value}")
            for v in self._metrics.variant_names
            for m in (SageMakerInstanceMetric.GPU_MEMORY_UTILIZATION, SageMakerInstanceMetric.GPU_UTILIZATION)
        ]
        return [
            self._graph(
                "KV cache usage (%)",
                per_variant(EngineMetric.KV_CACHE_USAGE, "Average"),
                [_line(config.kv_cache_pressure.threshold, "alarm")],
                left_label="%",
            ),
            self._graph(
                "Prefix cache hit rate (%)",
                per_variant(EngineMetric.PREFIX_CACHE_HIT_RATE, "Average"),
                [_line(config.prefix_cache_degradation.threshold, "alarm")],
                left_label="%",
            ),
            self._graph(
                "Tokens per second (per instance)",
                per_variant(EngineMetric.PROMPT_TOKENS_PER_SECOND, "Average")
                + per_variant(EngineMetric.GENERATION_TOKENS_PER_SECOND, "Average"),
                left_label="tokens/s",
            ),
            # GPU memory is percent x device count (CloudWatch's /aws/sagemaker/Endpoints), so is the line.
            self._graph(
                "GPU memory and utilization (% x GPUs)",
                gpu,
                [_line(config.gpu_memory_utilization.threshold * gpus_per_instance, "memory alarm")],
                left_label="%",
            ),
            self._graph(
                "Preemptions and engine errors",
                per_variant(EngineMetric.PREEMPTIONS, "Sum")
                + per_variant(RequestMetric.ENGINE_ERRORS, "Sum")
                + per_variant(RequestMetric.OUT_OF_MEMORY_ERRORS, "Sum"),
                left_label="count",
            ),
        ]

    def _adapter_row(self) -> list[cloudwatch.IWidget]:
        """Per LoRA adapter: latency against its ceiling, TTFT, requests and output tokens."""
        return [
            self._graph(
                "Per adapter: request latency p95 (ms)",
                self._per_adapter(RequestMetric.REQUEST_LATENCY, "p95"),
                [_line(self._config.adapter_ceiling_ms(a), f"{a} ceiling") for a in self._adapters],
                width=_HALF_WIDTH,
                left_label="ms",
            ),
            # Both classes mixed (no per-adapter-and-class dimension set): for comparing adapters, not the SLO.
            self._graph(
                "Per adapter: TTFT p95, both classes (ms)",
                self._per_adapter(RequestMetric.TIME_TO_FIRST_TOKEN, "p95"),
                width=_HALF_WIDTH,
                left_label="ms",
            ),
            self._graph(
                "Per adapter: requests",
                self._per_adapter(RequestMetric.REQUESTS, "Sum"),
                width=_HALF_WIDTH,
                left_label="requests",
            ),
            self._graph(
                "Per adapter: output tokens",
                self._per_adapter(RequestMetric.OUTPUT_TOKENS, "Sum"),
                width=_HALF_WIDTH,
                left_label="tokens",
            ),
        ]

    def _per_variant(
        self, metric: EngineMetric | RequestMetric, statistic: str, request_class: RequestClass | None = None
    ) -> list[cloudwatch.IMetric]:
        """One series of ``metric`` per variant, labelled ``<variant> <statistic>``."""
        return [
            self._metrics.custom(
                metric,
                variant=v,
                statistic=statistic,
                period_s=self._period,
                request_class=request_class,
                label=f"{v} {statistic}",
            )
            for v in self._metrics.variant_names
        ]

    def _per_adapter(self, metric: RequestMetric, statistic: str) -> list[cloudwatch.IMetric]:
        """One series of ``metric`` per adapter, across the variants (summed for ``Sum``, else the maximum)."""
        return [self._adapter_series(metric, statistic, adapter) for adapter in self._adapters]

    def _adapter_series(self, metric: RequestMetric, statistic: str, adapter: str) -> cloudwatch.IMetric:
        def one_variant(variant: str) -> cloudwatch.IMetric:
            return self._metrics.custom(
                metric, variant=variant, statistic=statistic, period_s=self._period, adapter=adapter
            )

        return self._metrics.across_variants(
            one_variant, combine="SUM" if statistic == "Sum" else "MAX", period_s=self._period, label=adapter
        )

    def _graph(
        self,
        title: str,
        left: Sequence[cloudwatch.IMetric],
        annotations: Sequence[cloudwatch.HorizontalAnnotation] = (),
        width: int = _THIRD_WIDTH,
        left_label: str | None = None,
    ) -> cloudwatch.GraphWidget:
        return cloudwatch.GraphWidget(
            title=title,
            left=list(left),
            left_annotations=list(annotations),
            left_y_axis=cloudwatch.YAxisProps(label=left_label, show_units=False, min=0),
            width=width,
            height=_GRAPH_HEIGHT,
            period=cdk.Duration.seconds(self._period),
        )
