"""Per-request limits on the fields that multiply engine work, declared once for both sides.

``app_config.container.ContainerConfig`` (validated at synth, keys under ``container.``) and
the container's ``serving_app.settings.Settings`` (validated at start from the environment)
build their fields from these declarations, as they do for the engine settings. The gateway
refuses a request over a limit with a 400 naming the field (``serving_app.sagemaker.limits``)
before vLLM sees it.

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

REQUEST_LIMITS: Final[tuple[Setting[int], ...]] = (
    MAX_SEQUENCES,
    MAX_LOGPROBS,
    MAX_STOP_SEQUENCES,
    MAX_STOP_SEQUENCE_CHARS,
    MAX_TOKEN_IDS,
)
