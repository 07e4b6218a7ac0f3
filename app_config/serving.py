"""The SageMaker endpoint: production variants, health check, routing, placement."""

from typing import Literal

from pydantic import Field, field_validator, model_validator

from app_config.base import ConfigModel, EndpointName, InstanceType, VariantName
from app_config.capacity_reservation import CapacityReservationConfig
from app_config.compile_cache import CompileCacheConfig
from app_config.inference_components import InferenceComponentsConfig
from serving_contract.env import (
    MEASURED_COLD_START_S,
    MEASURED_COLD_START_SOURCE,
    STARTUP_HEALTH_CHECK_TIMEOUT_DEFAULT_S,
    STARTUP_HEALTH_CHECK_TIMEOUT_FLOOR_S,
    STARTUP_REPORT_MARGIN_S,
)

MAX_INSTANCE_POOLS = 5
"""Instance types one production variant may list (SageMaker API, ProductionVariant.InstancePools: priority 1-5)."""


class VariantShape(ConfigModel):
    """What every variant of the endpoint has, production or shadow: a name, an instance type and the hard
    bounds of its scalable target (scheduled actions may move the floor and ceiling only inside them)."""

    variant_name: VariantName = Field(description="Production variant name (the scaling ResourceId uses it).")
    instance_type: InstanceType = Field(
        default="ml.g6e.xlarge",
        description=(
            "GPU hosting instance type (planning/gpu_instances.py lists the accepted ones). Default: the "
            "cheapest fleet that holds both TTFT SLO classes, with the projection's margin, at the default traffic, "
            "as `make plan` recommends (ml.g6e.xlarge, one L40S, throughput.routing prefix_aware; docs/planning.md). "
            "Seed 003's ml.g5.xlarge (A10G) and the L4 of ml.g6.xlarge prefill a first turn too slowly for "
            "slo.cold.ttft_p95_ms = 500 ms at any load (the L4 reaches about half its datasheet: docs/sources.md); "
            "they hold an 800 ms cold SLO (docs/planning.md). Changing it on a deployed, autoscaled variant fails "
            "the endpoint update until its scalable target is deregistered (SageMaker developer guide, 'Update "
            "endpoints that use auto scaling')."
        ),
    )
    instance_pools: tuple[InstanceType, ...] = Field(
        default=(),
        max_length=MAX_INSTANCE_POOLS,
        description=(
            "Instance types the variant may run on, in priority order (ProductionVariant.InstancePools, at most "
            f"{MAX_INSTANCE_POOLS}: SageMaker developer guide, 'Deploy to multiple instance types with instance "
            "pools'): SageMaker provisions the first and falls back to the next when one is short of capacity, at "
            "creation and at every scale-out. The first must be instance_type. Empty: instance_type alone. Each type "
            "gets its own memory plan, engine argv, compile cache and SLO verdict, and every one must hold the SLOs; "
            "the variant's scaling targets and floors are its weakest member's (docs/scaling.md, 'Instance pools')."
        ),
    )
    instance_provision_timeout_s: int = Field(
        default=1800,
        ge=300,
        le=3600,
        description=(
            "With instance_pools: VariantInstanceProvisionTimeoutInSeconds, the time SageMaker spends provisioning "
            "across all pools before the operation fails (AWS range 300-3600). Default 1800: room for a capacity "
            "error on the first pool and two ~660 s instance launches (a scale-out cooldown, docs/scaling.md) on the "
            "next. Not set without instance_pools."
        ),
    )
    capacity_reservation: CapacityReservationConfig | None = Field(
        default=None,
        description=(
            "Run the variant on reserved capacity for a dated event (ProductionVariant.CapacityReservationConfig): an "
            "ML capacity reservation or a training plan. Its instances launch only into it, and the variant stops "
            "serving when it ends (app_config/capacity_reservation.py; docs/scaling.md, 'Reserved capacity')."
        ),
    )
    initial_instance_count: int = Field(
        ge=1, le=100, description="Instances at creation (autoscaling owns it afterwards)."
    )
    min_capacity: int = Field(ge=1, le=100, description="Hard floor of the scalable target, in instances.")
    max_capacity: int = Field(ge=1, le=100, description="Hard ceiling of the scalable target, in instances.")

    @model_validator(mode="after")
    def _pools_start_with_the_instance_type(self) -> "VariantShape":
        pools = self.instance_pools
        if not pools:
            return self
        if pools[0] != self.instance_type:
            raise ValueError(
                f"instance_pools[0] = {pools[0]} must be instance_type = {self.instance_type}: the first pool is the "
                "variant's own type (priority 1); list the fallbacks after it"
            )
        if len(pools) == 1:
            raise ValueError(
                f"instance_pools = [{pools[0]}] names instance_type alone: list at least one fallback type after it, "
                "or leave instance_pools empty"
            )
        repeated = sorted({t for t in pools if pools.count(t) > 1})
        if repeated:
            raise ValueError(f"instance_pools lists {', '.join(repeated)} more than once: each type is one pool")
        return self

    @property
    def instance_types(self) -> tuple[str, ...]:
        """The types the variant runs on, in priority order: ``instance_pools``, or ``instance_type`` alone."""
        return self.instance_pools or (self.instance_type,)

    @staticmethod
    def instance_type_field(priority: int) -> str:
        """The field that names the type of ``priority`` (1 first): ``instance_type``, else
        ``instance_pools[<priority - 1>]``."""
        return "instance_type" if priority == 1 else f"instance_pools[{priority - 1}]"

    @model_validator(mode="after")
    def _capacity_in_bounds(self) -> "VariantShape":
        if self.min_capacity > self.max_capacity:
            raise ValueError(f"min_capacity = {self.min_capacity} must be <= max_capacity = {self.max_capacity}")
        if not self.min_capacity <= self.initial_instance_count <= self.max_capacity:
            raise ValueError(
                f"initial_instance_count = {self.initial_instance_count} must be within "
                f"min_capacity = {self.min_capacity} .. max_capacity = {self.max_capacity}"
            )
        return self


class VariantConfig(VariantShape):
    """One production variant of the endpoint (a model, an instance fleet and a weight)."""

    initial_weight: float = Field(
        ge=0,
        le=1000,
        description=(
            "Relative traffic weight at endpoint creation; traffic share = weight / sum of weights, 0 = no traffic. "
            "Afterwards weights are runtime state owned by ops promote/rollback (UpdateEndpointWeightsAndCapacities) "
            "and every deploy keeps them (the endpoint retains DesiredWeight). Changing this later makes a new "
            "endpoint config, which UpdateEndpoint deploys to a new fleet: every instance replaced, no traffic moved."
        ),
    )


class CanaryVariantConfig(VariantConfig):
    """The canary variant: same shape as the primary, smaller bounds, optional."""

    enabled: bool = Field(default=True, description="Create the canary variant at all.")


SHADOW_SAMPLING_SOURCE = "seed 002 scenario 6, migration phase 2: '10% shadow-copied'"


class ShadowVariantConfig(VariantShape):
    """The shadow variant (issue 47; seed 002 scenario 6, migration phase 2): a candidate that receives a copy of
    a share of the primary's requests and answers nobody. SageMaker replicates the requests
    (``ShadowProductionVariants``) and captures both variants' requests and answers (``DataCaptureConfig``) for
    ``ops shadow report``; ``ops shadow promote`` makes a passing shadow the canary.

    Its image comes from ``image.build.shadow`` (build) or ``image.shadow`` (prebuilt), as the canary's does.
    """

    enabled: bool = Field(
        default=False,
        description=(
            "Run the shadow variant. An endpoint config with a shadow variant holds one production variant "
            "(botocore's SageMaker model, CreateEndpointConfig.ShadowProductionVariants), so serving.canary.enabled "
            "must be false while it runs: shadow first, then canary (seed 002's phases)."
        ),
    )
    sampling_percent: int = Field(
        default=10,
        ge=1,
        le=100,
        description=(
            f"Share of the primary's requests copied to the shadow, percent. Source: {SHADOW_SAMPLING_SOURCE}. "
            "Written as the shadow's InitialVariantWeight = serving.primary.initial_weight x percent / 100 (SageMaker "
            "copies the share of the shadow's weight to the primary's; `ops shadow report` prints the share the "
            "endpoint runs, from DescribeEndpoint's weights)."
        ),
    )
    capture_percent: int | None = Field(
        default=None,
        ge=1,
        le=100,
        description=(
            "DataCaptureConfig.InitialSamplingPercentage: share of each variant's requests whose answer SageMaker "
            "writes to the artifacts bucket (data-capture/<endpoint>/<variant>/...; answers only, no prompt). None: "
            "sampling_percent, what the comparison needs (issue 53, finding 12: 100 kept every primary answer and "
            "prompt for 30 days while 10 % was shadowed). At most sampling_percent: `ops shadow report` compares the "
            "answers' distributions, not pairs, so capturing more of the primary than is shadowed adds no evidence; "
            "at seed 003's 50,000 requests a day and 10 %, the shadow's 200 answers (min_captured_answers) take ~10 "
            "hours."
        ),
    )
    capture_retention_days: int = Field(
        default=30,
        ge=1,
        le=365,
        description=(
            "Days captured requests and answers stay in the artifacts bucket (a lifecycle rule on data-capture/; "
            "they hold user prompts). Default 30: seed 002's two-week shadow phase, plus two weeks to report and "
            "review."
        ),
    )
    min_captured_answers: int = Field(
        default=200,
        ge=1,
        le=100000,
        description=(
            "Answers of each variant `ops shadow report` needs before its verdict can pass. Source: seed 000's "
            "offline eval suite (200 test cases)."
        ),
    )
    guardrail_share_tolerance: float = Field(
        default=0.02,
        ge=0,
        le=1,
        description=(
            "How far the shadow's share of answers passing the release's guardrail checks may fall below the "
            "primary's before the report fails, as a fraction. 0.02: about the 95 % noise of a share measured on "
            "min_captured_answers = 200 answers near 99 % (binomial standard error 0.7 points, x 1.96 = 1.4)."
        ),
    )

    def weight(self, primary_weight: float) -> float:
        """The shadow's InitialVariantWeight that copies ``sampling_percent`` of the primary's requests."""
        return primary_weight * self.sampling_percent / 100

    @property
    def capture_share(self) -> int:
        """``InitialSamplingPercentage``: ``capture_percent``, or ``sampling_percent`` when unset."""
        return self.sampling_percent if self.capture_percent is None else self.capture_percent

    @model_validator(mode="after")
    def _capture_no_more_than_shadowed(self) -> "ShadowVariantConfig":
        if self.capture_percent is not None and self.capture_percent > self.sampling_percent:
            raise ValueError(
                f"capture_percent = {self.capture_percent} is above sampling_percent = {self.sampling_percent}: the "
                "shadow comparison reads answer distributions, so capturing more of the primary's answers than is "
                "shadowed keeps user data it never uses; leave capture_percent unset (= sampling_percent) or lower it"
            )
        return self


class VpcPlacementConfig(ConfigModel):
    """Optional placement of the endpoint's containers in existing VPC subnets."""

    subnet_ids: tuple[str, ...] = Field(min_length=1, max_length=16, description="Private subnet ids (subnet-...).")
    security_group_ids: tuple[str, ...] = Field(min_length=1, max_length=5, description="Security group ids (sg-...).")

    @model_validator(mode="after")
    def _ids_look_right(self) -> "VpcPlacementConfig":
        for value in self.subnet_ids:
            if not value.startswith("subnet-"):
                raise ValueError(f"subnet_ids: {value!r} is not a subnet id (expected subnet-...)")
        for value in self.security_group_ids:
            if not value.startswith("sg-"):
                raise ValueError(f"security_group_ids: {value!r} is not a security group id (expected sg-...)")
        return self


InferenceAmiVersion = Literal[
    "al2-ami-sagemaker-inference-gpu-2",
    "al2-ami-sagemaker-inference-gpu-2-1",
    "al2-ami-sagemaker-inference-gpu-3-1",
    "al2023-ami-sagemaker-inference-gpu-4-1",
]

AMI_NVIDIA_DRIVER: dict[str, int] = {
    "al2-ami-sagemaker-inference-gpu-2": 535,
    "al2-ami-sagemaker-inference-gpu-2-1": 535,
    "al2-ami-sagemaker-inference-gpu-3-1": 550,
    "al2023-ami-sagemaker-inference-gpu-4-1": 580,
}
"""NVIDIA driver branch of each host AMI (botocore's SageMaker model, ``ProductionVariant.InferenceAmiVersion``:
2/2-1 driver 535 CUDA 12.2, 3-1 driver 550 CUDA 12.4, 4-1 driver 580 CUDA 13.0)."""

IMAGE_CUDA_MIN_DRIVER = 580
"""Driver branch the image's CUDA needs natively: torch 2.11.0 (vLLM 0.26.0's pin, as 0.22.0's) is built for CUDA 13.0,
and CUDA 13.x needs driver >= 580 (NVIDIA "CUDA Compatibility", minor-version table). On older drivers
the image runs through the forward-compatibility package ``cuda-compat-13-0`` (container/Dockerfile)."""


def needs_cuda_forward_compat(ami: str) -> bool:
    """True when the host's driver is older than the image's CUDA needs, so the engine must load
    ``cuda-compat-13-0``'s libcuda; False on driver >= 580, where that libcuda must stay off the loader
    path (the compat package is for older drivers only, NVIDIA "Forward Compatibility").

    Raises:
        KeyError: ``ami`` is not an :data:`InferenceAmiVersion`.
    """
    return AMI_NVIDIA_DRIVER[ami] < IMAGE_CUDA_MIN_DRIVER


ServingMode = Literal["variants", "inference_components"]


class ServingConfig(ConfigModel):
    """The endpoint, its endpoint config and its production variants or inference components."""

    mode: ServingMode = Field(
        default="variants",
        description=(
            "variants: one SageMaker model per production variant (primary + canary), adapters baked into the "
            "image, blue/green canary rollouts, scheduled capacity. inference_components: one variant hosting a "
            "base component and one component per adapter (adapters ship without an image build), a warm "
            "instance pool, copy-count scaling, optional scale to zero, rolling updates. docs/inference-components.md "
            "says when to pick which."
        ),
    )
    inference_components: InferenceComponentsConfig = Field(
        default=InferenceComponentsConfig(),
        description="Copies, instances, scale to zero, adapter artifacts and rollout of inference_components mode.",
    )
    endpoint_name: EndpointName | None = Field(
        default=None,
        description=(
            "Endpoint name; None derives <project>-vllm-<stage> (seed: mangaassist-vllm-prod). Set explicitly "
            "because the role's log-group scope, alarms and scaling ResourceIds need it before the endpoint exists."
        ),
    )
    primary: VariantConfig = Field(
        default=VariantConfig(
            variant_name="primary",
            initial_instance_count=2,
            initial_weight=95,
            min_capacity=2,
            max_capacity=6,
        ),
        description=(
            "Primary variant. Weight 95: seed 003 §8; min 2: seed 001 (never fewer than 2 warm). Counts: the plan's "
            "for the default fleet (make plan: 1 ml.g6e.xlarge holds the week's peak, the warm floor is 2); max 6 "
            "holds 3x that peak (seed 001's unforeseen surge) with room for a wrong projection, and keeps the "
            "endpoint-usage quota a blue/green update needs (2 x 6) small. Seed 003's 4 and seed 001's max 20 "
            "sized ml.g5.xlarge fleets."
        ),
    )
    canary: CanaryVariantConfig = Field(
        default=CanaryVariantConfig(
            variant_name="canary",
            initial_instance_count=1,
            initial_weight=5,
            min_capacity=1,
            max_capacity=2,
        ),
        description="Canary variant. Source: seed 003 §8 (1 instance, weight 5).",
    )
    shadow: ShadowVariantConfig = Field(
        default=ShadowVariantConfig(variant_name="shadow", initial_instance_count=1, min_capacity=1, max_capacity=2),
        description=(
            "Shadow variant (off by default): one instance like the canary's, scaling 1..2. Source: seed 002 scenario "
            "6 (shadow phase before the canary); the bounds follow serving.canary's."
        ),
    )
    container_startup_health_check_timeout_s: int = Field(
        default=STARTUP_HEALTH_CHECK_TIMEOUT_DEFAULT_S,
        ge=60,
        le=3600,
        description=(
            "Time SageMaker waits for /ping to pass after start (AWS range 60-3600). The container gives up "
            f"{STARTUP_REPORT_MARGIN_S} s earlier (its STARTUP_TIMEOUT_S), so a failed start ends with its own "
            f"log line. At least {STARTUP_HEALTH_CHECK_TIMEOUT_FLOOR_S}: the slowest measured cold start "
            f"({MEASURED_COLD_START_S} s, A10G-sized engine on 4 CPUs, empty compile cache; "
            f"{MEASURED_COLD_START_SOURCE}) plus that margin. "
            "Default 600: the default's L4 (and the seeds' A10G) with 4 vCPUs start slower than the H100 "
            "measured. Seed 003's 300 s raced SageMaker's kill."
        ),
    )

    routing_strategy: Literal["LEAST_OUTSTANDING_REQUESTS", "RANDOM"] | None = Field(
        default=None,
        description=(
            "How SageMaker spreads requests across a variant's instances when throughput.routing is not "
            "prefix_aware (None: LEAST_OUTSTANDING_REQUESTS). With throughput.routing = prefix_aware the endpoint "
            "config's RoutingStrategy is PREFIX_AWARE, and setting this stops synth."
        ),
    )
    inference_ami_version: InferenceAmiVersion = Field(
        default="al2023-ami-sagemaker-inference-gpu-4-1",
        description=(
            "Host AMI. Default gpu-4-1 (driver 580, CUDA 13.0): runs the image's CUDA 13.0 torch natively. gpu-3-1 "
            "(driver 550) still works through the image's cuda-compat-13-0; the stack sets CUDA_FORWARD_COMPAT from "
            "this value. Amazon Linux 2, under the al2-* AMIs, reached end of support on 2026-06-30."
        ),
    )
    network_isolation: bool = Field(
        default=True,
        description="Block all network access from the container (weights are baked, it needs none).",
    )
    vpc: VpcPlacementConfig | None = Field(default=None, description="Optional VPC placement of the containers.")
    compile_cache: CompileCacheConfig = Field(
        default=CompileCacheConfig(), description="The torch.compile cache each model starts from (issue 25)."
    )

    @field_validator("container_startup_health_check_timeout_s")
    @classmethod
    def _startup_budget_holds_a_cold_start(cls, value: int) -> int:
        if value < STARTUP_HEALTH_CHECK_TIMEOUT_FLOOR_S:
            raise ValueError(
                f"must be >= {STARTUP_HEALTH_CHECK_TIMEOUT_FLOOR_S}: the container gives up "
                f"{STARTUP_REPORT_MARGIN_S} s before SageMaker, and the slowest measured cold start took "
                f"{MEASURED_COLD_START_S} s to start ({MEASURED_COLD_START_SOURCE}); "
                f"a 4-vCPU L4 or A10G instance needs more, keep the default {STARTUP_HEALTH_CHECK_TIMEOUT_DEFAULT_S}"
            )
        return value

    @model_validator(mode="after")
    def _variants_consistent(self) -> "ServingConfig":
        if self.canary.enabled and self.canary.variant_name == self.primary.variant_name:
            raise ValueError(
                f"canary.variant_name = {self.canary.variant_name!r} must differ from primary.variant_name"
            )
        names = [v.variant_name for v in self.variants]
        if self.shadow.enabled and self.shadow.variant_name in names:
            raise ValueError(
                f"shadow.variant_name = {self.shadow.variant_name!r} must differ from the production variants' "
                f"names ({', '.join(names)})"
            )
        if all(variant.initial_weight == 0 for variant in self.variants):
            weights = ", ".join(f"{v.variant_name}.initial_weight = 0" for v in self.variants)
            raise ValueError(f"{weights}: at least one variant needs initial_weight > 0 to receive traffic")
        return self

    @property
    def hosts_inference_components(self) -> bool:
        """Whether the endpoint hosts inference components (``mode = inference_components``): a base
        component and one component per adapter on one production variant, adapters loaded at run time,
        copy-count scaling, rolling updates. False in ``variants`` mode: one model per production variant
        (primary and canary), adapters baked into the image, instance scaling, schedules, blue/green.

        The one place the app reads ``mode``; what differs between the modes follows from it (the
        stacks: ``cdk_constructs/endpoint/serving_mode.py``; monitoring: ``planning/topology.py``).
        """
        return self.mode == "inference_components"

    def reservations(self) -> dict[str, CapacityReservationConfig]:
        """``{variant key: its capacity_reservation}`` of each variant that runs and reserves, primary first."""
        shapes: tuple[tuple[str, VariantShape, bool], ...] = (
            ("primary", self.primary, True),
            ("canary", self.canary, self.canary.enabled),
            ("shadow", self.shadow, self.shadow.enabled),
        )
        return {
            key: shape.capacity_reservation
            for key, shape, runs in shapes
            if runs and shape.capacity_reservation is not None
        }

    @property
    def variants(self) -> tuple[VariantConfig, ...]:
        """The production variants that exist: the primary, then the canary when enabled."""
        return (self.primary, self.canary) if self.canary.enabled else (self.primary,)
