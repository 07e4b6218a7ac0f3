"""Which CloudWatch metrics the synthesized stacks read: alarms, scaling policies, dashboards."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any


def resources(template: Mapping[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    """Logical id -> resource of one type in a template."""
    return {k: v for k, v in template.get("Resources", {}).items() if v["Type"] == resource_type}


def dashboard_bodies(template: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every dashboard body of a template, parsed (tokens inside replaced by ``TOKEN``)."""
    bodies = []
    for dashboard in resources(template, "AWS::CloudWatch::Dashboard").values():
        body = dashboard["Properties"]["DashboardBody"]
        if isinstance(body, dict):  # Fn::Join around tokens (region, alarm ARNs)
            body = "".join(part if isinstance(part, str) else "TOKEN" for part in body["Fn::Join"][1])
        bodies.append(json.loads(body))
    return bodies


def dashboard_metrics(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(namespace, metric name) of every widget metric row."""
    for widget in body["widgets"]:
        for row in widget.get("properties", {}).get("metrics", []):
            if isinstance(row[0], str):
                yield row[0], row[1]


def metric_refs(node: Any) -> Iterator[tuple[str, str]]:
    """Every {Namespace, MetricName} pair anywhere below ``node`` (alarms, scaling policies)."""
    if isinstance(node, dict):
        if isinstance(node.get("Namespace"), str) and isinstance(node.get("MetricName"), str):
            yield node["Namespace"], node["MetricName"]
        for value in node.values():
            yield from metric_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from metric_refs(value)


def metrics_read(templates: Sequence[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """(namespace, metric name) of everything the templates' alarms, policies and widgets read."""
    used: set[tuple[str, str]] = set()
    for template in templates:
        for kind in ("AWS::CloudWatch::Alarm", "AWS::ApplicationAutoScaling::ScalingPolicy"):
            for resource in resources(template, kind).values():
                used |= set(metric_refs(resource["Properties"]))
        for body in dashboard_bodies(template):
            used |= set(dashboard_metrics(body))
    return used
