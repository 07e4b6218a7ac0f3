"""The synth-time memory plan: against what vLLM reported on a GPU, and where it stops synth."""

import dataclasses

import pytest

from app_config import load_config
from planning import memory_report
from planning.gpu_instances import GIB, H100_80GB, InstanceGpus, instance_gpus
from planning.make_plan import make_plan
from planning.memory_plan import (
    EngineMemoryInputs,
    ModelShape,
    awq_checkpoint_bytes,
    minimum_utilization,
    plan_engine_memory,
)
from planning.planner import Planner
from tests.config_helpers import config_error
from tests.synth_helpers import SEEDS_G5, cdk_json_context

LLAMA3_8B = {
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 8192,
}


SEEDS = {key.replace(".", "__"): value for key, value in SEEDS_G5.items()}
"""The seeds' fleet (ml.g5.xlarge) as ``_error`` keywords: these tests' figures are the A10G's."""


def llama3_8b_awq(vocab_size: int) -> ModelShape:
    shape = ModelShape(**LLAMA3_8B, vocab_size=vocab_size, weights_bytes=0)
    return ModelShape(**LLAMA3_8B, vocab_size=vocab_size, weights_bytes=awq_checkpoint_bytes(shape))


def container_engine(utilization: float) -> EngineMemoryInputs:
    """The container's argv with three rank-16 adapters and max_loras 4 (the default before issue 35)."""
    return EngineMemoryInputs(
        gpu_memory_utilization=utilization,
        tensor_parallel_size=1,
        max_model_len=4096,
        max_num_seqs=128,
        block_size=16,
        kv_cache_dtype="auto",
        lora_enabled=True,
        max_loras=4,
        max_lora_rank=16,
    )


@pytest.mark.parametrize(
    ("vocab_size", "utilization", "vllm_kv_tokens"),
    [
        # vLLM 0.22.0 on an H100 80GB (81,559 MiB) with an A10G-sized budget (0.26 x 81,559 =
        # 0.92 x 23,028 MiB), Llama-3-8B's real vocabulary, the container's engine defaults:
        # empty compile cache 110,000 tokens, a hit 112,144 (benchmarks/results/
        # h100-2026-11-25-startup/startup-3-defaults.json, gateway-make and gateway-made-hit).
        (128_256, 0.26, 110_000),
        (128_256, 0.26, 112_144),
        # docs/sources.md, "vLLM": utilization 0.5 of the same H100, 1024-token vocabulary: 280,784 tokens.
        (1_024, 0.5, 280_784),
    ],
)
def test_plan_is_within_10_percent_of_what_vllm_reported(
    vocab_size: int, utilization: float, vllm_kv_tokens: int
) -> None:
    config = load_config(cdk_json_context())
    plan = plan_engine_memory(
        shape=llama3_8b_awq(vocab_size),
        gpus=InstanceGpus(H100_80GB, 1),
        engine=container_engine(utilization),
        runtime_overhead_bytes=round(config.memory_plan.runtime_overhead_gib * GIB),
        typical_sequence_tokens=2560,
    )
    assert abs(plan.kv_tokens / vllm_kv_tokens - 1) <= 0.10, plan.kv_tokens


def test_default_shape_matches_the_awq_layout_of_llama3_8b() -> None:
    config = load_config(cdk_json_context())
    shape = config.model.shape.to_shape()
    assert awq_checkpoint_bytes(shape) == 5_727_854_592  # the published AWQ checkpoint: 5.73 GB
    assert abs(shape.weights_bytes - awq_checkpoint_bytes(shape)) < 0.01 * GIB
    assert shape.kv_bytes_per_token() == 128 * 1024  # docs/sources.md, "vLLM": 128 KiB per token
    # 4 slots x rank 16 x (32 layers x 81,920 + 2 x (vocab + hidden)) x 2 bytes.
    assert shape.lora_slot_bytes(max_loras=4, max_lora_rank=16) == 4 * 16 * (32 * 81_920 + 2 * 132_352) * 2


def test_default_config_fits_27_sequences_of_max_model_len_on_a_g5_xlarge() -> None:
    plan = Planner.of(load_config(cdk_json_context())).memory_plan("ml.g5.xlarge")
    # The seeds promised 128 sequences of 4,096 tokens; the KV cache holds about a fifth of that.
    assert plan.sequences_at_max_len == 27
    assert plan.sequences_at_typical_len == 43
    assert plan.concurrency_ceiling == 43
    assert plan.kv_tokens == plan.sequences_at_max_len * 4096 + plan.kv_tokens % 4096


def test_fp8_kv_cache_and_tensor_parallelism_move_the_plan_the_right_way() -> None:
    base = load_config(cdk_json_context())
    fp8 = load_config({**cdk_json_context(), "engine.kv_cache_dtype": "fp8"})
    assert Planner.of(fp8).memory_plan("ml.g5.xlarge").kv_tokens == pytest.approx(
        2 * Planner.of(base).memory_plan("ml.g5.xlarge").kv_tokens, rel=0.001
    )
    tp4 = load_config(
        {
            **cdk_json_context(),
            **SEEDS_G5,
            "engine.tensor_parallel_size": "4",
            "serving.primary.instance_type": "ml.g5.12xlarge",
            "serving.canary.instance_type": "ml.g5.12xlarge",
        }
    )
    # Four GPUs hold one copy of the weights between them: more than 4x the KV cache of one.
    assert (
        Planner.of(tp4).memory_plan("ml.g5.12xlarge").kv_tokens
        > 4 * Planner.of(base).memory_plan("ml.g5.xlarge").kv_tokens
    )


def test_minimum_utilization_is_where_one_sequence_just_fits() -> None:
    config = load_config(cdk_json_context())
    shape, gpus = config.model.shape.to_shape(), instance_gpus("ml.g5.xlarge")
    overhead = round(config.memory_plan.runtime_overhead_gib * GIB)
    engine = container_engine(0.5)
    needed = minimum_utilization(shape=shape, gpus=gpus, engine=engine, runtime_overhead_bytes=overhead)

    def plan_at(utilization: float) -> int:
        engine_at = dataclasses.replace(engine, gpu_memory_utilization=utilization)
        return plan_engine_memory(
            shape=shape, gpus=gpus, engine=engine_at, runtime_overhead_bytes=overhead, typical_sequence_tokens=2560
        ).kv_tokens

    assert plan_at(needed + 0.001) >= 4096 > plan_at(needed - 0.001)


def test_max_model_len_above_the_models_positions_stops_synth() -> None:
    assert config_error(engine__max_model_len="16384") == (
        "config error: engine.max_model_len = 16384: above model.shape.max_position_embeddings = 8192, the longest "
        "context the model supports (vLLM refuses to start)"
    )


def test_utilization_without_room_for_one_sequence_stops_synth() -> None:
    assert config_error(**SEEDS, engine__gpu_memory_utilization="0.2") == (
        "config error: engine.gpu_memory_utilization = 0.2: on serving.primary.instance_type = ml.g5.xlarge (A10G) "
        "it leaves 0 KV-cache tokens, fewer than one engine.max_model_len = 4096 sequence (budget 4.50 GiB - "
        "weights 5.33 - LoRA slots 0.26 - runtime 1.60); it needs >= 0.34 (vLLM refuses to start)"
    )


def test_max_model_len_above_the_kv_cache_even_at_full_utilization_stops_synth() -> None:
    # A long-context model on a T4: 15,360 MiB x 0.98 - 5.33 - 0.26 - 1.6 GiB = 7.51 GiB of KV cache,
    # 61,536 tokens of 128 KiB in whole blocks; not one 65,536-token sequence (3 LoRA slots).
    message = config_error(
        engine__max_model_len="65536",
        engine__gpu_memory_utilization="0.98",
        model__shape__max_position_embeddings="131072",
        memory_plan__typical_sequence_tokens="4096",
        serving__primary__instance_type="ml.g4dn.xlarge",
        monitoring__gpu_memory_utilization__threshold="99",
    )
    assert message.startswith(
        "config error: engine.max_model_len = 65536: only 61,536 KV-cache tokens fit on "
        "serving.primary.instance_type = ml.g4dn.xlarge (T4) even at engine.gpu_memory_utilization = 0.98; "
        "lower it to <= 61536"
    ), message


def test_tensor_parallel_above_the_instances_gpus_stops_synth() -> None:
    assert config_error(**SEEDS, engine__tensor_parallel_size="2") == (
        "config error: engine.tensor_parallel_size = 2: serving.primary.instance_type = ml.g5.xlarge has 1 GPU(s) "
        "(A10G); the engine cannot span more GPUs than the instance has"
    )


def test_marlin_on_a_gpu_without_it_and_a_kernel_that_does_not_suit_the_checkpoint_stop_synth() -> None:
    assert config_error(engine__quantization="awq_marlin", serving__canary__instance_type="ml.g4dn.xlarge") == (
        "config error: engine.quantization = 'awq_marlin': serving.canary.instance_type = ml.g4dn.xlarge has T4 "
        "(compute capability 7.5); Marlin kernels need >= 8.0, use 'auto'"
    )
    assert config_error(engine__quantization="gptq_marlin") == (
        "config error: engine.quantization = 'gptq_marlin' cannot run a model.quantization = 'awq' checkpoint; "
        "use 'auto' (vLLM reads the checkpoint's quantization_config)"
    )


def test_an_fp8_quantization_of_an_awq_checkpoint_stops_synth() -> None:
    # vLLM 0.22 refused it at start on the H200 (option matrix, quantization=fp8).
    assert config_error(engine__quantization="fp8") == (
        "config error: engine.quantization = 'fp8' cannot run a model.quantization = 'awq' checkpoint; "
        "use 'auto' (vLLM reads the checkpoint's quantization_config)"
    )


def test_fp8_kv_cache_on_hopper_needs_an_attention_backend_that_starts() -> None:
    hopper = {"serving__primary__instance_type": "ml.p5.48xlarge", "engine__kv_cache_dtype": "fp8"}
    assert config_error(**hopper) == (
        "config error: engine.kv_cache_dtype = 'fp8' with engine.attention_backend = 'auto' on ml.p5.48xlarge "
        "(H100 80GB HBM3): vLLM 0.22 picks FlashAttention 3, which crashes at start with an fp8 KV cache and a "
        "float16 model (measured on an H200); set engine.attention_backend to FLASHINFER or TRITON_ATTN"
    )
    chosen = {k.replace("__", "."): v for k, v in hopper.items()}
    config = load_config({**cdk_json_context(), **chosen, "engine.attention_backend": "FLASHINFER"})
    assert config.engine.environment()["ENGINE_ATTENTION_BACKEND"] == "FLASHINFER"
    # An A10G: FlashAttention 2 refuses fp8 itself and vLLM falls through to a backend that takes it.
    a10g = load_config({**cdk_json_context(), **SEEDS_G5, "engine.kv_cache_dtype": "fp8"})
    assert a10g.engine.attention_backend == "auto"


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("engine.kv_cache_dtype", "int4", "config error: engine.kv_cache_dtype = 'int4': must be one of auto or fp8"),
        (
            "engine.quantization",
            "AWQ",
            "config error: engine.quantization = 'AWQ': must be one of auto, awq_marlin, awq, gptq_marlin, gptq or fp8",
        ),
        ("memory_plan.runtime_overhead_gib", "0", "config error: memory_plan.runtime_overhead_gib = '0': must be > 0"),
        (
            "memory_plan.typical_sequence_tokens",
            "5000",
            "config error: memory_plan.typical_sequence_tokens = 5000: above engine.max_model_len = 4096",
        ),
        ("model.shape.head_dim", "4", "config error: model.shape.head_dim = '4': must be >= 8"),
        (
            "model.shape.num_key_value_heads",
            "5",
            "config error: model.shape: num_attention_heads = 32 must be a multiple of num_key_value_heads = 5",
        ),
    ],
)
def test_bad_values_of_the_new_keys_get_one_line(key: str, value: str, expected: str) -> None:
    assert config_error(**{key.replace(".", "__"): value}).startswith(expected)


def test_report_warns_only_when_the_active_target_is_above_the_fit() -> None:
    quiet_config = load_config({**cdk_json_context(), **SEEDS_G5})
    quiet = memory_report.build(quiet_config, make_plan(quiet_config))
    assert [r.warning for r in quiet] == [None, None]
    loud_config = load_config(
        {
            **cdk_json_context(),
            **SEEDS_G5,
            "scaling.primary.target_tracking.metric": "concurrent_requests_high_resolution",
            "scaling.primary.target_tracking.concurrent_requests_target": "60",
        }
    )
    loud = memory_report.build(loud_config, make_plan(loud_config))
    assert loud[0].warning == (
        "scaling.primary.target_tracking.concurrent_requests_target = 60 (the active target-tracking metric) is "
        "above the 43 requests of 2,560 tokens whose KV cache fits on ml.g5.xlarge: vLLM preempts and queues "
        "before the fleet scales out"
    )
    assert loud[1].warning is None
    assert f"    WARNING: {loud[0].warning}" in memory_report.render(loud)
