"""CloudWatch metrics of one endpoint, built only from the names in ``serving_contract.metrics``.

Not a construct: a small factory the alarm, guardrail and dashboard constructs share, so
every (namespace, metric name, dimensions) triple is spelled in one place.

The container publishes every metric with the dimensions (EndpointName, VariantName)
(plus Adapter for per-adapter figures) and ``AWS/SageMaker`` has no endpoint-only
dimension either, so an endpoint-wide figure is a metric-math combination of the
per-variant series: ``MAX`` for gauges and percentiles (the worst variant), ``SUM`` for
counts.

In inference_components mode the callers still name variants; the factory reads SageMaker's
metrics of the variant's base component instead (``InferenceComponentName``; invocation metrics
in ``AWS/SageMaker``, utilization as ``...Normalized`` in ``/aws/sagemaker/InferenceComponents``)
and writes each adapter's ``Adapter`` dimension as the gateway emits it (its component's name).
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch

from serving_contract.metrics import (
    SAGEMAKER_COMPONENT_NAMESPACE,
    SAGEMAKER_INSTANCE_NAMESPACE,
    SAGEMAKER_NAMESPACE,
    BudgetMetric,
    ClientMetric,
    Dimension,
    EngineMetric,
    RequestMetric,
    SageMakerComponentMetric,
    SageMakerInstanceMetric,
    SageMakerMetric,
)
from serving_contract.request_classes import RequestClass

# An instance metric's counterpart per inference component (same meaning, plain percent).
_COMPONENT_METRIC = {
    SageMakerInstanceMetric.GPU_UTILIZATION: SageMakerComponentMetric.GPU_UTILIZATION,
    SageMakerInstanceMetric.GPU_MEMORY_UTILIZATION: SageMakerComponentMetric.GPU_MEMORY_UTILIZATION,
    SageMakerInstanceMetric.CPU_UTILIZATION: SageMakerComponentMetric.CPU_UTILIZATION,
    SageMakerInstanceMetric.MEMORY_UTILIZATION: SageMakerComponentMetric.MEMORY_UTILIZATION,
}

Combine = Literal["MAX", "SUM"]
PerVariant = Callable[[str], cloudwatch.IMetric]


class EndpointMetrics:
    """Metric factory for one endpoint.

    Args:
        endpoint_name: the SageMaker endpoint name (the ``EndpointName`` dimension).
        variant_names: production variants, primary first.
        namespace: namespace of the container's EMF metrics.
        components: variant -> its base inference component (inference_components mode).
        adapter_dimensions: adapter name -> the ``Adapter`` dimension value the gateway emits
            (default: the name itself).
    """

    def __init__(
        self,
        *,
        endpoint_name: str,
        variant_names: Sequence[str],
        namespace: str,
        components: Mapping[str, str] | None = None,
        adapter_dimensions: Mapping[str, str] | None = None,
    ) -> None:
        self.endpoint_name = endpoint_name
        self.variant_names = tuple(variant_names)
        self.namespace = namespace
        self.components = dict(components or {})
        self.adapter_dimensions = dict(adapter_dimensions or {})
        self._expressions = 0

    def _ids(self) -> str:
        # Metric ids must be unique within one alarm or graph; a running number per
        # expression keeps two expressions of one graph (5xx and 4xx rate) apart.
        self._expressions += 1
        return f"x{self._expressions}"

    def _dimensions(self, variant: str, adapter: str | None = None) -> dict[str, str]:
        dims = {Dimension.ENDPOINT.value: self.endpoint_name, Dimension.VARIANT.value: variant}
        if adapter is not None:
            dims[Dimension.ADAPTER.value] = self.adapter_dimensions.get(adapter, adapter)
        return dims

    def _sagemaker_dimensions(self, variant: str) -> dict[str, str]:
        component = self.components.get(variant)
        if component is not None:
            return {Dimension.COMPONENT.value: component}
        return self._dimensions(variant)

    def _metric(
        self,
        namespace: str,
        name: str,
        *,
        dimensions: dict[str, str],
        statistic: str,
        period_s: int,
        label: str | None,
    ) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=namespace,
            metric_name=name,
            dimensions_map=dimensions,
            statistic=statistic,
            period=cdk.Duration.seconds(period_s),
            label=label,
        )

    def custom(
        self,
        metric: EngineMetric | RequestMetric | BudgetMetric,
        *,
        variant: str,
        statistic: str,
        period_s: int,
        adapter: str | None = None,
        request_class: RequestClass | None = None,
        label: str | None = None,
    ) -> cloudwatch.Metric:
        """A metric the container emits (``serving_contract.metrics``), for one variant; with
        ``request_class``, that class's series (the ``RequestClass`` dimension)."""
        dimensions = self._dimensions(variant, adapter)
        if request_class is not None:
            dimensions[Dimension.REQUEST_CLASS.value] = request_class.value
        return self._metric(
            self.namespace, metric.value, dimensions=dimensions, statistic=statistic, period_s=period_s, label=label
        )

    def sagemaker(
        self, metric: SageMakerMetric, *, variant: str, statistic: str, period_s: int, label: str | None = None
    ) -> cloudwatch.Metric:
        """An ``AWS/SageMaker`` invocation metric of one variant, or of its base component
        (latencies in microseconds)."""
        dimensions = self._sagemaker_dimensions(variant)
        return self._metric(
            SAGEMAKER_NAMESPACE,
            metric.value,
            dimensions=dimensions,
            statistic=statistic,
            period_s=period_s,
            label=label,
        )

    def instance(
        self,
        metric: SageMakerInstanceMetric,
        *,
        variant: str,
        statistic: str,
        period_s: int,
        label: str | None = None,
    ) -> cloudwatch.Metric:
        """A ``/aws/sagemaker/Endpoints`` instance metric of one variant (percent x device count),
        or the ``/aws/sagemaker/InferenceComponents`` ``...Normalized`` one of its base component
        (percent)."""
        if variant in self.components:
            return self._metric(
                SAGEMAKER_COMPONENT_NAMESPACE,
                _COMPONENT_METRIC[metric].value,
                dimensions=self._sagemaker_dimensions(variant),
                statistic=statistic,
                period_s=period_s,
                label=label,
            )
        dimensions = self._dimensions(variant)
        return self._metric(
            SAGEMAKER_INSTANCE_NAMESPACE,
            metric.value,
            dimensions=dimensions,
            statistic=statistic,
            period_s=period_s,
            label=label,
        )

    def across_variants(
        self, per_variant: PerVariant, *, combine: Combine, period_s: int, label: str
    ) -> cloudwatch.MathExpression:
        """``MAX([...])`` or ``SUM([...])`` of ``per_variant(v)`` over every variant.

        A variant with no datapoint drops out of MAX/SUM; when no variant has one, the
        expression has no datapoint and the alarm's missing-data treatment decides.
        """
        prefix = self._ids()
        using = {f"{prefix}v{i}": per_variant(name) for i, name in enumerate(self.variant_names)}
        return cloudwatch.MathExpression(
            expression=f"{combine}([{', '.join(using)}])",
            using_metrics=using,
            period=cdk.Duration.seconds(period_s),
            label=label,
        )

    def worst_or_silent(
        self, per_variant: PerVariant, *, period_s: int, label: str, silent_value: float
    ) -> cloudwatch.MathExpression:
        """``MAX([...])`` of ``per_variant(v)`` over every variant, as :meth:`across_variants`, except that a period in
        which SageMaker counted invocations of a variant whose container reported no request reads
        ``silent_value`` (issue 53, finding 15).

        The container's own metrics (TTFT, request latency) have no datapoint when it stops reporting, and an alarm
        that treats that as not breaching saw a silent container as an idle one. Here silence while SageMaker counts
        invocations (``Invocations`` > 0, the container's ``Requests`` 0) is a value above the alarm's threshold;
        an idle variant (no invocations) still has no datapoint, so an idle fleet stays OK.
        """
        prefix = self._ids()
        using: dict[str, cloudwatch.IMetric] = {}
        silent: list[str] = []
        for i, variant in enumerate(self.variant_names):
            using[f"{prefix}v{i}"] = per_variant(variant)
            using[f"{prefix}i{i}"] = self.sagemaker(
                SageMakerMetric.INVOCATIONS, variant=variant, statistic="Sum", period_s=period_s
            )
            using[f"{prefix}r{i}"] = self.custom(
                RequestMetric.REQUESTS, variant=variant, statistic="Sum", period_s=period_s
            )
            silent.append(f"(FILL({prefix}i{i}, 0) > 0 AND FILL({prefix}r{i}, 0) == 0)")
        worst = f"MAX([{', '.join(f'{prefix}v{i}' for i in range(len(self.variant_names)))}])"
        return cloudwatch.MathExpression(
            expression=f"IF({' OR '.join(silent)}, {silent_value:g}, {worst})",
            using_metrics=using,
            period=cdk.Duration.seconds(period_s),
            label=label,
        )

    def error_rate(
        self, errors: SageMakerMetric, *, variants: Sequence[str], period_s: int, label: str
    ) -> cloudwatch.MathExpression:
        """``errors / Invocations x 100`` (percent) summed over ``variants``.

        Periods without invocations yield no datapoint (``IF`` without a false branch returns
        none; CloudWatch user guide, "Using IF expressions")
        rather than a division by zero, so "no traffic" reads as missing data.
        """
        prefix = self._ids()
        using: dict[str, cloudwatch.IMetric] = {}
        for i, variant in enumerate(variants):
            using[f"{prefix}e{i}"] = self.sagemaker(errors, variant=variant, statistic="Sum", period_s=period_s)
            using[f"{prefix}i{i}"] = self.sagemaker(
                SageMakerMetric.INVOCATIONS, variant=variant, statistic="Sum", period_s=period_s
            )
        total_errors = "SUM([" + ", ".join(f"FILL({prefix}e{i}, 0)" for i in range(len(variants))) + "])"
        total_invocations = "SUM([" + ", ".join(f"FILL({prefix}i{i}, 0)" for i in range(len(variants))) + "])"
        return cloudwatch.MathExpression(
            expression=f"IF({total_invocations} > 0, 100 * {total_errors} / {total_invocations})",
            using_metrics=using,
            period=cdk.Duration.seconds(period_s),
            label=label,
        )

    def served_error_rate(
        self, *, variants: Sequence[str], period_s: int, label: str, guarded: bool = False
    ) -> cloudwatch.MathExpression:
        """What callers felt as errors, percent of invocations, summed over ``variants``:
        ``(Invocation5XXErrors + StreamErrors) / Invocations x 100``.

        ``StreamErrors`` (the container's) are streams answered 200 that ended with an error event,
        which SageMaker counts as successes (issue 49, finding 7). Without ``guarded``, periods without
        invocations have no datapoint, as :meth:`error_rate`. With ``guarded`` (a rollback alarm, whose
        missing data breaches) every period has a value: 0 without invocations, and 100 when SageMaker
        counted invocations but the container reported no request at all (its metrics stopped: a
        release that stops emitting them must not roll forward).
        """
        prefix = self._ids()
        using: dict[str, cloudwatch.IMetric] = {}
        for i, variant in enumerate(variants):
            using[f"{prefix}e{i}"] = self.sagemaker(
                SageMakerMetric.INVOCATION_5XX_ERRORS, variant=variant, statistic="Sum", period_s=period_s
            )
            using[f"{prefix}i{i}"] = self.sagemaker(
                SageMakerMetric.INVOCATIONS, variant=variant, statistic="Sum", period_s=period_s
            )
            using[f"{prefix}s{i}"] = self.custom(
                RequestMetric.STREAM_ERRORS, variant=variant, statistic="Sum", period_s=period_s
            )
            if guarded:
                using[f"{prefix}r{i}"] = self.custom(
                    RequestMetric.REQUESTS, variant=variant, statistic="Sum", period_s=period_s
                )
        count = len(variants)
        errors = _sum(prefix, ("e", "s"), count)
        invocations = _sum(prefix, ("i",), count)
        rate = f"100 * {errors} / {invocations}"
        if guarded:
            requests = _sum(prefix, ("r",), count)
            expression = f"IF({invocations} > 0, IF({requests} > 0, {rate}, 100), 0)"
        else:
            expression = f"IF({invocations} > 0, {rate})"
        return cloudwatch.MathExpression(
            expression=expression, using_metrics=using, period=cdk.Duration.seconds(period_s), label=label
        )

    def client_error_excess(
        self, *, variant: str, period_s: int, baseline_cap_percent: float, label: str
    ) -> cloudwatch.MathExpression:
        """``variant``'s 4xx rate less the baseline's, percentage points, a value in every period.

        The baseline is the other variants' ``Invocation4XXErrors / Invocations x 100`` (the same clients,
        split by weight), capped at ``baseline_cap_percent``: a release that answers 4xx to everything on
        every variant still stands out. A variant without invocations reads 0; without other variants (a
        single base component) the baseline is 0 and this is the variant's own 4xx rate.
        """
        prefix = self._ids()
        using: dict[str, cloudwatch.IMetric] = {
            f"{prefix}c": self.sagemaker(
                SageMakerMetric.INVOCATION_4XX_ERRORS, variant=variant, statistic="Sum", period_s=period_s
            ),
            f"{prefix}i": self.sagemaker(
                SageMakerMetric.INVOCATIONS, variant=variant, statistic="Sum", period_s=period_s
            ),
        }
        others = [name for name in self.variant_names if name != variant]
        for i, other in enumerate(others):
            using[f"{prefix}oc{i}"] = self.sagemaker(
                SageMakerMetric.INVOCATION_4XX_ERRORS, variant=other, statistic="Sum", period_s=period_s
            )
            using[f"{prefix}oi{i}"] = self.sagemaker(
                SageMakerMetric.INVOCATIONS, variant=other, statistic="Sum", period_s=period_s
            )
        rate = f"IF(FILL({prefix}i, 0) > 0, 100 * FILL({prefix}c, 0) / FILL({prefix}i, 0), 0)"
        if others:
            other_errors, other_invocations = _sum(prefix, ("oc",), len(others)), _sum(prefix, ("oi",), len(others))
            baseline = f"IF({other_invocations} > 0, 100 * {other_errors} / {other_invocations}, 0)"
            cap = f"{baseline_cap_percent:g}"
            # IF, not MIN([..., cap]): MIN's array takes time series, and a scalar in it is not documented.
            expression = f"{rate} - IF({baseline} > {cap}, {cap}, {baseline})"
        else:
            expression = rate
        return cloudwatch.MathExpression(
            expression=expression, using_metrics=using, period=cdk.Duration.seconds(period_s), label=label
        )

    def filled(self, metric: cloudwatch.IMetric, *, period_s: int, label: str) -> cloudwatch.MathExpression:
        """``FILL(metric, 0)``: a latency that reads 0 in periods without requests, so a rollback alarm
        whose missing data breaches is breached only when CloudWatch has no series at all."""
        key = f"{self._ids()}m"
        return cloudwatch.MathExpression(
            expression=f"FILL({key}, 0)",
            using_metrics={key: metric},
            period=cdk.Duration.seconds(period_s),
            label=label,
        )

    def request_share(self, metric: BudgetMetric, *, period_s: int, label: str) -> cloudwatch.MathExpression:
        """``metric / Requests x 100`` (percent of the container's requests) summed over every variant;
        no datapoint in periods without requests (as :meth:`error_rate`)."""
        prefix = self._ids()
        using: dict[str, cloudwatch.IMetric] = {}
        for i, variant in enumerate(self.variant_names):
            using[f"{prefix}b{i}"] = self.custom(metric, variant=variant, statistic="Sum", period_s=period_s)
            using[f"{prefix}r{i}"] = self.custom(
                RequestMetric.REQUESTS, variant=variant, statistic="Sum", period_s=period_s
            )
        count = len(self.variant_names)
        part = "SUM([" + ", ".join(f"FILL({prefix}b{i}, 0)" for i in range(count)) + "])"
        total = "SUM([" + ", ".join(f"FILL({prefix}r{i}, 0)" for i in range(count)) + "])"
        return cloudwatch.MathExpression(
            expression=f"IF({total} > 0, 100 * {part} / {total})",
            using_metrics=using,
            period=cdk.Duration.seconds(period_s),
            label=label,
        )

    def client_share(self, metric: ClientMetric, *, period_s: int, label: str) -> cloudwatch.MathExpression:
        """``metric / ClientRequests x 100`` (percent of the client library's calls to this endpoint; dimension
        EndpointName only); no datapoint in periods without calls (as :meth:`error_rate`)."""
        prefix = self._ids()
        dimensions = {Dimension.ENDPOINT.value: self.endpoint_name}
        using: dict[str, cloudwatch.IMetric] = {
            f"{prefix}m": self._metric(
                self.namespace, metric.value, dimensions=dimensions, statistic="Sum", period_s=period_s, label=None
            ),
            f"{prefix}r": self._metric(
                self.namespace,
                ClientMetric.REQUESTS.value,
                dimensions=dimensions,
                statistic="Sum",
                period_s=period_s,
                label=None,
            ),
        }
        return cloudwatch.MathExpression(
            expression=f"IF(FILL({prefix}r, 0) > 0, 100 * FILL({prefix}m, 0) / FILL({prefix}r, 0))",
            using_metrics=using,
            period=cdk.Duration.seconds(period_s),
            label=label,
        )


def _sum(prefix: str, kinds: Sequence[str], count: int) -> str:
    """``SUM([FILL(<prefix><kind><i>, 0), ...])`` over every kind and index: a missing count reads 0."""
    return "SUM([" + ", ".join(f"FILL({prefix}{kind}{i}, 0)" for kind in kinds for i in range(count)) + "])"
