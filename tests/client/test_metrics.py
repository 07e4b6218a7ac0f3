"""The client's metrics as CloudWatch reads them: EMF lines (the specification's shape) and PutMetricData
(against botocore's Stubber)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest
from botocore.stub import Stubber

from mangaassist_client import ClientMetric, EmfSink, MangaAssistClient, PutMetricDataSink
from mangaassist_client.metrics import CALL_METRICS
from tests.client.stubs import CALL, ENDPOINT, client, rig


def test_an_emf_line_names_namespace_dimension_metrics_and_units() -> None:
    lines: list[str] = []
    sink = EmfSink(endpoint_name=ENDPOINT, namespace="Custom/NS", write=lines.append, clock=lambda: 1764200000.5)
    sink.record({ClientMetric.REQUESTS: 1, ClientMetric.FALLBACKS: 1}, {"Backend": "bedrock-import", "Failures": ["x"]})
    (line,) = lines
    assert line.endswith("\n") and line.count("\n") == 1
    document = json.loads(line)
    assert document["_aws"] == {
        "Timestamp": 1764200000500,
        "CloudWatchMetrics": [
            {
                "Namespace": "Custom/NS",
                "Dimensions": [["EndpointName"]],
                "Metrics": [{"Name": "ClientRequests", "Unit": "Count"}, {"Name": "ClientFallbacks", "Unit": "Count"}],
            }
        ],
    }
    assert (document["EndpointName"], document["ClientRequests"], document["ClientFallbacks"]) == (ENDPOINT, 1, 1)
    assert (document["Backend"], document["Failures"]) == ("bedrock-import", ["x"])


def test_every_call_writes_every_counter_to_stdout_by_default() -> None:
    """Zeros included: a period's Sum of ClientRequests is every call, whatever happened."""
    with rig() as r:
        r.answer()
        chat = MangaAssistClient(r.client.config, client_factory=lambda service, region: r.clients[service])
        out = io.StringIO()
        with redirect_stdout(out):
            chat.chat(**CALL)
    (line,) = out.getvalue().splitlines()
    document = json.loads(line)
    names = [m["Name"] for m in document["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
    assert names == [m.value for m in CALL_METRICS]
    assert {name: document[name] for name in names} == {
        "ClientRequests": 1,
        "ClientRetries": 0,
        "ClientFallbacks": 0,
        "ClientCircuitOpened": 0,
        "ClientStreamsInterrupted": 0,
        "ClientCanaryRequests": 0,
    }
    assert document["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "MangaAssist/Inference"
    assert (document["Adapter"], document["Outcome"], document["Stream"]) == ("manga_domain_v3", "ok", False)


def test_put_metric_data_sends_the_sums_and_keeps_them_when_it_fails() -> None:
    cloudwatch = client("cloudwatch")
    sink = PutMetricDataSink(cloudwatch=cloudwatch, endpoint_name=ENDPOINT, interval_s=0)
    sink.record({ClientMetric.REQUESTS: 1, ClientMetric.FALLBACKS: 1}, {})
    sink.record({ClientMetric.REQUESTS: 1, ClientMetric.FALLBACKS: 0}, {})
    dimensions = [{"Name": "EndpointName", "Value": ENDPOINT}]
    expected = {
        "Namespace": "MangaAssist/Inference",
        "MetricData": [
            {"MetricName": "ClientRequests", "Dimensions": dimensions, "Value": 2.0, "Unit": "Count"},
            {"MetricName": "ClientFallbacks", "Dimensions": dimensions, "Value": 1.0, "Unit": "Count"},
        ],
    }
    with Stubber(cloudwatch) as stub:
        stub.add_client_error("put_metric_data", "InternalServiceError", "try again", 500)
        with pytest.raises(Exception, match="InternalServiceError"):
            sink.flush()
        stub.add_response("put_metric_data", {}, expected)  # the same sums, kept for the next send
        assert sink.flush() == 2
        assert sink.flush() == 0  # nothing counted since
        stub.assert_no_pending_responses()


def test_put_metric_data_interval_is_bounded() -> None:
    with pytest.raises(ValueError, match=r"interval_s = -1: must be from 0 to 3600"):
        PutMetricDataSink(cloudwatch=None, endpoint_name=ENDPOINT, interval_s=-1)
