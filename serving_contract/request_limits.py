"""Per-request limits on the fields that multiply engine work, declared once for both sides.

``app_config.container.ContainerConfig`` (validated at synth, keys under ``container.``) and
the container's ``serving_app.settings.Settings`` (validated at start from the environment)
build their fields from these declarations, as they do for the engine settings. The gateway
refuses a request over a limit with a 400 naming the field (``serving_app.sagemaker.limits``)
before vLLM sees it.

The size of a body is bounded the same way, relative to the context it must fit in
(:func:`max_body_bytes`, :func:`max_messages`): a 6 MB body of 174,000 tiny messages held the event
loop for about 1.1 s of JSON parsing and validation, and with the context budget on its
context-length 400 re-sent the body about 18 times to vLLM's ``/tokenize`` (issue 49, finding 4).
Both bounds are checked before the body is parsed: the byte bound from ``Content-Length`` in the
transport (``serving_app.transport``), the message count before the request model validates.

Why the gateway and not vLLM: vLLM 0.26's only cap on ``n`` is ``VLLM_MAX_N_SEQUENCES``
(default 16,384, ``vllm/envs.py``, checked in ``SamplingParams._verify_args`` in
``vllm/sampling_params.py``), and its logprob cap ``--max-logprobs`` (default 20,
``vllm/config/model.py``) is one engine-wide flag; stop strings, banned words and token-id
lists have no cap at all, and a completions ``prompt`` list fans out into one engine request
per element (advisory PYSEC-2026-3704, "Completion prompt lists fan out into unbounded engine
requests"). One request with ``n = 1000`` occupies 1000 of the engine's
``max_num_seqs`` slots (``engine.max_num_seqs``).

Standard library only: the image copies this package as it is (``container/Dockerfile``).
"""

from __future__ import annotations

from typing import Final

from serving_contract import env
from serving_contract.setting import Setting

VLLM_MAX_N_SEQUENCES: Final = 16_384
"""vLLM 0.26's own cap on ``n`` (``VLLM_MAX_N_SEQUENCES`` in vllm/envs.py): the upper bound here."""

VLLM_MAX_LOGPROBS_DEFAULT: Final = 20
"""vLLM 0.26's ``--max-logprobs`` default (vllm/config/model.py); the engine refuses more."""

SAGEMAKER_MAX_BODY_BYTES: Final = 6 * 1024 * 1024
"""SageMaker real-time ``InvokeEndpoint`` payload limit (6 MB): larger bodies never reach the
container, so no bound here is above it."""

MESSAGE_TEMPLATE_TOKENS: Final = 5
"""Tokens Llama-3-Instruct's chat template puts around every message, an empty one included:
``<|start_header_id|>``, the role, ``<|end_header_id|>``, ``\\n\\n`` and ``<|eot_id|>``
(the model's ``tokenizer_config.json`` ``chat_template``). One context of ``max_model_len`` tokens
therefore holds at most ``max_model_len // 5`` messages (:func:`max_messages`)."""


MAX_SEQUENCES = Setting(
    key="request_max_sequences",
    env_var=env.REQUEST_MAX_SEQUENCES,
    default=4,
    ge=1,
    le=VLLM_MAX_N_SEQUENCES,
    description=(
        "Most sequences one /invocations request may ask the engine for: n (and best_of, which vLLM "
        "ignores) times the number of prompts in a completions batch. MangaAssist sends n = 1; 4 leaves room "
        "for a re-ranking client. Source: vLLM's own VLLM_MAX_N_SEQUENCES (16,384, vllm/envs.py) is the "
        "engine's only cap; prompt lists fan out per element (PYSEC-2026-3704)."
    ),
)
MAX_LOGPROBS = Setting(
    key="request_max_logprobs",
    env_var=env.REQUEST_MAX_LOGPROBS,
    default=5,
    ge=0,
    le=VLLM_MAX_LOGPROBS_DEFAULT,
    description=(
        "Most log-probabilities per token a request may ask for: logprobs (completions), top_logprobs (chat) "
        "and prompt_logprobs (both; -1, 'the whole vocabulary', is refused). 5 is the legacy OpenAI "
        "completions limit; at most vLLM's --max-logprobs default (20)."
    ),
)
MAX_STOP_SEQUENCES = Setting(
    key="request_max_stop_sequences",
    env_var=env.REQUEST_MAX_STOP_SEQUENCES,
    default=4,
    ge=1,
    le=256,
    description=(
        "Most entries in stop and in bad_words (each is matched against every generated token). "
        "Source: OpenAI's API allows up to 4 stop sequences."
    ),
)
MAX_STOP_SEQUENCE_CHARS = Setting(
    key="request_max_stop_sequence_chars",
    env_var=env.REQUEST_MAX_STOP_SEQUENCE_CHARS,
    default=256,
    ge=1,
    le=65_536,
    description=(
        "Longest entry in stop and in bad_words, characters: vLLM keeps that much detokenized text per "
        "sequence to find a stop string. Gateway choice; MangaAssist's stop strings are a few characters."
    ),
)
MAX_TOKEN_IDS = Setting(
    key="request_max_token_ids",
    env_var=env.REQUEST_MAX_TOKEN_IDS,
    default=256,
    ge=1,
    le=131_072,
    description=(
        "Most entries in stop_token_ids, allowed_token_ids and logit_bias (each is applied to every decode "
        "step). Gateway choice; Llama-3 has 2 stop tokens and MangaAssist sends no bias."
    ),
)

MAX_BODY_BYTES_PER_TOKEN = Setting(
    key="request_max_body_bytes_per_token",
    env_var=env.REQUEST_MAX_BODY_BYTES_PER_TOKEN,
    default=64,
    ge=8,
    le=SAGEMAKER_MAX_BODY_BYTES // 4096,
    description=(
        "Largest /invocations body, in bytes per token of engine.max_model_len: a body over "
        "max_model_len x this (at most SageMaker's 6 MB) is refused with 413 before it is read. A context's worth "
        "of text is ~4 bytes per token in English and ~6 in Japanese written as JSON \\u escapes (as json.dumps "
        "sends it), plus ~30 bytes of JSON per message of at least 5 tokens; 64 (256 KiB at 4,096 tokens) leaves "
        "room for a conversation about ten contexts long, which the context budget trims. Gateway choice (issue 49)."
    ),
)

REQUEST_LIMITS: Final[tuple[Setting[int], ...]] = (
    MAX_SEQUENCES,
    MAX_LOGPROBS,
    MAX_STOP_SEQUENCES,
    MAX_STOP_SEQUENCE_CHARS,
    MAX_TOKEN_IDS,
    MAX_BODY_BYTES_PER_TOKEN,
)


def max_body_bytes(max_model_len: int, bytes_per_token: int) -> int:
    """Largest ``/invocations`` body in bytes: ``max_model_len x bytes_per_token``, at most
    :data:`SAGEMAKER_MAX_BODY_BYTES` (262,144 for the defaults 4,096 x 64)."""
    return min(SAGEMAKER_MAX_BODY_BYTES, max_model_len * bytes_per_token)


def max_messages(max_model_len: int) -> int:
    """Most messages a chat body may hold: what one context holds when every message is empty,
    ``max_model_len // MESSAGE_TEMPLATE_TOKENS`` (819 at 4,096). A longer conversation can never be
    sent whole; the context budget keeps the most recent turns that fit, so a client sends at most
    this many."""
    return max_model_len // MESSAGE_TEMPLATE_TOKENS
