"""Guarded rollouts of variants mode: the endpoint's DeploymentConfig (blue/green traffic shifting
with alarm rollback). Limits: docs/sources.md, "Deployment guardrails"."""

from typing import Literal

from pydantic import Field, model_validator

from app_config.base import ConfigModel


class RolloutConfig(ConfigModel):
    """The endpoint's DeploymentConfig: blue/green traffic shifting with alarm rollback."""

    enabled: bool = Field(default=True, description="Set DeploymentConfig on the endpoint.")
    traffic_routing: Literal["CANARY", "LINEAR", "ALL_AT_ONCE"] = Field(
        default="CANARY", description="Blue/green TrafficRoutingConfiguration.Type."
    )
    canary_size_percent: int = Field(
        default=10,
        ge=1,
        le=50,
        description="CANARY: share of capacity shifted first, percent (AWS <= 50%). Source: seed 000 (10%).",
    )
    linear_step_percent: int = Field(
        default=20, ge=10, le=50, description="LINEAR: share shifted per step, percent (AWS 10-50%)."
    )
    wait_interval_s: int = Field(
        default=600,
        ge=0,
        le=3600,
        description=(
            "Bake time between shifts, seconds (AWS 0-3600): two of the 5-minute windows of the p95 latency "
            "alarm (seed 002: TTFT P95 > 500 ms for 5 min), so a rollback alarm can fire before the next shift."
        ),
    )
    termination_wait_s: int = Field(
        default=120,
        ge=0,
        le=3600,
        description="Seconds the old (blue) fleet stays after the shift, for a fast rollback. Source: seed 003 §8.",
    )
    maximum_execution_timeout_s: int = Field(
        default=3600,
        ge=600,
        le=28800,
        description=(
            "Whole deployment limit, seconds (AWS 600-28800): green fleet provisioning (5-8 min, seed 001) + "
            "startup health check (serving.container_startup_health_check_timeout_s, 600 s by default) + bake + "
            "shift, with margin; a config whose sum exceeds it fails synth."
        ),
    )
    green_provisioning_allowance_s: int = Field(
        default=480,
        ge=0,
        le=3600,
        description=(
            "Time allowed for SageMaker to provision the green fleet's GPU instances before their startup health "
            "check, seconds. Source: seed 001 (5-8 min GPU scale-up; the upper bound)."
        ),
    )
    auto_rollback: bool = Field(
        default=True,
        description=(
            "Roll back a blue/green deployment on every variant's 5xx-rate, p95-TTFT and p99-ModelLatency alarms "
            "(serving_contract.alarms, by name): the update replaces both variants."
        ),
    )
    retain_deployment_config: bool = Field(
        default=False,
        description="RetainDeploymentConfig: reuse the last deployment's config; False keeps it from this config.",
    )

    @property
    def shift_steps(self) -> int:
        """Number of wait intervals a deployment goes through."""
        if self.traffic_routing == "LINEAR":
            return -(-100 // self.linear_step_percent)
        if self.traffic_routing == "CANARY":
            return 1
        return 0

    @model_validator(mode="after")
    def _fits_in_timeout(self) -> "RolloutConfig":
        shifting = self.shift_steps * self.wait_interval_s
        if shifting >= self.maximum_execution_timeout_s:
            raise ValueError(
                f"maximum_execution_timeout_s = {self.maximum_execution_timeout_s} must exceed the traffic shifting "
                f"time ({self.shift_steps} step(s) x wait_interval_s = {self.wait_interval_s} = {shifting} s)"
            )
        return self
