"""``ops shadow report`` and ``ops shadow promote`` on captured files shaped like SageMaker's data capture output
(serving_contract/data_capture.py: ``<variant>/yyyy/mm/dd/hh/*.jsonl`` of ``captureData`` records, JSON and
BASE64 encodings, both variants' records of one request sharing its ``inferenceId``), with botocore Stubbers for
CloudWatch's GetMetricData and DescribeAlarms, SageMaker's DescribeEndpoint, S3 and the Bedrock judge that lists
an answer's titles; offline (no AWS region) on a capture folder; and ``python -m ops shadow report`` without a
region in a fresh process (issue 54, item 4)."""

import base64
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from ops.cli import Deps, main
from ops.exit_codes import ExitCode, OpsError
from ops.shadow import ShadowClients
from ops.shadow.capture import parse_record
from tests.botocore_helpers import streaming_body

REPO = Path(__file__).resolve().parents[3]
NOW = dt.datetime(2026, 11, 27, 10, 0, 30, tzinfo=dt.UTC)
ENDPOINT = "mangaassist-vllm-prod"
SHADOW_PINS = {
    "base_model": "v2/" + "2" * 64,
    "adapters": {
        "manga_domain_v3": "v4/" + "3" * 64,
        "general_support_v2": "v2/" + "4" * 64,
        "jp_style_v1": "v2/" + "5" * 64,
    },
}
CATALOG = [
    {"title": "葬送のフリーレン", "aliases": ["Frieren"]},
    {"title": "進撃の巨人", "aliases": ["Attack on Titan"]},
]
GOOD = "Try Frieren: a quiet fantasy."
INVENTED = "Try Kuki Spirit, a classic."


def _client(service: str) -> Any:
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


def _cdk_json(tmp_path: Path, **overlay: Any) -> Path:
    """A cdk.json whose prod overlay runs the shadow (the canary off), with its own pins."""
    data = json.loads((REPO / "cdk.json").read_text())
    prod = {"serving": {"shadow": {"enabled": True, "min_captured_answers": 3}, "canary": {"enabled": False}}}
    prod["image"] = {"build": {"shadow": SHADOW_PINS}}
    data["context"]["stages"]["prod"] = prod | overlay
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def _record(event: str, text: str, *, stream: bool = False, inference_id: str | None = None, error: str = "") -> str:
    """One capture record of a chat answer: JSON-encoded, or a streamed answer captured BASE64; ``error``: the
    gateway's error object instead of an answer."""
    request = {
        "observedContentType": "application/json",
        "mode": "INPUT",
        "encoding": "JSON",
        "data": json.dumps({"messages": [{"role": "user", "content": "Recommend a manga."}]}),
    }
    if stream:
        chunks = [{"choices": [{"delta": {"content": part}}]} for part in (text[:5], text[5:])]
        sse = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        output = {
            "observedContentType": "text/event-stream",
            "mode": "OUTPUT",
            "encoding": "BASE64",
            "data": base64.b64encode(sse.encode()).decode(),
        }
    else:
        answer: dict[str, Any] = {"choices": [{"message": {"role": "assistant", "content": text}}]}
        if error:
            answer = {"error": {"message": error, "type": "BadRequest", "code": 400}}
        output = {
            "observedContentType": "application/json",
            "mode": "OUTPUT",
            "encoding": "JSON",
            "data": json.dumps(answer),
        }
    return json.dumps(
        {
            "captureData": {"endpointInput": request, "endpointOutput": output},
            "eventMetadata": {
                "eventId": event,
                "inferenceTime": "2026-11-27T09:10:00Z",
                **({"inferenceId": inference_id} if inference_id else {}),
            },
            "eventVersion": "0",
        }
    )


def _captures(folder: Path, variant: str, texts: list[str], ids: list[str | None] | None = None) -> None:
    """One hourly file of ``variant``, as SageMaker lays it out: <variant>/2026/11/27/09/<file>.jsonl; record i
    carries inferenceId ``ids[i]`` (default ``req-<i>``: the same request in both variants)."""
    hour = folder / variant / "2026" / "11" / "27" / "09"
    hour.mkdir(parents=True, exist_ok=True)
    ids = ids if ids is not None else [f"req-{i}" for i in range(len(texts))]
    lines = [_record(f"e-{variant}-{i}", text, stream=i == 0, inference_id=ids[i]) for i, text in enumerate(texts)]
    (hour / "09-10-00-000-abc.jsonl").write_text("\n".join(lines) + "\n")


def _metrics(stub: Stubber, shadow_ttft_p95: float = 310.0, shadow_5xx: float = 0.0) -> None:
    values = {
        "v0_ttft_cold_p50": 180.0,
        "v0_ttft_cold_p95": 320.0,
        "v0_ttft_warm_p50": 60.0,
        "v0_ttft_warm_p95": 90.0,
        "v0_invocations": 2000.0,
        "v0_errors": 1.0,
        "v1_ttft_cold_p50": 170.0,
        "v1_ttft_cold_p95": shadow_ttft_p95,
        "v1_ttft_warm_p50": 55.0,
        "v1_ttft_warm_p95": 85.0,
        "v1_invocations": 200.0,
        "v1_errors": shadow_5xx,
    }
    results = [
        {
            "Id": key,
            "Label": key,
            "Timestamps": [NOW - dt.timedelta(hours=2)],
            "Values": [value],
            "StatusCode": "Complete",
        }
        for key, value in values.items()
    ]
    stub.add_response(
        "get_metric_data",
        {"MetricDataResults": results},
        {
            "MetricDataQueries": ANY,
            "StartTime": dt.datetime(2026, 11, 27, 8, 0, tzinfo=dt.UTC),
            "EndTime": dt.datetime(2026, 11, 27, 10, 0, tzinfo=dt.UTC),
        },
    )


def _endpoint(stub: Stubber) -> None:
    variant = {"CurrentInstanceCount": 4, "DesiredInstanceCount": 4}
    stub.add_response(
        "describe_endpoint",
        {
            "EndpointName": ENDPOINT,
            "EndpointArn": f"arn:aws:sagemaker:us-east-1:123456789012:endpoint/{ENDPOINT}",
            "EndpointConfigName": "config-1",
            "EndpointStatus": "InService",
            "CreationTime": NOW,
            "LastModifiedTime": NOW,
            "ProductionVariants": [{"VariantName": "primary", "CurrentWeight": 100.0, **variant}],
            "ShadowProductionVariants": [{"VariantName": "shadow", "CurrentWeight": 9.5, **variant}],
        },
        {"EndpointName": ENDPOINT},
    )


def _listings(stub: Stubber, listings: list[str]) -> None:
    for listed in listings:
        stub.add_response(
            "converse",
            {
                "output": {"message": {"role": "assistant", "content": [{"text": listed}]}},
                "stopReason": "end_turn",
                "usage": {"inputTokens": 40, "outputTokens": 4, "totalTokens": 44},
                "metrics": {"latencyMs": 90},
            },
            {"modelId": "amazon.nova-pro-v1:0", "system": ANY, "messages": ANY, "inferenceConfig": ANY},
        )


class _Run:
    """The stubbed clients of one command, checked to be used up."""

    def __init__(self) -> None:
        self.clients = ShadowClients(
            _client("sagemaker"), _client("cloudwatch"), _client("s3"), _client("bedrock-runtime")
        )
        self.stubs = {
            name: Stubber(getattr(self.clients, name)) for name in ("sagemaker", "cloudwatch", "s3", "bedrock")
        }

    def __enter__(self) -> "_Run":
        for stub in self.stubs.values():
            stub.activate()
        return self

    def __exit__(self, *exc: object) -> None:
        for stub in self.stubs.values():
            stub.deactivate()

    def main(self, argv: list[str], lines: list[str]) -> int:
        deps = Deps(shadow_clients=lambda r, p: self.clients, now=lambda: NOW, out=lines.append)
        code = main(argv, deps)
        for stub in self.stubs.values():
            stub.assert_no_pending_responses()
        return code


def _catalog(tmp_path: Path) -> Path:
    path = tmp_path / "catalog.jsonl"
    path.write_text("".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in CATALOG))
    return path


def _argv(tmp_path: Path, action: str, *extra: str) -> list[str]:
    return [
        "shadow",
        action,
        "--cdk-json",
        str(tmp_path / "cdk.json"),
        "--hours",
        "2",
        "--catalog",
        str(_catalog(tmp_path)),
        *extra,
    ]


def test_the_report_compares_ttft_per_class_errors_lengths_and_guardrails_and_passes(tmp_path: Path) -> None:
    _cdk_json(tmp_path)
    _captures(tmp_path / "capture", "primary", [GOOD, GOOD, GOOD])
    _captures(tmp_path / "capture", "shadow", [GOOD, GOOD + " Also Attack on Titan.", GOOD])
    lines: list[str] = []
    with _Run() as run:
        _metrics(run.stubs["cloudwatch"])
        _listings(run.stubs["bedrock"], ["Frieren"] * 3 + ["Frieren", "Frieren\nAttack on Titan", "Frieren"])
        _endpoint(run.stubs["sagemaker"])
        code = run.main(_argv(tmp_path, "report", "--capture-dir", str(tmp_path / "capture")), lines)
    assert code == ExitCode.OK, "\n".join(lines)
    assert (
        lines[0]
        == "shadow report mangaassist-vllm-prod: primary vs shadow, 2026-11-27 08:00 .. 2026-11-27 10:00 UTC (2 h)"
    )
    assert lines[1] == (
        "sampling: the shadow gets a copy of 9.5 % of requests (DescribeEndpoint weights: primary 100, shadow 9.5)"
    )
    assert lines[2:4] == [
        "pairing by inferenceId: 3 of the shadow's 3 newest answers paired; 0 without an inferenceId (their caller "
        "set none), 0 with no primary answer in the window",
        "streamed answers among the pairs: primary 1, shadow 1; shadow answers 'session not found' (a turn of a "
        "session it never opened): 0",
    ]
    assert lines[4:16] == [
        "                                    primary            shadow",
        "TTFT p50 cold (ms)                      180               170",
        "TTFT p95 cold (ms)                      320               310",
        "TTFT p50 warm (ms)                       60                55",
        "TTFT p95 warm (ms)                       90                85",
        "invocations                           2,000               200",
        "5xx errors                       1 (0.05 %)        0 (0.00 %)",
        "paired answers                            3                 3",
        "answer length p10 (chars)                29                29",
        "answer length p50 (chars)                29                29",
        "answer length p90 (chars)                29                47",  # one streamed answer is longer
        "guardrail pass share          100.0 % (3/3)     100.0 % (3/3)",
    ]
    assert lines[-6:] == [
        "PASS shadow TTFT p95 cold = 310 ms (at most 500 ms, slo.cold.ttft_p95_ms)",
        "PASS shadow TTFT p95 warm = 85 ms (at most 500 ms, slo.warm.ttft_p95_ms)",
        "PASS shadow 5xx rate = 0.00 % (at most 0.5 %, slo.max_error_rate)",
        "PASS shadow paired answers = 3 (at least 3, serving.shadow.min_captured_answers)",
        "PASS shadow guardrail pass share = 100.0 % (at least the primary's 100.0 % - 2 points, "
        "serving.shadow.guardrail_share_tolerance)",
        "verdict: PASS (the shadow may become the canary: mangaassist-ops shadow promote)",
    ]


def test_a_slow_shadow_that_invents_titles_fails_the_report(tmp_path: Path) -> None:
    _cdk_json(tmp_path)
    _captures(tmp_path / "capture", "primary", [GOOD, GOOD, GOOD])
    _captures(tmp_path / "capture", "shadow", [GOOD, INVENTED, GOOD])
    lines: list[str] = []
    with _Run() as run:
        _metrics(run.stubs["cloudwatch"], shadow_ttft_p95=640.0, shadow_5xx=2.0)
        _listings(run.stubs["bedrock"], ["Frieren"] * 3 + ["Frieren", "Kuki Spirit", "Frieren"])
        _endpoint(run.stubs["sagemaker"])
        code = run.main(_argv(tmp_path, "report", "--capture-dir", str(tmp_path / "capture")), lines)
    assert code == ExitCode.CHECK_FAILED
    assert "FAIL shadow TTFT p95 cold = 640 ms (at most 500 ms, slo.cold.ttft_p95_ms)" in lines
    assert "FAIL shadow 5xx rate = 1.00 % (at most 0.5 %, slo.max_error_rate)" in lines
    assert (
        "FAIL shadow guardrail pass share = 66.7 % (at least the primary's 100.0 % - 2 points, "
        "serving.shadow.guardrail_share_tolerance)"
    ) in lines
    assert lines[-1] == "verdict: FAIL (3 of 5 checks failed)"


def test_the_report_reads_the_captures_from_the_bucket_by_hour(tmp_path: Path) -> None:
    _cdk_json(tmp_path)
    lines: list[str] = []
    with _Run() as run:
        _metrics(run.stubs["cloudwatch"])
        s3 = run.stubs["s3"]
        for variant in ("shadow", "primary"):  # the shadow's answers, then the primary's of the same requests
            for hour in ("10", "09"):  # newest first; 09 holds the answers
                prefix = f"data-capture/{ENDPOINT}/{variant}/2026/11/27/{hour}/"
                key = f"{prefix}09-10-00-000-abc.jsonl"
                contents = [{"Key": key, "Size": 10}] if hour == "09" else []
                s3.add_response(
                    "list_objects_v2",
                    {"Contents": contents, "KeyCount": len(contents)},
                    {"Bucket": "artifacts", "Prefix": prefix},
                )
                if contents:
                    body = "\n".join(_record(f"{variant}-{i}", GOOD, inference_id=f"r{i}") for i in range(3)) + "\n"
                    s3.add_response("get_object", {"Body": streaming_body(body)}, {"Bucket": "artifacts", "Key": key})
        _listings(run.stubs["bedrock"], ["Frieren"] * 6)
        _endpoint(run.stubs["sagemaker"])
        code = run.main(_argv(tmp_path, "report", "--bucket", "artifacts"), lines)
    assert code == ExitCode.OK, "\n".join(lines)


def test_promote_writes_the_shadow_as_the_canary_once_it_passes_and_its_alarms_are_quiet(tmp_path: Path) -> None:
    path = _cdk_json(tmp_path)
    _captures(tmp_path / "capture", "primary", [GOOD] * 3)
    _captures(tmp_path / "capture", "shadow", [GOOD] * 3)
    lines: list[str] = []
    with _Run() as run:
        _metrics(run.stubs["cloudwatch"])
        _listings(run.stubs["bedrock"], ["Frieren"] * 6)
        _endpoint(run.stubs["sagemaker"])
        _alarms(run.stubs["cloudwatch"], "OK")
        code = run.main(_argv(tmp_path, "promote", "--capture-dir", str(tmp_path / "capture"), "--write"), lines)
    assert code == ExitCode.OK, "\n".join(lines)
    prod = json.loads(path.read_text())["context"]["stages"]["prod"]
    assert prod["image"]["build"]["canary"] == SHADOW_PINS
    assert prod["serving"]["canary"]["enabled"] is True and prod["serving"]["shadow"]["enabled"] is False
    assert lines[-1].startswith("next: `make deploy` (a new endpoint config: the primary and the canary")


def test_promote_refuses_while_a_shadow_alarm_fires(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _cdk_json(tmp_path)
    before = path.read_text()
    _captures(tmp_path / "capture", "primary", [GOOD] * 3)
    _captures(tmp_path / "capture", "shadow", [GOOD] * 3)
    with _Run() as run:
        _metrics(run.stubs["cloudwatch"])
        _listings(run.stubs["bedrock"], ["Frieren"] * 6)
        _endpoint(run.stubs["sagemaker"])
        _alarms(run.stubs["cloudwatch"], "ALARM")
        code = run.main(_argv(tmp_path, "promote", "--capture-dir", str(tmp_path / "capture"), "--write"), [])
    assert code == ExitCode.NOT_READY
    assert capsys.readouterr().err == (
        f"error: shadow alarm(s) in ALARM: {ENDPOINT}-shadow-engine-errors; the shadow does not become the canary\n"
    )
    assert path.read_text() == before


def _alarms(stub: Stubber, engine_state: str) -> None:
    from serving_contract.alarms import shadow_alarm_names

    names = shadow_alarm_names(ENDPOINT, "shadow")
    alarms = [
        {"AlarmName": name, "StateValue": engine_state if name.endswith("engine-errors") else "OK"} for name in names
    ]
    stub.add_response(
        "describe_alarms", {"MetricAlarms": alarms}, {"AlarmNames": list(names), "AlarmTypes": ["MetricAlarm"]}
    )


def test_without_a_shadow_the_commands_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads((REPO / "cdk.json").read_text())
    (tmp_path / "cdk.json").write_text(json.dumps(data))
    deps = Deps(shadow_clients=lambda r, p: ShadowClients(None, None, None, None))
    assert main(_argv(tmp_path, "report", "--capture-dir", str(tmp_path)), deps) == 2
    assert (
        capsys.readouterr().err
        == "error: serving.shadow.enabled = false in stage prod: there is no shadow to compare\n"
    )


def test_a_capture_record_without_a_readable_answer_counts_as_no_answer() -> None:
    broken = json.loads(_record("e1", GOOD))
    broken["captureData"]["endpointOutput"]["data"] = "{not json"
    assert parse_record(json.dumps(broken)).problem == "answer not readable (JSONDecodeError)"
    assert parse_record(_record("e2", GOOD, stream=True)).text == GOOD
    with pytest.raises(ValueError, match="not a SageMaker data capture record"):
        parse_record('{"data": 1}')


def _offline(region: str | None, profile: str | None) -> ShadowClients:
    raise OpsError("--region: no region", ExitCode.NO_AWS)


def test_offline_on_a_capture_folder_pairs_by_inference_id_and_leaves_the_aws_checks_not_computed(
    tmp_path: Path,
) -> None:
    _cdk_json(tmp_path)
    capture = tmp_path / "capture"
    _captures(capture, "primary", [GOOD, GOOD, GOOD, GOOD], ids=["a", "b", "c", "d"])
    # The shadow saw b, c and d, a request without an id, one the primary's capture lacks, and a follow-up turn
    # of a session it never opened (the gateway's 400, as tests/engine/test_real_sessions.py sees it answered).
    _captures(capture, "shadow", [GOOD, GOOD, GOOD, GOOD, GOOD], ids=["b", "c", "d", None, "zz"])
    unknown = _record("e-shadow-x", "", inference_id="a", error="session not found: 'sess-1' (never opened here)")
    (capture / "shadow/2026/11/27/09/09-20-00-000-def.jsonl").write_text(unknown + "\n")
    lines: list[str] = []
    code = main(
        _argv(tmp_path, "report", "--capture-dir", str(capture), "--max-answers", "6"),
        Deps(shadow_clients=_offline, now=lambda: NOW, out=lines.append),
    )
    assert code == ExitCode.INCOMPLETE, "\n".join(lines)
    assert lines[0].startswith("offline: no AWS region: the captured answers are paired and compared")
    assert lines[2] == "sampling: not read (offline: DescribeEndpoint)"
    assert lines[3] == (
        "pairing by inferenceId: 4 of the shadow's 6 newest answers paired; 1 without an inferenceId (their caller "
        "set none), 1 with no primary answer in the window"
    )
    assert lines[4] == (
        "streamed answers among the pairs: primary 1, shadow 1; shadow answers 'session not found' (a turn of a "
        "session it never opened): 1"
    )
    assert (
        "NOT COMPUTED shadow TTFT p95 cold: offline: CloudWatch's figures need an AWS region and credentials" in lines
    )
    assert "PASS shadow paired answers = 4 (at least 3, serving.shadow.min_captured_answers)" in lines
    assert "NOT COMPUTED guardrail pass share: offline: the invented-titles check asks Bedrock's judge model" in lines
    assert lines[-1] == "verdict: INCOMPLETE (no check failed, 4 not computed; exit 11)"


def test_no_captured_answer_is_its_own_exit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _cdk_json(tmp_path)
    (tmp_path / "capture").mkdir()
    deps = Deps(shadow_clients=_offline, now=lambda: NOW, out=lambda line: None)
    assert main(_argv(tmp_path, "report", "--capture-dir", str(tmp_path / "capture")), deps) == ExitCode.NO_DATA
    assert capsys.readouterr().err.startswith("error: no captured answer of the shadow variant shadow in the last 2 h")


def _without_aws(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return env | {
        "HOME": str(tmp_path),
        "AWS_CONFIG_FILE": str(tmp_path / "no"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no"),
    }


def test_python_dash_m_ops_shadow_report_without_a_region_prints_one_line_not_a_traceback(tmp_path: Path) -> None:
    """The command as an SRE types it, in a fresh process with no AWS configuration at all."""
    _cdk_json(tmp_path)
    command = [sys.executable, "-m", "ops", "shadow", "report", "--cdk-json", str(tmp_path / "cdk.json")]
    result = subprocess.run(
        command, cwd=REPO, env=_without_aws(tmp_path), capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == ExitCode.NO_AWS
    assert result.stdout == "" and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(
        "error: --region: `shadow report` reads CloudWatch, DescribeEndpoint and Bedrock's judge"
    )
    # The default config has no shadow: that too is one line, before any AWS call.
    bare = subprocess.run(
        [sys.executable, "-m", "ops", "shadow", "report"],
        cwd=REPO,
        env=_without_aws(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (bare.returncode, bare.stderr) == (
        ExitCode.USAGE,
        "error: serving.shadow.enabled = false in stage prod: there is no shadow to compare\n",
    )


def test_a_capture_record_of_the_gateways_error_is_no_answer_and_says_why() -> None:
    answer = parse_record(_record("e", "", inference_id="i", error="session not found: 'x' (never opened here)"))
    assert (answer.text, answer.session_unknown, answer.inference_id) == ("", True, "i")
    assert answer.problem == "error: session not found: 'x' (never opened here)"
