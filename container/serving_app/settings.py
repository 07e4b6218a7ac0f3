"""Environment -> validated, frozen settings.

The CDK stack sets the variables named in :mod:`serving_contract.env`; this module is the
only place in the container that reads them. A bad value stops the process at once with
one line naming the variable, the value and what is allowed (house style, part 2 item 4).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from serving_app.context_budget.settings import BudgetSettings
from serving_app.env_values import env_field, parse_bool
from serving_contract import engine_settings as spec
from serving_contract import env, lifecycle
from serving_contract import request_limits as limits
from serving_contract.lifecycle import drain_timeout_problem, warmup_prefill_problem
from serving_contract.metrics import DEFAULT_NAMESPACE
from serving_contract.request_classes import WARM_MIN_CACHED_FRACTION_DEFAULT
from serving_contract.validation import allowed, describe, line, one_of

WARMUP_PREFILL_MAX_TOKENS: Final = env.WARMUP_PREFILL_MAX_TOKENS

NAME_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
"""Rule for every name clients and dimensions see: the served model, each adapter, the endpoint."""
_NAMESPACE_RE: Final = re.compile(r"^[A-Za-z0-9.\-_/#: ]{1,255}$")
_SHA256_RE: Final = re.compile(r"^[0-9a-f]{64}$")


class SettingsError(ValueError):
    """A variable has a value the container cannot run with; ``str()`` is one line."""


Bool = Annotated[bool, Field(strict=False)]


class Settings(BudgetSettings):
    """Everything the entrypoint reads from the environment, with defaults.

    Every setting the stack also configures is built from its one declaration: the engine's in
    ``serving_contract.engine_settings``, the lifecycle's in ``serving_contract.lifecycle``, the
    per-request limits in ``serving_contract.request_limits`` and the context budget's in
    ``serving_contract.context_budget`` (defaults, bounds and their sources there).
    """

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=False)

    # The engine flags: names, defaults, bounds and allowed values from serving_contract
    # (shared with the config model, so a value that passes synth is one accepted here).
    gpu_memory_utilization: float = env_field(spec.GPU_MEMORY_UTILIZATION)
    max_model_len: int = env_field(spec.MAX_MODEL_LEN)
    max_num_seqs: int = env_field(spec.MAX_NUM_SEQS)
    max_num_batched_tokens: int = env_field(spec.MAX_NUM_BATCHED_TOKENS)
    block_size: int = env_field(spec.BLOCK_SIZE)
    enable_prefix_caching: Bool = env_field(spec.ENABLE_PREFIX_CACHING)
    quantization: str = env_field(spec.QUANTIZATION)
    kv_cache_dtype: str = env_field(spec.KV_CACHE_DTYPE)
    attention_backend: str = env_field(spec.ATTENTION_BACKEND)
    tensor_parallel_size: int = env_field(spec.TENSOR_PARALLEL_SIZE)
    data_parallel_size: int = env_field(spec.DATA_PARALLEL_SIZE)
    enforce_eager: Bool = env_field(spec.ENFORCE_EAGER)
    max_cudagraph_capture_size: int = env_field(spec.MAX_CUDAGRAPH_CAPTURE_SIZE)
    cudagraph_memory_estimate: Bool = env_field(spec.CUDAGRAPH_MEMORY_ESTIMATE)
    kv_offloading_size_gib: float = env_field(spec.KV_OFFLOADING_SIZE)
    kv_offloading_backend: str = env_field(spec.KV_OFFLOADING_BACKEND)
    log_level: str = env_field(spec.LOG_LEVEL)
    served_model_name: str = Field(
        "base",
        alias=env.ENGINE_SERVED_MODEL_NAME,
        description="Name clients use for the base model.",
    )

    lora_adapters: tuple[str, ...] = Field((), alias=env.LORA_ADAPTERS, description="Comma-separated adapter names.")
    max_loras: int = env_field(spec.MAX_LORAS)
    max_lora_rank: int = env_field(spec.MAX_LORA_RANK)
    max_cpu_loras: int | None = env_field(spec.MAX_CPU_LORAS)
    specialize_active_lora: Bool = env_field(spec.SPECIALIZE_ACTIVE_LORA)
    lora_tuned_config_dir: Path | None = Field(
        None,
        alias=env.LORA_TUNED_CONFIG_DIR,
        description=(
            "Folder of vLLM's tuned LoRA kernel configs (benchmarks/lora_tune.py's output: "
            "<GPU name>_SHRINK.json, <GPU name>_EXPAND_TRUE.json), passed to the engine as "
            "VLLM_TUNED_CONFIG_FOLDER. vLLM reads only the files named after the GPU it runs on and "
            "logs 'Using default LoRA kernel configs' without them. Unset: vLLM's defaults."
        ),
    )
    lora_runtime_adapters: Bool = Field(
        False,
        alias=env.LORA_RUNTIME_ADAPTERS,
        description="SageMaker loads adapters at runtime (POST /adapters); inference_components mode.",
    )

    adapter_src_root: Path = Field(
        Path("/opt/ml"),
        alias=env.ADAPTER_SRC_ROOT,
        description=(
            "POST /adapters loads only from folders under this (resolved); SageMaker places model data "
            "under /opt/ml (serving_app.adapters.source)."
        ),
    )

    adapter_sha256: dict[str, str] = Field(
        default_factory=dict,
        alias=env.ADAPTER_SHA256,
        description=(
            "JSON {name: sha256}: POST /adapters refuses a name without an entry and a folder whose "
            "artifact_sha256 differs; empty (unset) checks nothing, as outside SageMaker."
        ),
    )

    # Lifecycle: serving_contract.lifecycle (shared with the config's container section).
    startup_timeout_s: float = env_field(lifecycle.STARTUP_TIMEOUT)
    warmup_num_requests: int = env_field(lifecycle.WARMUP_NUM_REQUESTS)
    warmup_prefill_tokens: int = env_field(lifecycle.WARMUP_PREFILL_TOKENS)
    shutdown_budget_s: float = env_field(lifecycle.SHUTDOWN_BUDGET)
    # The stack's bound (22 s) holds inside SageMaker's SIGKILL window; a local run with a longer
    # SHUTDOWN_BUDGET_S drains longer, so the upper bound follows it (_drain_fits_the_budget).
    drain_timeout_s: int = env_field(lifecycle.DRAIN_TIMEOUT, le=None)
    request_timeout_s: int = env_field(lifecycle.REQUEST_TIMEOUT)

    # Per-request limits: serving_contract.request_limits; enforced by serving_app.sagemaker.limits.
    request_max_sequences: int = env_field(limits.MAX_SEQUENCES)
    request_max_logprobs: int = env_field(limits.MAX_LOGPROBS)
    request_max_stop_sequences: int = env_field(limits.MAX_STOP_SEQUENCES)
    request_max_stop_sequence_chars: int = env_field(limits.MAX_STOP_SEQUENCE_CHARS)
    request_max_token_ids: int = env_field(limits.MAX_TOKEN_IDS)
    request_max_body_bytes_per_token: int = env_field(limits.MAX_BODY_BYTES_PER_TOKEN)

    request_read_timeout_s: int = env_field(lifecycle.REQUEST_READ_TIMEOUT)
    cuda_forward_compat: Bool | None = Field(
        None,
        alias=env.CUDA_FORWARD_COMPAT,
        description="Load cuda-compat-13-0 for the engine (host driver < 580); unset: the image's default.",
    )
    sessions_max: int = env_field(lifecycle.SESSIONS_MAX)
    session_ttl_s: int = env_field(lifecycle.SESSION_TTL)

    warm_min_cached_fraction: float = Field(
        WARM_MIN_CACHED_FRACTION_DEFAULT,
        alias=env.REQUEST_CLASS_WARM_MIN_CACHED_FRACTION,
        gt=0,
        le=1,
        description=(
            "A request is warm when at least this fraction of its prompt tokens came from the prefix cache, "
            "else cold (serving_contract.request_classes)."
        ),
    )
    metrics_namespace: str = Field(DEFAULT_NAMESPACE, alias=env.METRICS_NAMESPACE)
    metrics_interval_s: float = env_field(lifecycle.METRICS_INTERVAL)
    endpoint_name: str = Field("local", alias=env.ENDPOINT_NAME, min_length=1, max_length=63)
    variant_name: str = Field("AllTraffic", alias=env.VARIANT_NAME, min_length=1, max_length=63)

    @field_validator(
        "enable_prefix_caching",
        "enforce_eager",
        "cudagraph_memory_estimate",
        "lora_runtime_adapters",
        "cuda_forward_compat",
        "specialize_active_lora",
        mode="before",
    )
    @classmethod
    def _parse_bool(cls, value: Any) -> Any:
        return parse_bool(value)

    @field_validator(*(s.key for s in spec.ENGINE_SETTINGS if s.choices), mode="after")
    @classmethod
    def _one_of(cls, value: Any, info: ValidationInfo) -> Any:
        setting = spec.BY_KEY[str(info.field_name)]
        if value not in (setting.choices or ()):
            raise ValueError(one_of(setting.choices or ()))
        return value

    @field_validator("data_parallel_size", mode="after")
    @classmethod
    def _data_parallel(cls, value: int) -> int:
        # Not in ENGINE_SETTINGS (no config key: the stack derives it), so checked here.
        if value not in (spec.DATA_PARALLEL_SIZE.choices or ()):
            raise ValueError(one_of(spec.DATA_PARALLEL_SIZE.choices or ()))
        return value

    @field_validator("lora_adapters", mode="before")
    @classmethod
    def _split_adapters(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("lora_adapters")
    @classmethod
    def _check_adapters(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not NAME_RE.match(name):
                raise ValueError(f"adapter name {name!r} must match {NAME_RE.pattern} (letters, digits, . _ -)")
        duplicates = sorted({name for name in value if value.count(name) > 1})
        if duplicates:
            raise ValueError(f"adapter names must be unique, repeated: {', '.join(duplicates)}")
        return value

    @field_validator("served_model_name", "endpoint_name", "variant_name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not NAME_RE.match(value):
            raise ValueError(f"must match {NAME_RE.pattern}")
        return value

    @field_validator("adapter_src_root")
    @classmethod
    def _resolve_root(cls, value: Path) -> Path:
        if not value.is_absolute():
            raise ValueError("must be an absolute path")
        return Path(os.path.realpath(value))

    @field_validator("adapter_sha256", mode="before")
    @classmethod
    def _parse_digests(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else {}
            except json.JSONDecodeError:
                raise ValueError("must be a JSON object {adapter name: 64 lowercase hex sha256}") from None
        if not isinstance(value, dict):
            raise ValueError("must be a JSON object {adapter name: 64 lowercase hex sha256}")
        for name, digest in value.items():
            if not isinstance(digest, str) or not _SHA256_RE.match(digest):
                raise ValueError(f"entry {name!r} = {digest!r}: must be 64 lowercase hex characters")
        return value

    @field_validator("lora_tuned_config_dir")
    @classmethod
    def _check_tuned_dir(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_dir():
            raise ValueError("must be an existing folder (benchmarks/lora_tune.py's output)")
        return value

    @field_validator("metrics_namespace")
    @classmethod
    def _check_namespace(cls, value: str) -> str:
        if not _NAMESPACE_RE.match(value) or value.startswith("AWS/"):
            raise ValueError("must be 1-255 of letters, digits, . - _ / # : space, not AWS/...")
        return value

    @field_validator("drain_timeout_s")
    @classmethod
    def _drain_fits_the_budget(cls, value: int, info: ValidationInfo) -> int:
        budget = info.data.get("shutdown_budget_s")
        problem = None if budget is None else drain_timeout_problem(value, budget)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _cross_checks(self) -> Settings:
        adapters = ",".join(self.lora_adapters)
        problems = (
            (
                env.WARMUP_PREFILL_TOKENS,
                self.warmup_prefill_tokens,
                warmup_prefill_problem(
                    self.warmup_prefill_tokens, self.max_model_len, length_name=env.ENGINE_MAX_MODEL_LEN
                ),
            ),
            (
                env.LORA_ADAPTERS,
                adapters,
                f"adapter names must differ from {env.ENGINE_SERVED_MODEL_NAME} = {self.served_model_name!r}"
                if self.served_model_name in self.lora_adapters
                else None,
            ),
            (
                env.LORA_ADAPTERS,
                adapters,
                f"must be empty when {env.LORA_RUNTIME_ADAPTERS} = true (SageMaker then loads every adapter "
                "through POST /adapters)"
                if self.lora_runtime_adapters and self.lora_adapters
                else None,
            ),
            (
                env.LORA_MAX_CPU_LORAS,
                self.max_cpu_loras,
                f"must be >= {env.LORA_MAX_LORAS} = {self.max_loras}"
                if self.max_cpu_loras is not None and self.max_cpu_loras < self.max_loras
                else None,
            ),
        )
        for name, value, problem in problems:
            if problem:
                raise SettingsError(line(name, value, problem))
        return self

    @property
    def effective_max_cpu_loras(self) -> int:
        """CPU adapter cache size: the configured value, else room for every adapter."""
        return spec.effective_max_cpu_loras(self.max_cpu_loras, self.max_loras, len(self.lora_adapters))

    @property
    def runtime_adapter_capacity(self) -> int:
        """Most adapters ``POST /adapters`` registers at once: ``LORA_MAX_CPU_LORAS``, else ``LORA_MAX_LORAS``.

        vLLM keeps ``--max-cpu-loras`` adapters loaded in CPU memory and evicts the least
        recently used one beyond that (``LRUCacheWorkerLoRAManager.add_adapter`` in
        vllm/lora/worker_manager.py), and ``--max-cpu-loras`` defaults to ``--max-loras``
        (vllm/config/lora.py). The gateway refuses to register more than this, so loading a new
        adapter does not silently evict a registered one. (After a delete or a replacement it
        can: vLLM's unload leaves the weights in the cache until its LRU drops them; see
        ``serving_app.adapters.serving``.) The same number is passed as ``--max-cpu-loras``
        (``serving_app.vllm_args``).
        """
        return self.max_cpu_loras if self.max_cpu_loras is not None else self.max_loras

    @property
    def runtime_adapter_capacity_variable(self) -> str:
        """The variable :attr:`runtime_adapter_capacity` comes from (for refusal messages)."""
        return env.LORA_MAX_CPU_LORAS if self.max_cpu_loras is not None else env.LORA_MAX_LORAS

    @property
    def model_names(self) -> tuple[str, ...]:
        """Every name a request may use in ``model``: the base model, then the adapters."""
        return (self.served_model_name, *self.lora_adapters)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Parse ``environ``; raise :class:`SettingsError` with a one-line message on a bad value.

        Variables that are unset or empty take their defaults.
        """
        names = {field.alias for field in cls.model_fields.values() if field.alias}
        data = {key: value for key, value in environ.items() if key in names and value != ""}
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise SettingsError(_one_line(exc, data)) from None


def _one_line(exc: ValidationError, data: Mapping[str, str]) -> str:
    error = exc.errors(include_url=False)[0]
    loc = error.get("loc") or ()
    if not loc:  # a cross-check: its message is already the whole line
        return allowed(error)
    name = str(loc[0])
    return describe(error, name, data.get(name, "<unset>"))
