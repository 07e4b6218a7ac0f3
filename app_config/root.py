"""The root of the config tree: one frozen, validated object per synth."""

import re
from typing import Literal

from pydantic import Field, model_validator

from app_config.base import ConfigModel
from app_config.bedrock import BedrockConfig, check_import_region
from app_config.capacity import CapacityConfig, InstanceCapacity, instance_capacity
from app_config.capacity_timeline import check_schedule
from app_config.container import ContainerConfig
from app_config.engine import EngineConfig
from app_config.gpu_instances import instance_gpus
from app_config.image import ImageConfig
from app_config.image_build import PULL_THROUGH_PREFIX_MAX, docker_hub_cache_prefix
from app_config.llm import ModelConfig
from app_config.memory_plan import MemoryPlan, gib, minimum_utilization
from app_config.memory_plan_config import MemoryPlanConfig, engine_memory_inputs, plan_for_instance
from app_config.monitoring import MonitoringConfig
from app_config.observability import ObservabilityConfig
from app_config.scaling import ScalingConfig
from app_config.serving import ServingConfig
from serving_contract.components import adapter_component_name, base_component_name

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

    @model_validator(mode="after")
    def _derive_concurrency_targets(self) -> "AppConfig":
        """Fill each unset ``concurrent_requests_target`` with the variant's capacity at the SLO.

        The sections are frozen and pydantic keeps ``self`` from an ``__init__`` validator, so the
        derived section replaces the field in place, once, before any other check reads it.
        """
        updates = {}
        for key, variant in (("primary", self.serving.primary), ("canary", self.serving.canary)):
            scaling = getattr(self.scaling, key)
            if scaling.target_tracking.concurrent_requests_target is None:
                target = float(self.capacity_of(variant.instance_type).concurrency)
                tracking = scaling.target_tracking.model_copy(update={"concurrent_requests_target": target})
                updates[key] = scaling.model_copy(update={"target_tracking": tracking})
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
        rank = self.model.adapter_rank
        if rank is not None and rank > self.engine.max_lora_rank:
            # A rank above --max-lora-rank fails to load (CONVENTIONS.md, "LoRA").
            raise ValueError(
                f"model.adapters rank {rank} exceeds engine.max_lora_rank = {self.engine.max_lora_rank}; "
                "raise engine.max_lora_rank or retrain the adapters"
            )
        if self.engine.max_cpu_loras is not None and len(self.model.adapters) > self.engine.max_cpu_loras:
            raise ValueError(
                f"engine.max_cpu_loras = {self.engine.max_cpu_loras} is below the {len(self.model.adapters)} "
                "configured adapters; every adapter must fit the CPU cache"
            )
        self._kernel_checks()
        self._memory_plan_checks()
        if self.image.source == "build" and not self.serving.hosts_inference_components:
            self._check_artifact_pins()
        prefix = docker_hub_cache_prefix(self.project_name, self.stage)
        if self.image.build.docker_hub_credentials_secret_arn and len(prefix) > PULL_THROUGH_PREFIX_MAX:
            raise ValueError(
                f"project_name = {self.project_name!r}: the Docker Hub cache's repository prefix {prefix!r} is "
                f"{len(prefix)} characters, ECR allows {PULL_THROUGH_PREFIX_MAX}; shorten project_name or unset "
                "image.build.docker_hub_credentials_secret_arn"
            )
        if self.serving.hosts_inference_components:
            self._component_checks()
        elif self.stage == "prod" and self.serving.primary.min_capacity < 2:
            # Seed 001 user story 3: never fewer than 2 warm instances in production.
            raise ValueError(
                f"serving.primary.min_capacity = {self.serving.primary.min_capacity}: must be >= 2 in prod "
                "(the warm floor that keeps cold starts off the request path)"
            )
        self._monitoring_checks()
        self._scaling_checks()
        check_import_region(self.bedrock.enabled, self.env.region)
        return self

    def _component_checks(self) -> None:
        """What SageMaker or the engine would refuse in inference_components mode."""
        self._component_name_checks()
        components = self.serving.inference_components
        key = "serving.inference_components"
        if self.image.source == "prebuilt" and self.image.build.artifacts_bucket_name is None:
            raise ValueError(
                "serving.mode = inference_components with image.source = prebuilt needs "
                "image.build.artifacts_bucket_name: the bucket that holds the adapter components' artifacts"
            )
        expected = sorted(a.name for a in self.model.adapters)
        if sorted(components.adapter_artifacts) != expected:
            raise ValueError(
                f"{key}.adapter_artifacts pins [{', '.join(sorted(components.adapter_artifacts))}] but model.adapters "
                f"is [{', '.join(expected)}]; pin exactly one artifact per configured adapter"
            )
        capacity = self.engine.max_cpu_loras or self.engine.max_loras
        capacity_key = "engine.max_cpu_loras" if self.engine.max_cpu_loras else "engine.max_loras"
        if len(self.model.adapters) > capacity:
            # The container registers at most this many runtime adapters (vLLM keeps that many in
            # CPU memory and would evict beyond it), so one adapter component would fail to load.
            raise ValueError(
                f"model.adapters has {len(self.model.adapters)} adapters but {capacity_key} = {capacity}: the engine "
                "holds that many runtime adapters; raise engine.max_cpu_loras"
            )
        if self.stage == "prod" and (components.scale_to_zero or components.min_copy_count < 2):
            # Seed 001 user story 3: never fewer than 2 warm copies in production.
            raise ValueError(
                f"{key}.min_copy_count = {components.min_copy_count}, scale_to_zero = "
                f"{str(components.scale_to_zero).lower()}: prod keeps at least 2 warm copies (seed 001)"
            )
        instance_type = self.serving.primary.instance_type
        gpus = instance_gpus(instance_type)
        per_instance = gpus.count // self.engine.tensor_parallel_size
        if components.max_copy_count > components.max_instance_count * per_instance:
            raise ValueError(
                f"{key}.max_copy_count = {components.max_copy_count} needs more than {key}.max_instance_count = "
                f"{components.max_instance_count} instances of {per_instance} copy each ({instance_type}, "
                f"{gpus.count} GPU(s), engine.tensor_parallel_size = {self.engine.tensor_parallel_size})"
            )
        for field, needed, have, unit in (
            ("cpu_cores_per_copy", components.cpu_cores_per_copy, gpus.vcpus, "vCPUs"),
            ("memory_per_copy_mib", components.memory_per_copy_mib, gpus.memory_gib * 1024, "MiB"),
        ):
            if needed * per_instance > have:
                raise ValueError(
                    f"{key}.{field} = {needed:g} x {per_instance} copy(ies) per instance is above the {have:g} {unit} "
                    f"of {instance_type}"
                )
        # A rolling update replaces every copy the component has when it starts, up to max_copy_count
        # after a scale-out; one that outlasts its timeout rolls back.
        rollout = components.rollout
        batches = -(-components.max_copy_count // rollout.maximum_batch_size_copies)
        needed_s = batches * (self.serving.container_startup_health_check_timeout_s + rollout.wait_interval_s)
        if needed_s >= rollout.maximum_execution_timeout_s:
            raise ValueError(
                f"{key}.rollout.maximum_execution_timeout_s = {rollout.maximum_execution_timeout_s} must exceed "
                f"{batches} batch(es) of {rollout.maximum_batch_size_copies} at {key}.max_copy_count = "
                f"{components.max_copy_count} x (serving.container_startup_health_check_timeout_s = "
                f"{self.serving.container_startup_health_check_timeout_s} + {key}.rollout.wait_interval_s = "
                f"{rollout.wait_interval_s}) = {needed_s} s; raise it (at most 28800) or "
                f"{key}.rollout.maximum_batch_size_copies"
            )

    def _component_name_checks(self) -> None:
        """Every component name SageMaker accepts (pattern, 63 characters) and no two alike."""
        endpoint = self.endpoint_name
        try:
            names = {"the base component": base_component_name(endpoint)}
            for adapter in self.model.adapters:
                names[f"adapter {adapter.name!r}"] = adapter_component_name(endpoint, adapter.name)
        except ValueError as error:
            raise ValueError(f"serving.endpoint_name = {endpoint!r}: {error}") from None
        owners: dict[str, str] = {}
        for owner, name in names.items():
            # SageMaker resource names are unique regardless of case.
            if name.lower() in owners:
                raise ValueError(
                    f"model.adapters: {owner} gets inference component name {name!r}, as {owners[name.lower()]} "
                    "does; rename the adapter"
                )
            owners[name.lower()] = owner

    def _kernel_checks(self) -> None:
        kernel, checkpoint = self.engine.quantization, self.model.quantization
        # vLLM 0.22 refuses a method other than the checkpoint's at start ("Quantization method
        # specified in the model config (awq) does not match ..."; option matrix on an H200).
        suits = {
            "awq": ("awq",),
            "awq_marlin": ("awq",),
            "gptq": ("gptq",),
            "gptq_marlin": ("gptq",),
            "fp8": ("fp8",),
        }
        if kernel in suits and checkpoint not in suits[kernel]:
            raise ValueError(
                f"engine.quantization = {kernel!r} cannot run a model.quantization = {checkpoint!r} checkpoint; "
                "use 'auto' (vLLM reads the checkpoint's quantization_config)"
            )
        if self.engine.kv_cache_dtype == "fp8" and self.engine.attention_backend == "auto":
            for variant in self.serving.variants:
                gpu = instance_gpus(variant.instance_type).gpu
                if gpu.compute_capability >= (9, 0):
                    raise ValueError(
                        f"engine.kv_cache_dtype = 'fp8' with engine.attention_backend = 'auto' on "
                        f"{variant.instance_type} ({gpu.name}): vLLM 0.22 picks FlashAttention 3, which crashes at "
                        "start with an fp8 KV cache and a float16 model (measured on an H200); set "
                        "engine.attention_backend to FLASHINFER or TRITON_ATTN"
                    )
        if kernel.endswith("_marlin"):
            for variant in self.serving.variants:
                gpu = instance_gpus(variant.instance_type).gpu
                if gpu.compute_capability < (8, 0):
                    major, minor = gpu.compute_capability
                    raise ValueError(
                        f"engine.quantization = {kernel!r}: serving.{self._variant_key(variant.variant_name)}."
                        f"instance_type = {variant.instance_type} has {gpu.name} (compute capability "
                        f"{major}.{minor}); Marlin kernels need >= 8.0, use 'auto'"
                    )

    def _variant_key(self, variant_name: str) -> str:
        return "primary" if variant_name == self.serving.primary.variant_name else "canary"

    def _memory_plan_checks(self) -> None:
        """Stop synth where vLLM could not start (CONVENTIONS.md: it fails at start when one
        max_model_len sequence does not fit, and never when max_num_seqs x max_model_len does not)."""
        engine, shape = self.engine, self.model.shape
        if engine.max_model_len > shape.max_position_embeddings:
            raise ValueError(
                f"engine.max_model_len = {engine.max_model_len}: above model.shape.max_position_embeddings = "
                f"{shape.max_position_embeddings}, the longest context the model supports (vLLM refuses to start)"
            )
        if self.memory_plan.typical_sequence_tokens > engine.max_model_len:
            raise ValueError(
                f"memory_plan.typical_sequence_tokens = {self.memory_plan.typical_sequence_tokens}: above "
                f"engine.max_model_len = {engine.max_model_len}, so no request could be that long"
            )
        for variant in self.serving.variants:
            where = f"serving.{self._variant_key(variant.variant_name)}.instance_type = {variant.instance_type}"
            gpus = instance_gpus(variant.instance_type)
            if engine.tensor_parallel_size > gpus.count:
                raise ValueError(
                    f"engine.tensor_parallel_size = {engine.tensor_parallel_size}: {where} has "
                    f"{gpus.count} GPU(s) ({gpus.gpu.name}); the engine cannot span more GPUs than the instance has"
                )
            plan = self.memory_plan_of(variant.instance_type)
            if plan.fits_one_sequence:
                continue
            needed = minimum_utilization(
                shape=shape.to_shape(),
                gpus=gpus,
                engine=engine_memory_inputs(engine, len(self.model.adapters)),
                runtime_overhead_bytes=plan.overhead_bytes // engine.tensor_parallel_size,
            )
            if plan.kv_tokens == 0 or needed <= 0.98:
                raise ValueError(
                    f"engine.gpu_memory_utilization = {engine.gpu_memory_utilization:g}: on {where} "
                    f"({gpus.gpu.name}) it leaves {max(plan.kv_tokens, 0):,} KV-cache tokens, fewer than one "
                    f"engine.max_model_len = {engine.max_model_len} sequence (budget {gib(plan.budget_bytes)} GiB - "
                    f"weights {gib(plan.weights_bytes)} - LoRA slots {gib(plan.lora_bytes)} - runtime "
                    f"{gib(plan.overhead_bytes)}); it needs >= {needed:.2f} (vLLM refuses to start)"
                )
            raise ValueError(
                f"engine.max_model_len = {engine.max_model_len}: only {plan.kv_tokens:,} KV-cache tokens fit on "
                f"{where} ({gpus.gpu.name}) even at engine.gpu_memory_utilization = "
                f"{engine.gpu_memory_utilization:g}; lower it to <= {plan.kv_tokens} (vLLM refuses to start)"
            )

    def memory_plan_of(self, instance_type: str) -> MemoryPlan:
        """The memory plan of one engine of this config on ``instance_type``."""
        return plan_for_instance(instance_type, model=self.model, engine=self.engine, memory=self.memory_plan)

    def _monitoring_checks(self) -> None:
        adapters = {a.name for a in self.model.adapters}
        unknown = sorted(set(self.monitoring.adapter_latency_ceilings_ms) - adapters)
        if unknown:
            raise ValueError(
                f"monitoring.adapter_latency_ceilings_ms names unknown adapter(s) {', '.join(unknown)}; "
                f"model.adapters are: {', '.join(sorted(adapters)) or '(none)'}"
            )
        preallocated = self.engine.gpu_memory_utilization * 100
        threshold = self.monitoring.gpu_memory_utilization.threshold
        if threshold <= preallocated:
            # vLLM allocates this share of GPU memory at start: an alarm at or below it never clears.
            raise ValueError(
                f"monitoring.gpu_memory_utilization.threshold = {threshold:g} must be above "
                f"engine.gpu_memory_utilization = {self.engine.gpu_memory_utilization:g} x 100 "
                "(vLLM preallocates that share of GPU memory at start)"
            )
        if threshold > 100:
            raise ValueError(f"monitoring.gpu_memory_utilization.threshold = {threshold:g}: must be <= 100 (per GPU)")

    def _scaling_checks(self) -> None:
        if self.serving.hosts_inference_components:
            return  # copies scale by target tracking; schedules and blue/green are variants-mode features
        # The warm floor also binds every scheduled floor of the primary (seed 001 user story 3).
        warm_floor = 2 if self.stage == "prod" else None
        check_schedule(
            "primary",
            self.scaling.primary,
            self.serving.primary.min_capacity,
            self.serving.primary.max_capacity,
            warm_floor,
        )
        if self.serving.canary.enabled:
            check_schedule(
                "canary", self.scaling.canary, self.serving.canary.min_capacity, self.serving.canary.max_capacity, None
            )
        self._rollout_fits_in_timeout()
        self._scale_in_below_full_load()
        for key in ("primary", "canary"):
            tracking = getattr(self.scaling, key).target_tracking
            if tracking.metric == "concurrent_requests_high_resolution" and (
                tracking.concurrent_requests_target >= self.engine.max_num_seqs
            ):
                raise ValueError(
                    f"scaling.{key}.target_tracking.concurrent_requests_target = "
                    f"{tracking.concurrent_requests_target:g} must be below engine.max_num_seqs = "
                    f"{self.engine.max_num_seqs}, or the engine queues before the fleet scales"
                )

    def _scale_in_below_full_load(self) -> None:
        """The low-load scale-in must never fire while the engine is full.

        A full engine runs ``concurrency_ceiling`` sequences (the memory plan: what the KV cache
        fits at the typical length, capped by ``engine.max_num_seqs``), so RunningRequests never
        exceeds it; a threshold at or above it would shed an instance every cooldown at full load.
        The bound is half of it: the alarm averages over the variant, and removing one of two
        instances doubles the survivor's sequences, which must still fit.
        """
        for variant in self.serving.variants:
            key = self._variant_key(variant.variant_name)
            step = getattr(self.scaling, key).step_scaling
            if not (getattr(self.scaling, key).enabled and step.enabled):
                continue
            plan = self.memory_plan_of(variant.instance_type)
            bound = plan.concurrency_ceiling / 2
            if step.scale_in_running_requests > bound:
                raise ValueError(
                    f"scaling.{key}.step_scaling.scale_in_running_requests = {step.scale_in_running_requests:g}: "
                    f"must be <= {bound:g}, half the {plan.concurrency_ceiling} sequences the engine runs on "
                    f"{variant.instance_type} (memory plan at {plan.typical_sequence_tokens:,} tokens, "
                    f"engine.max_num_seqs = {self.engine.max_num_seqs}); removing one of two instances doubles "
                    "the survivor's load, and a threshold at the ceiling scales in at full load"
                )

    def _rollout_fits_in_timeout(self) -> None:
        """A blue/green deployment provisions the green fleet, waits for its startup health check,
        then shifts and bakes: all of it inside MaximumExecutionTimeoutInSeconds."""
        rollout = self.scaling.rollout
        if not rollout.enabled:
            return
        startup = self.serving.container_startup_health_check_timeout_s
        shifting = rollout.shift_steps * rollout.wait_interval_s
        needed = rollout.green_provisioning_allowance_s + startup + shifting
        if needed >= rollout.maximum_execution_timeout_s:
            raise ValueError(
                f"scaling.rollout.maximum_execution_timeout_s = {rollout.maximum_execution_timeout_s} must exceed "
                f"scaling.rollout.green_provisioning_allowance_s = {rollout.green_provisioning_allowance_s} + "
                f"serving.container_startup_health_check_timeout_s = {startup} + traffic shifting "
                f"({rollout.shift_steps} step(s) x scaling.rollout.wait_interval_s = {rollout.wait_interval_s}) "
                f"= {needed} s"
            )

    def _check_artifact_pins(self) -> None:
        expected = sorted(a.name for a in self.model.adapters)
        sets = {"primary": self.image.build.primary, "canary": self.image.build.canary}
        for variant, artifacts in sets.items():
            if artifacts is None:
                continue
            pinned = sorted(artifacts.adapters)
            if pinned != expected:
                # Every adapter the engine loads must be baked in, and nothing else.
                raise ValueError(
                    f"image.build.{variant}.adapters pins [{', '.join(pinned)}] but model.adapters is "
                    f"[{', '.join(expected)}]; pin exactly one version per configured adapter"
                )

    @property
    def endpoint_name(self) -> str:
        """The endpoint's name: configured, or ``<project>-vllm-<stage>`` in lowercase."""
        return self.serving.endpoint_name or f"{self.project_name.lower()}-vllm-{self.stage}"

    def stack_name(self, unit: str) -> str:
        """CloudFormation stack name of a deployment unit, e.g. ``MangaAssist-prod-Serving``."""
        return f"{self.project_name}-{self.stage}-{unit}"
