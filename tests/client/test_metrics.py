"""The client's metrics as CloudWatch reads them: EMF lines (the specification's shape) and PutMetricData
(against botocore's Stubber)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest
from botocore.exceptions import NoCredentialsError
from botocore.stub import Stubber

from mangaassist_client import (
    BackendUnavailableError,
    CallerError,
    ClientMetric,
    EmfSink,
    MangaAssistClient,
    PutMetricDataSink,
)
from mangaassist_client.metrics import CALL_METRICS
from tests.client.stubs import CALL, ENDPOINT, SAGEMAKER, client, gateway_error, rig, sse


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
        "ClientUnanswered": 0,
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


# Issue 53, finding 4: with every call failing and no fallback, each line read ClientFallbacks 0 and nothing
# counted the calls no backend answered, so no alarm could see a total outage.


def test_a_call_no_backend_answered_is_counted_unanswered_with_or_without_a_fallback() -> None:
    with rig(fallbacks=()) as r:
        for _ in range(3):
            r.fail(502, gateway_error(502, "engine error 500"))
            with pytest.raises(BackendUnavailableError):
                r.client.chat(**CALL)
        r.pending()
    assert [(c[ClientMetric.UNANSWERED], c[ClientMetric.FALLBACKS]) for c, _ in r.lines.calls()] == [(1, 0)] * 3
    assert {p["Outcome"] for _, p in r.lines.calls()} == {"unavailable"}
    with rig() as r:
        r.fail(502, gateway_error(502, "engine error 500"))
        r.bedrock.add_client_error("invoke_model", "ServiceUnavailableException", "busy", 503)
        with pytest.raises(BackendUnavailableError):
            r.client.chat(**CALL)
    assert (r.lines.last()[ClientMetric.UNANSWERED], r.lines.last()[ClientMetric.FALLBACKS]) == (1, 1)


def test_answers_caller_errors_and_closed_streams_are_not_unanswered() -> None:
    with rig() as r:
        r.answer()
        r.client.chat(**CALL)
        r.fail(502, gateway_error(502, "engine error 500"))
        r.imported_answer()
        r.client.chat(**CALL)  # the fallback answered
        r.fail(400, gateway_error(400, "unknown adapter 'ghost'"))
        with pytest.raises(CallerError):
            r.client.chat(**CALL)
        r.stream(sse("Try ", "Frieren."))
        stream = r.client.chat_stream(**CALL)
        next(stream)
        stream.close()
        r.pending()
    assert [c[ClientMetric.UNANSWERED] for c, _ in r.lines.calls()] == [0, 0, 0, 0]
    assert [p["Outcome"] for _, p in r.lines.calls()] == ["ok", "ok", "caller_error", "closed"]


def test_an_error_the_client_does_not_sort_is_unanswered_too() -> None:
    """A client that cannot sign (no credentials) answers nobody: the alarm must see it as well."""
    with rig() as r:
        runtime = r.clients["sagemaker-runtime"]
        r.sagemaker.deactivate()

        def no_credentials(**_: object) -> None:
            raise NoCredentialsError()

        runtime.meta.events.register_first("before-sign.sagemaker-runtime.InvokeEndpoint", no_credentials)
        with pytest.raises(NoCredentialsError):
            r.client.chat(**CALL)
    counts, properties = r.lines.calls()[-1]
    assert (counts[ClientMetric.UNANSWERED], properties["Outcome"]) == (1, "error")
    assert properties["Failures"] == [f"{SAGEMAKER}: NoCredentialsError: Unable to locate credentials"]
