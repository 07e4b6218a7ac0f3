"""The root of the config tree: one frozen, validated object per synth."""

import re
from functools import cached_property
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
from app_config.monitoring import MonitoringConfig
from app_config.observability import ObservabilityConfig
from app_config.planning.engine_memory import plan_for_instance
from app_config.planning.gpu_instances import engines_per_instance
from app_config.planning.memory_plan import MemoryPlan
from app_config.planning.prefix_routing import PrefixRouting, concurrency_threshold, prefix_length_bytes
from app_config.planning.resolved_plan import ResolvedPlan, resolve
from app_config.planning.throughput_at_slo import (
    CLASS_CURVES,
    CURVE_CLASSES,
    CURVES,
    ThroughputAtSlo,
    throughput_at_slo,
)
from app_config.release import ReleaseConfig
from app_config.scaling import ScalingConfig
from app_config.serving import ServingConfig
from app_config.slo import SloConfig
from app_config.throughput_config import ThroughputConfig
from app_config.traffic import TrafficConfig
from app_config.variants import VARIANT_KEYS, Variant, VariantKey
from serving_contract.request_classes import RequestClass

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
    capacity: ThroughputConfig = Field(
        default=ThroughputConfig(),
        description="Per-instance capacity at the TTFT SLO: routing assumption and measured overrides.",
    )
    traffic: TrafficConfig = Field(
        default=TrafficConfig(),
        description="The week's demand: volume, daily shape, release evenings, request shape (plan and simulation).",
    )
    release: ReleaseConfig = Field(
        default=ReleaseConfig(),
        description="ModelRelease stack: the quality-gated release pipelines of base-model and adapter versions.",
    )

    @cached_property
    def plan(self) -> ResolvedPlan:
        """The values this config leaves to be derived, derived (app_config/planning/resolved_plan.py):
        concurrency targets, scale-in thresholds, dated-event floors and the copy target.

        Computed once from the frozen fields and kept beside them; the validated sections themselves
        are never changed, so ``config.scaling`` is what was configured and ``config.plan.scaling``
        what the stacks deploy.
        """
        return resolve(self)

    @model_validator(mode="after")
    def _resolve_plan(self) -> "AppConfig":
        """Derive :attr:`plan` while validating, before the cross-section checks read it, so that a
        config whose derived values cannot be computed is a config error at load."""
        self.plan  # noqa: B018 (computed for its errors)
        return self

    @property
    def routed_class(self) -> RequestClass:
        """The request class whose curve ``capacity.routing`` reads: least_outstanding (the fresh
        curve) -> cold; session_affinity and prefix_aware (the conversations curve) -> warm."""
        return CURVE_CLASSES[CURVES[self.capacity.routing]]

    @property
    def ttft_slo_ms(self) -> float:
        """The TTFT p95 objective of :attr:`routed_class`: ``slo.<routed_class>.ttft_p95_ms``."""
        return self.slo.of(self.routed_class).ttft_p95_ms

    def throughput_of(self, instance_type: str, request_class: RequestClass | None = None) -> ThroughputAtSlo:
        """One ``instance_type`` instance's capacity at the TTFT SLOs: one engine per
        ``engine.tensor_parallel_size`` GPUs (vLLM data parallel).

        ``request_class`` None: the routing's curve, where first turns hold ``slo.cold.ttft_p95_ms``
        and follow-ups ``slo.warm.ttft_p95_ms`` (the projection carries both classes per level,
        devtools/ttft_model.py); cold: first turns on the fresh curve; warm: follow-ups on the
        conversations curve (each against its own class's objective).

        Raises:
            ValueError: no measurement and no projection for the instance type's GPU.
        """
        engines = engines_per_instance(instance_type, self.engine.tensor_parallel_size)
        if request_class is None:
            return throughput_at_slo(
                instance_type, self.slo.cold.ttft_p95_ms, self.capacity, engines, warm_slo_ms=self.slo.warm.ttft_p95_ms
            )
        return throughput_at_slo(
            instance_type,
            self.slo.of(request_class).ttft_p95_ms,
            self.capacity,
            engines,
            curve=CLASS_CURVES[request_class],
        )

    def prefix_routing(self) -> PrefixRouting | None:
        """The endpoint config's ``PrefixAwareRoutingConfig`` when ``capacity.routing`` is
        ``prefix_aware`` (app_config/planning/prefix_routing.py derives both fields), else None.

        Raises:
            ValueError: the request shape repeats too little to route on (one line).
        """
        if self.capacity.routing != "prefix_aware":
            return None
        capacity = self.throughput_of(self.serving.primary.instance_type)
        return PrefixRouting(
            prefix_length_bytes=prefix_length_bytes(self.traffic.request_shape),
            concurrency_threshold=concurrency_threshold(capacity.concurrency),
        )

    @model_validator(mode="after")
    def _cross_section_checks(self) -> "AppConfig":
        check_cross_sections(self)  # app_config/cross_section_checks.py
        return self

    def variant(self, key: VariantKey) -> Variant:
        """The variant ``key`` with its ``serving`` section and its resolved ``scaling`` section
        (:attr:`plan`: derived targets and floors filled), enabled or not."""
        if key == "primary":
            return Variant(key, self.serving.primary, self.plan.scaling.primary)
        return Variant(key, self.serving.canary, self.plan.scaling.canary)

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
