"""Environment -> validated, frozen settings.

The CDK stack sets the variables named in :mod:`serving_contract.env`; this module is the
only place in the container that reads them. A bad value stops the process at once with
one line naming the variable, the value and what is allowed (house style, part 2 item 4).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from serving_contract import env
from serving_contract.metrics import DEFAULT_NAMESPACE

LORA_RANKS: Final[tuple[int, ...]] = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""Values vLLM 0.22.0's ``--max-lora-rank`` accepts (checked with its parser, CONVENTIONS.md)."""

BLOCK_SIZES: Final[tuple[int, ...]] = (1, 8, 16, 32, 64, 128, 256)
"""KV-cache block sizes (tokens) the CUDA attention backends support in vLLM 0.22."""

QUANTIZATIONS: Final[tuple[str, ...]] = ("none", "awq", "awq_marlin", "gptq", "gptq_marlin", "fp8")
"""Quantization methods this image is meant to serve; ``none`` omits ``--quantization``."""

LOG_LEVELS: Final[tuple[str, ...]] = ("debug", "info", "warning", "error", "critical")

SAGEMAKER_SIGKILL_AFTER_S: Final = env.SAGEMAKER_SIGKILL_AFTER_S
"""SageMaker sends SIGKILL this long after SIGTERM (CONVENTIONS.md, container contract)."""

SAGEMAKER_INVOCATION_LIMIT_S: Final = env.SAGEMAKER_INVOCATION_TIMEOUT_S
"""SageMaker's limit for answering one ``/invocations`` call."""

MAX_DRAIN_TIMEOUT_S: Final = env.DRAIN_TIMEOUT_MAX_S
"""Drain budget cap (22 s): with vLLM's stop grace (3 s) and uvicorn's (2 s) it leaves 3 s of
the 30 s SIGKILL window spare (budget in ``serving_contract.env``)."""

_NAME_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_NAMESPACE_RE: Final = re.compile(r"^[A-Za-z0-9.\-_/#: ]{1,255}$")


class SettingsError(ValueError):
    """A variable has a value the container cannot run with; ``str()`` is one line."""


def _bool(value: Any) -> Any:
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
    return value


Bool = Annotated[bool, Field(strict=False)]


class Settings(BaseModel):
    """Everything the entrypoint reads from the environment, with defaults.

    Defaults come from the seed design (seeds/003 section 5: ml.g5.xlarge, Llama-3-8B AWQ,
    ``--gpu-memory-utilization 0.92 --max-model-len 4096 --max-num-seqs 128
    --max-num-batched-tokens 8192 --block-size 16``; seeds/000 section 4: rank-16 adapters,
    ``--max-loras 4``) and from SageMaker limits (60 s invocation, SIGKILL 30 s after SIGTERM).
    """

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=False)

    gpu_memory_utilization: float = Field(
        0.92,
        alias=env.ENGINE_GPU_MEMORY_UTILIZATION,
        gt=0.0,
        le=1.0,
        description="Fraction (0, 1] of GPU memory vLLM may take for weights + KV cache.",
    )
    max_model_len: int = Field(
        4096,
        alias=env.ENGINE_MAX_MODEL_LEN,
        ge=16,
        le=131072,
        description="Context length in tokens.",
    )
    max_num_seqs: int = Field(
        128,
        alias=env.ENGINE_MAX_NUM_SEQS,
        ge=1,
        le=4096,
        description="Sequences batched per engine step.",
    )
    max_num_batched_tokens: int = Field(
        8192,
        alias=env.ENGINE_MAX_NUM_BATCHED_TOKENS,
        ge=16,
        le=1048576,
        description="Tokens per engine step.",
    )
    block_size: Literal[1, 8, 16, 32, 64, 128, 256] = Field(
        16, alias=env.ENGINE_BLOCK_SIZE, description="KV-cache block size in tokens."
    )
    enable_prefix_caching: Bool = Field(True, alias=env.ENGINE_ENABLE_PREFIX_CACHING)
    quantization: Literal["none", "awq", "awq_marlin", "gptq", "gptq_marlin", "fp8"] = Field(
        "awq", alias=env.ENGINE_QUANTIZATION
    )
    tensor_parallel_size: Literal[1, 2, 4, 8] = Field(1, alias=env.ENGINE_TENSOR_PARALLEL_SIZE)
    enforce_eager: Bool = Field(
        False,
        alias=env.ENGINE_ENFORCE_EAGER,
        description="Skip CUDA-graph capture (slower, starts faster).",
    )
    log_level: Literal["debug", "info", "warning", "error", "critical"] = Field("info", alias=env.ENGINE_LOG_LEVEL)
    served_model_name: str = Field(
        "base",
        alias=env.ENGINE_SERVED_MODEL_NAME,
        description="Name clients use for the base model.",
    )

    lora_adapters: tuple[str, ...] = Field((), alias=env.LORA_ADAPTERS, description="Comma-separated adapter names.")
    max_loras: int = Field(
        4,
        alias=env.LORA_MAX_LORAS,
        ge=1,
        le=64,
        description="Adapters resident on the GPU at once.",
    )
    max_lora_rank: int = Field(16, alias=env.LORA_MAX_RANK)
    max_cpu_loras: int | None = Field(
        None,
        alias=env.LORA_MAX_CPU_LORAS,
        ge=1,
        le=1024,
        description="Adapters cached in CPU memory.",
    )

    startup_timeout_s: float = Field(
        600.0,
        alias=env.STARTUP_TIMEOUT_S,
        gt=0,
        le=3600,
        description="Engine load + warmup budget; <= ContainerStartupHealthCheckTimeoutInSeconds max of 3600 s.",
    )
    warmup_num_requests: int = Field(
        10,
        alias=env.WARMUP_NUM_REQUESTS,
        ge=1,
        le=1000,
        description="Warmup requests (seeds/003: 10); at least one per adapter is always sent.",
    )
    drain_timeout_s: float = Field(
        20.0,
        alias=env.DRAIN_TIMEOUT_S,
        gt=0,
        le=MAX_DRAIN_TIMEOUT_S,
        description="In-flight drain budget after SIGTERM, seconds.",
    )
    request_timeout_s: float = Field(
        55.0,
        alias=env.REQUEST_TIMEOUT_S,
        gt=0,
        lt=SAGEMAKER_INVOCATION_LIMIT_S,
        description="Per-request bound, < SageMaker's 60 s.",
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

    @field_validator("enable_prefix_caching", "enforce_eager", mode="before")
    @classmethod
    def _parse_bool(cls, value: Any) -> Any:
        return _bool(value)

    @field_validator("block_size", "tensor_parallel_size", mode="before")
    @classmethod
    def _parse_int_literal(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
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
            if not _NAME_RE.match(name):
                raise ValueError(f"adapter name {name!r} must match {_NAME_RE.pattern} (letters, digits, . _ -)")
        duplicates = sorted({name for name in value if value.count(name) > 1})
        if duplicates:
            raise ValueError(f"adapter names must be unique, repeated: {', '.join(duplicates)}")
        return value

    @field_validator("served_model_name", "endpoint_name", "variant_name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _NAME_RE.match(value):
            raise ValueError(f"must match {_NAME_RE.pattern}")
        return value

    @field_validator("max_lora_rank")
    @classmethod
    def _check_rank(cls, value: int) -> int:
        if value not in LORA_RANKS:
            raise ValueError(f"must be one of {', '.join(map(str, LORA_RANKS))}")
        return value

    @field_validator("metrics_namespace")
    @classmethod
    def _check_namespace(cls, value: str) -> str:
        if not _NAMESPACE_RE.match(value) or value.startswith("AWS/"):
            raise ValueError("must be 1-255 of letters, digits, . - _ / # : space, not AWS/...")
        return value

    @model_validator(mode="after")
    def _cross_checks(self) -> Settings:
        if self.served_model_name in self.lora_adapters:
            raise SettingsError(
                f"{env.LORA_ADAPTERS}={','.join(self.lora_adapters)!r} is invalid: "
                f"adapter names must differ from {env.ENGINE_SERVED_MODEL_NAME}="
                f"{self.served_model_name!r}"
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
        if self.max_cpu_loras is not None:
            return self.max_cpu_loras
        return max(self.max_loras, len(self.lora_adapters))

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
