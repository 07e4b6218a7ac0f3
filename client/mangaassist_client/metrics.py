"""What the client counts, where the project's alarms see it: CloudWatch EMF lines or PutMetricData.

One EMF line per call (every counter, zeros included, so a Sum over a period is exact and
``ClientFallbacks / ClientRequests`` is the fallback rate and ``ClientUnanswered / ClientRequests`` the share
of calls nothing answered, which the Observability stack alarms on), and one per shadow comparison. The
names, unit and dimension are the ones ``serving_contract.metrics.ClientMetric`` declares for the alarms;
this package cannot import the app, so it carries them and
``tests/client/test_contract_agreement.py`` checks that both agree.

Sinks:

* :class:`EmfSink` writes the lines to a stream (stdout by default): on Lambda, ECS/EKS with the awslogs
  driver or the CloudWatch agent they become metrics with no API call (EMF specification).
* :class:`PutMetricDataSink` sums the counts in memory and sends them with ``PutMetricData`` from a
  background thread every ``interval_s`` (and on :meth:`~PutMetricDataSink.close`), for callers whose logs
  do not reach CloudWatch Logs. Needs ``cloudwatch:PutMetricData``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, Final, Protocol, TextIO

DEFAULT_NAMESPACE: Final = "MangaAssist/Inference"
"""The project's metric namespace (config ``observability.metrics_namespace``); the Observability stack's
``MetricsNamespace`` output says which one a deployment uses."""
ENDPOINT_DIMENSION: Final = "EndpointName"
"""The one dimension: the SageMaker endpoint the client calls (the alarm's dimension)."""
UNIT: Final = "Count"


class ClientMetric(StrEnum):
    """Counters of the client (mirror of ``serving_contract.metrics.ClientMetric``)."""

    REQUESTS = "ClientRequests"  # calls (chat or stream), whatever answered
    RETRIES = "ClientRetries"  # retries of one backend after throttling or a 503 with Retry-After
    FALLBACKS = "ClientFallbacks"  # calls answered (or tried) by a backend after the first
    CIRCUIT_OPENED = "ClientCircuitOpened"  # a backend's circuit opened (or opened again after a failed probe)
    STREAMS_INTERRUPTED = "ClientStreamsInterrupted"  # streams that failed after their first token
    CANARY_REQUESTS = "ClientCanaryRequests"  # calls sent to the canary backend first
    UNANSWERED = "ClientUnanswered"  # calls no backend answered (BackendUnavailableError, or an unsorted error)
    SHADOW_REQUESTS = "ClientShadowRequests"  # shadow copies made (each one a stored pair)
    SHADOW_ERRORS = "ClientShadowErrors"  # shadow copies that failed
    SHADOW_DROPPED = "ClientShadowDropped"  # copies not made: the queue was full, or one waited past its deadline
    SHADOW_STORE_FAILED = "ClientShadowStoreFailed"  # pairs the store could not write and dropped


CALL_METRICS: Final = (
    ClientMetric.REQUESTS,
    ClientMetric.RETRIES,
    ClientMetric.FALLBACKS,
    ClientMetric.CIRCUIT_OPENED,
    ClientMetric.STREAMS_INTERRUPTED,
    ClientMetric.CANARY_REQUESTS,
    ClientMetric.UNANSWERED,
)
"""The counters of every call's line."""


class MetricsSink(Protocol):
    """Where counts go. ``properties`` are searchable log fields (EMF), never dimensions."""

    def record(self, counts: Mapping[ClientMetric, int], properties: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


class NullSink:
    """Counts nothing (tests, or a caller that counts elsewhere)."""

    def record(self, counts: Mapping[ClientMetric, int], properties: Mapping[str, Any]) -> None:
        return None

    def close(self) -> None:
        return None


class EmfSink:
    """One EMF JSON object per line (CloudWatch Embedded Metric Format specification: ``_aws.Timestamp`` in
    epoch ms, ``_aws.CloudWatchMetrics[{Namespace, Dimensions, Metrics[{Name, Unit}]}]``, values as members).

    Args:
        endpoint_name: the ``EndpointName`` dimension.
        namespace: the Observability stack's ``MetricsNamespace``.
        write: where each line (with its newline) goes; default ``sys.stdout.write``, flushed.
        clock: epoch seconds (the line's timestamp).
    """

    def __init__(
        self,
        *,
        endpoint_name: str,
        namespace: str = DEFAULT_NAMESPACE,
        write: Callable[[str], Any] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._endpoint = endpoint_name
        self._namespace = namespace
        self._write = write
        self._clock = clock
        self._lock = threading.Lock()  # one write per line keeps lines whole across threads

    def line(self, counts: Mapping[ClientMetric, int], properties: Mapping[str, Any]) -> str:
        """The EMF line of ``counts`` (without its newline)."""
        directive = {
            "Timestamp": int(self._clock() * 1000),
            "CloudWatchMetrics": [
                {
                    "Namespace": self._namespace,
                    "Dimensions": [[ENDPOINT_DIMENSION]],
                    "Metrics": [{"Name": metric.value, "Unit": UNIT} for metric in counts],
                }
            ],
        }
        members = {**properties, ENDPOINT_DIMENSION: self._endpoint, **{m.value: n for m, n in counts.items()}}
        return json.dumps({"_aws": directive, **members}, separators=(",", ":"), default=str)

    def record(self, counts: Mapping[ClientMetric, int], properties: Mapping[str, Any]) -> None:
        text = self.line(counts, properties) + "\n"
        with self._lock:
            if self._write is not None:
                self._write(text)
            else:
                stream: TextIO = sys.stdout
                stream.write(text)
                stream.flush()

    def close(self) -> None:
        return None


class PutMetricDataSink:
    """Sums counts per metric and sends them with ``PutMetricData`` every ``interval_s`` seconds.

    Args:
        cloudwatch: a boto3 ``cloudwatch`` client.
        endpoint_name, namespace: as :class:`EmfSink`.
        interval_s: seconds between sends (60: the alarmed metrics' one-minute resolution); 0 starts no
            thread (call :meth:`flush` yourself).
    """

    def __init__(
        self, *, cloudwatch: Any, endpoint_name: str, namespace: str = DEFAULT_NAMESPACE, interval_s: float = 60.0
    ) -> None:
        if not 0 <= interval_s <= 3600:
            raise ValueError(f"interval_s = {interval_s}: must be from 0 to 3600")
        self._cloudwatch = cloudwatch
        self._endpoint = endpoint_name
        self._namespace = namespace
        self._sums: dict[ClientMetric, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if interval_s > 0:
            self._thread = threading.Thread(target=self._run, args=(interval_s,), daemon=True, name="metrics-flush")
            self._thread.start()

    def record(self, counts: Mapping[ClientMetric, int], properties: Mapping[str, Any]) -> None:
        with self._lock:
            for metric, value in counts.items():
                self._sums[metric] = self._sums.get(metric, 0) + value

    def flush(self) -> int:
        """Send what was counted since the last send; returns the data sent (0: nothing counted).

        Raises botocore's error when PutMetricData fails; the counts are kept for the next send."""
        with self._lock:
            sums, self._sums = self._sums, {}
        if not sums:
            return 0
        data = [
            {
                "MetricName": metric.value,
                "Dimensions": [{"Name": ENDPOINT_DIMENSION, "Value": self._endpoint}],
                "Value": float(value),
                "Unit": UNIT,
            }
            for metric, value in sums.items()
        ]
        try:
            # At most len(ClientMetric) data, far below PutMetricData's 1,000 a request.
            self._cloudwatch.put_metric_data(Namespace=self._namespace, MetricData=data)
        except Exception:
            self.record(sums, {})
            raise
        return len(data)

    def _run(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            try:
                self.flush()
            except Exception as error:  # a failed send must not end the thread; the counts wait for the next
                print(f"mangaassist_client: PutMetricData failed: {error}", file=sys.stderr)

    def close(self) -> None:
        """Stop the thread and send what is left."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.flush()
