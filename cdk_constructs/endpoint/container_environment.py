"""Map the validated config onto the container's environment variables."""

import json

from app_config import AppConfig
from app_config.image_build import pin_sha256
from app_config.pins import built_artifact_sets
from app_config.serving import needs_cuda_forward_compat
from serving_contract import env
from serving_contract.components import adapter_component_name


def container_environment(config: AppConfig) -> dict[str, str]:
    """Environment variables shared by every production variant's container.

    The container's entrypoint parses exactly these (names in ``serving_contract.env``)
    into vLLM's argv, so engine settings change with a deploy, not an image rebuild.
    ``VARIANT_NAME`` is added per variant by :class:`ServingEndpoint`.

    Returns:
        Variable name to string value; every value is a string, as SageMaker requires.
    """
    runtime_adapters = config.serving.hosts_inference_components
    variables = {
        **config.engine.environment(),
        env.ENGINE_SERVED_MODEL_NAME: config.model.name,
        # inference_components: no adapter is baked in; SageMaker loads each at runtime.
        env.LORA_ADAPTERS: "" if runtime_adapters else ",".join(adapter.name for adapter in config.model.adapters),
        env.STARTUP_TIMEOUT_S: str(env.startup_budget_s(config.serving.container_startup_health_check_timeout_s)),
        **config.container.environment(config.engine.max_model_len),
        env.REQUEST_CLASS_WARM_MIN_CACHED_FRACTION: f"{config.slo.warm_min_cached_fraction:g}",
        env.METRICS_NAMESPACE: config.observability.metrics_namespace,
        env.ENDPOINT_NAME: config.endpoint_name,
        env.CUDA_FORWARD_COMPAT: "true" if needs_cuda_forward_compat(config.serving.inference_ami_version) else "false",
    }
    if runtime_adapters:
        variables[env.LORA_RUNTIME_ADAPTERS] = "true"
        # SageMaker registers each adapter under its component's name; the container loads only
        # the files whose digest is that adapter's pin (issue 22 item 5).
        pins = config.serving.inference_components.adapter_artifacts
        digests = {adapter_component_name(config.endpoint_name, name): pin_sha256(pin) for name, pin in pins.items()}
        variables[env.ADAPTER_SHA256] = json.dumps(digests, sort_keys=True, separators=(",", ":"))
    return variables


def model_versions_environment(config: AppConfig, variant: str) -> dict[str, str]:
    """``{MODEL_VERSIONS: JSON}`` of the pins ``variant``'s image bakes in (base model and adapters), so every
    answer names the versions that produced it (container/serving_app/versions.py); empty when the image is
    prebuilt."""
    sets = built_artifact_sets(config)
    artifacts = sets.get(variant, sets.get("primary"))  # a canary without a set of its own runs the primary's image
    if artifacts is None:
        return {}
    pins = {config.model.name: artifacts.base_model}
    if not config.serving.hosts_inference_components:  # runtime adapters are loaded, not baked
        pins |= dict(artifacts.adapters)
    return {env.MODEL_VERSIONS: json.dumps(pins, sort_keys=True, separators=(",", ":"))}
