"""The root of the config tree: one frozen, validated object per synth."""

import re
from typing import Literal

from pydantic import Field, model_validator

from app_config.base import ConfigModel
from app_config.bedrock import BedrockConfig
from app_config.capacity import CapacityConfig, InstanceCapacity, instance_capacity
from app_config.container import ContainerConfig
from app_config.cross_section_checks import check_cross_sections
from app_config.engine import EngineConfig
from app_config.image import ImageConfig
from app_config.llm import ModelConfig
from app_config.memory_plan import MemoryPlan
from app_config.memory_plan_config import MemoryPlanConfig, plan_for_instance
from app_config.monitoring import MonitoringConfig
from app_config.observability import ObservabilityConfig
from app_config.release import ReleaseConfig
from app_config.scaling import ScalingConfig, VariantScalingConfig
from app_config.serving import ServingConfig
from app_config.variants import VARIANT_KEYS, Variant, VariantKey

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
    """Everything the stacks need, validated once in ``app.py``.

    Defaults are MangaAssist's production values from the seeds; a stage overlay in
    ``cdk.json`` and ``-c key=value`` overrides adjust them.
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
    monitoring: MonitoringConfig = Field(
        default=MonitoringConfig(), description="Alarms, notifications and the SLO dashboard."
    )
    scaling: ScalingConfig = Field(
        default=ScalingConfig(), description="Autoscaling, scheduled capacity, rollout guardrails, prices."
    )
    bedrock: BedrockConfig = Field(
        default=BedrockConfig(), description="Optional Bedrock Custom Model Import stack (off by default)."
    )
    capacity: CapacityConfig = Field(
        default=CapacityConfig(),
        description="Per-instance capacity at the TTFT SLO: routing assumption and measured overrides.",
    )
    release: ReleaseConfig = Field(
        default=ReleaseConfig(),
        description="ModelRelease stack: the quality-gated release pipelines of base-model and adapter versions.",
    )

    @model_validator(mode="after")
    def _derive_concurrency_targets(self) -> "AppConfig":
        """Fill each unset ``concurrent_requests_target`` with the variant's capacity at the SLO.

        The sections are frozen and pydantic keeps ``self`` from an ``__init__`` validator, so the
        derived section replaces the field in place, once, before any other check reads it.
        """
        updates: dict[str, VariantScalingConfig] = {}
        for variant in (self.variant(key) for key in VARIANT_KEYS):  # the canary's too: enabling it is a -c away
            scaling = variant.scaling
            if scaling.target_tracking.concurrent_requests_target is None:
                target = float(self.capacity_of(variant.serving.instance_type).concurrency)
                tracking = scaling.target_tracking.model_copy(update={"concurrent_requests_target": target})
                updates[variant.key] = scaling.model_copy(update={"target_tracking": tracking})
        if updates:
            object.__setattr__(self, "scaling", self.scaling.model_copy(update=updates))
        return self

    def capacity_of(self, instance_type: str) -> InstanceCapacity:
        """One ``instance_type`` instance's capacity at TTFT p95 <= ``monitoring.high_ttft.threshold``.

        Raises:
            ValueError: no measurement and no projection for the instance type's GPU.
        """
        return instance_capacity(instance_type, self.monitoring.high_ttft.threshold, self.capacity)

    @model_validator(mode="after")
    def _cross_section_checks(self) -> "AppConfig":
        check_cross_sections(self)  # app_config/cross_section_checks.py
        return self

    def variant(self, key: VariantKey) -> Variant:
        """The variant ``key`` with its ``serving`` and ``scaling`` sections, enabled or not."""
        if key == "primary":
            return Variant(key, self.serving.primary, self.scaling.primary)
        return Variant(key, self.serving.canary, self.scaling.canary)

    def variants(self) -> tuple[Variant, ...]:
        """The production variants that exist, primary first: the primary, and the canary when
        ``serving.canary.enabled`` (as ``serving.variants``), each with what belongs to it."""
        return tuple(self.variant(key) for key in VARIANT_KEYS if key == "primary" or self.serving.canary.enabled)

    def deployed_variants(self) -> tuple[Variant, ...]:
        """The variants the endpoint has: :meth:`variants`, less the canary in inference_components mode
        (one variant hosts the components)."""
        if self.serving.hosts_inference_components:
            return (self.variant("primary"),)
        return self.variants()

    def memory_plan_of(self, instance_type: str) -> MemoryPlan:
        """The memory plan of one engine of this config on ``instance_type``."""
        return plan_for_instance(instance_type, model=self.model, engine=self.engine, memory=self.memory_plan)

    @property
    def endpoint_name(self) -> str:
        """The endpoint's name: configured, or ``<project>-vllm-<stage>`` in lowercase."""
        return self.serving.endpoint_name or f"{self.project_name.lower()}-vllm-{self.stage}"

    def stack_name(self, unit: str) -> str:
        """CloudFormation stack name of a deployment unit, e.g. ``MangaAssist-prod-Serving``."""
        return f"{self.project_name}-{self.stage}-{unit}"
