"""Client-side shadow and canary (issue 48; seed 002 scenario 6), and the migration's mode (issue 54): Bedrock
answers, a sampled share of calls is copied to the endpoint asynchronously (a bounded queue, drops counted, a
deadline of its own) and each answer and its copy are stored as a pair; during the ramp the endpoint answers
the share the ramp's state names and Bedrock is copied."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import ANY, Stubber

from mangaassist_client import (
    BackendUnavailableError,
    BedrockFoundationModel,
    BedrockImportedModels,
    ClientConfig,
    ClientMetric,
    DirectoryPairStore,
    MangaAssistClient,
    MirrorConfig,
    Pair,
    PairStoreConfig,
    RampConfig,
    S3PairStore,
    SageMakerEndpoint,
    migration_config_from_outputs,
)
from mangaassist_client.mirror import prompt_sha256
from mangaassist_client.model import chat_request
from tests.botocore_helpers import add_event_stream_response, event, streaming_body
from tests.client import wire
from tests.client.stubs import (
    CALL,
    DOMAIN_ARN,
    ENDPOINT,
    FOUNDATION_ID,
    IMPORTED,
    SAGEMAKER,
    VERSIONS,
    Clock,
    Lines,
    client,
    completion,
    gateway_error,
    parts,
    rig,
    sse,
)

WAIT_S = 30.0
BEDROCK = f"bedrock:{FOUNDATION_ID}"
KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
PARAMETER = "/MangaAssist/prod/migration/state"
CONVERSE_ANSWER = {
    "output": {"message": {"role": "assistant", "content": [{"text": "Try Blue Giant."}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 30, "outputTokens": 5, "totalTokens": 35},
    "metrics": {"latencyMs": 300},
}


def wait_for(predicate: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


class Gate:
    """Holds one operation of a client (a ``before-parameter-build`` handler runs before the Stubber answers)."""

    def __init__(self, runtime: Any, event_name: str) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        runtime.meta.events.register(f"before-parameter-build.{event_name}", self._hold)

    def _hold(self, **_: Any) -> None:
        self.entered.set()
        assert self.release.wait(WAIT_S), "the test never released the held call"


@dataclass
class Migration:
    """A client in migration mode: Converse (Stubber'd) answers, the endpoint (Stubber'd) is copied."""

    client: MangaAssistClient
    bedrock: Stubber
    sagemaker: Stubber
    ssm: Stubber
    runtimes: dict[str, Any]
    lines: Lines
    clock: Clock
    pairs: list[Pair]

    def converse(self, text: str = "Try Blue Giant.") -> None:
        self.bedrock.add_response(
            "converse", {**CONVERSE_ANSWER, "output": {"message": {"role": "assistant", "content": [{"text": text}]}}}
        )

    def endpoint(self, text: str = "Try Dungeon Meshi.") -> None:
        body = {"Body": streaming_body(completion(text)), "ContentType": "application/json"}
        body.update({"CustomAttributes": VERSIONS, "InvokedProductionVariant": "primary"})
        expected = {
            "EndpointName": ENDPOINT,
            "Body": ANY,
            "ContentType": "application/json",
            "Accept": "application/json",
            "InferenceId": ANY,
        }
        self.sagemaker.add_response("invoke_endpoint", body, expected)

    def ramp(self, percent: float) -> None:
        value = json.dumps({"step": 0, "percent": percent, "status": "ramping", "since": None, "reason": "test"})
        self.ssm.add_response(
            "get_parameter", {"Parameter": {"Name": PARAMETER, "Value": value, "Type": "String"}}, {"Name": PARAMETER}
        )


@contextmanager
def migration(
    *, share: float = 0.6, rand: Callable[[], float] = lambda: 0.5, pair_store: Any = None, **mirror: Any
) -> Iterator[Migration]:
    """The client over Stubbers; ``pair_store`` replaces the S3 store, ``mirror`` are MirrorConfig fields."""
    runtimes = {name: client(name) for name in ("bedrock-runtime", "sagemaker-runtime", "ssm", "s3")}
    config = ClientConfig(
        primary=BedrockFoundationModel(FOUNDATION_ID, region="us-east-1"),
        allow_substitute=True,
        mirror=MirrorConfig(SageMakerEndpoint(ENDPOINT), share=share, **mirror),
    )
    clock, lines = Clock(), Lines()
    pairs: list[Pair] = []
    with ExitStack() as stack:
        stubs = [
            stack.enter_context(Stubber(runtimes[name])) for name in ("bedrock-runtime", "sagemaker-runtime", "ssm")
        ]
        chat = MangaAssistClient(
            config,
            metrics=lines,
            client_factory=lambda service, region: runtimes[service],
            clock=clock,
            sleep=clock.sleep,
            rand=rand,
            on_pair=pairs.append,
            pair_store=pair_store,
        )
        bedrock, sagemaker, ssm = stubs
        rig_ = Migration(chat, bedrock, sagemaker, ssm, runtimes, lines, clock, pairs)
        try:
            yield rig_
        finally:
            chat.close()
        for stub in stubs:
            stub.assert_no_pending_responses()


def stored(root: Path) -> list[dict[str, Any]]:
    """Every pair the directory store wrote, in file order."""
    return [
        json.loads(line)
        for path in sorted(root.glob("pairs/*/*/*/*/*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def test_the_copy_never_delays_the_answer_and_the_pair_is_stored_with_what_each_side_did(tmp_path: Path) -> None:
    store = DirectoryPairStore(tmp_path, sink=Lines(), flush_interval_s=0)
    with migration(pair_store=store) as m:
        gate = Gate(m.runtimes["sagemaker-runtime"], "sagemaker-runtime.InvokeEndpoint")
        m.converse("Try Blue Giant.")
        m.endpoint("Try Dungeon Meshi.")
        result = m.client.chat(**CALL, language="ja")
        wait_for(gate.entered.is_set, "the copy to reach the endpoint")
        # The answer is back while its copy is still held inside the endpoint's call.
        assert result.backend == BEDROCK and not gate.release.is_set() and m.pairs == []
        gate.release.set()
        wait_for(lambda: m.pairs, "the pair")
    (record,) = stored(tmp_path)  # the client's close wrote the batch
    assert record == m.pairs[0].record()
    assert record["request_id"] == m.pairs[0].request_id and len(record["request_id"]) == 32
    assert (record["adapter"], record["language"], record["stream"]) == ("manga_domain_v3", "ja", False)
    assert record["prompt_sha256"] == prompt_sha256(chat_request(**CALL)) and "messages" not in record
    answer, copy = record["answer"], record["copy"]
    assert (answer["backend"], answer["text"], answer["version"], answer["error"]) == (
        BEDROCK,
        "Try Blue Giant.",
        FOUNDATION_ID,
        None,
    )
    assert (answer["prompt_tokens"], answer["completion_tokens"], answer["ttft_ms"]) == (30, 5, None)
    assert (copy["backend"], copy["text"], copy["variant"], copy["error"]) == (
        SAGEMAKER,
        "Try Dungeon Meshi.",
        "primary",
        None,
    )
    assert copy["served"] == {"base_model": "base/v4/" + "a" * 64, "adapter": "manga_domain_v3/v3/" + "b" * 64}
    assert (copy["prompt_tokens"], copy["completion_tokens"]) == (40, 6)
    assert answer["latency_ms"] is not None and copy["latency_ms"] is not None
    counts, properties = next(rec for rec in m.lines.records if ClientMetric.SHADOW_REQUESTS in rec[0])
    assert counts == {ClientMetric.SHADOW_REQUESTS: 1, ClientMetric.SHADOW_ERRORS: 0}
    assert (properties["AnsweredBy"], properties["Backend"], properties["Language"]) == (BEDROCK, SAGEMAKER, "ja")


def test_the_endpoint_is_sent_the_calls_request_id_as_its_inference_id() -> None:
    """SageMaker's data capture records InferenceId in both variants' records: ops shadow report pairs by it."""
    sent: list[str] = []
    with migration() as m:
        m.runtimes["sagemaker-runtime"].meta.events.register(
            "provide-client-params.sagemaker-runtime.InvokeEndpoint",
            lambda params, **_: sent.append(params["InferenceId"]),
        )
        m.converse()
        m.endpoint()
        m.client.chat(**CALL)
        wait_for(lambda: m.pairs, "the pair")
    assert sent == [m.pairs[0].request_id]


def test_a_streamed_call_stores_both_times_to_first_token(tmp_path: Path) -> None:
    with migration() as m:
        frames = [
            event("messageStart", b'{"role": "assistant"}'),
            event("contentBlockDelta", json.dumps({"delta": {"text": "Try "}, "contentBlockIndex": 0}).encode()),
            event("contentBlockDelta", json.dumps({"delta": {"text": "Blue Giant."}, "contentBlockIndex": 0}).encode()),
            event("messageStop", b'{"stopReason": "end_turn"}'),
            event(
                "metadata",
                json.dumps(
                    {"usage": {"inputTokens": 30, "outputTokens": 5, "totalTokens": 35}, "metrics": {"latencyMs": 300}}
                ).encode(),
            ),
        ]
        add_event_stream_response(m.bedrock, "converse_stream", {}, frames)
        head = {"ContentType": "text/event-stream", "CustomAttributes": VERSIONS}
        body = sse("Try ", "Dungeon Meshi.", usage={"prompt_tokens": 40, "completion_tokens": 6, "total_tokens": 46})
        add_event_stream_response(m.sagemaker, "invoke_endpoint_with_response_stream", head, parts(body))
        assert "".join(m.client.chat_stream(**CALL)) == "Try Blue Giant."
        wait_for(lambda: m.pairs, "the pair")
    record = m.pairs[0].record()
    assert record["stream"] is True
    assert (record["answer"]["text"], record["copy"]["text"]) == ("Try Blue Giant.", "Try Dungeon Meshi.")
    assert record["answer"]["ttft_ms"] is not None and record["copy"]["ttft_ms"] is not None
    assert record["copy"]["completion_tokens"] == 6


def test_a_full_queue_drops_the_copy_and_counts_it() -> None:
    with migration(max_in_flight=1, queue_size=1) as m:
        gate = Gate(m.runtimes["sagemaker-runtime"], "sagemaker-runtime.InvokeEndpoint")
        for _ in range(3):
            m.converse()
        m.endpoint()
        m.endpoint()
        m.client.chat(**CALL)
        wait_for(gate.entered.is_set, "the first copy to run")
        m.client.chat(**CALL)  # queued
        m.client.chat(**CALL)  # the queue holds one: dropped
        assert ({ClientMetric.SHADOW_DROPPED: 1}, {"Backend": SAGEMAKER, "Reason": "queue_full"}) in m.lines.records
        gate.release.set()
    assert len(m.pairs) == 2


def test_a_copy_that_waited_past_its_deadline_is_dropped_not_made() -> None:
    with migration(max_in_flight=1, queue_size=4, deadline_s=5.0) as m:
        gate = Gate(m.runtimes["sagemaker-runtime"], "sagemaker-runtime.InvokeEndpoint")
        m.converse()
        m.converse()
        m.endpoint()
        m.client.chat(**CALL)
        wait_for(gate.entered.is_set, "the first copy to run")
        m.client.chat(**CALL)  # queued behind it
        m.clock.now += 6.0  # the queued copy's deadline passes while it waits
        gate.release.set()
        wait_for(lambda: any(r[1].get("Reason") == "expired" for r in m.lines.records), "the expired copy's count")
    assert len(m.pairs) == 1


def test_a_hung_endpoint_ends_the_copy_at_its_deadline() -> None:
    """Real time and a real transport (tests/client/wire.py): the endpoint holds the copy's request unanswered."""
    pairs: list[Pair] = []
    with wire.services() as s:
        config = ClientConfig(
            primary=BedrockFoundationModel(FOUNDATION_ID, region="us-east-1"),
            allow_substitute=True,
            mirror=MirrorConfig(SageMakerEndpoint(ENDPOINT), share=1.0, deadline_s=0.5),
        )
        clients = {name: s.client(name) for name in ("sagemaker-runtime", "bedrock-runtime")}
        chat = MangaAssistClient(
            config, metrics=Lines(), client_factory=lambda service, r: clients[service], on_pair=pairs.append
        )
        s.queue("Converse", wire.converse_answer("Try Blue Giant."))
        s.queue("InvokeEndpoint", wire.hang)
        # The answer is back while the endpoint holds the copy (the Gate tests above show it deterministically).
        assert chat.chat(**CALL).text == "Try Blue Giant."
        wait_for(lambda: pairs, "the copy to time out")
        chat.close()
    (pair,) = pairs
    assert pair.copy.error is not None and pair.copy.error.startswith(f"{SAGEMAKER}: timeout")
    assert (pair.copy.text, pair.copy.latency_ms, pair.answer.text) == ("", None, "Try Blue Giant.")


def test_a_failed_copy_is_stored_with_its_error_and_counted_never_raised() -> None:
    with migration() as m:
        m.converse()
        m.sagemaker.add_client_error("invoke_endpoint", "ServiceUnavailable", "busy", 503)
        assert m.client.chat(**CALL).text == "Try Blue Giant."
        wait_for(lambda: m.pairs, "the pair")
    assert m.pairs[0].copy.error == f"{SAGEMAKER}: server 503 ServiceUnavailable: busy"
    counts = next(rec[0] for rec in m.lines.records if ClientMetric.SHADOW_REQUESTS in rec[0])
    assert counts[ClientMetric.SHADOW_ERRORS] == 1


def test_a_call_no_backend_answered_still_stores_its_copy_with_why() -> None:
    with migration() as m:
        m.bedrock.add_client_error("converse", "ServiceUnavailableException", "busy", 503)
        m.endpoint()
        with pytest.raises(BackendUnavailableError, match=r"^no backend answered"):
            m.client.chat(**CALL)
        wait_for(lambda: m.pairs, "the pair")
    answer = m.pairs[0].answer
    assert (answer.backend, answer.text) == ("none", "")
    assert answer.error is not None and answer.error.startswith(f"unavailable: {BEDROCK}: server 503")


def test_calls_outside_the_share_get_no_copy() -> None:
    with migration(share=0.4) as m:  # the rig's rand is 0.5
        m.converse()
        m.client.chat(**CALL)
    assert m.pairs == [] and all(ClientMetric.SHADOW_REQUESTS not in counts for counts, _ in m.lines.records)


def test_prompts_are_kept_only_when_the_store_is_told_to() -> None:
    store = PairStoreConfig(bucket="mangaassist-pairs", kms_key_arn=KEY_ARN, batch_size=1, store_prompts=True)
    bodies: list[bytes] = []
    with migration(store=store) as m, Stubber(m.runtimes["s3"]) as s3:
        m.runtimes["s3"].meta.events.register(
            "provide-client-params.s3.PutObject", lambda params, **_: bodies.append(params["Body"])
        )
        expected = {
            "Bucket": "mangaassist-pairs",
            "Key": ANY,
            "Body": ANY,
            "ContentType": "application/x-ndjson",
            "ServerSideEncryption": "aws:kms",
            "SSEKMSKeyId": KEY_ARN,
        }
        s3.add_response("put_object", {}, expected)
        m.converse()
        m.endpoint()
        m.client.chat(**CALL)
        wait_for(lambda: m.pairs, "the pair")  # stored before on_pair sees it
        s3.assert_no_pending_responses()
    (line,) = bodies[0].decode().splitlines()
    assert json.loads(line)["messages"] == CALL["messages"]


def test_the_s3_store_writes_a_batch_under_the_stacks_key_and_retries_a_failed_one() -> None:
    s3, lines = client("s3"), Lines()
    with Stubber(s3) as stub:
        store = S3PairStore(
            s3,
            bucket="mangaassist-pairs",
            kms_key_arn=KEY_ARN,
            sink=lines,
            batch_size=2,
            flush_interval_s=0,
            max_buffered=3,
        )
        stub.add_client_error("put_object", "AccessDenied", "denied", 403)
        store.put({"request_id": "a"})
        store.put({"request_id": "b"})  # a full batch: its write fails and both wait
        bodies: list[bytes] = []
        s3.meta.events.register("provide-client-params.s3.PutObject", lambda params, **_: bodies.append(params["Body"]))
        expected = {
            "Bucket": "mangaassist-pairs",
            "Key": ANY,
            "Body": ANY,
            "ContentType": "application/x-ndjson",
            "ServerSideEncryption": "aws:kms",
            "SSEKMSKeyId": KEY_ARN,
        }
        stub.add_response("put_object", {}, expected)
        store.put({"request_id": "c"})  # the next full batch carries the failed one's pairs too
        stub.assert_no_pending_responses()
        assert store.flush() == 0
    assert [json.loads(line)["request_id"] for line in bodies[-1].decode().splitlines()] == ["a", "b", "c"]
    assert lines.records == []


def test_the_s3_store_drops_the_oldest_beyond_its_bound_and_counts_them() -> None:
    s3, lines = client("s3"), Lines()
    with Stubber(s3) as stub:
        store = S3PairStore(
            s3,
            bucket="mangaassist-pairs",
            kms_key_arn=KEY_ARN,
            sink=lines,
            batch_size=2,
            flush_interval_s=0,
            max_buffered=2,
        )
        stub.add_client_error("put_object", "SlowDown", "slow", 503)
        stub.add_client_error("put_object", "SlowDown", "slow", 503)
        for name in "abc":  # two full batches, both refused: three pairs wait where two may
            store.put({"request_id": name})
    assert sum(counts[ClientMetric.SHADOW_STORE_FAILED] for counts, _ in lines.records) == 1


def test_the_batch_key_is_the_stores_layout(tmp_path: Path) -> None:
    store = DirectoryPairStore(tmp_path, sink=Lines(), flush_interval_s=0)
    store.put({"request_id": "a"})
    store.close()
    (path,) = tmp_path.glob("pairs/*/*/*/*/*.jsonl")
    year, month, day, hour = path.parent.relative_to(tmp_path / "pairs").parts
    assert len(year) == 4 and len(month) == len(day) == len(hour) == 2 and path.name.endswith(".jsonl")
    assert list(tmp_path.rglob("*.partial")) == []


# -- the ramp: the endpoint answers the ramp's share ------------------------------------------------------------


def test_during_the_ramp_the_endpoint_answers_its_share_and_bedrock_is_copied() -> None:
    ramp = RampConfig(PARAMETER, region="us-east-1", refresh_s=60)
    with migration(share=1.0, ramp=ramp) as m:
        m.ramp(75)  # rand 0.5 < 0.75: the endpoint answers
        m.endpoint("Try Dungeon Meshi.")
        m.converse("Try Blue Giant.")
        result = m.client.chat(**CALL)
        wait_for(lambda: m.pairs, "the pair")
    assert result.backend == SAGEMAKER
    assert (m.pairs[0].answer.backend, m.pairs[0].copy.backend) == (SAGEMAKER, BEDROCK)
    assert m.lines.calls()[0][0][ClientMetric.CANARY_REQUESTS] == 1


def test_the_ramp_state_is_read_once_per_refresh_and_a_failed_read_keeps_the_last() -> None:
    ramp = RampConfig(PARAMETER, region="us-east-1", refresh_s=60)
    with migration(share=0.0, ramp=ramp) as m:
        m.ramp(25)  # rand 0.5 >= 0.25: Bedrock answers
        m.converse()
        m.converse()
        assert m.client.chat(**CALL).backend == BEDROCK
        assert m.client.chat(**CALL).backend == BEDROCK  # no second read within refresh_s
        m.clock.now += 61
        m.ssm.add_client_error("get_parameter", "ThrottlingException", "slow", 400)
        m.converse()
        assert m.client.chat(**CALL).backend == BEDROCK  # the last read (25 %) still holds
        m.clock.now += 61
        m.ramp(100)
        m.endpoint()
        assert m.client.chat(**CALL).backend == SAGEMAKER


def test_a_ramp_never_read_sends_no_call_to_the_endpoint() -> None:
    with migration(share=0.0, ramp=RampConfig(PARAMETER, refresh_s=60), rand=lambda: 0.0) as m:
        m.ssm.add_client_error("get_parameter", "AccessDeniedException", "no", 400)
        m.converse()
        assert m.client.chat(**CALL).backend == BEDROCK


# -- configuration ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: MirrorConfig(SageMakerEndpoint(ENDPOINT), share=0.1, queue_size=0),
            "mirror.queue_size = 0: must be from 1 to 10000",
        ),
        (
            lambda: MirrorConfig(SageMakerEndpoint(ENDPOINT), share=0.1, deadline_s=0),
            "mirror.deadline_s = 0: must be above 0 and at most 3600",
        ),
        (
            lambda: MirrorConfig(SageMakerEndpoint(ENDPOINT), share=0.1, mode="canary", ramp=RampConfig(PARAMETER)),
            "mirror.mode = 'canary' with a store or a ramp: a canary copies nothing",
        ),
        (
            lambda: PairStoreConfig(bucket="Bad_Bucket", kms_key_arn=KEY_ARN),
            "store.bucket = 'Bad_Bucket': not an S3 bucket name",
        ),
        (
            lambda: PairStoreConfig(bucket="mangaassist-pairs", kms_key_arn="alias/mine"),
            "store.kms_key_arn = 'alias/mine': not a KMS key ARN",
        ),
        (lambda: RampConfig(PARAMETER, refresh_s=0), "ramp.refresh_s = 0: must be from 1 to 3600"),
        (lambda: chat_request(**CALL, language="Japanese"), "language = 'Japanese': must be a lowercase ISO 639 code"),
    ],
)
def test_a_bad_mirror_setting_is_one_line_naming_it(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")) as raised:
        make()
    assert "\n" not in str(raised.value)


OUTPUTS = {
    "MangaAssist-prod-Serving": {"EndpointName": ENDPOINT},
    "MangaAssist-prod-Observability": {"MetricsNamespace": "MangaAssist/Inference"},
    "MangaAssist-prod-Migration": {
        "MigrationStoreBucketName": "mangaassist-prod-migration-store",
        "MigrationStoreKeyArn": KEY_ARN,
        "MigrationStateParameterName": PARAMETER,
    },
}


def test_migration_mode_comes_from_the_stacks_outputs() -> None:
    config = migration_config_from_outputs(OUTPUTS, source="cdk-outputs.json", foundation_model=FOUNDATION_ID)
    assert config.primary == BedrockFoundationModel(FOUNDATION_ID) and config.allow_substitute
    assert config.mirror is not None and config.mirror.backend == SageMakerEndpoint(ENDPOINT)
    assert (config.mirror.share, config.mirror.mode) == (0.1, "shadow")  # seed 002: 10 % shadow-copied
    assert config.mirror.store == PairStoreConfig("mangaassist-prod-migration-store", KEY_ARN)
    assert config.mirror.ramp == RampConfig(PARAMETER)
    blocks = {**OUTPUTS, "MangaAssist-prod-Migration": {}}
    with pytest.raises(
        ValueError, match=r"^x\.json: stack MangaAssist-prod-Migration has no output MigrationStoreBucketName"
    ):
        migration_config_from_outputs(blocks, source="x.json", foundation_model=FOUNDATION_ID)


# -- the canary without a ramp (issue 48) ------------------------------------------------------------------------

SHADOW = MirrorConfig(BedrockImportedModels({"manga_domain_v3": DOMAIN_ARN}), share=0.6, max_in_flight=1)
CANARY = MirrorConfig(BedrockFoundationModel(FOUNDATION_ID, region="us-east-1"), share=0.6, mode="canary")


def test_the_endpoints_answer_can_be_shadowed_by_an_imported_model_too() -> None:
    pairs: list[Pair] = []
    with rig(mirror=SHADOW, on_pair=pairs.append) as r:
        r.answer("Try Delicious in Dungeon.")
        r.imported_answer("Try Frieren.")
        assert r.client.chat(**CALL).backend == SAGEMAKER
        wait_for(lambda: pairs, "the pair")
        r.pending()
    assert (pairs[0].answer.backend, pairs[0].copy.backend, pairs[0].copy.version) == (SAGEMAKER, IMPORTED, DOMAIN_ARN)


def test_a_canary_call_is_answered_by_the_canary_backend() -> None:
    """A foundation model lacks the adapter: as a canary it answers only where substitutes are allowed."""
    with rig(mirror=CANARY, allow_substitute=True) as r:
        r.bedrock.add_response("converse", CONVERSE_ANSWER)
        result = r.client.chat(**CALL)
        r.pending()  # the endpoint was not called
    assert (result.backend, result.text) == (f"bedrock:{FOUNDATION_ID}", "Try Blue Giant.")
    assert r.lines.last()[ClientMetric.CANARY_REQUESTS] == 1
    assert r.lines.last()[ClientMetric.FALLBACKS] == 0


def test_a_failing_canary_falls_back_to_the_primary() -> None:
    with rig(mirror=CANARY, allow_substitute=True) as r:
        r.bedrock.add_client_error("converse", "InternalServerException", "boom", 500)
        r.answer()
        assert r.client.chat(**CALL).backend == SAGEMAKER
        r.pending()
    assert r.lines.last()[ClientMetric.FALLBACKS] == 1


def test_outside_the_canary_share_the_primary_answers() -> None:
    with rig(mirror=MirrorConfig(CANARY.backend, share=0.4, mode="canary"), allow_substitute=True) as r:
        r.answer()
        assert r.client.chat(**CALL).backend == SAGEMAKER
        r.fail(502, gateway_error(502, "engine error 500"))
        r.imported_answer()
        assert r.client.chat(**CALL).backend == IMPORTED
        r.pending()
    assert all(counts[ClientMetric.CANARY_REQUESTS] == 0 for counts, _ in r.lines.calls())
