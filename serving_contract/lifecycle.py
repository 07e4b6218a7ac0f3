"""The serving process's lifecycle settings (start-up, warm-up, drain, timeouts, metrics cadence,
sessions), declared once for both sides.

``app_config.container.ContainerConfig`` (validated at synth, keys under ``container.``) and the
container's ``serving_app.settings.Settings`` (validated at start from the environment) build
their fields from these declarations (shape: ``serving_contract.setting``). Where a bound depends
on another value (the drain on the shutdown budget, the prefill warm-up on ``max_model_len``),
the rule is a function here that both sides call, so both say the same thing.

Standard library only: the image copies this package as it is (``container/Dockerfile``).
"""

from __future__ import annotations

from typing import Final

from serving_contract import env
from serving_contract.setting import Setting

WARMUP_NUM_REQUESTS: Final = Setting(
    key="warmup_num_requests",
    env_var=env.WARMUP_NUM_REQUESTS,
    default=10,
    ge=1,
    le=100,
    description=(
        "Synthetic chat requests sent through the base model and adapters before /ping turns 200, one at a "
        "time per name (at least one per name is always sent). Source: seed 003 §10 (10 requests, ~10 s). "
        "At most 100: at seed 003's ~1 s a request that is up to 100 s of STARTUP_TIMEOUT_S, which the engine's "
        "cold start (206 s measured, serving_contract.env.MEASURED_COLD_START_S) shares."
    ),
)
WARMUP_PREFILL_TOKENS: Final = Setting(
    key="warmup_prefill_tokens",
    env_var=env.WARMUP_PREFILL_TOKENS,
    default=2048,
    ge=0,
    description=(
        "Prompt tokens of the prefill warm-up before /ping turns 200: every model name (base and each adapter) "
        "gets one prompt of this many tokens (rounded down to a multiple of 16) and one of one fewer, so Triton "
        "compiles the prefill-sized LoRA kernels before the first user's long prompt does (issue 35). 0: off; "
        "else at least 128 and at most engine.max_model_len - 2. Source: MangaAssist's first turn, 2,040 tokens "
        "(seed 002: a 600-token system prompt + 1,400 of context + a 40-token turn)."
    ),
)
DRAIN_TIMEOUT: Final = Setting(
    key="drain_timeout_s",
    env_var=env.DRAIN_TIMEOUT_S,
    default=20,
    ge=1,
    le=env.DRAIN_TIMEOUT_MAX_S,
    description=(
        "Seconds in-flight requests may finish after SIGTERM. At most 22: with vLLM's 3 s stop grace, uvicorn's "
        "2 s and 3 s spare, shutdown stays inside SageMaker's 30 s SIGKILL (serving_contract.env). A local run "
        "that sets SHUTDOWN_BUDGET_S higher raises the container's bound with it (drain_timeout_problem)."
    ),
)
REQUEST_TIMEOUT: Final = Setting(
    key="request_timeout_s",
    env_var=env.REQUEST_TIMEOUT_S,
    default=55,
    ge=1,
    lt=env.SAGEMAKER_INVOCATION_TIMEOUT_S,
    description=(
        "Upper bound on one /invocations request, seconds; below SageMaker's 60 s so the client gets the "
        "gateway's answer, not SageMaker's timeout."
    ),
)
REQUEST_READ_TIMEOUT: Final = Setting(
    key="request_read_timeout_s",
    env_var=env.REQUEST_READ_TIMEOUT_S,
    default=10,
    ge=1,
    le=env.DRAIN_TIMEOUT_MAX_S,
    description=(
        "Seconds a request's line, headers and whole body may take to arrive (408 after). SageMaker buffers "
        "the payload (<= 6 MB) before calling the container; half the drain budget, so a stalled upload "
        "cannot hold the SIGTERM drain (serving_app.transport). At most the drain cap (22 s)."
    ),
)
METRICS_INTERVAL: Final = Setting(
    key="metrics_interval_s",
    env_var=env.METRICS_INTERVAL_S,
    default=10.0,
    gt=0,
    le=60,
    description=(
        "Seconds between scrapes of vLLM /metrics into EMF lines. 10: six samples of queue depth and KV-cache use "
        "in each one-minute period their alarms average (cdk_constructs/observability/endpoint_alarms.py). At most "
        "60: the EMF metrics are standard resolution and every alarm period is a multiple of 60 s "
        "(app_config.monitoring), so a longer interval leaves minutes without a datapoint."
    ),
)
SESSIONS_MAX: Final = Setting(
    key="sessions_max",
    env_var=env.SESSIONS_MAX,
    default=4096,
    ge=1,
    le=1_000_000,
    description=(
        "Most live SageMaker stateful sessions per instance; NEW_SESSION past it answers 429. At the measured "
        "~4.5 req/s per instance that holds the TTFT SLO (docs/sources.md, Capacity) and seed 002's 4.2 turns "
        "per conversation, ~1.07 conversations start per second; with 20-minute sessions and clients that never "
        "CLOSE that is ~1,290 live, so 4096 leaves ~3x headroom. One session is one dict entry (~200 bytes)."
    ),
)
SESSION_TTL: Final = Setting(
    key="session_ttl_s",
    env_var=env.SESSION_TTL_S,
    default=1200,
    ge=1,
    le=86_400,
    description=(
        "Lifetime of a stateful session from NEW_SESSION, seconds (the Expires SageMaker is told). 1200: "
        "model_hosting_container_standards' default (SageMakerConfig.sessions_expiration, 20 minutes), which "
        "vLLM 0.26's own /invocations uses. At most one day."
    ),
)

LIFECYCLE_SETTINGS: Final[tuple[Setting[int] | Setting[float], ...]] = (
    WARMUP_NUM_REQUESTS,
    WARMUP_PREFILL_TOKENS,
    DRAIN_TIMEOUT,
    REQUEST_TIMEOUT,
    REQUEST_READ_TIMEOUT,
    METRICS_INTERVAL,
    SESSIONS_MAX,
    SESSION_TTL,
)
"""Every lifecycle setting with a config key (``container.<key>``), in the config reference's order."""

DRAIN_RETRY_AFTER_S: Final = 1
"""``Retry-After`` of the 503 a draining instance answers new work with (issue 53, finding 5), seconds, and
the same as ``error.retry_after_s`` in its body (SageMaker passes the body, not the header). The instance's
``/ping`` is 503 from the signal on, so SageMaker takes it out of rotation, and the retry is routed among the
variant's other instances; 1 s is short enough for a caller's deadline of seconds (seed 002: p99 < 2 s) to
hold the retry, long enough that a retry does not land back before the signal's effect."""
DRAINING_ERROR_TYPE: Final = "InstanceDraining"
"""``error.type`` of that 503: the client library (``mangaassist_client.errors``, which carries a copy) retries
it elsewhere and never counts it against the endpoint's circuit, so a deploy that drains every old instance
within seconds does not open it."""

# Container-only: the stack derives the first from serving.container_startup_health_check_timeout_s
# and never sets the second (SageMaker's SIGKILL window is fixed).
STARTUP_TIMEOUT: Final = Setting(
    key="startup_timeout_s",
    env_var=env.STARTUP_TIMEOUT_S,
    default=float(env.startup_budget_s(env.STARTUP_HEALTH_CHECK_TIMEOUT_DEFAULT_S)),
    gt=0,
    le=3600,
    description=(
        "Engine load + warm-up budget, seconds; the stack sets it STARTUP_REPORT_MARGIN_S below the endpoint's "
        "ContainerStartupHealthCheckTimeoutInSeconds (serving_contract.env.startup_budget_s), whose most is 3600."
    ),
)
SHUTDOWN_BUDGET: Final = Setting(
    key="shutdown_budget_s",
    env_var=env.SHUTDOWN_BUDGET_S,
    default=float(env.SAGEMAKER_SIGKILL_AFTER_S),
    ge=env.SAGEMAKER_SIGKILL_AFTER_S,
    le=env.SHUTDOWN_BUDGET_MAX_S,
    description="SIGTERM to SIGKILL, seconds: SageMaker's 30 unless a local run gives the drain more.",
)


def drain_timeout_problem(drain_timeout_s: float, shutdown_budget_s: float) -> str | None:
    """What is wrong with draining for ``drain_timeout_s`` inside ``shutdown_budget_s``, or None.

    The phrase completes ``<name> = <value>: `` (``serving_contract.validation``). Inside
    SageMaker's budget it is the declared bound's own phrase (``must be <= 22``), as at synth.
    """
    most = env.drain_timeout_max_s(shutdown_budget_s)
    if drain_timeout_s <= most:
        return None
    if shutdown_budget_s == env.SAGEMAKER_SIGKILL_AFTER_S:
        return f"must be <= {most:g}"
    return (
        f"must be <= {most:g} ({env.SHUTDOWN_BUDGET_S} = {shutdown_budget_s:g} s less vLLM's "
        f"{env.ENGINE_STOP_GRACE_S} s stop grace, uvicorn's {env.UVICORN_SHUTDOWN_GRACE_S} s and "
        f"{env.SHUTDOWN_SPARE_S} s spare)"
    )


def warmup_prefill_problem(tokens: int, max_model_len: int, *, length_name: str) -> str | None:
    """What is wrong with a prefill warm-up of ``tokens`` for ``max_model_len``, or None.

    ``length_name`` names ``max_model_len`` (``engine.max_model_len`` at synth,
    ``ENGINE_MAX_MODEL_LEN`` in the container). The phrase completes ``<name> = <value>: ``.
    """
    most = max_model_len - env.WARMUP_PREFILL_MAX_TOKENS
    if tokens == 0 or env.WARMUP_PREFILL_MIN_TOKENS <= tokens <= most:
        return None
    return (
        f"must be 0 (off) or from {env.WARMUP_PREFILL_MIN_TOKENS} to {length_name} - {env.WARMUP_PREFILL_MAX_TOKENS}"
        f" = {most} (shorter prompts are not prefill-sized; the warm-up prompt and its answer must fit one sequence)"
    )
