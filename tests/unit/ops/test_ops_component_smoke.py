"""``smoke`` in inference_components mode: component checks, scale to zero, ``--wake``, requests per component."""

import json

import pytest

from ops.cli import main
from ops.components import wait_component
from ops.exit_codes import ExitCode, OpsError
from tests.unit.ops.ops_stubs import (
    ADAPTER_COMPONENTS,
    ADAPTERS,
    BASE,
    BASE_MODEL,
    ENDPOINT,
    IMAGE,
    NO_CAPACITY,
    FakeClock,
    Stubs,
    stubbed,
    write_component_outputs,
)


@pytest.fixture
def args(tmp_path):
    return ["smoke", "--stack-outputs", str(write_component_outputs(tmp_path))]


def _queue_requests(stubs: Stubs, adapters=ADAPTERS) -> None:
    stubs.invoke(None, BASE_MODEL, component=BASE)
    stubs.invoke_stream(None, BASE_MODEL, component=BASE)
    for adapter in adapters:
        stubs.invoke(None, adapter, component=ADAPTER_COMPONENTS[adapter])
        stubs.invoke_stream(None, adapter, component=ADAPTER_COMPONENTS[adapter])


def _rows(stubs: Stubs) -> list[list[str]]:
    table = next(line for line in stubs.lines if line.startswith("adapter"))
    return [row.split() for row in table.splitlines()[2:]]


def test_smoke_sends_to_the_base_and_every_adapter_component(args):
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 1.0})
        stubs.describe_all_components()
        _queue_requests(stubs)
        code = main(args, stubs.deps(FakeClock(tick=0.01)))
    assert code == ExitCode.OK
    assert stubs.lines[:5] == [
        f"endpoint {ENDPOINT}: InService (inference components on primary x4)",
        f"component {BASE}: InService, 2 copies (desired 2), {IMAGE}",
        f"component {ENDPOINT}-manga-domain-v3: InService, s3://artifacts/adapters/manga-domain-v3/adapter.tar.gz",
        f"component {ENDPOINT}-general-support-v2: InService, s3://artifacts/adapters/general-support-v2/adapter.tar.gz",
        f"component {ENDPOINT}-jp-style-v1: InService, s3://artifacts/adapters/jp-style-v1/adapter.tar.gz",
    ]
    assert stubs.lines[5].splitlines()[0].split() == ["adapter", "component", "mode", "status", "ttft", "latency"]
    rows = _rows(stubs)
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("(base)", BASE, "sync", "ok"),
        ("(base)", BASE, "stream", "ok"),
        *[(a, ADAPTER_COMPONENTS[a], m, "ok") for a in ADAPTERS for m in ("sync", "stream")],
    ]
    assert stubs.lines[-1] == "smoke passed: 8 request(s), 4 component(s)"


def test_smoke_with_endpoint_name_derives_component_names_from_config(tmp_path):
    """--endpoint-name: the mode comes from serving.mode in cdk.json, names from serving_contract."""
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(json.dumps({"context": {"stage": "prod", "serving.mode": "inference_components"}}))
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 1.0})
        stubs.describe_component(BASE)
        stubs.describe_component(ADAPTER_COMPONENTS["jp_style_v1"])
        _queue_requests(stubs, adapters=("jp_style_v1",))
        code = main(
            ["smoke", "--cdk-json", str(cdk_json), "--endpoint-name", ENDPOINT, "--adapter", "jp_style_v1"],
            stubs.deps(FakeClock()),
        )
    assert code == ExitCode.OK
    assert stubs.lines[-1] == "smoke passed: 4 request(s), 2 component(s)"


def test_scaled_to_zero_fails_without_wake(args, capsys):
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 1.0})
        stubs.describe_all_components(base_copies=0)
        code = main(args, stubs.deps(FakeClock()))
    assert code == ExitCode.NOT_READY
    assert capsys.readouterr().err.strip() == (
        f"error: inference component {BASE} is scaled to zero (0 copies); pass --wake to send a request that wakes "
        "it and wait for a copy (minutes; requests fail meanwhile)"
    )


def test_wake_sends_one_request_then_waits_for_a_copy(args):
    clock = FakeClock()
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 1.0})
        stubs.describe_all_components(base_copies=0)
        stubs.invoke_error(BASE, BASE_MODEL, "ValidationError", NO_CAPACITY, max_tokens=1)
        stubs.describe_component(BASE, copies=0, desired=1)  # t = 0: Application Auto Scaling reacted
        stubs.describe_component(BASE, status="Updating", copies=0, desired=1)  # t = 30: the copy loads
        stubs.describe_component(BASE, copies=1)  # t = 60
        _queue_requests(stubs)
        code = main([*args, "--wake"], stubs.deps(clock))
    assert code == ExitCode.OK
    assert clock.sleeps == [30.0, 30.0]
    assert stubs.lines[1:5] == [
        f"component {BASE} is scaled to zero: waking it (one request, then up to 900 s for a copy)",
        f"wake request failed as expected: ValidationError: {NO_CAPACITY}",
        f"component {BASE} woke after 60 s",
        f"component {BASE}: InService, 1 copy (desired 1), {IMAGE}",
    ]
    assert stubs.lines[-1] == "smoke passed: 8 request(s), 4 component(s)"


def test_wake_gives_up_after_the_wake_timeout(args, capsys):
    clock = FakeClock()
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 1.0})
        stubs.describe_all_components(base_copies=0)
        stubs.invoke_error(BASE, BASE_MODEL, "ValidationError", NO_CAPACITY, max_tokens=1)
        for _ in range(3):  # t = 0, 20, 40 with a 40 s limit
            stubs.describe_component(BASE, copies=0, desired=1)
        code = main([*args, "--wake", "--wake-timeout-s", "40", "--poll-s", "20"], stubs.deps(clock))
    assert code == ExitCode.NOT_READY
    assert clock.sleeps == [20.0, 20.0]
    assert capsys.readouterr().err.strip() == (
        f"error: inference component {BASE} still InService, 0 copies (desired 1) after 40 s (--wake-timeout-s)"
    )


def test_wake_request_failing_otherwise_is_an_aws_error(args, capsys):
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 1.0})
        stubs.describe_all_components(base_copies=0)
        stubs.invoke_error(BASE, BASE_MODEL, "AccessDeniedException", "not authorized to perform InvokeEndpoint")
        code = main([*args, "--wake"], stubs.deps(FakeClock()))
    assert code == ExitCode.AWS_ERROR
    assert capsys.readouterr().err.strip() == (
        f"error: wake request to {BASE} failed with AccessDeniedException (not authorized to perform "
        "InvokeEndpoint); expected SageMaker's no-capacity error"
    )


def test_wake_stops_at_once_when_the_component_fails(args, capsys):
    clock = FakeClock()
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 1.0})
        stubs.describe_all_components(base_copies=0)
        stubs.invoke_error(BASE, BASE_MODEL, "ValidationError", NO_CAPACITY)
        stubs.describe_component(BASE, status="Failed", copies=0, FailureReason="CUDA out of memory")
        code = main([*args, "--wake"], stubs.deps(clock))
    assert code == ExitCode.NOT_READY
    assert clock.sleeps == []
    assert capsys.readouterr().err.strip() == f"error: inference component {BASE} is Failed (CUDA out of memory)"


def test_component_not_in_service_is_not_ready(args, capsys):
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 1.0})
        stubs.describe_component(BASE)
        stubs.describe_component(ADAPTER_COMPONENTS["manga_domain_v3"])
        stubs.describe_component(ADAPTER_COMPONENTS["general_support_v2"], status="Creating")
        stubs.describe_component(ADAPTER_COMPONENTS["jp_style_v1"])
        code = main(args, stubs.deps(FakeClock()))
    assert code == ExitCode.NOT_READY
    assert capsys.readouterr().err.strip() == (
        f"error: inference component {ADAPTER_COMPONENTS['general_support_v2']} is Creating, not InService"
    )


def test_failed_base_component_names_its_failure_reason(args, capsys):
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 1.0})
        stubs.describe_component(BASE, status="Failed", copies=0, FailureReason="image pull failed")
        for component in ADAPTER_COMPONENTS.values():
            stubs.describe_component(component)
        code = main(args, stubs.deps(FakeClock()))
    assert code == ExitCode.NOT_READY
    assert capsys.readouterr().err.strip() == (
        f"error: inference component {BASE} is Failed, not InService (image pull failed)"
    )


def test_missing_component_is_an_aws_error(args, capsys):
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 1.0})
        stubs.sagemaker.add_client_error(
            "describe_inference_component",
            service_error_code="ValidationException",
            service_message=f'Could not find inference component "{BASE}".',
        )
        code = main(args, stubs.deps(FakeClock()))
    assert code == ExitCode.AWS_ERROR
    assert (
        capsys.readouterr().err.strip()
        == f'error: inference component {BASE}: Could not find inference component "{BASE}".'
    )


def test_component_answering_model_error_fails_the_check(args):
    adapter = "manga_domain_v3"
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 1.0})
        stubs.describe_component(BASE)
        stubs.describe_component(ADAPTER_COMPONENTS[adapter])
        stubs.invoke(None, BASE_MODEL, component=BASE)
        stubs.invoke_model_error(None, adapter, status=404, component=ADAPTER_COMPONENTS[adapter])
        code = main([*args, "--adapter", adapter, "--mode", "sync"], stubs.deps(FakeClock()))
    assert code == ExitCode.CHECK_FAILED
    assert [r[:5] for r in _rows(stubs)] == [
        ["(base)", BASE, "sync", "ok", "-"],
        [adapter, ADAPTER_COMPONENTS[adapter], "sync", "ModelError", "404"],
    ]
    assert f"FAIL {adapter} on {ADAPTER_COMPONENTS[adapter]} (sync): ModelError 404: Received server error (404)" in (
        stubs.output
    )
    assert stubs.lines[-1] == "smoke FAILED: 1 of 2 request(s) failed"


def test_adapter_without_a_component_is_a_usage_error(tmp_path, capsys):
    outputs = write_component_outputs(tmp_path, AdapterInferenceComponentJpStyleV1="")
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 1.0})
        code = main(["smoke", "--stack-outputs", str(outputs), "--adapter", "jp_style_v1"], stubs.deps(FakeClock()))
    assert code == ExitCode.USAGE
    assert capsys.readouterr().err.strip() == (
        f"error: adapter 'jp_style_v1' has no inference component on {ENDPOINT} "
        "(adapters with one: general_support_v2, manga_domain_v3)"
    )


def test_wait_component_ends_at_once_on_failed():
    """One DescribeInferenceComponent, then the FailureReason; no polling until the timeout."""
    clock = FakeClock()
    with stubbed() as stubs:
        stubs.describe_component(BASE, status="Failed", copies=0, FailureReason="health check timed out")
        with pytest.raises(OpsError) as info:
            wait_component(
                stubs.clients.sagemaker,
                BASE,
                timeout_s=600,
                poll_s=30,
                clock=clock,
                sleep=clock.sleep,
                timeout_flag="--wake-timeout-s",
            )
    assert info.value.code == ExitCode.NOT_READY
    assert str(info.value) == f"inference component {BASE} is Failed (health check timed out)"
    assert clock.sleeps == []
