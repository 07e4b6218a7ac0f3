"""The config's checks that span sections: what no single section can judge alone.

``AppConfig`` runs :func:`check_cross_sections` once every section has validated. Each check
raises ``ValueError`` with one line naming the keys, their values and what would be accepted;
``app_config.errors`` turns it into the config error that stops synth. Concerns: adapters against
the engine, the engine's kernels on the variants' GPUs, the image build's pins, the Docker Hub
cache's name, inference components, the prod warm floor, monitoring thresholds, the rollout's
timeout, the deploy's approval check and the shadow variant. The checks that need the plan (could
vLLM start on the variants' GPUs, can they hold their SLOs, the schedules and the derived targets)
run when it is made: ``planning/checks.py``.
"""

from typing import TYPE_CHECKING

from app_config.bedrock import check_import_region, check_imported_adapters
from app_config.context_budget import check_context_budget
from app_config.image_build import PULL_THROUGH_PREFIX_MAX, docker_hub_cache_prefix
from app_config.release import (
    check_deploy_approval,
    check_prod_release_floors,
    check_registered_packages,
    model_package_group_name,
)
from app_config.scaling import PROD_WARM_FLOOR
from app_config.serving import ServingConfig
from app_config.shadow import check_shadow
from app_config.throughput_config import check_measured_pauses
from app_config.variants import existing_variant_keys
from planning.gpu_instances import instance_gpus
from serving_contract.components import adapter_component_name, base_component_name
from serving_contract.lifecycle import warmup_prefill_problem
from serving_contract.validation import line

if TYPE_CHECKING:
    from app_config.root import AppConfig


def check_cross_sections(config: "AppConfig") -> None:
    """Every check across sections, in order; the first that fails raises.

    Raises:
        ValueError: one line naming the keys, the values and what is allowed.
    """
    _routing_strategy_is_free(config)
    rank = config.model.adapter_rank
    if rank is not None and rank > config.engine.max_lora_rank:
        # A rank above --max-lora-rank fails to load (docs/sources.md, "LoRA").
        raise ValueError(
            f"model.adapters rank {rank} exceeds engine.max_lora_rank = {config.engine.max_lora_rank}; "
            "raise engine.max_lora_rank or retrain the adapters"
        )
    if config.engine.max_cpu_loras is not None and len(config.model.adapters) > config.engine.max_cpu_loras:
        raise ValueError(
            f"engine.max_cpu_loras = {config.engine.max_cpu_loras} is below the {len(config.model.adapters)} "
            "configured adapters; every adapter must fit the CPU cache"
        )
    _check_prefill_warmup(config)
    _kernel_checks(config)
    check_context_budget(config)
    if config.image.source == "build" and not config.serving.hosts_inference_components:
        _check_artifact_pins(config)
    prefix = docker_hub_cache_prefix(config.project_name, config.stage)
    if config.image.build.docker_hub_credentials_secret_arn and len(prefix) > PULL_THROUGH_PREFIX_MAX:
        raise ValueError(
            f"project_name = {config.project_name!r}: the Docker Hub cache's repository prefix {prefix!r} is "
            f"{len(prefix)} characters, ECR allows {PULL_THROUGH_PREFIX_MAX}; shorten project_name or unset "
            "image.build.docker_hub_credentials_secret_arn"
        )
    if config.serving.hosts_inference_components:
        _component_checks(config)
    elif config.stage == "prod" and config.serving.primary.min_capacity < PROD_WARM_FLOOR:
        raise ValueError(
            f"serving.primary.min_capacity = {config.serving.primary.min_capacity}: must be >= {PROD_WARM_FLOOR} in "
            "prod (the warm floor that keeps cold starts off the request path, seed 001)"
        )
    _monitoring_checks(config)
    _rollout_fits_in_timeout(config)
    check_import_region(config.bedrock.enabled, config.env.region)
    check_imported_adapters(config.bedrock.models, [config.model.name, *(a.name for a in config.model.adapters)])
    check_deploy_approval(config.stage, config.release, config.image.source)
    check_prod_release_floors(config.stage, config.release)
    groups = {config.model.name: model_package_group_name(config.project_name, config.stage, "base_model")}
    groups |= {
        adapter.name: model_package_group_name(config.project_name, config.stage, "adapter")
        for adapter in config.model.adapters
    }
    check_registered_packages(config.release, groups, config.env.account, config.env.region)
    check_shadow(config)  # app_config/shadow.py
    check_measured_pauses(config.throughput.measured, config.traffic.think_s)


def _component_checks(config: "AppConfig") -> None:
    """What SageMaker or the engine would refuse in inference_components mode."""
    _component_name_checks(config)
    components = config.serving.inference_components
    key = "serving.inference_components"
    if config.serving.primary.instance_pools:
        # SageMaker allows them (developer guide, "Deploy to multiple instance types with instance pools"), but a
        # component's copies then need compute requirements that fit every type: not planned here yet.
        raise ValueError(
            f"serving.primary.instance_pools = [{', '.join(config.serving.primary.instance_pools)}]: instance pools "
            "are planned for serving.mode = variants only; leave them empty in inference_components mode"
        )
    if config.serving.primary.capacity_reservation is not None:
        raise ValueError(
            "serving.primary.capacity_reservation: reserved capacity is planned for serving.mode = variants only"
        )
    if config.image.source == "prebuilt" and config.image.build.artifacts_bucket_name is None:
        raise ValueError(
            "serving.mode = inference_components with image.source = prebuilt needs "
            "image.build.artifacts_bucket_name: the bucket that holds the adapter components' artifacts"
        )
    expected = sorted(a.name for a in config.model.adapters)
    if sorted(components.adapter_artifacts) != expected:
        raise ValueError(
            f"{key}.adapter_artifacts pins [{', '.join(sorted(components.adapter_artifacts))}] but model.adapters "
            f"is [{', '.join(expected)}]; pin exactly one artifact per configured adapter"
        )
    capacity = config.engine.max_cpu_loras or config.engine.max_loras
    capacity_key = "engine.max_cpu_loras" if config.engine.max_cpu_loras else "engine.max_loras"
    if len(config.model.adapters) > capacity:
        # The container registers at most this many runtime adapters (vLLM keeps that many in
        # CPU memory and would evict beyond it), so one adapter component would fail to load.
        raise ValueError(
            f"model.adapters has {len(config.model.adapters)} adapters but {capacity_key} = {capacity}: the engine "
            "holds that many runtime adapters; raise engine.max_cpu_loras"
        )
    if config.stage == "prod" and (components.scale_to_zero or components.min_copy_count < PROD_WARM_FLOOR):
        raise ValueError(
            f"{key}.min_copy_count = {components.min_copy_count}, scale_to_zero = "
            f"{str(components.scale_to_zero).lower()}: prod keeps at least {PROD_WARM_FLOOR} warm copies (seed 001)"
        )
    instance_type = config.serving.primary.instance_type
    gpus = instance_gpus(instance_type)
    per_instance = gpus.count // config.engine.tensor_parallel_size
    if components.max_copy_count > components.max_instance_count * per_instance:
        raise ValueError(
            f"{key}.max_copy_count = {components.max_copy_count} needs more than {key}.max_instance_count = "
            f"{components.max_instance_count} instances of {per_instance} copy each ({instance_type}, "
            f"{gpus.count} GPU(s), engine.tensor_parallel_size = {config.engine.tensor_parallel_size})"
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
    needed_s = batches * (config.serving.container_startup_health_check_timeout_s + rollout.wait_interval_s)
    if needed_s >= rollout.maximum_execution_timeout_s:
        raise ValueError(
            f"{key}.rollout.maximum_execution_timeout_s = {rollout.maximum_execution_timeout_s} must exceed "
            f"{batches} batch(es) of {rollout.maximum_batch_size_copies} at {key}.max_copy_count = "
            f"{components.max_copy_count} x (serving.container_startup_health_check_timeout_s = "
            f"{config.serving.container_startup_health_check_timeout_s} + {key}.rollout.wait_interval_s = "
            f"{rollout.wait_interval_s}) = {needed_s} s; raise it (at most 28800) or "
            f"{key}.rollout.maximum_batch_size_copies"
        )


def _component_name_checks(config: "AppConfig") -> None:
    """Every component name SageMaker accepts (pattern, 63 characters) and no two alike."""
    endpoint = config.endpoint_name
    try:
        names = {"the base component": base_component_name(endpoint)}
        for adapter in config.model.adapters:
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


def _kernel_checks(config: "AppConfig") -> None:
    kernel, checkpoint = config.engine.quantization, config.model.quantization
    # vLLM 0.22 refused a method other than the checkpoint's at start ("Quantization method
    # specified in the model config (awq) does not match ..."; option matrix on an H200); 0.26
    # raises the same error (vllm/config/model.py, _verify_quantization).
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
    if config.engine.kv_cache_dtype == "fp8" and config.engine.attention_backend == "auto":
        for _, instance_type in _variant_instance_types(config.serving):
            gpu = instance_gpus(instance_type).gpu
            if gpu.compute_capability >= (9, 0):
                raise ValueError(
                    f"engine.kv_cache_dtype = 'fp8' with engine.attention_backend = 'auto' on "
                    f"{instance_type} ({gpu.name}): vLLM 0.22 picks FlashAttention 3, which crashes at "
                    "start with an fp8 KV cache and a float16 model (measured on an H200); set "
                    "engine.attention_backend to FLASHINFER or TRITON_ATTN"
                )
    if kernel.endswith("_marlin"):
        for key, instance_type in _variant_instance_types(config.serving):
            gpu = instance_gpus(instance_type).gpu
            if gpu.compute_capability < (8, 0):
                major, minor = gpu.compute_capability
                raise ValueError(
                    f"engine.quantization = {kernel!r}: {key} = {instance_type} has {gpu.name} (compute capability "
                    f"{major}.{minor}); Marlin kernels need >= 8.0, use 'auto'"
                )


def _variant_instance_types(serving: ServingConfig) -> list[tuple[str, str]]:
    """``(key, instance type)`` of every instance type an existing variant may run on, its ``instance_pools``
    included: ``("serving.primary.instance_pools[1]", "ml.g6e.2xlarge")``."""
    found = []
    for key in existing_variant_keys(serving):
        shape = getattr(serving, key)
        for priority, instance_type in enumerate(shape.instance_types, start=1):
            found.append((f"serving.{key}.{shape.instance_type_field(priority)}", instance_type))
    return found


def _monitoring_checks(config: "AppConfig") -> None:
    adapters = {a.name for a in config.model.adapters}
    unknown = sorted(set(config.monitoring.adapter_latency_ceilings_ms) - adapters)
    if unknown:
        raise ValueError(
            f"monitoring.adapter_latency_ceilings_ms names unknown adapter(s) {', '.join(unknown)}; "
            f"model.adapters are: {', '.join(sorted(adapters)) or '(none)'}"
        )
    preallocated = config.engine.gpu_memory_utilization * 100
    threshold = config.monitoring.gpu_memory_utilization.threshold
    if threshold <= preallocated:
        # vLLM allocates this share of GPU memory at start: an alarm at or below it never clears.
        raise ValueError(
            f"monitoring.gpu_memory_utilization.threshold = {threshold:g} must be above "
            f"engine.gpu_memory_utilization = {config.engine.gpu_memory_utilization:g} x 100 "
            "(vLLM preallocates that share of GPU memory at start)"
        )
    if threshold > 100:
        raise ValueError(f"monitoring.gpu_memory_utilization.threshold = {threshold:g}: must be <= 100 (per GPU)")


def _rollout_fits_in_timeout(config: "AppConfig") -> None:
    """A blue/green deployment provisions the green fleet, waits for its startup health check,
    then shifts and bakes: all of it inside MaximumExecutionTimeoutInSeconds."""
    rollout = config.scaling.rollout
    if not rollout.enabled:
        return
    startup = config.serving.container_startup_health_check_timeout_s
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


def _check_artifact_pins(config: "AppConfig") -> None:
    expected = sorted(a.name for a in config.model.adapters)
    build = config.image.build
    sets = {"primary": build.primary, "canary": build.canary, "shadow": build.shadow}
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


def _check_prefill_warmup(config: "AppConfig") -> None:
    """The container refuses the same values at start (serving_app.settings); synth says it first."""
    tokens = config.container.warmup_prefill_tokens
    problem = warmup_prefill_problem(tokens, config.engine.max_model_len, length_name="engine.max_model_len")
    if problem:
        raise ValueError(line("container.warmup_prefill_tokens", tokens, problem))


def _routing_strategy_is_free(config: "AppConfig") -> None:
    """``serving.routing_strategy`` applies only when ``throughput.routing`` leaves the strategy open:
    prefix-aware routing sets the endpoint config's RoutingStrategy itself."""
    if config.throughput.routing == "prefix_aware" and config.serving.routing_strategy is not None:
        raise ValueError(
            f"serving.routing_strategy = {config.serving.routing_strategy!r} has no effect while throughput.routing = "
            "'prefix_aware' sets RoutingStrategy PREFIX_AWARE; set throughput.routing = least_outstanding (or "
            "session_affinity) to choose it, or leave it unset"
        )
