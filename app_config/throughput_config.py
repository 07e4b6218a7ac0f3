"""The ``throughput`` section (``capacity`` until issue 55): where each instance's throughput at the TTFT
SLOs comes from, and the capacity job that measures it (``python -m ops throughput measure``).

The projection these settings select is :mod:`planning.throughput_at_slo`.
"""

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, model_validator

from app_config.base import ConfigModel, InstanceType, InstanceTypeKey, union_tag
from serving_contract.capacity_job import RESULT_FORMAT


class MeasuredThroughput(ConfigModel):
    """One instance type's throughput at the SLO as one figure, as ``python -m ops load`` prints it."""

    concurrency: int = Field(ge=1, le=1024, description="Concurrent requests per instance at the SLO.")
    requests_per_minute: float = Field(gt=0, le=100000, description="Requests completed per minute at that level.")
    ttft_p50_ms: float = Field(gt=0, le=60000, description="TTFT p50 at one concurrent request, ms.")
    date: dt.date | None = Field(default=None, description="When it was measured (ops load prints it).")


class ClassFigures(ConfigModel):
    """One request class at one offered rate."""

    requests: int = Field(ge=0, le=10_000_000, description="Requests of the class measured at the rate.")
    ttft_p50_ms: float | None = Field(default=None, ge=0, le=600_000, description="TTFT p50, ms (None: no request).")
    ttft_p95_ms: float | None = Field(default=None, ge=0, le=600_000, description="TTFT p95, ms (None: no request).")


class MeasuredStep(ConfigModel):
    """One offered rate of an open-loop sweep (cli_support/open_loop.py's StepSummary, trimmed)."""

    requests_per_minute: float = Field(gt=0, le=100_000, description="Offered arrival rate, requests per minute.")
    served_per_minute: float = Field(ge=0, le=100_000, description="Requests sent in the window and answered, /min.")
    completed_per_minute: float = Field(ge=0, le=100_000, description="Answers finished in the window, /min.")
    requests: int = Field(ge=0, le=10_000_000, description="Requests sent in the measured window.")
    errors: int = Field(ge=0, le=10_000_000, description="Of those, answered with an error.")
    cold: ClassFigures = Field(description="First turns and follow-ups that missed the prefix cache.")
    warm: ClassFigures = Field(description="Follow-ups that met their prefix cache.")
    running_mean: float | None = Field(
        default=None, ge=0, le=100_000, description="vLLM's num_requests_running, mean over the window."
    )
    kv_cache_usage_mean: float | None = Field(
        default=None, ge=0, le=1, description="vLLM's kv_cache_usage_perc (0-1), mean over the window."
    )

    @model_validator(mode="after")
    def _errors_within_requests(self) -> "MeasuredStep":
        if self.errors > self.requests:
            raise ValueError(f"errors = {self.errors} must be <= requests = {self.requests}")
        return self


class MeasuredCurve(ConfigModel):
    """One instance type measured by the capacity job (``python -m ops throughput measure``): TTFT per
    class at each offered rate of an open-loop sweep, what its engines did there, and where it fell
    off the cliff. The planner judges it against the config's SLOs (planning/throughput_at_slo.py)."""

    format: str = Field(description=f"Result format: {RESULT_FORMAT} (serving_contract/capacity_job.py).")
    instance_type: str = Field(min_length=1, max_length=64, description="The instance type the job ran on.")
    date: dt.date = Field(description="The day the job ran (UTC).")
    job: str = Field(min_length=1, max_length=63, description="The SageMaker processing job's name.")
    gpu: str = Field(default="", max_length=64, description="The GPU the job saw (nvidia-smi's name).")
    think_s: float = Field(
        ge=0,
        le=3600,
        description=(
            "Mean pause between a conversation's turns, seconds. A curve holds at the pause it was measured at: "
            "one measured at another than traffic.think_s stops synth (the pause sets how many follow-ups are "
            "cold, docs/planning.md)."
        ),
    )
    kv_cache_tokens: int | None = Field(
        default=None,
        ge=1,
        le=100_000_000,
        description="The engine's KV cache when measured, tokens (vLLM's 'GPU KV cache size'); None in older results.",
    )
    engines: int = Field(default=1, ge=1, le=8, description="Engines on the instance (data parallel).")
    steps: list[MeasuredStep] = Field(
        min_length=1, max_length=64, description="The sweep's steps, in increasing offered rate."
    )
    cliff_per_minute: float | None = Field(
        default=None,
        gt=0,
        le=100_000,
        description="The first offered rate whose TTFT p95 reached twice the highest SLO (None: not reached).",
    )

    @model_validator(mode="after")
    def _rates_increase(self) -> "MeasuredCurve":
        if self.format != RESULT_FORMAT:
            raise ValueError(f"format = {self.format!r}: this version reads {RESULT_FORMAT!r} (ops throughput measure)")
        rates = [s.requests_per_minute for s in self.steps]
        if rates != sorted(set(rates)):
            raise ValueError(f"steps: requests_per_minute must increase step by step, got {rates}")
        return self


class CapacityJobConfig(ConfigModel):
    """The capacity job: the serving image on a candidate instance type, swept open loop (issue 46)."""

    max_runtime_s: int = Field(
        default=3600,
        ge=600,
        le=4 * 3600,
        description=(
            "StoppingCondition.MaxRuntimeInSeconds of one job; with the instance's price, the cost bound "
            "`ops throughput measure` prints before it starts anything. Default 1 h: an engine start (2-7 min), "
            "the sweep's steps (a minute each) and the upload."
        ),
    )
    volume_size_gb: int = Field(
        default=100,
        ge=30,
        le=1024,
        description="ProcessingResources.ClusterConfig.VolumeSizeInGB (the image and vLLM's caches).",
    )
    rates_per_minute: list[float] = Field(
        default=[60.0, 120.0, 180.0, 240.0, 300.0, 360.0, 420.0, 480.0, 560.0, 640.0, 720.0, 800.0],
        min_length=2,
        max_length=32,
        description=(
            "Offered requests per minute of the sweep's steps, increasing; it stops past the cliff (TTFT p95 at "
            "4x the highest SLO). Default: 60-800, around the 252-540 a minute one engine holds on the GPUs "
            "modelled (planning/engine_model.py)."
        ),
    )
    step_s: int = Field(
        default=60, ge=20, le=600, description="Seconds per step: a quarter settles, the rest is measured."
    )
    instance_types: tuple[InstanceType, ...] = Field(
        default=("ml.g5.xlarge", "ml.g6.xlarge", "ml.g6e.xlarge"),
        min_length=1,
        max_length=20,
        description=(
            "Candidate instance types a capacity job may run on, besides the variants' own (always allowed). The "
            "operator policy allows CreateProcessingJob on these types only (IAM condition sagemaker:InstanceTypes) "
            "and `ops throughput measure` refuses any other. Default: one GPU each of the families the seeds and the "
            "planner compare (A10G, L4, L40S), about $1-3 an hour (issue 53, finding 11)."
        ),
    )

    @model_validator(mode="after")
    def _rates_increase(self) -> "CapacityJobConfig":
        rates = self.rates_per_minute
        if any(rate <= 0 for rate in rates) or rates != sorted(set(rates)):
            raise ValueError(f"rates_per_minute must be positive and increase, got {rates}")
        return self


PAUSE_TOLERANCE_S = 0.5
"""How far a curve's pause may be from ``traffic.think_s`` and still count (rounding in a result)."""


def check_measured_pauses(measured: dict[str, Any], think_s: float) -> None:
    """Refuse a measured curve whose pause is not the config's (``traffic.think_s``): at another pause
    another share of follow-ups is cold and the engine holds another rate (issue 52).

    Raises:
        ValueError: one line naming the curve, both pauses and what to do.
    """
    for key, curve in measured.items():
        if isinstance(curve, MeasuredCurve) and abs(curve.think_s - think_s) > PAUSE_TOLERANCE_S:
            raise ValueError(
                f"throughput.measured.{key}: measured with users pausing {curve.think_s:g} s, traffic.think_s is "
                f"{think_s:g} s; a curve holds only at its own pause: measure it again at {think_s:g} s "
                f"(python -m ops throughput measure --instance-type {key}) or remove it"
            )


def _measured_form(value: Any) -> str:
    """``curve`` for the capacity job's result (it names its ``format``), else ``figure``: one form is
    validated, so a bad value gets that form's one error, not both forms' lists."""
    named = value.get("format") if isinstance(value, dict) else getattr(value, "format", None)
    return "curve" if named is not None else "figure"


Measured = Annotated[
    Annotated[MeasuredCurve, union_tag("curve")] | Annotated[MeasuredThroughput, union_tag("figure")],
    Discriminator(_measured_form),
]
"""One instance type's measurement, in either form (:func:`_measured_form` tells them apart)."""


class ThroughputConfig(ConfigModel):
    """Where the per-instance throughput at the TTFT SLO comes from (see planning/throughput_at_slo.py)."""

    routing: Literal["least_outstanding", "session_affinity", "prefix_aware"] = Field(
        default="prefix_aware",
        description=(
            "How follow-up turns reach engines: least_outstanding (SageMaker's routing without sessions: the fresh "
            "curve), session_affinity (clients use stateful sessions: the conversations curve) or prefix_aware "
            "(the endpoint config's RoutingStrategy PREFIX_AWARE, derived PrefixLength and ConcurrencyThreshold: "
            "the conversations curve with no client change; docs/planning.md)."
        ),
    )
    measured: dict[InstanceTypeKey, Measured] = Field(
        default={},
        description=(
            "Capacity measured in the account per instance type; overrides the open-loop engine model "
            "(planning/throughput_at_slo.py). Either the capacity job's curve (`python -m ops throughput measure "
            "--write <stage>` writes it: TTFT per class at each offered rate) or the one figure "
            "`python -m ops load` prints (concurrency, requests_per_minute, ttft_p50_ms)."
        ),
    )
    job: CapacityJobConfig = Field(
        default=CapacityJobConfig(), description="The capacity job of `python -m ops throughput measure`."
    )

    @model_validator(mode="after")
    def _curves_name_their_type(self) -> "ThroughputConfig":
        for key, measured in self.measured.items():
            if isinstance(measured, MeasuredCurve) and measured.instance_type != key:
                raise ValueError(
                    f"measured.{key}: its curve was measured on {measured.instance_type}; put it under that key"
                )
        return self
