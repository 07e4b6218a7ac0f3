"""Every TTFT alarm, rollback guardrail and canary gate reads one request class's metric and takes
its threshold from the one SLO declaration, ``slo.<class>.ttft_p95_ms`` (issue 33).

The walk covers every synthesized template of every mode and stage, plus a synth whose cold and
warm objectives differ, so a threshold wired to the wrong class fails here.
"""

from collections.abc import Iterator
from typing import Any

import pytest

from app_config import AppConfig
from serving_contract.metrics import Dimension, RequestMetric
from serving_contract.request_classes import RequestClass
from tests.metric_refs import resources
from tests.synth_helpers import Synth, synthesize

SPLIT_SLO = {
    "slo.cold.ttft_p50_ms": "900",
    "slo.cold.ttft_p95_ms": "2500",
    "slo.warm.ttft_p50_ms": "150",
    "slo.warm.ttft_p95_ms": "400",
    "slo.max_error_rate": "0.01",
}


@pytest.fixture(scope="module")
def split_slo_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The defaults with different cold and warm objectives."""
    return synthesize(tmp_path_factory.mktemp("cdk-out-split-slo"), SPLIT_SLO)


def _ttft_reads(alarm: dict[str, Any]) -> Iterator[dict[str, str]]:
    """The dimensions of every TimeToFirstToken series an alarm reads (plain or metric math)."""
    if alarm.get("MetricName") == RequestMetric.TIME_TO_FIRST_TOKEN:
        yield {d["Name"]: d["Value"] for d in alarm.get("Dimensions", [])}
    for query in alarm.get("Metrics", []):
        metric = query.get("MetricStat", {}).get("Metric", {})
        if metric.get("MetricName") == RequestMetric.TIME_TO_FIRST_TOKEN:
            yield {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}


def ttft_alarms(synth: Synth) -> list[tuple[str, RequestClass, float]]:
    """(alarm name, class, threshold) of every alarm in the synth that reads TTFT; fails on one
    that reads a series without a class, or several classes."""
    found = []
    for template in (t.to_json() for t in synth.templates.values()):
        for alarm in (r["Properties"] for r in resources(template, "AWS::CloudWatch::Alarm").values()):
            reads = list(_ttft_reads(alarm))
            if not reads:
                continue
            classes = {dims.get(Dimension.REQUEST_CLASS, "") for dims in reads}
            assert len(classes) == 1 and "" not in classes, (alarm.get("AlarmName"), classes)
            (klass,) = classes
            found.append((alarm["AlarmName"], RequestClass(klass), alarm["Threshold"]))
    return found


def rollback_alarm_names(synth: Synth) -> set[str]:
    """The alarms a deployment rolls back on: the endpoint's AutoRollbackConfiguration and each
    inference component's (its rolling update's) alarms."""
    names: set[str] = set()
    for template in (t.to_json() for t in synth.templates.values()):
        for kind, path in (
            ("AWS::SageMaker::Endpoint", ("DeploymentConfig", "AutoRollbackConfiguration", "Alarms")),
            (
                "AWS::SageMaker::InferenceComponent",
                ("DeploymentConfig", "AutoRollbackConfiguration", "Alarms"),
            ),
        ):
            for resource in resources(template, kind).values():
                node: Any = resource["Properties"]
                for key in path:
                    node = node.get(key, {}) if isinstance(node, dict) else {}
                names |= {alarm["AlarmName"] for alarm in node or []}
    return names


def check(synth: Synth) -> None:
    config: AppConfig = synth.config
    alarms = ttft_alarms(synth)
    assert alarms, "no TTFT alarm at all"
    for name, klass, threshold in alarms:
        assert threshold == config.slo.of(klass).ttft_p95_ms, (name, klass, threshold)
    # Both classes are watched, and every deployment rolls back on both classes' TTFT.
    assert {klass for _, klass, _ in alarms} == set(RequestClass)
    rollback = rollback_alarm_names(synth)
    assert rollback, "no rollback alarms"
    guarded = {name: klass for name, klass, _ in alarms if name in rollback}
    assert set(guarded.values()) == set(RequestClass), sorted(rollback)


def test_every_ttft_alarm_of_every_mode_reads_a_class_at_its_slo(
    all_synths: list[Synth], vpc_single_variant_synth: Synth, components_synth: Synth, dev_components_synth: Synth
) -> None:
    for synth in [*all_synths, vpc_single_variant_synth, components_synth, dev_components_synth]:
        check(synth)


def test_split_objectives_reach_each_class_alarm(split_slo_synth: Synth) -> None:
    check(split_slo_synth)
    thresholds = {(klass, threshold) for _, klass, threshold in ttft_alarms(split_slo_synth)}
    assert thresholds == {(RequestClass.COLD, 2500), (RequestClass.WARM, 400)}
    error_rates = {
        alarm["Properties"]["Threshold"]
        for alarm in resources(split_slo_synth.template_json("Serving"), "AWS::CloudWatch::Alarm").values()
        if alarm["Properties"].get("AlarmName", "").endswith("-5xx-rate")
    }
    assert error_rates == {1.0}  # slo.max_error_rate 0.01 = 1 %


def test_the_walk_catches_a_ttft_alarm_without_a_class() -> None:
    mixed = {
        "MetricName": "TimeToFirstToken",
        "Dimensions": [{"Name": "EndpointName", "Value": "e"}, {"Name": "VariantName", "Value": "v"}],
    }
    assert list(_ttft_reads(mixed)) == [{"EndpointName": "e", "VariantName": "v"}]
