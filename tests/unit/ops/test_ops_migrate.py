"""``ops migrate score|sample|report`` (issue 54, items 2 and 3) on stores written by the client library's own
pair store (mangaassist_client.pairs.DirectoryPairStore), the invented example of docs/examples/, and botocore
Stubbers for Bedrock (Titan embeddings, ApplyGuardrail, the title judge) and S3."""

import datetime as dt
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from devtools import migration_example
from mangaassist_client import DirectoryPairStore
from mangaassist_client.mirror import Pair, Side
from mangaassist_client.model import ServedVersions, Usage
from ops.cli import Deps, main
from ops.exit_codes import ExitCode
from ops.migrate import MigrateClients
from tests.botocore_helpers import streaming_body
from tests.client.stubs import Lines

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "docs" / "examples" / "migration-invented"
NOW = dt.datetime(2026, 11, 16, 8, 0, tzinfo=dt.UTC)
ENDPOINT = "sagemaker:mangaassist-vllm-prod"
BEDROCK = "bedrock:meta.llama3-1-8b-instruct-v1:0"


def _client(service: str) -> Any:
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


def _cdk_json(tmp_path: Path, prod: dict[str, Any]) -> Path:
    data = json.loads((REPO / "cdk.json").read_text())
    data["context"]["stages"]["prod"] = prod
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps(data))
    return path


def _run(argv: list[str], clients: MigrateClients | None = None) -> tuple[int, list[str]]:
    out: list[str] = []

    def factory(region: str | None, profile: str | None, what: str) -> MigrateClients:
        assert clients is not None, f"{what} asked for AWS clients"
        return clients

    code = main(argv, Deps(migrate_clients=factory, out=out.append, now=lambda: NOW))
    return code, out


def _side(backend: str, text: str, latency_s: float, ttft_s: float | None = None, error: str | None = None) -> Side:
    from mangaassist_client.model import Completion

    done = (
        None
        if error
        else Completion(text, Usage(40, max(1, len(text) // 4)), backend, "stop", ServedVersions("b", "a"))
    )
    return Side.of(backend, "m", done, seconds=(latency_s, ttft_s), error=error)


def write_store(root: Path, count: int, *, endpoint_text: str = "Try Frieren, a calm fantasy.", seed: int = 1) -> None:
    """``count`` pairs through the client's own DirectoryPairStore: Bedrock answered, the endpoint copied."""
    rng = random.Random(seed)
    store = DirectoryPairStore(root, sink=Lines(), flush_interval_s=0, batch_size=1000)
    for index in range(count):
        bedrock = _side(
            BEDROCK, "Try Frieren: quiet, kind, complete." + " x" * rng.randint(0, 9), rng.uniform(0.9, 1.3)
        )
        endpoint = _side(
            ENDPOINT, endpoint_text + " y" * rng.randint(0, 9), rng.uniform(0.5, 0.7), rng.uniform(0.1, 0.2)
        )
        pair = Pair(
            f"{index:032x}", "2026-11-10T10:00:00.000Z", "manga_domain_v3", "en", False, "0" * 64, bedrock, endpoint
        )
        store.put(pair.record())
    store.close()


# -- the invented example ----------------------------------------------------------------------------------------


def test_the_example_is_what_its_generator_writes() -> None:
    expected = migration_example.build(random.Random(54))
    found = {str(p.relative_to(EXAMPLE)) for p in EXAMPLE.rglob("*") if p.is_file()} - {"README.md"}
    assert found == set(expected), "run: .venv/bin/python -m devtools.migration_example"
    for relative, text in expected.items():
        assert (EXAMPLE / relative).read_text(encoding="utf-8") == text, relative


def _without_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS setting in the environment and no config or credentials file: what boto3 finds on a fresh machine."""
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))


def test_the_example_report_runs_in_a_fresh_process_with_no_aws_credentials_or_region(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {
        "HOME": str(tmp_path),
        "AWS_CONFIG_FILE": str(tmp_path / "no"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no"),
    }
    result = subprocess.run(
        [sys.executable, "-m", "ops", "migrate", "report", "--from", str(EXAMPLE)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.returncode, result.stderr) == (ExitCode.CHECK_FAILED, "")
    out = result.stdout
    for figure in (
        "length p50 E/B",
        "KS D (p)",
        "guardrail E/B",
        "similarity p50",
        "p95",
        "TTFT p95",
        "human preference",
    ):
        assert figure in out
    assert "PASS all: median semantic similarity = 0.866" in out
    assert "PASS all: endpoint preferred or tied in 60.0% of 40 labelled pairs" in out
    assert "FAIL manga_domain_v3/ja: endpoint error rate = 0.77%" in out
    assert "NOT JUDGED jp_style_v1/ja: 40 pairs (at least 100, migration.gates.min_pairs)" in out
    assert out.rstrip().endswith("verdict: FAIL: 3 gate(s) failed (exit 1)")


def test_the_gates_come_from_config(tmp_path: Path) -> None:
    cdk_json = _cdk_json(tmp_path, {"migration": {"gates": {"length_ks_max": 0.3}}, "slo": {"max_error_rate": 0.01}})
    code, out = _run(["migrate", "report", "--from", str(EXAMPLE), "--cdk-json", str(cdk_json)])
    assert code == ExitCode.OK and out[-1] == "verdict: PASS: every gate holds (exit 0)"
    assert (
        "PASS manga_domain_v3/ja: answer length KS D = 0.271 (at most 0.3, migration.gates.length_ks_max"
        in "\n".join(out)
    )


def test_without_stored_scores_the_report_says_what_it_needs_and_is_incomplete(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "store", ignore=shutil.ignore_patterns("scores"))
    cdk_json = _cdk_json(tmp_path, {"migration": {"gates": {"length_ks_max": 0.3}}, "slo": {"max_error_rate": 0.01}})
    code, out = _run(["migrate", "report", "--from", str(tmp_path / "store"), "--cdk-json", str(cdk_json)])
    assert code == ExitCode.INCOMPLETE
    text = "\n".join(out)
    assert (
        "NOT COMPUTED all: semantic similarity: 0 of 384 answered pairs scored, at least 100 needed; scoring needs "
        "Bedrock: run `python -m ops migrate score --from <store> --region <region>`" in text
    )
    assert out[-1] == "verdict: INCOMPLETE: no gate failed, 8 not computed (exit 11)"


def test_a_longer_endpoint_fails_the_length_gate_per_group(tmp_path: Path) -> None:
    write_store(tmp_path, 120, endpoint_text="Try Frieren. " * 12)
    code, out = _run(["migrate", "report", "--from", str(tmp_path)])
    assert code == ExitCode.CHECK_FAILED
    assert any(line.startswith("FAIL manga_domain_v3/en: answer length KS D = 1.000") for line in out)
    assert any(line.startswith("PASS all: endpoint TTFT p95") for line in out) is False  # not streamed: N/A
    assert "N/A all: TTFT p95: no streamed call was copied" in out


def test_no_pairs_is_its_own_exit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["migrate", "report", "--from", str(tmp_path)])[0] == ExitCode.NO_DATA
    assert capsys.readouterr().err.startswith(f"error: --from {tmp_path}: no pairs under pairs/")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "not JSON"),
        ('{"schema": 2}', "schema = 2: this report reads schema 1"),
        (
            '{"schema": 1, "request_id": "r"}',
            "not a pair: no at, adapter, language, stream, prompt_sha256, answer, copy",
        ),
    ],
)
def test_a_record_that_is_not_a_pair_is_one_line_naming_its_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    path = tmp_path / "pairs" / "2026" / "11" / "10" / "10" / "batch.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n" + line + "\n")
    assert _run(["migrate", "report", "--from", str(tmp_path)])[0] == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err == f"error: {tmp_path}/pairs/2026/11/10/10/batch.jsonl:2: {message}" + err.split(message, 1)[1]
    assert err.count("\n") == 1


def test_an_s3_store_without_a_region_is_one_line_saying_what_it_needs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _without_aws(monkeypatch, tmp_path)
    code = main(["migrate", "report", "--from", "s3://mangaassist-prod-migration-store"])
    assert code == ExitCode.NO_AWS
    err = capsys.readouterr().err
    assert (
        err.startswith("error: --region: `migrate report --from s3://...` needs AWS: a region") and err.count("\n") == 1
    )


# -- score: the Bedrock scores, stored beside the pairs ---------------------------------------------------------


def _embedding(stub: Stubber, vector: list[float]) -> None:
    body = {"embedding": vector, "inputTextTokenCount": 9}
    expected = {
        "modelId": "amazon.titan-embed-text-v2:0",
        "body": ANY,
        "contentType": "application/json",
        "accept": "application/json",
    }
    stub.add_response(
        "invoke_model", {"body": streaming_body(json.dumps(body)), "contentType": "application/json"}, expected
    )


def _guardrail(stub: Stubber, action: str) -> None:
    response = {
        "usage": {
            "topicPolicyUnits": 1,
            "contentPolicyUnits": 1,
            "wordPolicyUnits": 1,
            "sensitiveInformationPolicyUnits": 1,
            "sensitiveInformationPolicyFreeUnits": 0,
            "contextualGroundingPolicyUnits": 0,
        },
        "action": action,
        "outputs": [],
        "assessments": [],
    }
    expected = {"guardrailIdentifier": "gr0example", "guardrailVersion": "1", "source": "OUTPUT", "content": ANY}
    stub.add_response("apply_guardrail", response, expected)


def _titles(stub: Stubber, reply: str) -> None:
    answer = {
        "output": {"message": {"role": "assistant", "content": [{"text": reply}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1},
    }
    stub.add_response("converse", answer)


def test_score_stores_guardrail_verdicts_and_similarity_and_the_report_reads_them(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_store(store, 2)
    (tmp_path / "catalog.jsonl").write_text(json.dumps({"title": "葬送のフリーレン", "aliases": ["Frieren"]}) + "\n")
    cdk_json = _cdk_json(
        tmp_path,
        {
            "migration": {
                "guardrail_id": "gr0example",
                "guardrail_version": "1",
                "gates": {"min_pairs": 2, "min_labels": 1},
            }
        },
    )
    bedrock = _client("bedrock-runtime")
    with Stubber(bedrock) as stub:
        # Pair 1: the same direction (similarity 1); both pass. Pair 2: orthogonal; the endpoint invents a title.
        _embedding(stub, [1.0, 0.0])
        _embedding(stub, [1.0, 0.0])
        for _ in range(2):
            _guardrail(stub, "NONE")
            _titles(stub, "Frieren")
        _embedding(stub, [1.0, 0.0])
        _embedding(stub, [0.0, 1.0])
        _guardrail(stub, "NONE")
        _titles(stub, "Kuki Spirit")
        _guardrail(stub, "GUARDRAIL_INTERVENED")
        _titles(stub, "NONE")
        clients = MigrateClients(s3=None, bedrock=bedrock, ssm=None, cloudwatch=None)
        argv = [
            "migrate",
            "score",
            "--from",
            str(store),
            "--cdk-json",
            str(cdk_json),
            "--catalog",
            str(tmp_path / "catalog.jsonl"),
        ]
        code, out = _run(argv, clients)
        stub.assert_no_pending_responses()
    assert code == ExitCode.OK and out == ["scored 2 pair(s) of 2 (0 already scored) in " + str(store)]
    (scores,) = store.glob("scores/*/*/*/*/*.jsonl")
    first, second = (json.loads(line) for line in scores.read_text().splitlines())
    assert (first["similarity"], second["similarity"]) == (1.0, 0.0)
    assert second["guardrail"]["endpoint"] == {"passed": False, "action": "NONE", "invented_titles": ["Kuki Spirit"]}
    assert second["guardrail"]["bedrock"]["passed"] is False and second["guardrail_id"] == "gr0example:1"
    assert _run(argv, clients)[1] == ["scored 0 pair(s) of 2 (2 already scored) in " + str(store)]  # no Bedrock call
    report = "\n".join(_run(["migrate", "report", "--from", str(store), "--cdk-json", str(cdk_json)])[1])
    assert "FAIL all: median semantic similarity = 0.500" in report
    assert "PASS all: endpoint guardrail pass share = 50.0% (at least Bedrock's 50.0% - 2 points" in report


# -- sample: the human-preference sample, and its labels read back ----------------------------------------------


def test_a_sample_is_exported_in_random_ab_order_and_its_labels_are_read_back(tmp_path: Path) -> None:
    write_store(tmp_path, 20)
    code, out = _run(["migrate", "sample", "--from", str(tmp_path), "--name", "week-2", "--size", "10", "--seed", "3"])
    assert code == ExitCode.OK and out[0].startswith(f"sample week-2: 10 pairs in random A/B order: {tmp_path}/human/")
    tasks = [json.loads(line) for line in (tmp_path / "human/week-2/tasks.jsonl").read_text().splitlines()]
    key = {
        row["id"]: row["a"] for row in map(json.loads, (tmp_path / "human/week-2/key.jsonl").read_text().splitlines())
    }
    assert len(tasks) == 10 and set(key) == {task["id"] for task in tasks}
    assert set(key.values()) == {"endpoint", "bedrock"}  # both orders were drawn
    assert all("endpoint" not in json.dumps(task) and "sagemaker" not in json.dumps(task) for task in tasks)
    for task in tasks:  # answer A is the endpoint's exactly where the key says so
        assert task["answer_a"].startswith("Try Frieren, a calm") == (key[task["id"]] == "endpoint")
    # The raters prefer the endpoint's answer every time, whichever letter it had.
    labels = [{"id": t["id"], "preference": "a" if key[t["id"]] == "endpoint" else "b"} for t in tasks]
    (tmp_path / "human/week-2/labels.jsonl").write_text("".join(json.dumps(label) + "\n" for label in labels))
    cdk_json = _cdk_json(tmp_path, {"migration": {"gates": {"min_labels": 10}}})
    report = "\n".join(_run(["migrate", "report", "--from", str(tmp_path), "--cdk-json", str(cdk_json)])[1])
    assert "human preference (samples: week-2): endpoint 10, Bedrock 0, tie 0" in report
    assert "PASS all: endpoint preferred or tied in 100.0% of 10 labelled pairs (won 10, lost 0, tied 0" in report
    again = _run(["migrate", "sample", "--from", str(tmp_path), "--name", "week-2"])[0]
    assert again == ExitCode.USAGE  # a second sample would orphan the labels


def test_the_same_seed_draws_the_same_sample(tmp_path: Path) -> None:
    write_store(tmp_path, 30)
    for name in ("one", "two"):
        _run(["migrate", "sample", "--from", str(tmp_path), "--name", name, "--size", "5", "--seed", "9"])
    assert (tmp_path / "human/one/tasks.jsonl").read_text() == (tmp_path / "human/two/tasks.jsonl").read_text()


def test_a_bad_label_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_store(tmp_path, 4)
    _run(["migrate", "sample", "--from", str(tmp_path), "--name", "s", "--size", "2"])
    first = json.loads((tmp_path / "human/s/tasks.jsonl").read_text().splitlines()[0])["id"]
    (tmp_path / "human/s/labels.jsonl").write_text(json.dumps({"id": first, "preference": "A"}) + "\n")
    assert _run(["migrate", "report", "--from", str(tmp_path)])[0] == ExitCode.USAGE
    assert capsys.readouterr().err == f"error: {tmp_path}/human/s/labels.jsonl:1: preference = 'A': allowed a, b, tie\n"


# -- publish: the ramp's gate ------------------------------------------------------------------------------------


def test_publish_stores_the_verdict_in_the_s3_store_for_the_ramp(tmp_path: Path) -> None:
    write_store(tmp_path / "local", 3)
    (batch,) = (tmp_path / "local").glob("pairs/*/*/*/*/*.jsonl")
    s3 = _client("s3")
    with Stubber(s3) as stub:
        key = str(batch.relative_to(tmp_path / "local"))
        stub.add_response(
            "list_objects_v2",
            {"Contents": [{"Key": key, "Size": 1}], "KeyCount": 1},
            {"Bucket": "store", "Prefix": "pairs/"},
        )
        stub.add_response("get_object", {"Body": streaming_body(batch.read_bytes())}, {"Bucket": "store", "Key": key})
        for prefix in ("scores/", "human/"):
            stub.add_response("list_objects_v2", {"KeyCount": 0}, {"Bucket": "store", "Prefix": prefix})
        published: list[bytes] = []
        s3.meta.events.register(
            "provide-client-params.s3.PutObject", lambda params, **_: published.append(params["Body"])
        )
        stub.add_response(
            "put_object",
            {},
            {"Bucket": "store", "Key": "reports/latest.json", "Body": ANY, "ContentType": "application/json"},
        )
        clients = MigrateClients(s3=s3, bedrock=None, ssm=None, cloudwatch=None)
        code, out = _run(["migrate", "report", "--from", "s3://store", "--publish"], clients)
        stub.assert_no_pending_responses()
    assert code == ExitCode.INCOMPLETE  # 3 pairs: fewer than min_pairs
    assert out[-1] == "published: s3://store/reports/latest.json (verdict incomplete)"
    report = json.loads(published[0])
    assert (report["at"], report["verdict"], report["pairs"], report["source"]) == (
        "2026-11-16T08:00:00Z",
        "incomplete",
        3,
        "s3://store/",
    )


# -- status: the ramp's phase, its next step and that step's gates ----------------------------------------------

PARAMETER = "/cfn/ramp-state"
MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:Ramp"


def _outputs(tmp_path: Path) -> Path:
    path = tmp_path / "cdk-outputs.json"
    block = {
        "MigrationStateParameterName": PARAMETER,
        "MigrationStoreBucketName": "store",
        "MigrationRampStateMachineArn": MACHINE,
    }
    path.write_text(json.dumps({"MangaAssist-prod-Migration": block}))
    return path


def test_status_shows_the_phase_the_next_step_and_its_gates(tmp_path: Path) -> None:
    clients = MigrateClients(
        s3=_client("s3"),
        bedrock=None,
        ssm=_client("ssm"),
        cloudwatch=_client("cloudwatch"),
        stepfunctions=_client("stepfunctions"),
    )
    stubs = {name: Stubber(getattr(clients, name)) for name in ("s3", "ssm", "cloudwatch", "stepfunctions")}
    state = {
        "step": 1,
        "percent": 25,
        "status": "ramping",
        "since": "2026-11-14T08:00:00Z",
        "reason": "step 2: gates held",
    }
    stubs["ssm"].add_response(
        "get_parameter", {"Parameter": {"Name": PARAMETER, "Value": json.dumps(state)}}, {"Name": PARAMETER}
    )
    report = json.dumps({"at": "2026-11-16T06:00:00Z", "verdict": "pass", "pairs": 900}).encode()
    stubs["s3"].add_response(
        "get_object", {"Body": streaming_body(report)}, {"Bucket": "store", "Key": "reports/latest.json"}
    )
    alarms = [{"AlarmName": "mangaassist-vllm-prod-critical", "StateValue": "OK"}]
    stubs["cloudwatch"].add_response(
        "describe_alarms", {"MetricAlarms": alarms}, {"AlarmNames": ANY, "AlarmTypes": ANY}
    )
    stubs["stepfunctions"].add_response(
        "list_executions",
        {
            "executions": [
                {
                    "executionArn": MACHINE + ":run-1",
                    "stateMachineArn": MACHINE,
                    "name": "run-1",
                    "status": "RUNNING",
                    "startDate": dt.datetime(2026, 11, 6, 9, 0, tzinfo=dt.UTC),
                }
            ]
        },
        {"stateMachineArn": MACHINE, "statusFilter": "RUNNING"},
    )
    for stub in stubs.values():
        stub.activate()
    code, out = _run(["migrate", "status", "--stack-outputs", str(_outputs(tmp_path))], clients)
    for stub in stubs.values():
        stub.assert_no_pending_responses()
    assert code == ExitCode.OK
    assert out[0] == (
        "migration ramp of mangaassist-vllm-prod (stage prod): shadow phase, then 5 % 168 h -> 25 % 60 h -> 50 % 60 h "
        "-> 75 % 60 h -> 100 % 24 h"
    )
    assert out[1].startswith("gates the report judges (migration.gates), over at least 100 pairs: error rate <= 0.5%")
    assert out[2:] == [
        "phase: ramping, step 2 of 5: the endpoint answers 25 % of calls since 2026-11-14 08:00 UTC (step 2: gates "
        "held)",
        "next: step 3, 50 % of calls, not before 2026-11-16 20:00 UTC (12.0 h left)",
        "  gate: a passing report published after the step began, at most 24 h old (ops migrate report --publish): "
        "latest pass at 2026-11-16 06:00 UTC (counts)",
        "  gate: the watched alarms out of ALARM (any in ALARM rolls back): mangaassist-vllm-prod-critical OK, "
        "mangaassist-vllm-prod-client-fallback-rate MISSING",
        "execution: run-1 running since 2026-11-06 09:00 UTC",
    ]


def test_status_without_a_region_prints_the_plan_then_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _without_aws(monkeypatch, tmp_path)
    code = main(["migrate", "status", "--parameter-name", PARAMETER])
    captured = capsys.readouterr()
    assert code == ExitCode.NO_AWS and captured.out.startswith("migration ramp of mangaassist-vllm-prod")
    assert captured.err.startswith(
        "error: --region: `migrate status` (the ramp's parameter, alarms and report) needs AWS"
    )
    assert captured.err.count("\n") == 1
