"""``serving.mode = inference_components``: adapters deployed on their own, a warm instance pool,
copy-count scaling and scale to zero.

Facts this follows (SageMaker API reference and developer guide, cited in docs/inference-components.md):
an endpoint hosting inference components has ``ExecutionRoleArn`` on its endpoint config and
variants without ``ModelName``; ``ManagedInstanceScaling`` keeps the instance pool between
``MinInstanceCount`` and ``MaxInstanceCount`` while Application Auto Scaling moves each
component's copy count (``inference-component/<name>``,
``sagemaker:inference-component:DesiredCopyCount``); scale to zero needs ``MinInstanceCount`` 0
and a minimum copy count of 0, and a scale-out policy driven by ``NoCapacityInvocationFailures``
wakes it (calls fail until a copy is up, ~5 min for an 8B model in AWS's measurement).
"""

from pydantic import Field, model_validator

from app_config.base import AdapterName, ConfigModel
from app_config.image_build import ArtifactPin, placeholder_pin


class ComponentRolloutConfig(ConfigModel):
    """The base component's rolling update (``DeploymentConfig.RollingUpdatePolicy``): the canary
    of this mode. Rolling deployments exclude multi-variant endpoints, so there is no canary
    variant here: copies are replaced a batch at a time while the guardrail alarms watch."""

    maximum_batch_size_copies: int = Field(
        default=1, ge=1, le=100, description="Copies replaced per batch (COPY_COUNT). Source: AWS's example (1)."
    )
    wait_interval_s: int = Field(
        default=600,
        ge=0,
        le=3600,
        description=(
            "Bake time after each batch before the next, seconds; the guardrail alarms (5-minute windows) can "
            "fire inside it. Source: the variants-mode canary bake (seed 000, 600 s)."
        ),
    )
    rollback_maximum_batch_size_copies: int = Field(
        default=1,
        ge=1,
        le=100,
        description="Copies rolled back per batch when an alarm fires. Source: AWS's example (1).",
    )
    maximum_execution_timeout_s: int = Field(
        default=28800,
        ge=600,
        le=28800,
        description=(
            "Upper bound of the whole rolling update, seconds (AWS range 600-28800). Source: an update at the default "
            "max_copy_count 20, one copy per batch, needs 20 x (300 s start-up + 600 s bake) = 18,000 s; synth "
            "checks it against max_copy_count. AWS's maximum, so only a stuck update hits it."
        ),
    )


class ComponentScalingConfig(ConfigModel):
    """Target tracking on the base component's copies."""

    @property
    def target_value(self) -> float:
        """The copy target: set, or derived from the throughput at the SLOs
        (``planning.plan.Plan.inference_components`` holds it)."""
        if self.concurrent_requests_per_copy_target is None:
            raise ValueError(
                "concurrent_requests_per_copy_target is unset: read the derived one from "
                "the plan (planning.plan.Plan.inference_components)"
            )
        return self.concurrent_requests_per_copy_target

    concurrent_requests_per_copy_target: float | None = Field(
        default=None,
        gt=0,
        le=1024,
        description=(
            "Target of SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution (10 s datapoints). "
            "None: one engine's concurrency at the TTFT SLOs (a copy is one engine), the same capacity figure "
            "the variants mode's concurrent_requests_target derives from (planning/throughput_at_slo.py)."
        ),
    )
    scale_out_cooldown_s: int = Field(
        default=60, ge=0, le=3600, description="Seconds between scale-outs. Source: seed 001 (60 s)."
    )
    scale_in_cooldown_s: int = Field(
        default=600, ge=0, le=86400, description="Seconds between scale-ins. Source: seed 001 (600 s)."
    )


def _default_adapter_artifacts() -> dict[str, str]:
    return {
        "manga_domain_v3": placeholder_pin("v3"),
        "general_support_v2": placeholder_pin("v2"),
        "jp_style_v1": placeholder_pin("v1"),
    }


class InferenceComponentsConfig(ConfigModel):
    """The endpoint of ``serving.mode = inference_components``.

    One production variant (``serving.primary``'s name and instance type) hosts a base component
    (the image with the base model; one engine per copy) and one adapter component per adapter.
    ``serving.primary``'s capacities and ``serving.canary`` are not used in this mode.
    """

    initial_instance_count: int = Field(
        default=2,
        ge=1,
        le=100,
        description="Instances the variant starts with (InitialInstanceCount). Source: seed 001 (2 warm in prod).",
    )
    min_instance_count: int = Field(
        default=2,
        ge=0,
        le=100,
        description=(
            "Warm instance pool floor (ManagedInstanceScaling.MinInstanceCount): instances kept InService even when "
            "copies scale in, so a new copy loads on a running instance instead of waiting for one (5-8 min, "
            "seed 001). 0 only with scale_to_zero."
        ),
    )
    max_instance_count: int = Field(
        default=20,
        ge=1,
        le=100,
        description="Instance ceiling (ManagedInstanceScaling.MaxInstanceCount). Source: seed 001 (max 20).",
    )
    initial_copy_count: int = Field(
        default=2, ge=1, le=100, description="Copies of the base component at creation (RuntimeConfig.CopyCount)."
    )
    min_copy_count: int = Field(
        default=2,
        ge=0,
        le=100,
        description="Floor of the base component's scalable target, copies. Source: seed 001 (2 warm in prod).",
    )
    max_copy_count: int = Field(
        default=20,
        ge=1,
        le=100,
        description=(
            "Ceiling of the base component's scalable target, copies. Source: seed 001's 20 instances, one copy "
            "per ml.g5.xlarge (its one GPU)."
        ),
    )
    scale_to_zero: bool = Field(
        default=False,
        description=(
            "Let copies and instances reach 0 when idle, and add a copy when a request finds none "
            "(NoCapacityInvocationFailures >= 1 in a minute). Waking takes minutes and calls fail meanwhile: "
            "for dev, never prod."
        ),
    )
    cpu_cores_per_copy: float = Field(
        default=2.0,
        ge=0.25,
        le=192,
        description=(
            "CPU cores reserved per copy (NumberOfCpuCoresRequired): vLLM's API server and engine core, and the "
            "gateway. Source: 2 of an ml.g5.xlarge's 4 vCPUs (docs/performance.md measures the 4-CPU case)."
        ),
    )
    memory_per_copy_mib: int = Field(
        default=8192,
        ge=128,
        le=2_097_152,
        description=(
            "Host memory reserved per copy, MiB (MinMemoryRequiredInMb): Python, torch, vLLM and the CPU LoRA cache. "
            "Source: half of an ml.g5.xlarge's 16 GiB."
        ),
    )
    model_data_download_timeout_s: int = Field(
        default=600,
        ge=60,
        le=3600,
        description=(
            "Time SageMaker allows to download an adapter's artifact (StartupParameters, AWS range 60-3600). "
            "Source: the 600 s of AWS's inference-component examples; a rank-16 adapter on every linear layer of "
            "Llama-3-8B is 32 x 81,920 x 16 x 2 bytes = 84 MB in fp16."
        ),
    )
    adapter_artifacts: dict[AdapterName, ArtifactPin] = Field(
        default_factory=_default_adapter_artifacts,
        description=(
            "Pin per adapter ({version}/{sha256}) of its component's artifact "
            "s3://<artifacts bucket>/<image.build.adapters_prefix>/<name>/<version>/adapter.tar.gz (the adapter's "
            "files at the archive's root). Changing a pin updates that adapter's component only (a new ArtifactUrl). "
            "Names must equal model.adapters; the sha256 is artifact_sha256 of the archive's files, and the container "
            "loads only matching files (ADAPTER_SHA256). Source: seed 000 versions; the default digests are "
            "placeholders, which inference_components mode refuses at synth."
        ),
    )
    scaling: ComponentScalingConfig = Field(
        default=ComponentScalingConfig(), description="Target tracking on the base component's copies."
    )
    rollout: ComponentRolloutConfig = Field(
        default=ComponentRolloutConfig(), description="The base component's rolling update with auto-rollback."
    )

    @model_validator(mode="after")
    def _bounds(self) -> "InferenceComponentsConfig":
        for kind in ("instance", "copy"):
            low, high = getattr(self, f"min_{kind}_count"), getattr(self, f"max_{kind}_count")
            initial = getattr(self, f"initial_{kind}_count")
            if low > high:
                raise ValueError(f"min_{kind}_count = {low} must be <= max_{kind}_count = {high}")
            if not low <= initial <= high:
                raise ValueError(
                    f"initial_{kind}_count = {initial} must be within min_{kind}_count = {low} .. "
                    f"max_{kind}_count = {high}"
                )
        if self.scale_to_zero and (self.min_copy_count or self.min_instance_count):
            raise ValueError(
                f"scale_to_zero = true needs min_copy_count = 0 and min_instance_count = 0 (got "
                f"{self.min_copy_count} and {self.min_instance_count}): a floor above 0 never lets it reach zero"
            )
        if not self.scale_to_zero and (self.min_copy_count == 0 or self.min_instance_count == 0):
            raise ValueError(
                f"min_copy_count = {self.min_copy_count}, min_instance_count = {self.min_instance_count}: 0 needs "
                "scale_to_zero = true, or nothing would wake the endpoint"
            )
        return self
