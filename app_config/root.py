"""The root of the config tree: one frozen, validated object per synth."""

import re
from typing import Literal

from pydantic import Field, model_validator

from app_config.base import ConfigModel
from app_config.bedrock import BedrockConfig
from app_config.container import ContainerConfig
from app_config.cross_section_checks import check_cross_sections
from app_config.engine import EngineConfig
from app_config.image import ImageConfig
from app_config.llm import ModelConfig
from app_config.memory_plan_config import MemoryPlanConfig
from app_config.migration import MigrationConfig
from app_config.monitoring import MonitoringConfig
from app_config.observability import ObservabilityConfig
from app_config.release import ReleaseConfig
from app_config.scaling import ScalingConfig
from app_config.serving import ServingConfig
from app_config.slo import SloConfig
from app_config.throughput_config import ThroughputConfig
from app_config.traffic import TrafficConfig

_ACCOUNT = re.compile(r"^\d{12}$")
_REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")


class DeploymentEnvConfig(ConfigModel):
    """Target account and region; both None keeps the stacks environment-agnostic."""

    account: str | None = Field(default=None, description="12-digit AWS account id, or None.")
    region: str | None = Field(default=None, description="AWS region such as ap-northeast-1, or None.")

    @model_validator(mode="after")
    def _shapes(self) -> "DeploymentEnvConfig":
        if self.account is not None and not _ACCOUNT.match(self.account):
            raise ValueError(f"account = {self.account!r}: must be a 12-digit AWS account id")
        if self.region is not None and not _REGION.match(self.region):
            raise ValueError(f"region = {self.region!r}: must be an AWS region name such as ap-northeast-1")
        return self


class AppConfig(ConfigModel):
    """Everything the stacks need, validated once in ``app.py``: plain data.

    Defaults are MangaAssist's production values from the seeds; a stage overlay in
    ``cdk.json`` and ``-c key=value`` overrides adjust them. What follows from the config (derived
    targets, throughput, memory plans, the variants with their resolved scaling) is the plan's:
    ``planning.make_plan.make_plan(config)``.
    """

    project_name: str = Field(
        default="MangaAssist",
        pattern=r"^[A-Za-z][A-Za-z0-9]{0,31}$",
        description="Prefix of stack names and tags.",
    )
    stage: Literal["dev", "prod"] = Field(
        default="prod", description="Deployment stage; selects the overlay in cdk.json."
    )
    env: DeploymentEnvConfig = Field(default=DeploymentEnvConfig(), description="Target account and region.")
    tags: dict[str, str] = Field(
        default={"Project": "MangaAssist", "Workload": "llm-serving"},
        description="Tags applied to every resource.",
    )
    model: ModelConfig = Field(default=ModelConfig(), description="Base model and LoRA adapters baked into the image.")
    engine: EngineConfig = Field(default=EngineConfig(), description="vLLM engine settings (container env vars).")
    memory_plan: MemoryPlanConfig = Field(
        default=MemoryPlanConfig(), description="Assumptions of the synth-time KV-cache and GPU-memory plan."
    )
    container: ContainerConfig = Field(default=ContainerConfig(), description="Serving-process lifecycle settings.")
    serving: ServingConfig = Field(default=ServingConfig(), description="Endpoint and production variants.")
    image: ImageConfig = Field(default=ImageConfig(), description="ECR repository and image references.")
    observability: ObservabilityConfig = Field(default=ObservabilityConfig(), description="Logs and metrics.")
    slo: SloConfig = Field(
        default=SloConfig(),
        description="Service-level objectives, declared once: TTFT per request class (cold, warm), error rate.",
    )
    monitoring: MonitoringConfig = Field(
        default=MonitoringConfig(), description="Alarms, notifications and the SLO dashboard."
    )
    scaling: ScalingConfig = Field(
        default=ScalingConfig(), description="Autoscaling, scheduled capacity, rollout guardrails, prices."
    )
    bedrock: BedrockConfig = Field(
        default=BedrockConfig(), description="Optional Bedrock Custom Model Import stack (off by default)."
    )
    throughput: ThroughputConfig = Field(
        default=ThroughputConfig(),
        description=(
            "Per-instance throughput at the TTFT SLOs: the routing it assumes, measured curves and the measuring job. "
            "Named capacity until issue 55, which gave each thing called capacity a name of its own."
        ),
    )
    traffic: TrafficConfig = Field(
        default=TrafficConfig(),
        description="The week's demand: volume, daily shape, release evenings, request shape (plan and simulation).",
    )
    release: ReleaseConfig = Field(
        default=ReleaseConfig(),
        description="ModelRelease stack: the quality-gated release pipelines of base-model and adapter versions.",
    )
    migration: MigrationConfig = Field(
        default=MigrationConfig(),
        description="Migration stack (off by default): Bedrock to the endpoint, its comparisons, gates and ramp.",
    )

    @model_validator(mode="after")
    def _cross_section_checks(self) -> "AppConfig":
        check_cross_sections(self)  # app_config/cross_section_checks.py
        return self

    @property
    def endpoint_name(self) -> str:
        """The endpoint's name: configured, or ``<project>-vllm-<stage>`` in lowercase."""
        return self.serving.endpoint_name or f"{self.project_name.lower()}-vllm-{self.stage}"

    @property
    def capacity(self) -> ThroughputConfig:
        """The ``throughput`` section under its old name, for one release: planning/capacity.py (``make capacity``)
        still reads it there. The config key ``capacity`` itself is refused with its new name."""
        return self.throughput

    def stack_name(self, unit: str) -> str:
        """CloudFormation stack name of a deployment unit, e.g. ``MangaAssist-prod-Serving``."""
        return f"{self.project_name}-{self.stage}-{unit}"
