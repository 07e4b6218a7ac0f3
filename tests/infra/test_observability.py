"""Alarms, guardrail alarms, alarm topic and dashboard: template assertions.

Every expected number below is read from the config the synth used (defaults = the seeds'
values), so these tests check wiring and semantics, not copies of constants.
"""

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

import pytest
from aws_cdk import assertions

from app_config.monitoring import AlarmRuleConfig, AlarmWindowConfig
from serving_contract import alarms as alarm_names
from serving_contract import metrics
from serving_contract.request_classes import RequestClass
from tests.metric_refs import (
    dashboard_bodies,
    dashboard_metrics,
    evaluate_metric_math,
    metric_refs,
    metrics_read,
    resources,
)
from tests.synth_helpers import Synth

# ---------------------------------------------------------------------------------------
# helpers


def _resources(template: Mapping[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    return resources(template, resource_type)


def _alarms_by_name(synth: Synth, unit: str) -> dict[str, dict[str, Any]]:
    """Named alarms: the health alarms. Step-scaling triggers keep generated names on purpose
    (they sit in ALARM during normal scale-out and must not look like health alarms)."""
    return {
        v["Properties"]["AlarmName"]: v["Properties"]
        for v in _resources(synth.template_json(unit), "AWS::CloudWatch::Alarm").values()
        if "AlarmName" in v["Properties"]
    }


def _metric_stats(alarm: dict[str, Any]) -> list[tuple[str, str, str, int, dict[str, str]]]:
    """(namespace, metric, stat, period, dimensions) of every metric an alarm reads."""
    if "MetricName" in alarm:
        dims = {d["Name"]: d["Value"] for d in alarm.get("Dimensions", [])}
        stat = str(alarm.get("Statistic") or alarm.get("ExtendedStatistic"))
        return [(str(alarm["Namespace"]), str(alarm["MetricName"]), stat, int(alarm["Period"]), dims)]
    found = []
    for query in alarm["Metrics"]:
        if "MetricStat" in query:
            stat = query["MetricStat"]
            metric = stat["Metric"]
            dims = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
            found.append((metric["Namespace"], metric["MetricName"], stat["Stat"], stat["Period"], dims))
    return found


def _expression(alarm: dict[str, Any]) -> str:
    returned = [q for q in alarm["Metrics"] if q.get("ReturnData", True)]
    assert len(returned) == 1
    return str(returned[0]["Expression"])


_dashboard_bodies = dashboard_bodies
_dashboard_metrics = dashboard_metrics
_metric_refs = metric_refs


def _check_rule(alarm: dict[str, Any], rule: AlarmWindowConfig, threshold: float | None = None) -> None:
    assert threshold is not None or isinstance(rule, AlarmRuleConfig)
    assert alarm["Threshold"] == (threshold if threshold is not None else getattr(rule, "threshold", None))
    assert alarm["EvaluationPeriods"] == rule.evaluation_periods
    for _, _, _, period, _ in _metric_stats(alarm):
        assert period == rule.period_s


# ---------------------------------------------------------------------------------------
# every alarm: metric, statistic, period, threshold, comparison, missing data


class AlarmCase(NamedTuple):
    """What one alarm must look like."""

    slug: str
    field: str  # the MonitoringConfig field holding its rule
    names: set[str]  # every metric the alarm reads
    stat: str
    comparison: str
    missing: str
    critical: bool


ALARMS = [
    AlarmCase("queue-build-up", "queue_build_up", {"QueueDepth"}, "Average", "GreaterThanThreshold", "breaching", True),
    AlarmCase(
        "kv-cache-pressure",
        "kv_cache_pressure",
        {"KvCacheUsagePercent"},
        "Average",
        "GreaterThanThreshold",
        "missing",
        False,
    ),
    AlarmCase(
        "context-budget-drift",
        "context_budget_drift",
        {"TokenBudgetTrimmed", "Requests"},
        "Sum",
        "GreaterThanThreshold",
        "notBreaching",
        False,
    ),
    AlarmCase(
        "engine-errors",
        "engine_errors",
        {"OutOfMemoryErrors", "EngineErrors"},
        "Sum",
        "GreaterThanOrEqualToThreshold",
        "notBreaching",
        True,
    ),
    AlarmCase(
        "prefix-cache-degraded",
        "prefix_cache_degradation",
        {"PrefixCacheHitRatePercent"},
        "Average",
        "LessThanThreshold",
        "notBreaching",
        False,
    ),
    AlarmCase(
        "5xx-rate",
        "server_error_rate",
        # StreamErrors: a stream that failed after its 200 is a success to SageMaker (issue 49).
        {"Invocation5XXErrors", "Invocations", "StreamErrors"},
        "Sum",
        "GreaterThanThreshold",
        "notBreaching",
        True,
    ),
    AlarmCase(
        "4xx-rate",
        "client_error_rate",
        {"Invocation4XXErrors", "Invocations"},
        "Sum",
        "GreaterThanThreshold",
        "notBreaching",
        False,
    ),
    AlarmCase(
        "model-latency-p99",
        "model_latency_p99",
        {"ModelLatency"},
        "p99",
        "GreaterThanThreshold",
        "notBreaching",
        False,
    ),
    AlarmCase(
        "gpu-memory-high",
        "gpu_memory_utilization",
        {"GPUMemoryUtilization"},
        "Maximum",
        "GreaterThanThreshold",
        "missing",
        False,
    ),
]


@pytest.mark.parametrize("case", ALARMS, ids=[case.slug for case in ALARMS])
def test_alarm_semantics(default_synth: Synth, case: AlarmCase) -> None:
    config = default_synth.config
    alarm = _alarms_by_name(default_synth, "Observability")[f"{config.endpoint_name}-{case.slug}"]
    read = _metric_stats(alarm)
    assert {name for _, name, _, _, _ in read} == case.names
    assert {s for _, _, s, _, _ in read} == {case.stat}
    # Every variant's series is read: the alarm covers the whole endpoint.
    assert {dims["VariantName"] for *_, dims in read} == {v.variant_name for v in config.serving.variants}
    rule: AlarmRuleConfig = getattr(config.monitoring, case.field)
    gpus = config.engine.tensor_parallel_size
    threshold = rule.threshold * gpus if case.field == "gpu_memory_utilization" else None
    _check_rule(alarm, rule, threshold)
    assert alarm["ComparisonOperator"] == case.comparison
    assert alarm["TreatMissingData"] == case.missing
    assert alarm["AlarmDescription"].startswith("[critical]" if case.critical else "[warning]")
    # Warnings notify directly; criticals page only through the composite alarm.
    assert bool(alarm.get("AlarmActions")) is not case.critical


@pytest.mark.parametrize("klass", list(RequestClass), ids=[k.value for k in RequestClass])
def test_one_ttft_alarm_per_request_class_at_its_slo(default_synth: Synth, klass: RequestClass) -> None:
    config = default_synth.config
    alarm = _alarms_by_name(default_synth, "Observability")[f"{config.endpoint_name}-ttft-p95-high-{klass.value}"]
    read = [r for r in _metric_stats(alarm) if r[1] == "TimeToFirstToken"]
    assert {(name, stat) for _, name, stat, _, _ in read} == {("TimeToFirstToken", "p95")}
    assert {dims["VariantName"] for *_, dims in read} == {v.variant_name for v in config.serving.variants}
    # Beside it, per variant, what tells a silent container from an idle one (issue 53, finding 15).
    silence = {(name, stat) for _, name, stat, _, _ in _metric_stats(alarm) if name != "TimeToFirstToken"}
    assert silence == {("Invocations", "Sum"), ("Requests", "Sum")}
    assert {dims["RequestClass"] for *_, dims in read} == {klass.value}
    _check_rule(alarm, config.monitoring.high_ttft, config.slo.of(klass).ttft_p95_ms)
    assert (alarm["ComparisonOperator"], alarm["TreatMissingData"]) == ("GreaterThanThreshold", "notBreaching")
    assert alarm["AlarmDescription"].startswith("[warning]") and alarm.get("AlarmActions")


def test_seed_defaults_reach_the_template(default_synth: Synth) -> None:
    alarms = _alarms_by_name(default_synth, "Observability")
    name = default_synth.config.endpoint_name
    # Seed 002 "Alerting rules" and the ModelLatency unit (microseconds).
    assert alarms[f"{name}-ttft-p95-high-cold"]["Threshold"] == 500
    assert alarms[f"{name}-ttft-p95-high-warm"]["Threshold"] == 500
    assert alarms[f"{name}-queue-build-up"]["Threshold"] == 80
    assert alarms[f"{name}-queue-build-up"]["EvaluationPeriods"] * 60 == 120
    assert alarms[f"{name}-kv-cache-pressure"]["Threshold"] == 95
    assert alarms[f"{name}-prefix-cache-degraded"]["Threshold"] == 20  # from the prompt layout (finding 10)
    assert alarms[f"{name}-model-latency-p99"]["Threshold"] == 2_000_000


def test_error_rates_are_math_over_invocations(default_synth: Synth) -> None:
    alarms = _alarms_by_name(default_synth, "Observability")
    name = default_synth.config.endpoint_name
    assert alarms[f"{name}-context-budget-drift"]["Threshold"] == 10
    for slug in ("5xx-rate", "4xx-rate", "context-budget-drift"):
        expression = _expression(alarms[f"{name}-{slug}"])
        assert expression.startswith("IF(SUM([")
        assert "100 * SUM([FILL(" in expression


def test_the_client_fallback_rate_alarm_reads_the_client_librarys_counts(default_synth: Synth) -> None:
    """Issue 48: ClientFallbacks / ClientRequests of the endpoint's callers (client/mangaassist_client), in the
    namespace the stack outputs for them, a warning that notifies."""
    config = default_synth.config
    template = default_synth.template_json("Observability")
    alarm = _alarms_by_name(default_synth, "Observability")[f"{config.endpoint_name}-client-fallback-rate"]
    rule = config.monitoring.client_fallback_rate
    namespace = config.observability.metrics_namespace
    dims = {"EndpointName": config.endpoint_name}
    assert sorted(_metric_stats(alarm), key=str) == [
        (namespace, "ClientFallbacks", "Sum", rule.period_s, dims),
        (namespace, "ClientRequests", "Sum", rule.period_s, dims),
    ]
    assert {m.value for m in metrics.ClientMetric} >= {"ClientFallbacks", "ClientRequests"}
    _check_rule(alarm, rule)
    assert (alarm["Threshold"], rule.window_s) == (1, 900)
    assert _expression(alarm).startswith("IF(FILL(") and "> 0, 100 * FILL(" in _expression(alarm)
    assert (alarm["ComparisonOperator"], alarm["TreatMissingData"]) == ("GreaterThanThreshold", "notBreaching")
    assert alarm["AlarmDescription"].startswith("[warning]") and alarm["AlarmActions"] and alarm["OKActions"]
    assert template["Outputs"]["MetricsNamespace"]["Value"] == namespace


def test_an_alarm_sees_calls_that_nothing_answered(default_synth: Synth) -> None:
    """Issue 53, finding 4: with every call failing and no fallback configured, ClientFallbacks stays 0 and the
    fallback-rate alarm cannot fire; ClientUnanswered / ClientRequests can, at the error-rate SLO, and it pages
    (critical) like the 5xx-rate alarm: these callers got errors."""
    config = default_synth.config
    alarm = _alarms_by_name(default_synth, "Observability")[f"{config.endpoint_name}-client-unanswered-rate"]
    rule = config.monitoring.client_unanswered_rate
    namespace = config.observability.metrics_namespace
    dims = {"EndpointName": config.endpoint_name}
    assert sorted(_metric_stats(alarm), key=str) == [
        (namespace, "ClientRequests", "Sum", rule.period_s, dims),
        (namespace, "ClientUnanswered", "Sum", rule.period_s, dims),
    ]
    assert "ClientUnanswered" in {m.value for m in metrics.ClientMetric}
    _check_rule(alarm, rule)
    assert (alarm["Threshold"], rule.window_s) == (config.monitoring.server_error_rate.threshold, 900)
    expression = _expression(alarm)
    assert expression.startswith("IF(FILL(") and "> 0, 100 * FILL(" in expression
    # Every call failing: 100 % unanswered, far above the threshold, whatever ClientFallbacks says.
    assert (alarm["ComparisonOperator"], alarm["TreatMissingData"]) == ("GreaterThanThreshold", "notBreaching")
    assert alarm["AlarmDescription"].startswith("[critical]") and not alarm.get("AlarmActions")


def test_one_latency_alarm_per_adapter_with_its_ceiling(vpc_single_variant_synth: Synth) -> None:
    config = vpc_single_variant_synth.config
    alarms = _alarms_by_name(vpc_single_variant_synth, "Observability")
    for adapter in config.model.adapters:
        alarm = alarms[f"{config.endpoint_name}-adapter-{adapter.name}-latency-p95"]
        read = [r for r in _metric_stats(alarm) if r[1] not in ("Invocations", "Requests")]  # silence: finding 15
        assert {(n, s) for _, n, s, _, _ in read} == {("RequestLatency", "p95")}
        assert {dims["Adapter"] for *_, dims in read} == {adapter.name}
        _check_rule(alarm, config.monitoring.adapter_latency, config.monitoring.adapter_ceiling_ms(adapter.name))
        assert alarm["TreatMissingData"] == "notBreaching"
    assert config.monitoring.adapter_ceiling_ms("jp_style_v1") == 1500
    assert config.monitoring.adapter_ceiling_ms("manga_domain_v3") == config.monitoring.adapter_latency.threshold


def test_critical_composite_covers_exactly_the_critical_alarms(default_synth: Synth) -> None:
    template = default_synth.template_json("Observability")
    critical_ids = {
        key
        for key, value in _resources(template, "AWS::CloudWatch::Alarm").items()
        if value["Properties"]["AlarmDescription"].startswith("[critical]")
    }
    composites = {
        v["Properties"]["AlarmName"]: v["Properties"]
        for v in _resources(template, "AWS::CloudWatch::CompositeAlarm").values()
    }
    critical = composites[f"{default_synth.config.endpoint_name}-critical"]
    rule = json.dumps(critical["AlarmRule"])
    assert {key for key in critical_ids if key in rule} == critical_ids
    assert len(critical_ids) == 4  # queue build-up, engine errors, 5xx rate, client calls nothing answered
    assert critical["AlarmActions"] and critical["OKActions"]


def test_guardrail_alarms_are_named_for_rollback_and_precede_the_endpoint(default_synth: Synth) -> None:
    config = default_synth.config
    alarms = _alarms_by_name(default_synth, "Serving")
    variant_names = {v.variant_name for v in config.serving.variants}
    for variant in config.serving.variants:
        names = alarm_names.rollback_alarm_names(config.endpoint_name, variant.variant_name)
        error_alarm, cold_alarm, warm_alarm, model_latency_alarm, client_alarm = (alarms[name] for name in names)
        # What callers felt: 5xx answers and streams that failed after their 200, per invocation; the
        # container's request count tells a silent container from an idle one (issue 49, finding 7).
        assert {n for _, n, _, _, _ in _metric_stats(error_alarm)} == {
            "Invocation5XXErrors",
            "Invocations",
            "StreamErrors",
            "Requests",
        }
        assert {d["VariantName"] for *_, d in _metric_stats(error_alarm)} == {variant.variant_name}
        assert _expression(error_alarm).startswith("IF(SUM([") and _expression(error_alarm).endswith(", 100), 0)")
        _check_rule(error_alarm, config.monitoring.canary_error_rate, config.slo.max_error_rate_percent)
        for klass, latency_alarm in zip(RequestClass, (cold_alarm, warm_alarm), strict=True):
            assert [(n, s, d["RequestClass"]) for _, n, s, _, d in _metric_stats(latency_alarm)] == [
                ("TimeToFirstToken", "p95", klass.value)
            ]
            assert _expression(latency_alarm).startswith("FILL(")  # 0 without streams, never missing
            _check_rule(latency_alarm, config.monitoring.canary_ttft_p95, config.slo.of(klass).ttft_p95_ms)
        # TTFT exists for streaming requests only; ModelLatency for every request.
        assert [(ns, n, s) for ns, n, s, _, _ in _metric_stats(model_latency_alarm)] == [
            ("AWS/SageMaker", "ModelLatency", "p99")
        ]
        assert {d["VariantName"] for *_, d in _metric_stats(model_latency_alarm)} == {variant.variant_name}
        _check_rule(model_latency_alarm, config.monitoring.canary_model_latency_p99)
        # 4xx against the baseline: the other variants' rate, capped (issue 49, finding 7).
        read = _metric_stats(client_alarm)
        assert {n for _, n, _, _, _ in read} == {"Invocation4XXErrors", "Invocations"}
        assert {d["VariantName"] for *_, d in read} == variant_names
        cap = config.monitoring.canary_client_error_baseline_cap_percent
        assert f" > {cap:g}, {cap:g}, IF(SUM([FILL(" in _expression(client_alarm)  # the baseline, capped
        _check_rule(client_alarm, config.monitoring.canary_client_error_rate)
        for alarm in (error_alarm, cold_alarm, warm_alarm, model_latency_alarm, client_alarm):
            assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
            # Every period has a value (idle reads 0): missing data means the metrics are gone.
            assert alarm["TreatMissingData"] == "breaching"
    assert error_alarm["Threshold"] == 0.5  # seed 000 canary gate
    template = default_synth.template_json("Serving")
    guardrail_ids = {
        k for k, v in _resources(template, "AWS::CloudWatch::Alarm").items() if "AlarmName" in v["Properties"]
    }
    (endpoint,) = _resources(template, "AWS::SageMaker::Endpoint").values()
    assert guardrail_ids <= set(endpoint["DependsOn"])
    # The observability stack's rollback composite names them, so it deploys after Serving.
    composite = next(
        v["Properties"]
        for v in _resources(default_synth.template_json("Observability"), "AWS::CloudWatch::CompositeAlarm").values()
        if v["Properties"]["AlarmName"].endswith("-deployment-rollback")
    )
    for name in default_synth.stacks.serving.guardrail_alarms.alarm_names:
        assert f'ALARM("{name}")' in composite["AlarmRule"]
    # Issue 21, finding 2: it fires outside deployments too, and must not claim a rollback is running.
    assert "outside one nothing rolls back" in composite["AlarmDescription"]
    assert default_synth.stacks.serving in default_synth.stacks.observability.dependencies


def test_guardrail_alarms_follow_the_variants(vpc_single_variant_synth: Synth) -> None:
    config = vpc_single_variant_synth.config
    names = set(_alarms_by_name(vpc_single_variant_synth, "Serving"))
    assert names == set(alarm_names.rollback_alarm_names(config.endpoint_name, config.serving.primary.variant_name))


def test_every_alarm_name_carries_the_endpoint_prefix(all_synths: list[Synth]) -> None:
    for synth in all_synths:
        prefix = alarm_names.alarm_name_prefix(synth.config.endpoint_name)
        for unit in ("Serving", "Observability"):
            template = synth.template_json(unit)
            for kind in ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm"):
                for alarm in _resources(template, kind).values():
                    name = alarm["Properties"].get("AlarmName")
                    if name is None:  # a step-scaling trigger, checked in test_scaling
                        assert alarm["Properties"]["MetricName"] in {"QueueDepth", "RunningRequests"}, alarm
                        continue
                    assert name.startswith(prefix)


# ---------------------------------------------------------------------------------------
# every metric used anywhere is one that exists


def _allowed(namespace: str) -> set[tuple[str, str]]:
    return (
        {(namespace, name) for name in metrics.EMITTED | metrics.CLIENT_EMITTED}
        | {(metrics.SAGEMAKER_NAMESPACE, m.value) for m in metrics.SageMakerMetric}
        | {(metrics.SAGEMAKER_INSTANCE_NAMESPACE, m.value) for m in metrics.SageMakerInstanceMetric}
        | {(metrics.SAGEMAKER_COMPONENT_NAMESPACE, m.value) for m in metrics.SageMakerComponentMetric}
    )


def test_every_metric_used_is_emitted_or_published_by_sagemaker(
    all_synths: list[Synth], vpc_single_variant_synth: Synth, components_synth: Synth, dev_components_synth: Synth
) -> None:
    checked = 0
    for synth in [*all_synths, vpc_single_variant_synth, components_synth, dev_components_synth]:
        allowed = _allowed(synth.config.observability.metrics_namespace)
        for template in (t.to_json() for t in synth.templates.values()):
            used = metrics_read([template])
            assert used <= allowed, f"unknown metrics: {sorted(used - allowed)}"
            checked += len(used)
    assert checked > 0


def test_metric_walk_catches_an_unknown_metric() -> None:
    policy = {"CustomizedMetricSpecification": {"Namespace": "MangaAssist/Inference", "MetricName": "Typo"}}
    assert set(_metric_refs(policy)) == {("MangaAssist/Inference", "Typo")}
    assert ("MangaAssist/Inference", "Typo") not in _allowed("MangaAssist/Inference")


# ---------------------------------------------------------------------------------------
# dashboard


def test_dashboard_shows_the_slos_capacity_and_adapters(default_synth: Synth) -> None:
    config = default_synth.config
    (body,) = _dashboard_bodies(default_synth.template_json("Observability"))
    graphs = {w["properties"]["title"]: w["properties"] for w in body["widgets"] if w["type"] == "metric"}

    def lines(title: str) -> set[float]:
        return {a["value"] for a in graphs[title].get("annotations", {}).get("horizontal", [])}

    slo = config.slo
    assert slo.availability_percent in lines("Availability (%)")
    assert slo.error_rate_percent in lines("Error rate (%)")
    for klass in RequestClass:
        title = f"Time to first token, {klass.value} requests (ms)"
        assert {slo.of(klass).ttft_p50_ms, slo.of(klass).ttft_p95_ms} <= lines(title)
        assert {row[row.index("RequestClass") + 1] for row in graphs[title]["metrics"] if "RequestClass" in row} == {
            klass.value
        }
    assert slo.latency_p99_ms in lines("Request latency p99 (ms)")
    assert slo.queue_wait_p95_ms in lines("Queue wait, worst interval mean (ms)")
    for variant in config.serving.variants:
        assert {variant.min_capacity, variant.max_capacity} <= lines("Instances per variant (min/max)")
    instance_rows = graphs["Instances per variant (min/max)"]["metrics"]
    assert {row[-1]["stat"] for row in instance_rows} == {"SampleCount"}
    adapter_rows = [
        row for row in graphs["Per adapter: request latency p95 (ms)"]["metrics"] if isinstance(row[0], str)
    ]
    adapters_seen = {row[row.index("Adapter") + 1] for row in adapter_rows}
    assert adapters_seen == {a.name for a in config.model.adapters}
    for title in ("KV cache usage (%)", "Prefix cache hit rate (%)", "Tokens per second (per instance)"):
        assert title in graphs
    assert any(w["type"] == "alarm" for w in body["widgets"])


# ---------------------------------------------------------------------------------------
# alarm topic


def test_topic_is_kms_encrypted_and_tls_only(default_synth: Synth) -> None:
    template = default_synth.template("Observability")
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    template.has_resource_properties(
        "AWS::SNS::Topic", {"KmsMasterKeyId": {"Fn::GetAtt": [assertions.Match.any_value(), "Arn"]}}
    )
    template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": assertions.Match.array_with(
                    [
                        assertions.Match.object_like(
                            {
                                "Effect": "Deny",
                                "Principal": "*",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        ),
                        assertions.Match.object_like(
                            {
                                "Effect": "Allow",
                                "Action": "sns:Publish",
                                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                                "Condition": assertions.Match.object_like(
                                    {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
                                ),
                            }
                        ),
                    ]
                )
            }
        },
    )
    # CloudWatch may use the key only on behalf of this account's alarms.
    template.has_resource_properties(
        "AWS::KMS::Key",
        {
            "KeyPolicy": {
                "Statement": assertions.Match.array_with(
                    [
                        assertions.Match.object_like(
                            {
                                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                                "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
                                "Condition": assertions.Match.object_like(
                                    {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
                                ),
                            }
                        )
                    ]
                )
            }
        },
    )
    template.resource_count_is("AWS::SNS::Subscription", 0)


def test_topic_subscriptions_come_from_config(vpc_single_variant_synth: Synth) -> None:
    template = vpc_single_variant_synth.template("Observability")
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"})
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "https", "Endpoint": "https://hooks.example.com/alarms"}
    )


def test_scaled_to_zero_components_do_not_page_on_silence(dev_components_synth: Synth, components_synth: Synth) -> None:
    """Issue 21, finding 8: the dev overlay's inference_components mode scales to zero copies, which
    publish nothing; a breaching queue-build-up alarm paged on-call through the critical composite
    all night. Without scale to zero, silence still pages."""
    name = dev_components_synth.config.endpoint_name
    assert dev_components_synth.config.serving.inference_components.scale_to_zero
    idle = _alarms_by_name(dev_components_synth, "Observability")[f"{name}-queue-build-up"]
    assert idle["TreatMissingData"] == "notBreaching"
    assert "no data = scaled to zero, not breaching" in idle["AlarmDescription"]
    warm = components_synth.config.endpoint_name
    assert _alarms_by_name(components_synth, "Observability")[f"{warm}-queue-build-up"]["TreatMissingData"] == (
        "breaching"
    )


def _period_value(
    alarm: dict[str, Any], by_metric: Mapping[str, float | None], silent: frozenset[str] = frozenset()
) -> float | None:
    """The alarm's value in one period where each metric it reads has ``by_metric[MetricName]`` (None: no datapoint),
    except that the variants in ``silent`` report nothing of their own (the container's metrics are missing)."""
    values: dict[str, float | None] = {}
    for query in alarm["Metrics"]:
        if "MetricStat" not in query:
            continue
        metric = query["MetricStat"]["Metric"]
        variant = next((d["Value"] for d in metric.get("Dimensions", []) if d["Name"] == "VariantName"), None)
        own = metric["Namespace"] != "AWS/SageMaker"
        values[query["Id"]] = None if own and variant in silent else by_metric.get(metric["MetricName"])
    return evaluate_metric_math(_expression(alarm), values)


@pytest.mark.parametrize("slug", ["ttft-p95-high-cold", "ttft-p95-high-warm", "adapter-manga_domain_v3-latency-p95"])
def test_a_latency_alarm_sees_a_container_that_stops_reporting_while_traffic_flows(
    default_synth: Synth, slug: str
) -> None:
    """Issue 53, finding 15: the latency alarms treated missing data as not breaching, so a container that stopped
    reporting while SageMaker counted invocations looked idle, and only the error-rate alarm could see it. Each
    period is evaluated as CloudWatch's metric math would (tests/metric_refs.py)."""
    (name,) = [n for n in _alarms_by_name(default_synth, "Observability") if n.endswith(f"-{slug}")]
    alarm = _alarms_by_name(default_synth, "Observability")[name]
    threshold = float(alarm["Threshold"])
    latency = "TimeToFirstToken" if slug.startswith("ttft") else "RequestLatency"
    serving = {"Invocations": 100.0, "Requests": 100.0, latency: threshold / 2}
    assert _period_value(alarm, serving) == threshold / 2  # reporting and fast: below the threshold
    silent = _period_value(alarm, serving, silent=frozenset({"primary", "canary"}))
    assert silent is not None and silent > threshold  # invoked, no report: a breach
    one_silent = _period_value(alarm, serving, silent=frozenset({"canary"}))
    assert one_silent is not None and one_silent > threshold  # the canary's container alone went quiet
    idle = _period_value(alarm, {"Invocations": None, "Requests": None, latency: None})
    assert idle is None and alarm["TreatMissingData"] == "notBreaching"  # an idle fleet stays OK
