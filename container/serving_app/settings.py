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
from serving_app.env_values import parse_bool
from serving_contract import engine_settings as spec
from serving_contract import env
from serving_contract import request_limits as limits
from serving_contract.metrics import DEFAULT_NAMESPACE
from serving_contract.request_classes import WARM_MIN_CACHED_FRACTION_DEFAULT

WARMUP_PREFILL_MAX_TOKENS: Final = env.WARMUP_PREFILL_MAX_TOKENS
WARMUP_PREFILL_MIN_TOKENS: Final = env.WARMUP_PREFILL_MIN_TOKENS

SAGEMAKER_SIGKILL_AFTER_S: Final = env.SAGEMAKER_SIGKILL_AFTER_S
"""SageMaker sends SIGKILL this long after SIGTERM (docs/sources.md, "Container contract")."""

SAGEMAKER_INVOCATION_LIMIT_S: Final = env.SAGEMAKER_INVOCATION_TIMEOUT_S
"""SageMaker's limit for answering one ``/invocations`` call."""

MAX_DRAIN_TIMEOUT_S: Final = env.DRAIN_TIMEOUT_MAX_S
"""Drain budget cap (22 s): with vLLM's stop grace (3 s) and uvicorn's (2 s) it leaves 3 s of
the 30 s SIGKILL window spare (budget in ``serving_contract.env``)."""

NAME_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
"""Rule for every name clients and dimensions see: the served model, each adapter, the endpoint."""
_NAMESPACE_RE: Final = re.compile(r"^[A-Za-z0-9.\-_/#: ]{1,255}$")
_SHA256_RE: Final = re.compile(r"^[0-9a-f]{64}$")


def _field(setting: spec.EngineSetting) -> Any:
    return Field(
        setting.default,
        alias=setting.env_var,
        description=setting.description,
        ge=setting.ge,
        gt=setting.gt,
        le=setting.le,
        lt=setting.lt,
    )


def _limit(limit: limits.RequestLimit) -> Any:
    return Field(limit.default, alias=limit.env_var, description=limit.description, ge=limit.ge, le=limit.le)


class SettingsError(ValueError):
    """A variable has a value the container cannot run with; ``str()`` is one line."""


Bool = Annotated[bool, Field(strict=False)]


class Settings(BudgetSettings):
    """Everything the entrypoint reads from the environment, with defaults.

    Engine defaults, bounds and sources: ``serving_contract.engine_settings`` (the seed design,
    corrected where a GPU measurement contradicted it). Lifecycle bounds follow SageMaker's
    limits (60 s invocation, SIGKILL 30 s after SIGTERM).
    """

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=False)

    # The engine flags: names, defaults, bounds and allowed values from serving_contract
    # (shared with the config model, so a value that passes synth is one accepted here).
    gpu_memory_utilization: float = _field(spec.GPU_MEMORY_UTILIZATION)
    max_model_len: int = _field(spec.MAX_MODEL_LEN)
    max_num_seqs: int = _field(spec.MAX_NUM_SEQS)
    max_num_batched_tokens: int = _field(spec.MAX_NUM_BATCHED_TOKENS)
    block_size: int = _field(spec.BLOCK_SIZE)
    enable_prefix_caching: Bool = _field(spec.ENABLE_PREFIX_CACHING)
    quantization: str = _field(spec.QUANTIZATION)
    kv_cache_dtype: str = _field(spec.KV_CACHE_DTYPE)
    attention_backend: str = _field(spec.ATTENTION_BACKEND)
    tensor_parallel_size: int = _field(spec.TENSOR_PARALLEL_SIZE)
    data_parallel_size: int = _field(spec.DATA_PARALLEL_SIZE)
    enforce_eager: Bool = _field(spec.ENFORCE_EAGER)
    max_cudagraph_capture_size: int = _field(spec.MAX_CUDAGRAPH_CAPTURE_SIZE)
    cudagraph_memory_estimate: Bool = _field(spec.CUDAGRAPH_MEMORY_ESTIMATE)
    log_level: str = _field(spec.LOG_LEVEL)
    served_model_name: str = Field(
        "base",
        alias=env.ENGINE_SERVED_MODEL_NAME,
        description="Name clients use for the base model.",
    )

    lora_adapters: tuple[str, ...] = Field((), alias=env.LORA_ADAPTERS, description="Comma-separated adapter names.")
    max_loras: int = _field(spec.MAX_LORAS)
    max_lora_rank: int = _field(spec.MAX_LORA_RANK)
    max_cpu_loras: int | None = _field(spec.MAX_CPU_LORAS)
    specialize_active_lora: Bool = _field(spec.SPECIALIZE_ACTIVE_LORA)
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

    startup_timeout_s: float = Field(
        float(env.startup_budget_s(env.STARTUP_HEALTH_CHECK_TIMEOUT_DEFAULT_S)),
        alias=env.STARTUP_TIMEOUT_S,
        gt=0,
        le=3600,
        description=(
            "Engine load + warmup budget, seconds; the stack sets it STARTUP_REPORT_MARGIN_S below the endpoint's "
            "ContainerStartupHealthCheckTimeoutInSeconds (serving_contract.env.startup_budget_s)."
        ),
    )
    warmup_num_requests: int = Field(
        10,
        alias=env.WARMUP_NUM_REQUESTS,
        ge=1,
        le=1000,
        description="Warmup requests (seeds/003: 10); at least one per adapter is always sent.",
    )
    warmup_prefill_tokens: int = Field(
        env.WARMUP_PREFILL_TOKENS_DEFAULT,
        alias=env.WARMUP_PREFILL_TOKENS,
        ge=0,
        description=(
            "Prompt tokens of the prefill warm-up: before /ping goes green every model name (base and each "
            "adapter) gets one prompt of this many tokens and one of one fewer, so Triton compiles the "
            "prefill-sized LoRA kernels (it compiles once for token counts divisible by 16 and once for the "
            "rest) before the first user's long prompt does (issue 35). 2,048: MangaAssist's first turn is "
            "2,040 tokens (seed 002's 600-token system prompt + 1,400 of context + a 40-token turn). 0: off."
        ),
    )
    drain_timeout_s: float = Field(
        20.0,
        alias=env.DRAIN_TIMEOUT_S,
        gt=0,
        description=(
            "In-flight drain budget after SIGTERM, seconds; at most drain_timeout_max_s(SHUTDOWN_BUDGET_S) "
            "(22 s on SageMaker)."
        ),
    )
    shutdown_budget_s: float = Field(
        SAGEMAKER_SIGKILL_AFTER_S,
        alias=env.SHUTDOWN_BUDGET_S,
        ge=SAGEMAKER_SIGKILL_AFTER_S,
        le=env.SHUTDOWN_BUDGET_MAX_S,
        description="SIGTERM to SIGKILL, seconds: SageMaker's 30 unless a local run gives the drain more.",
    )
    request_timeout_s: float = Field(
        55.0,
        alias=env.REQUEST_TIMEOUT_S,
        gt=0,
        lt=SAGEMAKER_INVOCATION_LIMIT_S,
        description="Per-request bound, < SageMaker's 60 s.",
    )

    # Per-request limits: serving_contract.request_limits; enforced by serving_app.sagemaker.limits.
    request_max_sequences: int = _limit(limits.MAX_SEQUENCES)
    request_max_logprobs: int = _limit(limits.MAX_LOGPROBS)
    request_max_stop_sequences: int = _limit(limits.MAX_STOP_SEQUENCES)
    request_max_stop_sequence_chars: int = _limit(limits.MAX_STOP_SEQUENCE_CHARS)
    request_max_token_ids: int = _limit(limits.MAX_TOKEN_IDS)

    request_read_timeout_s: float = Field(
        10.0,
        alias=env.REQUEST_READ_TIMEOUT_S,
        gt=0,
        le=MAX_DRAIN_TIMEOUT_S,
        description="A request's headers and body must arrive within this, seconds (serving_app.transport).",
    )
    cuda_forward_compat: Bool | None = Field(
        None,
        alias=env.CUDA_FORWARD_COMPAT,
        description="Load cuda-compat-13-0 for the engine (host driver < 580); unset: the image's default.",
    )
    sessions_max: int = Field(
        env.SESSIONS_MAX_DEFAULT,
        alias=env.SESSIONS_MAX,
        ge=1,
        le=env.SESSIONS_MAX_LIMIT,
        description="Most live stateful sessions; NEW_SESSION past it answers 429 (serving_contract.env).",
    )
    session_ttl_s: int = Field(
        env.SESSION_TTL_DEFAULT_S,
        alias=env.SESSION_TTL_S,
        ge=1,
        le=env.SESSION_TTL_MAX_S,
        description="Stateful session lifetime from NEW_SESSION, seconds.",
    )

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
    metrics_interval_s: float = Field(
        10.0,
        alias=env.METRICS_INTERVAL_S,
        gt=0,
        le=300,
        description="vLLM /metrics scrape period, seconds.",
    )
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
            raise ValueError(f"allowed values are {setting.allowed_text()}")
        return value

    @field_validator("data_parallel_size", mode="after")
    @classmethod
    def _data_parallel(cls, value: int) -> int:
        # Not in ENGINE_SETTINGS (no config key: the stack derives it), so checked here.
        if value not in (spec.DATA_PARALLEL_SIZE.choices or ()):
            raise ValueError(f"allowed values are {spec.DATA_PARALLEL_SIZE.allowed_text()}")
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

    @field_validator("warmup_prefill_tokens")
    @classmethod
    def _check_prefill_tokens(cls, value: int) -> int:
        if 0 < value < WARMUP_PREFILL_MIN_TOKENS:
            raise ValueError(
                f"must be 0 (off) or at least {WARMUP_PREFILL_MIN_TOKENS} (shorter batches are not prefill-sized: "
                "vLLM captures them as CUDA graphs at start)"
            )
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

    @model_validator(mode="after")
    def _cross_checks(self) -> Settings:
        drain_max = env.drain_timeout_max_s(self.shutdown_budget_s)
        if self.drain_timeout_s > drain_max:
            raise SettingsError(
                f"{env.DRAIN_TIMEOUT_S}='{self.drain_timeout_s:g}' is invalid: must be <= {drain_max:g} "
                f"({env.SHUTDOWN_BUDGET_S} {self.shutdown_budget_s:g} s less vLLM's {env.ENGINE_STOP_GRACE_S} s, "
                f"uvicorn's {env.UVICORN_SHUTDOWN_GRACE_S} s and {env.SHUTDOWN_SPARE_S} s spare)"
            )
        if self.served_model_name in self.lora_adapters:
            raise SettingsError(
                f"{env.LORA_ADAPTERS}={','.join(self.lora_adapters)!r} is invalid: "
                f"adapter names must differ from {env.ENGINE_SERVED_MODEL_NAME}="
                f"{self.served_model_name!r}"
            )
        if self.lora_runtime_adapters and self.lora_adapters:
            raise SettingsError(
                f"{env.LORA_ADAPTERS}={','.join(self.lora_adapters)!r} is invalid: must be empty when "
                f"{env.LORA_RUNTIME_ADAPTERS}=true (SageMaker then loads every adapter through POST /adapters)"
            )
        if self.warmup_prefill_tokens and self.warmup_prefill_tokens + WARMUP_PREFILL_MAX_TOKENS > self.max_model_len:
            raise SettingsError(
                f"{env.WARMUP_PREFILL_TOKENS}={self.warmup_prefill_tokens!r} is invalid: must be at most "
                f"{env.ENGINE_MAX_MODEL_LEN}={self.max_model_len} - {WARMUP_PREFILL_MAX_TOKENS} "
                "(the warm-up prompt and its answer must fit one sequence), or 0 (off)"
            )
        if self.max_cpu_loras is not None and self.max_cpu_loras < self.max_loras:
            raise SettingsError(
                f"{env.LORA_MAX_CPU_LORAS}={self.max_cpu_loras!r} is invalid: must be >= "
                f"{env.LORA_MAX_LORAS}={self.max_loras}"
            )
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
    name = str(loc[0]) if loc else "environment"
    if name not in data and not loc:
        return str(error.get("msg", exc)).removeprefix("Value error, ")
    value = data.get(name, "<unset>")
    ctx = error.get("ctx") or {}
    allowed = _allowed(error["type"], ctx, str(error.get("msg", "")))
    return f"{name}={value!r} is invalid: {allowed}"


def _allowed(kind: str, ctx: Mapping[str, Any], msg: str) -> str:
    if kind == "literal_error":
        return f"allowed values are {ctx.get('expected', '')}"
    bounds = {
        "greater_than": "must be > {gt}",
        "greater_than_equal": "must be >= {ge}",
        "less_than": "must be < {lt}",
        "less_than_equal": "must be <= {le}",
        "string_too_short": "must have at least {min_length} characters",
        "string_too_long": "must have at most {max_length} characters",
    }
    if kind in bounds:
        return bounds[kind].format(**ctx)
    if kind in ("int_parsing", "int_from_float"):
        return "must be an integer"
    if kind == "float_parsing":
        return "must be a number"
    if kind in ("bool_parsing", "bool_type"):
        return "must be one of true, false, 1, 0, yes, no, on, off"
    return msg.removeprefix("Value error, ")
