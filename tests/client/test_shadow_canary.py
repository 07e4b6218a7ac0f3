"""Client-side shadow and canary (issue 48; seed 002 scenario 6): a sampled share of calls goes to a second
backend too (shadow: compared, never delaying the answer) or instead (canary: answered by it)."""

from __future__ import annotations

import threading
import time
from typing import Any

from mangaassist_client import BedrockFoundationModel, BedrockImportedModels, ClientMetric, Comparison, MirrorConfig
from tests.client.stubs import CALL, DOMAIN_ARN, FOUNDATION_ID, IMPORTED, SAGEMAKER, Rig, gateway_error, rig

SHADOW = MirrorConfig(BedrockImportedModels({"manga_domain_v3": DOMAIN_ARN}), share=0.6, max_in_flight=1)
WAIT_S = 30.0


def wait_for(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


class Gate:
    """Holds Bedrock's InvokeModel (a ``before-parameter-build`` handler runs before the Stubber answers)."""

    def __init__(self, r: Rig) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        runtime = r.client.backends[1].runtime  # type: ignore[attr-defined]
        runtime.meta.events.register("before-parameter-build.bedrock-runtime.InvokeModel", self._hold)

    def _hold(self, **_: Any) -> None:
        self.entered.set()
        assert self.release.wait(WAIT_S), "the test never released the shadow copy"


def test_the_shadow_copy_never_delays_the_answer_and_is_compared() -> None:
    comparisons: list[Comparison] = []
    with rig(mirror=SHADOW, on_comparison=comparisons.append) as r:
        gate = Gate(r)
        r.answer("Try Delicious in Dungeon.")
        r.imported_answer("Try Frieren.")
        result = r.client.chat(**CALL)
        wait_for(gate.entered.is_set, "the shadow copy to reach Bedrock")
        # The answer is back while its copy is still held inside the Bedrock call.
        assert result.backend == SAGEMAKER and not gate.release.is_set() and comparisons == []
        gate.release.set()
        wait_for(lambda: comparisons, "the comparison")
        r.pending()
    (comparison,) = comparisons
    assert (comparison.answered_by, comparison.shadow, comparison.same_text) == (SAGEMAKER, IMPORTED, False)
    assert comparison.length_ratio == len("Try Frieren.") / len("Try Delicious in Dungeon.")
    assert comparison.shadow_version == DOMAIN_ARN and comparison.shadow_error is None
    shadow_counts, properties = next(rec for rec in r.lines.records if ClientMetric.SHADOW_REQUESTS in rec[0])
    assert shadow_counts == {
        ClientMetric.SHADOW_REQUESTS: 1,
        ClientMetric.SHADOW_ERRORS: 0,
        ClientMetric.SHADOW_MISMATCHES: 1,
    }
    assert properties["AnsweredBy"] == SAGEMAKER


def test_a_copy_beyond_max_in_flight_is_dropped_and_counted() -> None:
    with rig(mirror=SHADOW) as r:
        gate = Gate(r)
        r.answer()
        r.imported_answer()
        r.client.chat(**CALL)
        wait_for(gate.entered.is_set, "the first copy")
        r.answer()
        r.client.chat(**CALL)  # max_in_flight 1: no second copy
        assert any(counts == {ClientMetric.SHADOW_DROPPED: 1} for counts, _ in r.lines.records)
        gate.release.set()
        r.client.close()
        r.pending()


def test_a_failed_copy_is_counted_not_raised() -> None:
    with rig(mirror=SHADOW) as r:
        r.answer("Try Delicious in Dungeon.")
        r.bedrock.add_client_error("invoke_model", "ThrottlingException", "slow down", 429)
        assert r.client.chat(**CALL).text == "Try Delicious in Dungeon."
        r.client.close()
    counts, properties = next(rec for rec in r.lines.records if ClientMetric.SHADOW_REQUESTS in rec[0])
    assert counts[ClientMetric.SHADOW_ERRORS] == 1 and counts[ClientMetric.SHADOW_MISMATCHES] == 0
    assert properties["ShadowError"] == "bedrock-import: throttled 429 ThrottlingException: slow down"


def test_calls_outside_the_share_get_no_copy() -> None:
    outside = MirrorConfig(SHADOW.backend, share=0.4)  # the rig's rand is 0.5
    with rig(mirror=outside) as r:
        r.answer()
        r.client.chat(**CALL)
        r.client.close()
        r.pending()  # no Bedrock call was made
    assert all(ClientMetric.SHADOW_REQUESTS not in counts for counts, _ in r.lines.records)


CANARY = MirrorConfig(BedrockFoundationModel(FOUNDATION_ID, region="us-east-1"), share=0.6, mode="canary")
CONVERSE_ANSWER = {
    "output": {"message": {"role": "assistant", "content": [{"text": "Try Blue Giant."}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 30, "outputTokens": 5, "totalTokens": 35},
    "metrics": {"latencyMs": 300},
}


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
