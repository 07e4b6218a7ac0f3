"""CloudWatch Embedded Metric Format (EMF) lines on stdout.

SageMaker ships container stdout to ``/aws/sagemaker/Endpoints/<endpoint>``; CloudWatch
turns each JSON line carrying an ``_aws`` block into metrics (EMF spec: ``_aws.Timestamp``
in epoch ms, ``_aws.CloudWatchMetrics[{Namespace, Dimensions[[...]], Metrics[{Name, Unit}]}]``,
dimension and metric values as top-level members).

Written by hand rather than with ``aws-embedded-metrics``: the format is ~20 lines, the
library's environment detection probes for a CloudWatch agent/EC2 metadata when it is not
on Lambda/ECS (SageMaker is neither), and its async flush model does not fit a per-request
hot path. One ``write`` per line keeps lines whole in the log stream.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from serving_contract.metrics import UNITS, Dimension


class EmfWriter:
    """Writes one EMF object per line.

    ``base_dimensions`` (EndpointName, VariantName) are added to every line.
    """

    def __init__(self, namespace: str, base_dimensions: Mapping[str, str], stream: TextIO | None = None) -> None:
        self._namespace = namespace
        self._base = dict(base_dimensions)
        self._base_set = tuple(self._base)
        self._stream = stream
        self._directives: dict[tuple[tuple[str, ...], tuple[tuple[str, ...], ...]], str] = {}

    def emit(
        self,
        metrics: Mapping[str, float | int],
        *,
        dimension_sets: Sequence[Sequence[str]] | None = None,
        dimensions: Mapping[str, str] | None = None,
        properties: Mapping[str, Any] | None = None,
        timestamp_ms: int | None = None,
    ) -> str:
        """Write one line with ``metrics`` (name -> value; units from ``serving_contract``).

        ``dimension_sets`` default to one set of the base dimensions. Returns the line.
        The ``CloudWatchMetrics`` directive is serialised once per (metric names, dimension
        sets) and cached: this runs once per request on the hot path.
        """
        if not metrics:
            return ""
        sets = tuple(tuple(s) for s in dimension_sets) if dimension_sets else (self._base_set,)
        key = (tuple(metrics), sets)
        directive = self._directives.get(key)
        if directive is None:
            directive = json.dumps(
                [
                    {
                        "Namespace": self._namespace,
                        "Dimensions": [list(s) for s in sets],
                        "Metrics": [{"Name": name, "Unit": UNITS.get(name, "None")} for name in metrics],
                    }
                ],
                separators=(",", ":"),
            )
            self._directives[key] = directive
        members = {**(properties or {}), **self._base, **(dimensions or {}), **metrics}
        if "_aws" in members:
            raise ValueError("'_aws' is reserved for EMF metadata")
        timestamp = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
        body = json.dumps(members, separators=(",", ":"), allow_nan=False)
        line = f'{{"_aws":{{"Timestamp":{timestamp},"CloudWatchMetrics":{directive}}},{body[1:]}'
        stream = self._stream or sys.stdout
        stream.write(line + "\n")
        return line

    @property
    def request_dimension_sets(self) -> list[list[str]]:
        """Per-request sets: fleet-wide and per adapter."""
        base = list(self._base)
        return [base, [*base, Dimension.ADAPTER]]
