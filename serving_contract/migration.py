"""The Bedrock-to-endpoint migration's shared names (seed 002 scenario 6; issue 54), declared once.

Read by the ops commands (``ops migrate``), the ramp's step Lambda (``cdk_constructs/migration/runtime``,
which bundles this file: standard library only) and the Migration stack. The client library, installed on
its own, carries a copy of what it writes (``mangaassist_client.pairs``); tests/client/test_contract_agreement.py
keeps both equal.

The comparison store (one S3 bucket, SSE-KMS under the stack's key) holds, under these prefixes:

* ``pairs/yyyy/mm/dd/hh/<ms>-<uuid>.jsonl``: the pairs the client wrote, one JSON object per line (schema
  below), the hour (UTC) the batch was written;
* ``scores/<same path>``: what ``ops migrate score`` computed for the pairs of the file of the same path
  (similarity, guardrail verdicts), one object per pair;
* ``human/<sample>/tasks.jsonl``, ``key.jsonl``, ``labels.jsonl``: a human-preference sample, its hidden A/B
  key and the labels read back;
* ``reports/latest.json``: the last report ``ops migrate report --publish`` wrote: the ramp's gate.

A pair (schema :data:`PAIR_SCHEMA`) names the call (``request_id``, ``at``, ``adapter``, ``language``,
``stream``, ``prompt_sha256``; ``messages`` only where the client was told to keep prompts) and two sides,
``answer`` (what the caller got) and ``copy`` (the asynchronous copy), each with the fields of :data:`SIDE_FIELDS`.
Which side is the self-hosted endpoint is read from its ``backend`` (``sagemaker:<endpoint>``): during the ramp
the endpoint answers some calls and Bedrock copies them.
"""

from typing import Final

PAIR_SCHEMA: Final = 1
PAIRS_PREFIX: Final = "pairs/"
SCORES_PREFIX: Final = "scores/"
HUMAN_PREFIX: Final = "human/"
REPORTS_PREFIX: Final = "reports/"
LATEST_REPORT_KEY: Final = "reports/latest.json"
PAIR_FILE_SUFFIX: Final = ".jsonl"

SIDES: Final = ("answer", "copy")
SIDE_FIELDS: Final = (
    "backend",
    "model",
    "version",
    "served",
    "variant",
    "text",
    "error",
    "latency_ms",
    "ttft_ms",
    "prompt_tokens",
    "completion_tokens",
    "finish_reason",
)
"""Each side of a pair: the backend (``sagemaker:<endpoint>``, ``bedrock:<model id>``, ``bedrock-import``), the
model and version that answered, the endpoint's served versions (``{"base_model", "adapter"}``) and variant,
the text ('' when it failed), the error (None when it answered), the latency and time to first token in
milliseconds (TTFT only for streamed calls), the token counts and the finish reason."""
PAIR_FIELDS: Final = (
    "schema",
    "request_id",
    "at",
    "adapter",
    "language",
    "stream",
    "prompt_sha256",
    *SIDES,
)
"""Every pair's keys (``messages`` besides, only when prompts are kept)."""
ENDPOINT_BACKEND_PREFIX: Final = "sagemaker:"
"""A side whose ``backend`` starts with this is the self-hosted endpoint (the migration's candidate)."""

RAMP_STATE_FIELDS: Final = ("step", "percent", "status", "since", "reason")
"""The ramp's state, one JSON object in an SSM String parameter: ``step`` (-1: the shadow phase, before the
first step; else the index into ``migration.ramp.steps``), ``percent`` (of calls the endpoint answers, 0 to 100),
``status``, ``since`` (ISO 8601 UTC, when the step began) and ``reason`` (of the last change)."""
RAMP_STATUSES: Final = ("shadow", "ramping", "full", "rolled_back")
INITIAL_RAMP_STATE: Final = '{"step": -1, "percent": 0, "status": "shadow", "since": null, "reason": "deployed"}'
"""The parameter's value as the stack creates it: the shadow phase (Bedrock answers every call)."""

REPORT_VERDICTS: Final = ("pass", "fail", "incomplete")
"""``reports/latest.json``'s ``verdict``: every gate held; a gate failed; no gate failed but some were not computed."""
