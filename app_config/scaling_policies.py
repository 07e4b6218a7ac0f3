"""Scaling policies of a production variant: target tracking and queue-depth step scaling.

Sources of the defaults: seed 001 (user stories 3 and 7: targets, +2/+4/+8 steps), seed 003 §9
(queue-depth trigger), the memory plan (the concurrency target and the scale-in bound), and
``make simulate`` (the scale-out cooldowns). AWS behaviour: the Application Auto Scaling user
guide, "Target tracking scaling policies" and "Step scaling policies" (cooldown periods).
"""

from typing import Literal

from pydantic import Field, model_validator

from app_config.base import ConfigModel, IntChoice

LAUNCH_TIME_S = 660
"""Seconds from a scale-out to a new instance serving: provisioning 8 min (seed 001 user story 7,
"SageMaker scale-up: 5-8 minutes", the slow end; AWS publishes no figure) plus the measured
start of the A10G-sized engine, 61-83 s from the compile cache (the default) and 135-206 s cold
(serving_contract.env.start_up_ranges), rounded up to 11 min: a cold start past ~180 s takes longer. The default
scale-out cooldowns: shorter ones compound while instances boot (make simulate)."""
SCALE_IN_TARGET_FRACTION = 0.25
"""Derived scale-in threshold / concurrency target: removing one of N >= 2 instances below it leaves at
most half the target per instance (StepScalingConfig.scale_in_running_requests)."""


class TargetTrackingConfig(ConfigModel):
    """Target tracking on a SageMaker predefined metric."""

    enabled: bool = Field(default=True, description="Create the target-tracking policy.")
    metric: Literal["invocations_per_instance", "concurrent_requests_high_resolution"] = Field(
        default="concurrent_requests_high_resolution",
        description=(
            "concurrent_requests_high_resolution = SageMakerVariantConcurrentRequestsPerModelHighResolution "
            "(10 s datapoints, docs/sources.md, Metrics): what an LLM engine runs out of, bounded by the memory plan; "
            "invocations_per_instance = SageMakerVariantInvocationsPerInstance (per minute). The simulation "
            "(make simulate) showed seed 001's 200 invocations/min holding the fleet at its max of 20 all day: "
            "one g5 serves ~1,200/min (seed 001 user story 4), so the target sat at 1/6 of capacity."
        ),
    )
    invocations_per_instance_target: float = Field(
        default=200.0,
        gt=0,
        le=100000,
        description=(
            "Target invocations per minute per instance. Source: seed 001 user story 3 (200/min, the same "
            "level its step alarms and One Piece trigger are set against); seed 003's 50/min belongs to its "
            "8-instance ceiling and would hold the fleet near max at <1 request/s per GPU."
        ),
    )
    concurrent_requests_target: float | None = Field(
        default=None,
        gt=0,
        le=1024,
        description=(
            "Target concurrent requests per instance (high-resolution metric); unset (the default) = the instance "
            "type's concurrency at the TTFT SLO (planning/throughput_at_slo.py: measured with ops load, "
            "else projected from the GPU measurement at MangaAssist's request shape, docs/performance.md). Above it, "
            "TTFT p95 passes slo.<class>.ttft_p95_ms of the routing's class (throughput.routing). The earlier 32 came "
            "from what the KV cache fits (43 typical requests on a g5); measured on an H100 at the request shape, TTFT"
            " p95 at 32 concurrent is ~1.7 s."
        ),
    )
    scale_out_cooldown_s: int = Field(
        default=LAUNCH_TIME_S,
        ge=0,
        le=3600,
        description=(
            "Seconds between scale-outs: the time a new instance takes to serve (LAUNCH_TIME_S, 660 s). Within it, "
            "capacity already added counts toward the next scale-out (AAS user guide, target tracking "
            "cooldowns), so a rising metric still adds the difference; seed 001's 60 s let the metric of a fleet "
            "whose new instances were still booting compound the desired count to max."
        ),
    )
    scale_in_cooldown_s: int = Field(
        default=600, ge=0, le=86400, description="Seconds between scale-ins. Source: seed 001 (600 s)."
    )
    disable_scale_in: bool = Field(
        default=True,
        description=(
            "Scale out only (TargetTrackingScalingPolicyConfiguration.DisableScaleIn); the low-load step policy "
            "removes one instance at a time instead. An engine's concurrency grows faster than its arrival rate "
            "(its steps lengthen with the requests it runs), so a proportional scale-in from a quiet fleet lands past "
            "the rate each instance holds; make simulate showed it dropping 39 instances to 6 and past the "
            "prefix-cache cliff during an unforeseen surge (docs/scaling.md)."
        ),
    )

    @property
    def target_value(self) -> float:
        """The target value of the selected metric.

        Raises:
            ValueError: the concurrency target is unset; ``AppConfig`` derives it, so only a
                ``TargetTrackingConfig`` built outside a config tree can get here.
        """
        if self.metric == "invocations_per_instance":
            return self.invocations_per_instance_target
        if self.concurrent_requests_target is None:
            raise ValueError(
                "concurrent_requests_target is unset: read the derived one from the plan (planning.plan.Plan.scaling, "
                "planning/resolved_plan.py)"
            )
        return self.concurrent_requests_target


class KvCacheTrackingConfig(ConfigModel):
    """Target tracking on the container's ``KvCacheUsagePercent``: the leading signal of the cliff (issue 45).

    Under open-loop conversations an engine's TTFT stays flat until its prefix cache stops holding the
    live conversations, then jumps ~9x within +30 % load (benchmarks/results/h200-2026-11-27-open-loop):
    TTFT turns only after the cliff. The KV cache's share in use (vLLM's ``kv_cache_usage_perc``, which
    the gateway publishes) rises with the running requests and with their cold, longer prompts before
    that, so a policy on it adds instances while TTFT still holds. Scale-out only (``DisableScaleIn``):
    concurrency tracking and the low-load step decide scale-in, so this policy never holds a quiet
    fleet up.
    """

    enabled: bool = Field(default=True, description="Create the KV-cache target-tracking policy (scale-out only).")
    target_percent: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description=(
            "Target KvCacheUsagePercent, the variant's average; unset (the default) = the KV cache's share in use "
            "at the instance type's arrival rate at the TTFT SLOs (planning/throughput_at_slo.py, the open-loop "
            "engine model), rounded up: above it the fleet is past the rate it is sized for."
        ),
    )
    scale_out_cooldown_s: int = Field(
        default=LAUNCH_TIME_S,
        ge=0,
        le=3600,
        description="Seconds between scale-outs: the time a new instance takes to serve (LAUNCH_TIME_S, 660 s).",
    )

    @property
    def target_value(self) -> float:
        """The target, percent.

        Raises:
            ValueError: the target is unset; the plan derives it (planning/resolved_plan.py).
        """
        if self.target_percent is None:
            raise ValueError(
                "kv_cache_tracking.target_percent is unset: read the derived one from the plan "
                "(planning.plan.Plan.scaling)"
            )
        return self.target_percent


class ScalingStepConfig(ConfigModel):
    """One scale-out step: when the metric is in [lower, upper), add ``adjustment`` instances."""

    lower: float = Field(ge=0, description="Inclusive lower bound of the metric, in queued requests per instance.")
    upper: float | None = Field(default=None, description="Exclusive upper bound; None = unbounded (last step).")
    adjustment: int = Field(ge=1, le=100, description="Instances to add.")


class StepScalingConfig(ConfigModel):
    """Step scaling on the container's queue-depth metric (serving_contract EngineMetric.QUEUE_DEPTH).

    The scale-out alarm fires at the first step's ``lower``; steps must be contiguous.
    """

    enabled: bool = Field(default=True, description="Create the step-scaling policies and their alarms.")
    statistic: Literal["Average", "Maximum"] = Field(
        default="Average",
        description="How per-instance QueueDepth datapoints combine (Average = queued requests per instance).",
    )
    scale_out_steps: tuple[ScalingStepConfig, ...] = Field(
        default=(
            ScalingStepConfig(lower=50, upper=100, adjustment=2),
            ScalingStepConfig(lower=100, upper=200, adjustment=4),
            ScalingStepConfig(lower=200, upper=None, adjustment=8),
        ),
        min_length=1,
        max_length=20,
        description=(
            "Scale-out steps. Source: seed 001 user story 7 (+2/+4/+8 at 1x/2x/4x the trigger) with seed 003 §9's "
            "queue_depth > 50 trigger."
        ),
    )
    # No 10/30 s: the queue-depth metric is standard resolution (EMF without StorageResolution,
    # so 60 s datapoints); a sub-minute alarm period on it sees no data and, with missing data
    # treated as notBreaching, never fires.
    scale_out_period_s: IntChoice[Literal[60, 120, 300]] = Field(
        default=60,
        description=(
            "Alarm period, seconds; 60, 120 or 300 (the metric has 1-minute resolution). "
            "Source: seed 001 (1-minute alarm, 1 evaluation)."
        ),
    )
    scale_out_evaluation_periods: int = Field(default=1, ge=1, le=10, description="Periods above threshold.")
    scale_out_cooldown_s: int = Field(
        default=LAUNCH_TIME_S,
        ge=0,
        le=3600,
        description=(
            "Seconds (LAUNCH_TIME_S, 660 s). A larger step during the cooldown adds only the difference to the "
            "step that started it (AAS user guide, 'Step scaling policies', cooldown period), so +2 then +8 adds "
            "6 more and nothing stalls; seed 001's 60 s re-fired every minute while instances booted (an alarm in "
            "ALARM re-invokes its scaling action once a minute, CloudWatch user guide) and reached max."
        ),
    )
    # Scale-in keys on low load, not on a short queue: a healthy vLLM keeps QueueDepth near 0
    # under ordinary load (it queues only when its max_num_seqs slots or KV cache are full), so
    # seed 003's "queue < 5 for 300 s" would remove an instance every cooldown while target
    # tracking adds it back. The threshold follows the variant's concurrency target (a quarter of
    # it): removing one of N >= 2 instances leaves at most threshold x N / (N - 1) <= half the
    # target per instance, so target tracking never adds back what scale-in removed.
    scale_in_running_requests: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Scale in while RunningRequests (vLLM sequences in the batch, Average per instance) stays below this. "
            "None: a quarter of the variant's target_tracking.concurrent_requests_target (derived at synth). Set, "
            "it must be below that target (or scale-in removes what target tracking adds) and <= half the "
            "sequences the engine runs (memory plan concurrency ceiling): at or above it the alarm fires at full load."
        ),
    )
    scale_in_adjustment: int = Field(default=-1, ge=-100, le=-1, description="Instances removed per scale-in.")
    scale_in_period_s: IntChoice[Literal[60, 120, 300]] = Field(
        default=60, description="Scale-in alarm period, seconds; 60, 120 or 300 (1-minute metric)."
    )
    scale_in_evaluation_periods: int = Field(
        default=5, ge=1, le=60, description="Periods below threshold (5 x 60 s = seed 003's 300 s)."
    )
    scale_in_cooldown_s: int = Field(default=600, ge=0, le=86400, description="Seconds. Source: seed 001 (600 s).")

    @model_validator(mode="after")
    def _steps_contiguous(self) -> "StepScalingConfig":
        steps = self.scale_out_steps
        for index, step in enumerate(steps):
            last = index == len(steps) - 1
            if step.upper is None and not last:
                raise ValueError(
                    f"scale_out_steps[{index}].upper is unbounded but step {index + 1} follows; only the last "
                    "step may have upper = null"
                )
            if step.upper is not None and step.upper <= step.lower:
                raise ValueError(f"scale_out_steps[{index}]: lower = {step.lower:g} must be < upper = {step.upper:g}")
            if not last and step.upper != steps[index + 1].lower:
                raise ValueError(
                    f"scale_out_steps[{index}].upper = {step.upper:g} must equal scale_out_steps[{index + 1}].lower = "
                    f"{steps[index + 1].lower:g} (steps must be contiguous and non-overlapping)"
                )
            if not last and steps[index + 1].adjustment < step.adjustment:
                raise ValueError(
                    f"scale_out_steps[{index + 1}].adjustment = {steps[index + 1].adjustment} is below "
                    f"scale_out_steps[{index}].adjustment = {step.adjustment}; steps must not shrink as load grows"
                )
        if steps[-1].upper is not None:
            raise ValueError(
                f"scale_out_steps[{len(steps) - 1}].upper = {steps[-1].upper:g}: the last step must be unbounded (null)"
            )
        return self

    @property
    def scale_in_threshold(self) -> float:
        """RunningRequests below which the variant scales in: set, or derived from the concurrency target
        (``planning.plan.Plan.scaling`` holds the derived one)."""
        if self.scale_in_running_requests is None:
            raise ValueError(
                "step_scaling.scale_in_running_requests is unset: read the derived one from the plan "
                "(planning.plan.Plan.scaling)"
            )
        return self.scale_in_running_requests

    @property
    def scale_out_threshold(self) -> float:
        """Queue depth at which the scale-out alarm fires (the first step's lower bound)."""
        return self.scale_out_steps[0].lower
