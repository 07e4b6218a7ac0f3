"""``serving.compile_cache``: the torch.compile cache each model starts from (issue 25)."""

from pydantic import Field, model_validator

from app_config.base import ConfigModel
from app_config.cloudformation_limits import PROVIDER_MAX_WAIT_S
from app_config.scaling import ScalingConfig

MEASURED_LORA_TUNING_S = 127.6
"""The tuner's full search with a cold Triton cache on an H200, seconds
(benchmarks/results/h200-2026-11-26-lora-levers/lora-tune-first-stale-pointers.json)."""


JOB_PROVISIONING_S = 900
"""How much longer than the job's own limit the deploy waits: a GPU processing instance can take
minutes to provision before ``MaxRuntimeInSeconds`` starts counting."""
POLL_INTERVAL_S = 30
"""Seconds between the custom resource's looks at its job (``DescribeProcessingJob``)."""
MAX_JOB_RUNTIME_S = PROVIDER_MAX_WAIT_S - JOB_PROVISIONING_S - 2 * POLL_INTERVAL_S
"""Longest ``max_runtime_s``, 2,340 s: the deploy waits for the job (this + :data:`JOB_PROVISIONING_S`) and
two more polls inside the provider's longest wait, itself inside CloudFormation's 3,600 s
(``app_config.cloudformation_limits``; issue 49, finding 3)."""


class CompileCacheConfig(ConfigModel):
    """The cache-making job the serving stack runs for each model, and whether models read it.

    With it, a new instance loads vLLM's compiled graphs instead of compiling them: measured on
    an H100 on 4 CPUs, 61.3-82.6 s to ready instead of 134.9-205.8 s (docs/performance.md,
    start-up). The job is a SageMaker processing job on the model's own instance type (the cache
    holds code for that GPU), run once per image, instance type and container environment.
    """

    enabled: bool = Field(
        default=True,
        description=(
            "Make a compile cache for each model and have the model read it (SageMaker model data in "
            "/opt/ml/model). A missing or failed cache is a cold start, logged by the container, never a failed "
            "deploy. Needs the processing-job quota '<instance type> for processing job usage' (ops preflight "
            "checks it)."
        ),
    )
    max_runtime_s: int = Field(
        default=2100,
        ge=600,
        le=MAX_JOB_RUNTIME_S,
        description=(
            "The job's MaxRuntimeInSeconds: SageMaker stops it after this. A cold start took up to 206 s on an H100 "
            "on 4 CPUs; an ml.g5.xlarge compiles slower, the LoRA tuning step takes up to lora_tuning_budget_s and "
            f"the image pull minutes: 2,100 s leaves margin. At most {MAX_JOB_RUNTIME_S:,}: the deploy waits this + "
            f"{JOB_PROVISIONING_S} s of provisioning + two polls inside CloudFormation's 3,600 s wait for a custom "
            "resource (ServiceTimeout) less 300 s head room. A job still running then does not fail the deploy: "
            "it is stopped and the models start cold, a failed manifest saying why (issue 53)."
        ),
    )
    volume_size_gb: int = Field(
        default=30,
        ge=1,
        le=512,
        description=(
            "The job instance's ML storage volume, GB (ProcessingResources VolumeSizeInGB): holds its input (the "
            "environment file) and output (the cache, ~56 MB per engine configuration), not the image."
        ),
    )
    lora_tuning: bool = Field(
        default=True,
        description=(
            "After the job's engine stops, tune vLLM's LoRA kernels (shrink/expand) on the job's GPU and publish "
            "the configs as lora-configs/ beside the cache; each model whose cache loads passes them to vLLM "
            "(VLLM_TUNED_CONFIG_FOLDER). Measured on an H200: ITL at 8 concurrent 7.7 -> 6.7 ms, requests a minute "
            "278 -> 309 (docs/performance.md, 'Multi-LoRA'). Skipped for a model that serves no LoRA adapter; a "
            "failed or timed-out tuning still publishes the cache, without the configs."
        ),
    )
    lora_tuning_budget_s: int = Field(
        default=600,
        ge=60,
        le=1800,
        description=(
            "Seconds the job's LoRA tuning step may take; it is stopped at this and the cache is published without "
            f"configs. The full search took {MEASURED_LORA_TUNING_S} s on an H200 with a cold Triton cache; an "
            "ml.g5.xlarge compiles on 4 vCPUs. At most half of max_runtime_s: the engine's cold start needs the rest."
        ),
    )

    @model_validator(mode="after")
    def _check_tuning_fits_the_job(self) -> "CompileCacheConfig":
        if self.lora_tuning and 2 * self.lora_tuning_budget_s > self.max_runtime_s:
            raise ValueError(
                f"lora_tuning_budget_s = {self.lora_tuning_budget_s} must be at most half of max_runtime_s = "
                f"{self.max_runtime_s}: the job's engine cold start needs the rest (lower the budget, raise "
                "max_runtime_s or set lora_tuning to false)"
            )
        return self

    @property
    def job_lora_tuning_budget_s(self) -> int:
        """The job's LoRA tuning budget in seconds: ``lora_tuning_budget_s``, or 0 when ``lora_tuning`` is off
        (``serving_contract.compile_cache.job_arguments``)."""
        return self.lora_tuning_budget_s if self.lora_tuning else 0


def instance_start_s(cache: CompileCacheConfig, scaling: ScalingConfig, *, cached: bool | None = None) -> float:
    """Seconds from a provisioned instance to a passing /ping: ``scaling.instance_start_cached_s`` when
    models read the compile cache (``cache.enabled``, or ``cached`` when given), else
    ``scaling.instance_start_cold_s``. Both are measured floors (their descriptions say where)."""
    use_cache = cache.enabled if cached is None else cached
    return scaling.instance_start_cached_s if use_cache else scaling.instance_start_cold_s
