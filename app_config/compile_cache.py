"""``serving.compile_cache``: the torch.compile cache each model starts from (issue 25)."""

from pydantic import Field

from app_config.base import ConfigModel
from app_config.scaling import ScalingConfig


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
        default=3600,
        ge=600,
        le=5400,
        description=(
            "The job's MaxRuntimeInSeconds: SageMaker stops it after this. A cold start took up to 206 s on an H100 "
            "on 4 CPUs; an ml.g5.xlarge compiles slower and provisioning takes minutes. At most 5,400 so the custom "
            "resource that waits for it (this + 15 min) stays inside the CDK provider's 2-hour limit."
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


def instance_start_s(cache: CompileCacheConfig, scaling: ScalingConfig, *, cached: bool | None = None) -> float:
    """Seconds from a provisioned instance to a passing /ping: ``scaling.instance_start_cached_s`` when
    models read the compile cache (``cache.enabled``, or ``cached`` when given), else
    ``scaling.instance_start_cold_s``. Both are measured floors (their descriptions say where)."""
    use_cache = cache.enabled if cached is None else cached
    return scaling.instance_start_cached_s if use_cache else scaling.instance_start_cold_s
