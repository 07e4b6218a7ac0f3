"""The migration end to end (issue 54): the client in migration mode, a Converse stand-in answering (Bedrock
Runtime's wire protocol on a local socket, tests/client/wire.py, through botocore's real client), each call copied
asynchronously to the real gateway and vLLM's CPU engine through SageMaker's wire protocol
(tests/engine/sagemaker_shim.py), the pairs stored by the client's own DirectoryPairStore; then the ops commands
on that store: the Bedrock scores (``migrate score``, Bedrock's embedding, guardrail and judge calls answered by a
Stubber), a human sample exported in random A/B order and its labels read back, and the report computed offline.

Uses the shared gateway (tests/engine/conftest.py): the copies leave the engine as they found it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from mangaassist_client import (
    BedrockFoundationModel,
    ClientConfig,
    DirectoryPairStore,
    EmfSink,
    MangaAssistClient,
    MirrorConfig,
    SageMakerEndpoint,
    botocore_config,
)
from ops.cli import Deps, main
from ops.exit_codes import ExitCode
from ops.migrate import MigrateClients
from tests.botocore_helpers import streaming_body
from tests.client import wire
from tests.engine.real_engine import ENGINE_ENV, RealGateway
from tests.engine.sagemaker_shim import SageMakerShim

pytestmark = pytest.mark.real_engine

REPO = Path(__file__).resolve().parents[2]
ENDPOINT = ENGINE_ENV["ENDPOINT_NAME"]
FOUNDATION = "meta.llama3-1-8b-instruct-v1:0"
CALLS = (
    ("manga_domain_v3", "ja", False),
    ("manga_domain_v3", "ja", True),
    ("general_support_v2", "en", False),
    ("general_support_v2", "en", True),
    ("jp_style_v1", "ja", True),
)
"""(adapter, language, streamed): every adapter, both languages, sync and streamed calls."""
MESSAGES = [{"role": "user", "content": "Recommend one manga for a reader who liked Frieren."}]


@dataclass
class Migration:
    store: Path
    answers: list[str]
    records: list[dict[str, Any]]
    inference_ids: list[str]
    lines: list[str]


@pytest.fixture(scope="module")
def migration(shared_gateway: RealGateway, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Migration]:
    """Every call of :data:`CALLS` through the client in migration mode; the store once the client closed."""
    store = tmp_path_factory.mktemp("migration-store")
    shim = SageMakerShim(shared_gateway.url).start()
    lines: list[str] = []
    with wire.services() as bedrock:
        credentials = {"region_name": "us-east-1", "aws_access_key_id": "x", "aws_secret_access_key": "x"}
        runtime = boto3.client("sagemaker-runtime", endpoint_url=shim.url, config=botocore_config(120), **credentials)
        clients = {"sagemaker-runtime": runtime, "bedrock-runtime": bedrock.client("bedrock-runtime")}
        config = ClientConfig(
            primary=BedrockFoundationModel(FOUNDATION, region="us-east-1"),
            allow_substitute=True,  # Bedrock's model serves no LoRA adapter: seed 002's migration answered from it
            # Every call copied, one copy at a time; its deadline is the CPU engine's on 2 loaded cores, not an SLO.
            mirror=MirrorConfig(SageMakerEndpoint(ENDPOINT), share=1.0, max_in_flight=1, deadline_s=300),
        )
        client = MangaAssistClient(
            config,
            metrics=EmfSink(endpoint_name=ENDPOINT, write=lines.append),
            client_factory=lambda service, region: clients[service],
            pair_store=DirectoryPairStore(store, sink=EmfSink(endpoint_name=ENDPOINT, write=lines.append)),
        )
        answers = []
        for index, (adapter, language, streamed) in enumerate(CALLS):
            text = f"Try Blue Giant ({index})."
            call: dict[str, Any] = {
                "adapter": adapter,
                "messages": MESSAGES,
                "max_tokens": 8,
                "temperature": 0,
                "language": language,
            }
            if streamed:
                bedrock.queue("ConverseStream", wire.converse_stream("Try ", f"Blue Giant ({index})."))
                answers.append("".join(client.chat_stream(**call)))
            else:
                bedrock.queue("Converse", wire.converse_answer(text))
                answers.append(client.chat(**call).text)
        client.close()  # the copies finish and the store writes its batch
        assert bedrock.unscripted == []
    shim.stop()
    records = [
        json.loads(line)
        for path in sorted(store.glob("pairs/*/*/*/*/*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    ids = [headers["X-Amzn-SageMaker-Inference-Id"] for headers in shim.requests]
    yield Migration(store, answers, records, ids, lines)


def test_bedrock_answers_every_call_and_each_copy_to_the_engine_is_stored_as_a_pair(migration: Migration) -> None:
    assert migration.answers == [f"Try Blue Giant ({index})." for index in range(len(CALLS))]
    records = sorted(migration.records, key=lambda r: r["at"])
    assert [(r["adapter"], r["language"], r["stream"]) for r in records] == list(CALLS)
    # The request id the pair names is the InferenceId SageMaker received (what its data capture records).
    assert sorted(r["request_id"] for r in records) == sorted(migration.inference_ids)
    for record in records:
        answer, copy = record["answer"], record["copy"]
        assert (answer["backend"], answer["version"], answer["error"]) == (f"bedrock:{FOUNDATION}", FOUNDATION, None)
        assert (copy["backend"], copy["variant"], copy["error"]) == (f"sagemaker:{ENDPOINT}", "AllTraffic", None)
        # What the gateway said answered, through SageMaker's CustomAttributes: the adapter asked for.
        assert copy["served"] == {"base_model": "base/unknown", "adapter": f"{record['adapter']}/unknown"}
        assert copy["completion_tokens"] and copy["prompt_tokens"] and copy["latency_ms"] > 0
        assert (copy["ttft_ms"] is not None, answer["ttft_ms"] is not None) == (record["stream"], record["stream"])
        assert "messages" not in record and len(record["prompt_sha256"]) == 64
    shadow_lines = [json.loads(line) for line in migration.lines if '"ClientShadowRequests"' in line]
    assert sum(line["ClientShadowRequests"] for line in shadow_lines) == len(CALLS)
    assert sum(line["ClientShadowErrors"] for line in shadow_lines) == 0


def _bedrock_scorer() -> Any:
    """A bedrock-runtime client whose embedding, guardrail and judge calls are answered as they are made (a
    Stubber filled just in time): an embedding from the text's digest, no guardrail intervention, no title."""
    bedrock = boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(bedrock)

    def embedding(params: dict[str, Any], **_: Any) -> None:
        digest = hashlib.sha256(json.loads(params["body"])["inputText"].encode()).digest()
        body = json.dumps({"embedding": [1.0, *(b / 255 for b in digest[:7])], "inputTextTokenCount": 8})
        stub.add_response("invoke_model", {"body": streaming_body(body), "contentType": "application/json"}, ANY_PARAMS)

    def guardrail(**_: Any) -> None:
        units = {
            "topicPolicyUnits": 1,
            "contentPolicyUnits": 1,
            "wordPolicyUnits": 1,
            "contextualGroundingPolicyUnits": 0,
            "sensitiveInformationPolicyUnits": 1,
            "sensitiveInformationPolicyFreeUnits": 0,
        }
        stub.add_response("apply_guardrail", {"usage": units, "action": "NONE", "outputs": [], "assessments": []})

    def judge(**_: Any) -> None:
        reply = {
            "output": {"message": {"role": "assistant", "content": [{"text": "NONE"}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
            "metrics": {"latencyMs": 1},
        }
        stub.add_response("converse", reply)

    for operation, handler in (("InvokeModel", embedding), ("ApplyGuardrail", guardrail), ("Converse", judge)):
        bedrock.meta.events.register(f"provide-client-params.bedrock-runtime.{operation}", handler)
    stub.activate()
    return bedrock


ANY_PARAMS = {
    "modelId": "amazon.titan-embed-text-v2:0",
    "body": ANY,
    "contentType": "application/json",
    "accept": "application/json",
}


def test_the_report_is_computed_offline_with_every_metric_and_the_human_sample_read_back(
    migration: Migration, tmp_path: Path
) -> None:
    data = json.loads((REPO / "cdk.json").read_text())
    gates = {"min_pairs": 2, "min_labels": 2}  # five pairs: the gates' figures are what this test reads
    data["context"]["stages"]["prod"] = {"migration": {"guardrail_id": "gr0e2e", "gates": gates}}
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(json.dumps(data))
    (tmp_path / "catalog.jsonl").write_text(json.dumps({"title": "BLUE GIANT", "aliases": ["Blue Giant"]}) + "\n")
    store, common = str(migration.store), ["--cdk-json", str(cdk_json)]
    scorer = MigrateClients(s3=None, bedrock=_bedrock_scorer(), ssm=None, cloudwatch=None)
    out: list[str] = []

    def offline(region: str | None, profile: str | None, what: str) -> MigrateClients:
        raise AssertionError(f"the report asked for AWS: {what}")

    def run(argv: list[str], clients: Any = offline) -> int:
        deps = Deps(migrate_clients=clients, out=out.append, now=lambda: dt.datetime(2026, 12, 1, tzinfo=dt.UTC))
        return main([*argv, *common], deps)

    catalog = ["--catalog", str(tmp_path / "catalog.jsonl")]
    assert run(["migrate", "score", "--from", store, *catalog], lambda r, p, w: scorer) == ExitCode.OK
    assert out[-1] == f"scored {len(CALLS)} pair(s) of {len(CALLS)} (0 already scored) in {store}"
    assert run(["migrate", "sample", "--from", store, "--name", "e2e", "--size", "4", "--seed", "1"]) == ExitCode.OK
    tasks = [json.loads(line) for line in (migration.store / "human/e2e/tasks.jsonl").read_text().splitlines()]
    key = {
        row["id"]: row["a"]
        for row in map(json.loads, (migration.store / "human/e2e/key.jsonl").read_text().splitlines())
    }
    assert len(tasks) == 4 and {task["id"] for task in tasks} == set(key)
    # Raters: Bedrock's answer wins the first two, the engine's the third, the fourth is a tie.
    winners = ["bedrock", "bedrock", "endpoint", "tie"]
    labels = [
        {"id": t["id"], "preference": "tie" if w == "tie" else ("a" if key[t["id"]] == w else "b")}
        for t, w in zip(tasks, winners, strict=True)
    ]
    (migration.store / "human/e2e/labels.jsonl").write_text("".join(json.dumps(label) + "\n" for label in labels))

    out.clear()
    code = run(["migrate", "report", "--from", store])
    report = "\n".join(out)
    assert code in (ExitCode.OK, ExitCode.CHECK_FAILED), report  # the tiny random model may fail a gate
    assert "NOT COMPUTED" not in report
    assert "human preference (samples: e2e): endpoint 1, Bedrock 2, tie 1" in report
    for gate in (
        "endpoint error rate = 0.00%",
        "answer length KS D =",
        "endpoint TTFT p95 =",
        "latency p95 endpoint / Bedrock =",
        "endpoint guardrail pass share = 100.0%",
        "median semantic similarity =",
        "endpoint preferred or tied in 50.0% of 4",
    ):
        assert f"all: {gate}" in report, gate
    for group in ("general_support_v2/en", "jp_style_v1/ja", "manga_domain_v3/ja"):
        assert any(line.startswith(group) for line in out), group
