"""Which CloudWatch metrics the synthesized stacks read: alarms, scaling policies, dashboards."""

from __future__ import annotations

import json
import math
import re
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


class _Point(float):
    """One period's value of a metric math term; NaN stands for no datapoint. Arithmetic keeps it missing, and a
    comparison on it raises: the alarms compare only filled values, and CloudWatch gives no datapoint there, which
    Python's ``nan > 0`` (False) would not."""

    def _compare(self, other: float, op: Any) -> bool:
        if math.isnan(self) or math.isnan(float(other)):
            raise ValueError("a comparison on missing data: FILL the term first")
        return bool(op(float(self), float(other)))

    def __gt__(self, other: float) -> bool:  # type: ignore[override]
        return self._compare(other, lambda a, b: a > b)

    def __lt__(self, other: float) -> bool:  # type: ignore[override]
        return self._compare(other, lambda a, b: a < b)

    def __ge__(self, other: float) -> bool:  # type: ignore[override]
        return self._compare(other, lambda a, b: a >= b)

    def __le__(self, other: float) -> bool:  # type: ignore[override]
        return self._compare(other, lambda a, b: a <= b)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, float | int) and self._compare(float(other), lambda a, b: a == b)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = float.__hash__

    def __add__(self, other: float) -> _Point:  # type: ignore[override]
        return _Point(float(self) + float(other))

    def __radd__(self, other: float) -> _Point:  # type: ignore[override]
        return _Point(float(other) + float(self))

    def __sub__(self, other: float) -> _Point:  # type: ignore[override]
        return _Point(float(self) - float(other))

    def __rsub__(self, other: float) -> _Point:  # type: ignore[override]
        return _Point(float(other) - float(self))

    def __mul__(self, other: float) -> _Point:  # type: ignore[override]
        return _Point(float(self) * float(other))

    def __rmul__(self, other: float) -> _Point:  # type: ignore[override]
        return _Point(float(other) * float(self))

    def __truediv__(self, other: float) -> _Point:  # type: ignore[override]
        return _Point(float(self) / float(other)) if float(other) else _MISSING  # IF's other branch decides

    def __rtruediv__(self, other: float) -> _Point:  # type: ignore[override]
        return _Point(float(other) / float(self)) if float(self) else _MISSING


_MISSING = _Point("nan")


def evaluate_metric_math(expression: str, values: Mapping[str, float | None]) -> float | None:
    """One period of a CloudWatch metric math ``expression`` over ``values`` (metric id -> that period's datapoint,
    None when the metric has none), as CloudWatch evaluates it (CloudWatch user guide, "Metric math syntax and
    functions"); None means the expression has no datapoint, so the alarm's missing-data treatment decides.

    The subset the alarms use: ``IF(c, a[, b])`` (no datapoint when ``c`` is false and there is no ``b``), ``MAX`` and
    ``SUM`` of a list (missing members drop out; all missing is missing), ``FILL(m, v)``, ``AND``, ``OR``,
    comparisons and arithmetic (a missing operand of arithmetic makes the result missing).

    Raises:
        ValueError: a name without a value, or a comparison on missing data (see :class:`_Point`).
    """

    def known(value: float) -> bool:
        return not math.isnan(value)

    def if_(condition: Any, then: float, otherwise: float = _MISSING) -> float:
        return _Point(then if condition else otherwise)

    def combine(points: list[float], how: Any) -> float:
        present = [float(v) for v in points if known(v)]
        return _Point(how(present)) if present else _MISSING

    def fill(value: float, default: float) -> float:
        return value if known(value) else _Point(default)

    text = re.sub(r"\bAND\b", " and ", expression)
    text = re.sub(r"\bOR\b", " or ", text)
    names = set(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", text)) - {"and", "or", "IF", "MAX", "SUM", "FILL"}
    unknown = names - set(values)
    if unknown:
        raise ValueError(f"{expression!r}: no value for {sorted(unknown)}")
    scope: dict[str, Any] = {name: _MISSING if (v := values[name]) is None else _Point(v) for name in names}
    scope |= {"IF": if_, "MAX": lambda v: combine(v, max), "SUM": lambda v: combine(v, sum), "FILL": fill}
    result = eval(text, {"__builtins__": {}}, scope)  # the template's own expression; test-only
    return float(result) if known(result) else None
