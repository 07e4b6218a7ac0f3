"""Map the validated config onto the container's environment variables."""

from app_config import AppConfig
from serving_contract import env


def _flag(value: bool) -> str:
    return "true" if value else "false"


def container_environment(config: AppConfig) -> dict[str, str]:
    """Environment variables shared by every production variant's container.

    The container's entrypoint parses exactly these (names in ``serving_contract.env``)
    into vLLM's argv, so engine settings change with a deploy, not an image rebuild.
    ``VARIANT_NAME`` is added per variant by :class:`ServingEndpoint`.

    Returns:
        Variable name to string value; every value is a string, as SageMaker requires.
    """
    engine = config.engine
    variables = {
        env.ENGINE_SERVED_MODEL_NAME: config.model.name,
        env.ENGINE_GPU_MEMORY_UTILIZATION: str(engine.gpu_memory_utilization),
        env.ENGINE_MAX_MODEL_LEN: str(engine.max_model_len),
        env.ENGINE_MAX_NUM_SEQS: str(engine.max_num_seqs),
        env.ENGINE_MAX_NUM_BATCHED_TOKENS: str(engine.max_num_batched_tokens),
        env.ENGINE_BLOCK_SIZE: str(engine.block_size),
        env.ENGINE_ENABLE_PREFIX_CACHING: _flag(engine.enable_prefix_caching),
        # "none" is the container's word for an unquantized checkpoint (no --quantization flag).
        env.ENGINE_QUANTIZATION: config.model.quantization or "none",
        env.ENGINE_TENSOR_PARALLEL_SIZE: str(engine.tensor_parallel_size),
        env.ENGINE_ENFORCE_EAGER: _flag(engine.enforce_eager),
        env.ENGINE_LOG_LEVEL: engine.log_level,
        env.LORA_ADAPTERS: ",".join(adapter.name for adapter in config.model.adapters),
        env.LORA_MAX_LORAS: str(engine.max_loras),
        env.LORA_MAX_RANK: str(engine.max_lora_rank),
        env.STARTUP_TIMEOUT_S: str(config.serving.container_startup_health_check_timeout_s),
        env.WARMUP_NUM_REQUESTS: str(config.container.warmup_num_requests),
        env.DRAIN_TIMEOUT_S: str(config.container.drain_timeout_s),
        env.REQUEST_TIMEOUT_S: str(config.container.request_timeout_s),
        env.METRICS_NAMESPACE: config.observability.metrics_namespace,
        env.METRICS_INTERVAL_S: str(config.container.metrics_interval_s),
        env.ENDPOINT_NAME: config.endpoint_name,
    }
    if engine.max_cpu_loras is not None:
        variables[env.LORA_MAX_CPU_LORAS] = str(engine.max_cpu_loras)
    return variables
