"""``smoke`` against stubbed SageMaker clients: table, failures and exit codes."""

import json

from ops.cli import main
from ops.exit_codes import ExitCode
from tests.unit.ops.ops_stubs import ADAPTERS, ENDPOINT, FakeClock, Stubs, stubbed

ARGS = ["smoke", "--endpoint-name", ENDPOINT]


def _queue_all_ok(stubs: Stubs, variants=("primary", "canary")) -> None:
    for adapter in ADAPTERS:
        for variant in variants:
            stubs.invoke(variant, adapter)
            stubs.invoke_stream(variant, adapter)


def test_smoke_passes_every_adapter_variant_and_mode():
    with stubbed() as stubs:
        stubs.describe_endpoint()
        _queue_all_ok(stubs)
        code = main(ARGS, stubs.deps(FakeClock(tick=0.01)))
    assert code == ExitCode.OK
    out = stubs.output
    assert f"endpoint {ENDPOINT}: InService (primary=95 x4, canary=5 x1)" in out
    assert out.splitlines()[1].split() == ["adapter", "variant", "mode", "status", "ttft", "latency"]
    rows = [line.split() for line in out.splitlines()[3:15]]
    assert len(rows) == 12  # 3 adapters x 2 variants x 2 modes
    assert {(r[0], r[1], r[2]) for r in rows} == {
        (a, v, m) for a in ADAPTERS for v in ("primary", "canary") for m in ("sync", "stream")
    }
    assert all(r[3] == "ok" for r in rows)
    # Clock ticks 10 ms per read: sync = start, end; stream = start, first content, end.
    stream_row = next(r for r in rows if r[2] == "stream")
    assert stream_row[4:] == ["10", "ms", "20", "ms"]
    sync_row = next(r for r in rows if r[2] == "sync")
    assert sync_row[4:] == ["-", "10", "ms"]
    assert out.endswith("smoke passed: 12 request(s), 3 adapter(s) x 2 variant(s)")


def test_smoke_fails_when_endpoint_not_in_service(capsys):
    with stubbed() as stubs:
        stubs.describe_endpoint(status="Updating")
        code = main(ARGS, stubs.deps(FakeClock()))
    assert code == ExitCode.NOT_READY
    assert capsys.readouterr().err.strip() == f"error: endpoint {ENDPOINT} is Updating, not InService"
    assert stubs.lines == []


def test_smoke_fails_when_endpoint_failed_with_reason(capsys):
    with stubbed() as stubs:
        stubs.describe_endpoint(status="Failed", FailureReason="CUDA out of memory")
        code = main(ARGS, stubs.deps(FakeClock()))
    assert code == ExitCode.NOT_READY
    assert "is Failed, not InService (CUDA out of memory)" in capsys.readouterr().err


def test_smoke_fails_on_unknown_variant(capsys):
    with stubbed() as stubs:
        stubs.describe_endpoint()
        code = main([*ARGS, "--variant", "shadow"], stubs.deps(FakeClock()))
    assert code == ExitCode.NOT_READY
    assert "has no variant 'shadow' (variants: primary, canary)" in capsys.readouterr().err


def test_smoke_reports_model_error_from_one_variant():
    with stubbed() as stubs:
        stubs.describe_endpoint()
        stubs.invoke("primary", "manga_domain_v3")
        stubs.invoke_model_error("canary", "manga_domain_v3", status=503)
        code = main([*ARGS, "--adapter", "manga_domain_v3", "--mode", "sync"], stubs.deps(FakeClock(tick=0.01)))
    assert code == ExitCode.CHECK_FAILED
    rows = [line.split() for line in stubs.lines[1].splitlines()[2:]]
    assert rows[0][:4] == ["manga_domain_v3", "primary", "sync", "ok"]
    assert rows[1][:5] == ["manga_domain_v3", "canary", "sync", "ModelError", "503"]
    assert "FAIL manga_domain_v3 on canary (sync): ModelError 503: Received server error (503)" in stubs.output
    assert stubs.lines[-1] == "smoke FAILED: 1 of 2 request(s) failed"


def test_smoke_reports_stream_error_event():
    error = {"ModelStreamError": {"Message": "engine aborted the request", "ErrorCode": "ModelStreamError"}}
    with stubbed() as stubs:
        stubs.describe_endpoint()
        stubs.invoke_stream("primary", "jp_style_v1", [{"PayloadPart": {"Bytes": b'data: {"choices":[]}'}}, error])
        code = main(
            [*ARGS, "--adapter", "jp_style_v1", "--variant", "primary", "--mode", "stream"],
            stubs.deps(FakeClock()),
        )
    assert code == ExitCode.CHECK_FAILED
    assert "jp_style_v1  primary  stream  stream ModelStreamError" in stubs.output
    assert "FAIL jp_style_v1 on primary (stream): stream ModelStreamError: ModelStreamError: engine aborted" in (
        stubs.output
    )


def test_smoke_rejects_empty_content():
    with stubbed() as stubs:
        stubs.describe_endpoint()
        stubs.invoke("canary", "general_support_v2", content="  ")
        code = main(
            [*ARGS, "--adapter", "general_support_v2", "--variant", "canary", "--mode", "sync"],
            stubs.deps(FakeClock()),
        )
    assert code == ExitCode.CHECK_FAILED
    assert "FAIL general_support_v2 on canary (sync): bad answer: answer content is empty" in stubs.output


def test_smoke_reads_endpoint_from_outputs_file(tmp_path):
    outputs = tmp_path / "cdk-outputs.json"
    outputs.write_text(
        json.dumps(
            {
                "MangaAssist-prod-ImageRepository": {"ImageRepositoryUri": "x"},
                "MangaAssist-prod-Serving": {
                    "EndpointName": ENDPOINT,
                    "PrimaryVariantName": "primary",
                    "CanaryVariantName": "canary",
                },
            }
        )
    )
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 100.0})
        stubs.invoke("primary", "manga_domain_v3")
        code = main(
            ["smoke", "--stack-outputs", str(outputs), "--adapter", "manga_domain_v3", "--mode", "sync"],
            stubs.deps(FakeClock()),
        )
    assert code == ExitCode.OK


def test_smoke_reads_endpoint_from_describe_stacks():
    with stubbed() as stubs:
        stubs.cloudformation.add_response(
            "describe_stacks",
            {
                "Stacks": [
                    {
                        "StackName": "MangaAssist-dev-Serving",
                        "CreationTime": "2026-11-20T00:00:00Z",
                        "StackStatus": "UPDATE_COMPLETE",
                        "Outputs": [{"OutputKey": "EndpointName", "OutputValue": ENDPOINT}],
                    }
                ]
            },
            {"StackName": "MangaAssist-dev-Serving"},
        )
        stubs.describe_endpoint(weights={"primary": 100.0})
        stubs.invoke("primary", "jp_style_v1")
        code = main(["smoke", "--stage", "dev", "--adapter", "jp_style_v1", "--mode", "sync"], stubs.deps(FakeClock()))
    assert code == ExitCode.OK


def test_missing_outputs_file_is_a_usage_error(tmp_path, capsys):
    with stubbed() as stubs:
        code = main(["smoke", "--stack-outputs", str(tmp_path / "nope.json")], stubs.deps(FakeClock()))
    assert code == ExitCode.USAGE
    assert capsys.readouterr().err.strip() == (
        f"error: --stack-outputs {tmp_path / 'nope.json'}: cannot read (No such file or directory)"
    )


def test_outputs_file_without_serving_stack_names_the_stacks(tmp_path, capsys):
    outputs = tmp_path / "out.json"
    outputs.write_text(json.dumps({"MangaAssist-prod-ImageRepository": {"ImageRepositoryUri": "x"}}))
    with stubbed() as stubs:
        code = main(["smoke", "--stack-outputs", str(outputs)], stubs.deps(FakeClock()))
    assert code == ExitCode.USAGE
    assert capsys.readouterr().err.strip() == (
        f"error: --stack-outputs {outputs}: no stack 'MangaAssist-prod-Serving' with output 'EndpointName' "
        "(stacks: MangaAssist-prod-ImageRepository)"
    )


SHA = "c" * 64
PINS = {"base_model": f"v1/{SHA}", "adapters": {a: f"v3/{SHA}" for a in ADAPTERS}}


def _pinned_cdk_json(tmp_path):
    path = tmp_path / "cdk.json"
    context = {"stage": "prod", "stages": {"prod": {"image": {"build": {"primary": PINS}}}}}
    path.write_text(json.dumps({"context": context}))
    return str(path)


def _served(adapter: str, adapter_pin: str = f"v3/{SHA}") -> str:
    return f"base_model=llama-3-8b-instruct-awq/v1/{SHA};adapter={adapter}/{adapter_pin}"


def test_smoke_checks_each_answer_names_the_pinned_versions(tmp_path):
    with stubbed() as stubs:
        stubs.describe_endpoint()
        for adapter in ADAPTERS:
            for variant in ("primary", "canary"):
                stubs.invoke(variant, adapter, custom_attributes=_served(adapter))
                stubs.invoke_stream(variant, adapter, custom_attributes=_served(adapter))
        code = main([*ARGS, "--cdk-json", _pinned_cdk_json(tmp_path)], stubs.deps(FakeClock(tick=0.01)))
    assert code == ExitCode.OK, stubs.output


def test_smoke_fails_an_answer_from_another_version(tmp_path):
    with stubbed() as stubs:
        stubs.describe_endpoint()
        for adapter in ADAPTERS:
            for variant in ("primary", "canary"):
                old = variant == "canary" and adapter == "jp_style_v1"
                served = _served(adapter, f"v2/{SHA}" if old else f"v3/{SHA}")
                stubs.invoke(variant, adapter, custom_attributes=served)
                stubs.invoke_stream(variant, adapter, custom_attributes=None if old else served)
        code = main([*ARGS, "--cdk-json", _pinned_cdk_json(tmp_path)], stubs.deps(FakeClock(tick=0.01)))
    assert code == ExitCode.CHECK_FAILED
    assert (
        f"FAIL jp_style_v1 on canary (sync): wrong version: served adapter 'jp_style_v1/v2/{SHA}', pinned "
        f"'jp_style_v1/v3/{SHA}'"
    ) in stubs.output
    assert (
        "FAIL jp_style_v1 on canary (stream): wrong version: the answer names no versions (no CustomAttributes; "
        "an image older than issue 36?)"
    ) in stubs.output
    assert stubs.output.endswith("smoke FAILED: 2 of 12 request(s) failed")
