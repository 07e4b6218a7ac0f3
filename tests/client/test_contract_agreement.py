"""The client package carries its own copy of what it shares with the app (it is installed on its own and
cannot import it); these tests keep each copy equal to the app's one declaration, or read the container's
own writers' output with the client's parsers."""

from __future__ import annotations

import json

import pytest
from botocore.stub import Stubber
from hypothesis import given, settings
from hypothesis import strategies as st

from app_config import load_config
from cli_support.sse import SseDecodeError, SseDecoder
from mangaassist_client import config as client_config
from mangaassist_client import errors as client_errors
from mangaassist_client import metrics as client_metrics
from mangaassist_client import mirror as client_mirror
from mangaassist_client import model as client_model
from mangaassist_client import pairs as client_pairs
from mangaassist_client.errors import FailureKind, classify
from mangaassist_client.sse import SseDecodeError as ClientSseDecodeError
from mangaassist_client.sse import SseDecoder as ClientSseDecoder
from serving_app.context_budget.protocol import Trim
from serving_app.errors import error_response
from serving_app.versions import ModelVersions
from serving_contract import context_budget, lifecycle, metrics, migration, outputs
from tests.client.stubs import client, model_error
from tests.client.wire import gateway_drain_answer


def test_metric_names_unit_dimension_and_namespace_agree() -> None:
    assert {m.name: m.value for m in client_metrics.ClientMetric} == {m.name: m.value for m in metrics.ClientMetric}
    assert client_metrics.UNIT == metrics.CLIENT_UNIT
    assert metrics.Dimension.ENDPOINT.value == client_metrics.ENDPOINT_DIMENSION
    assert client_metrics.DEFAULT_NAMESPACE == metrics.DEFAULT_NAMESPACE


def test_output_keys_and_stack_names_agree() -> None:
    assert client_config.ENDPOINT_NAME_OUTPUT == outputs.ENDPOINT_NAME
    assert client_config.METRICS_NAMESPACE_OUTPUT == outputs.METRICS_NAMESPACE
    assert client_config.IMPORTED_MODEL_ARN_PREFIX == outputs.IMPORTED_MODEL_ARN_PREFIX
    assert client_config.IMPORTED_MODEL_ADAPTER_PREFIX == outputs.IMPORTED_MODEL_ADAPTER_PREFIX
    for name in ("mangaassist-llama3-domain-v1", "a-b_c1", "manga_domain_v3", "x--y__z", "Already-Pascal"):
        assert client_config.imported_model_output(name) == outputs.imported_model_output(name)
        assert client_config.imported_model_adapter_output(name) == outputs.imported_model_adapter_output(name)
    for stage in ("prod", "dev"):
        config = load_config({"stage": stage, "stages": {stage: {}}})
        for unit in ("Serving", "Observability", "BedrockImport"):
            assert client_config.stack_name(client_config.DEFAULT_PROJECT, stage, unit) == config.stack_name(unit)


def test_the_context_budget_attribute_agrees() -> None:
    assert (client_model.CONTEXT_BUDGET_ATTRIBUTE, client_model.CONTEXT_BUDGET_OFF) == (
        context_budget.OPT_OUT_ATTRIBUTE,
        context_budget.OPT_OUT_VALUE,
    )


def test_the_client_reads_what_the_container_writes_in_custom_attributes() -> None:
    """The gateway's own writers: the trim report first, then the versions (serving_app.sagemaker.serving)."""
    versions = ModelVersions("base", {"base": "v4/" + "a" * 64, "manga_domain_v3": "v3/" + "b" * 64})
    trim = Trim(reason="context_length", turns=4, tokens=812, by="marker")
    header = f"{trim.header_value()};{versions.attributes('manga_domain_v3')}"
    parsed = client_model.parse_custom_attributes(header)
    assert client_model.context_budget_report(parsed) == client_model.ContextBudgetReport(
        "context_length", 4, 812, "marker"
    )
    assert client_model.served_versions(parsed) == client_model.ServedVersions(
        "base/v4/" + "a" * 64, "manga_domain_v3/v3/" + "b" * 64
    )
    base_only = client_model.parse_custom_attributes(versions.attributes("base"))
    assert client_model.served_versions(base_only) == client_model.ServedVersions("base/v4/" + "a" * 64, None)
    assert client_model.context_budget_report(base_only) is None


def test_the_containers_oom_503_is_read_as_retry_after_through_model_error() -> None:
    """The gateway's 503 body, as SageMaker hands it back in ModelError's OriginalMessage."""
    response = error_response(503, "engine out of memory ...; retry later", retry_after_s=5)
    assert response.headers["retry-after"] == "5"
    body = json.loads(bytes(response.body))
    runtime = client("sagemaker-runtime")
    with Stubber(runtime) as stub:
        stub.add_client_error("invoke_endpoint", **model_error(503, body))
        with pytest.raises(Exception) as raised:
            runtime.invoke_endpoint(EndpointName="e", Body=b"{}")
    failure = classify(raised.value, "sagemaker:e")
    assert failure is not None
    assert (failure.kind, failure.status, failure.retry_after_s) == (FailureKind.RETRY_AFTER, 503, 5.0)


def test_the_containers_drain_503_is_read_as_draining_through_model_error() -> None:
    """The real gateway's refusal while it drains (issue 53, finding 5), as SageMaker hands it back."""
    assert client_errors.DRAINING_ERROR_TYPE == lifecycle.DRAINING_ERROR_TYPE
    assert client_errors.DRAIN_RETRY_AFTER_S == lifecycle.DRAIN_RETRY_AFTER_S
    status, _, body = gateway_drain_answer()
    assert json.loads(body)["error"]["message"].startswith(client_errors.DRAINING_MESSAGE)
    runtime = client("sagemaker-runtime")
    with Stubber(runtime) as stub:
        stub.add_client_error("invoke_endpoint", **model_error(status, body))
        with pytest.raises(Exception) as raised:
            runtime.invoke_endpoint(EndpointName="e", Body=b"{}")
    failure = classify(raised.value, "sagemaker:e")
    assert failure is not None
    assert (failure.kind, failure.status, failure.retry_after_s) == (FailureKind.DRAINING, 503, 1.0)


EVENT = st.lists(
    st.one_of(
        st.text(alphabet=st.characters(blacklist_characters="\r\n"), max_size=20).map(lambda t: f"data: {t}"),
        st.text(alphabet=st.characters(blacklist_characters="\r\n"), max_size=10).map(lambda t: f":{t}"),
        st.sampled_from(["data", "data:", "event: x", "id: 1", "data:  two spaces"]),
    ),
    max_size=4,
)


def _decode(decoder: SseDecoder | ClientSseDecoder, chunks: list[bytes]) -> list[str | None]:
    out: list[str | None] = []
    for chunk in chunks:
        try:
            out += decoder.feed(chunk)
        except (SseDecodeError, ClientSseDecodeError):
            out.append(None)
    return out


@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(EVENT, max_size=6),
    ends=st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=1, max_size=3),
    bom=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_the_sse_decoder_dispatches_what_cli_supports_decoder_does(
    events: list[list[str]], ends: list[str], bom: bool, cuts: list[int]
) -> None:
    """The same stream, cut at the same points (inside lines, characters and CRLF pairs), through both."""
    text = "".join(
        "".join(line + ends[(i + j) % len(ends)] for j, line in enumerate(event)) + ends[i % len(ends)]
        for i, event in enumerate(events)
    )
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", "surrogatepass")  # lone surrogates: bad UTF-8
    points = sorted({min(c, len(data)) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert _decode(ClientSseDecoder(), chunks) == _decode(SseDecoder(), chunks)


def test_the_pairs_the_client_writes_are_the_stores_layout_and_schema() -> None:
    """ops migrate report reads what the client writes (serving_contract/migration.py declares it once)."""
    assert (client_pairs.PAIRS_PREFIX, client_pairs.PAIR_FILE_SUFFIX) == (
        migration.PAIRS_PREFIX,
        migration.PAIR_FILE_SUFFIX,
    )
    assert client_mirror.PAIR_SCHEMA == migration.PAIR_SCHEMA
    side = client_mirror.Side.of("sagemaker:e", "m", None, seconds=(None, None), error="x")
    pair = client_mirror.Pair("r", "2026-01-01T00:00:00.000Z", "a", "ja", False, "0" * 64, side, side)
    record = pair.record()
    assert tuple(record) == migration.PAIR_FIELDS
    assert tuple(record["answer"]) == tuple(record["copy"]) == migration.SIDE_FIELDS
    assert side.backend.startswith(migration.ENDPOINT_BACKEND_PREFIX)
    assert client_model.UNDETERMINED_LANGUAGE == "und"


def test_the_migration_stacks_output_keys_agree() -> None:
    assert client_config.MIGRATION_STORE_BUCKET_OUTPUT == outputs.MIGRATION_STORE_BUCKET_NAME
    assert client_config.MIGRATION_STORE_KEY_OUTPUT == outputs.MIGRATION_STORE_KEY_ARN
    assert client_config.MIGRATION_STATE_PARAMETER_OUTPUT == outputs.MIGRATION_STATE_PARAMETER_NAME


def test_the_client_reads_the_ramp_state_the_stack_and_the_step_function_write() -> None:
    """The parameter's initial value (the stack's) and a step's value (the step function's write_state shape)."""
    from mangaassist_client.ramp import RampShare

    ssm = client("ssm")
    step = {"step": 1, "percent": 25, "status": "ramping", "since": "2026-11-16T09:00:00Z", "reason": "step 2"}
    assert set(step) == set(migration.RAMP_STATE_FIELDS)
    clock = iter([0.0, 100.0])
    share = RampShare(ssm, "/p", refresh_s=60, clock=lambda: next(clock))
    with Stubber(ssm) as stub:
        for value in (migration.INITIAL_RAMP_STATE, json.dumps(step)):
            stub.add_response("get_parameter", {"Parameter": {"Name": "/p", "Value": value}}, {"Name": "/p"})
        assert (share.share(), share.share()) == (0.0, 0.25)
