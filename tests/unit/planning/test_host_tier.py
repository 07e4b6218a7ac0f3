"""The memory plan's host tier (issue 56): what KV offload to host memory pins, what each instance type has
left for it, and the one line that stops synth when it does not fit."""

import pytest

from app_config import load_config
from planning import memory_report
from planning.engine_memory import cpu_lora_slots, host_tier_for_instance
from planning.gpu_instances import GIB, instance_gpus
from planning.make_plan import make_plan
from planning.memory_plan import (
    HostOffload,
    ModelShape,
    largest_host_offload_gib,
    plan_host_offload,
    power_of_two_ceil,
)
from tests.config_helpers import config_error
from tests.synth_helpers import cdk_json_context

LLAMA3_8B = ModelShape(
    num_hidden_layers=32,
    hidden_size=4096,
    intermediate_size=14336,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    vocab_size=128256,
    max_position_embeddings=8192,
    weights_bytes=0,
)


def offload(size_gib: float, tp: int = 1, kv_cache_dtype: str = "auto") -> HostOffload:
    """Llama-3-8B's offload of ``size_gib`` with the engine's 16-token blocks."""
    return plan_host_offload(
        LLAMA3_8B, size_gib=size_gib, tensor_parallel_size=tp, block_size=16, kv_cache_dtype=kv_cache_dtype
    )


def test_the_g6e_host_memory_is_what_conventions_checked() -> None:
    # CONVENTIONS part 1, "Checked 2026-11-29": 32, 64 and 128 GiB with 4, 8 and 16 vCPUs.
    assert [
        (instance_gpus(f"ml.g6e.{size}").memory_gib, instance_gpus(f"ml.g6e.{size}").vcpus)
        for size in (
            "xlarge",
            "2xlarge",
            "4xlarge",
        )
    ] == [(32, 4), (64, 8), (128, 16)]


@pytest.mark.parametrize(
    ("size", "rounded"),
    # vLLM PR #50094's measured resident memory of one pinned torch tensor: 6 GiB -> 8, 10 -> 16, 12 -> 16.
    [(0, 0), (1, 1), (3, 4), (6 * GIB, 8 * GIB), (10 * GIB, 16 * GIB), (12 * GIB, 16 * GIB), (16 * GIB, 16 * GIB)],
)
def test_torchs_pinned_allocator_rounds_up_to_a_power_of_two(size: int, rounded: int) -> None:
    assert power_of_two_ceil(size) == rounded


def test_an_offload_is_whole_blocks_of_every_layer_pinned_per_layer_in_powers_of_two() -> None:
    # 2 MiB per 16-token block over 32 layers (128 KiB per token): 16 GiB is 8,192 blocks, 0.5 GiB per layer.
    sixteen = offload(16, 1)
    assert (sixteen.blocks, sixteen.tokens, sixteen.buffers) == (8192, 131072, 32)
    assert sixteen.pinned_bytes == sixteen.asked_bytes == 16 * GIB
    # 40 GiB: 1.25 GiB per layer, pinned as 2 GiB each: 64 GiB for 327,680 tokens (the issue's ~330k).
    forty = offload(40, 1)
    assert (forty.tokens, forty.pinned_bytes) == (327680, 64 * GIB)
    # Two ranks: each pins its half of every layer (64 buffers of 0.625 GiB, 1 GiB each).
    split = offload(40, 2)
    assert (split.tokens, split.buffers, split.pinned_bytes) == (327680, 64, 64 * GIB)
    # fp8 KV: a block is half the bytes, so the same GiB holds twice the tokens.
    fp8 = offload(16, kv_cache_dtype="fp8")
    assert (fp8.tokens, fp8.pinned_bytes) == (262144, 16 * GIB)
    off = offload(0, 1)
    assert (off.blocks, off.pinned_bytes, off.buffers) == (0, 0, 0)


@pytest.mark.parametrize(
    ("available_gib", "tp", "largest"),
    [
        (25.74, 1, 16.0),
        (31.99, 1, 16.0),
        (32, 1, 32.0),
        (15.99, 1, 8.0),
        (57.74, 1, 32.0),
        (60, 2, 32.0),
        (0.001, 1, 0.0),
    ],
)
def test_the_largest_offload_that_fits_is_a_power_of_two_per_layer(
    available_gib: float, tp: int, largest: float
) -> None:
    available = round(available_gib * GIB)
    fits = largest_host_offload_gib(
        LLAMA3_8B, available_bytes=available, tensor_parallel_size=tp, block_size=16, kv_cache_dtype="auto"
    )
    assert fits == largest
    if fits:
        pinned = offload(fits, tp).pinned_bytes
        assert pinned <= available
        more = offload(fits + 1 / 64, tp)
        assert more.pinned_bytes > available  # one block more pins the next power of two


def test_the_host_tier_of_an_ml_g6e_xlarge_leaves_25_74_gib_per_engine() -> None:
    config = load_config({**cdk_json_context(), "engine.kv_offloading_size_gib": "16"})
    tier = host_tier_for_instance(
        "ml.g6e.xlarge", model=config.model, engine=config.engine, memory=config.memory_plan, runtime_adapters=False
    )
    # 32 - 2 (OS) - 4 (the engine's processes) - 3 rank-16 CPU LoRA slots of Llama-3-8B (0.26).
    assert (tier.host_bytes, tier.engines, tier.cpu_lora_slots) == (32 * GIB, 1, 3)
    assert tier.cpu_lora_bytes == LLAMA3_8B.lora_slot_bytes(3, 16)
    assert round(tier.available_bytes / GIB, 2) == 25.74
    assert tier.fits
    # Four GPUs, four engines share the host: (384 - 2) / 4 - 4 - 0.26 each.
    many = host_tier_for_instance(
        "ml.g6e.12xlarge", model=config.model, engine=config.engine, memory=config.memory_plan, runtime_adapters=False
    )
    assert (many.engines, round(many.available_bytes / GIB, 2)) == (4, 91.24)
    # Without adapters there are no CPU LoRA slots; in inference_components mode every copy has the runtime cache.
    assert cpu_lora_slots(config.engine, 0, runtime_adapters=False) == 0
    assert cpu_lora_slots(config.engine, 0, runtime_adapters=True) == config.engine.max_loras == 3
    assert cpu_lora_slots(config.engine.model_copy(update={"max_cpu_loras": 6}), 3, runtime_adapters=False) == 6


def test_an_offload_above_the_host_tier_stops_synth_in_one_line() -> None:
    assert config_error(engine__kv_offloading_size_gib="40") == (
        "config error: engine.kv_offloading_size_gib = 40: serving.primary.instance_type = ml.g6e.xlarge has 32 GiB "
        "of host memory, 25.74 GiB after the OS (2), the engine's processes (4) and its 3 CPU LoRA slots (0.26); "
        "vLLM 0.26 pins 64 GiB for it (32 layer buffers, each rounded up to a power of two); at most 16 GiB fits "
        "(or pick ml.g6e.4xlarge, 128 GiB)"
    )


def test_an_offload_that_fits_only_before_rounding_stops_synth() -> None:
    # 20 GiB < 25.74 left, but 0.625 GiB per layer pins 1 GiB: 32 in all.
    assert config_error(engine__kv_offloading_size_gib="20") == (
        "config error: engine.kv_offloading_size_gib = 20: serving.primary.instance_type = ml.g6e.xlarge has 32 GiB "
        "of host memory, 25.74 GiB after the OS (2), the engine's processes (4) and its 3 CPU LoRA slots (0.26); "
        "vLLM 0.26 pins 32 GiB for it (32 layer buffers, each rounded up to a power of two); at most 16 GiB fits "
        "(or pick ml.g6e.2xlarge, 64 GiB)"
    )


def test_every_variants_instance_type_is_checked() -> None:
    roomy = {"serving__primary__instance_type": "ml.g6e.4xlarge", "engine__kv_offloading_size_gib": "40"}
    assert config_error(**roomy, serving__canary__instance_type="ml.g6e.xlarge").startswith(
        "config error: engine.kv_offloading_size_gib = 40: serving.canary.instance_type = ml.g6e.xlarge has 32 GiB"
    )
    shadow = config_error(
        **roomy,
        serving__canary__instance_type="ml.g6e.4xlarge",
        serving__canary__enabled="false",
        serving__shadow__enabled="true",
        serving__shadow__instance_type="ml.g6e.xlarge",
    )
    assert shadow.startswith(
        "config error: engine.kv_offloading_size_gib = 40: serving.shadow.instance_type = ml.g6e.xlarge has 32 GiB"
    )
    both_roomy = {**roomy, "serving__canary__instance_type": "ml.g6e.4xlarge"}
    config = load_config({**cdk_json_context(), **{k.replace("__", "."): v for k, v in both_roomy.items()}})
    make_plan(config)  # 64 GiB pinned of 121.74 left on each


def test_data_parallel_engines_share_the_host() -> None:
    four_gpus = {
        "serving__primary__instance_type": "ml.g6e.12xlarge",
        "serving__canary__instance_type": "ml.g6e.12xlarge",
    }
    assert config_error(**four_gpus, engine__kv_offloading_size_gib="100") == (
        "config error: engine.kv_offloading_size_gib = 100: serving.primary.instance_type = ml.g6e.12xlarge has 384 "
        "GiB of host memory, 91.24 GiB per engine after the OS (2) and each of its 4 engines' processes (4) and 3 CPU "
        "LoRA slots (0.26); vLLM 0.26 pins 128 GiB for it (32 layer buffers, each rounded up to a power of two); at "
        "most 64 GiB fits (or pick ml.g6e.24xlarge, 768 GiB)"
    )


def test_a_type_without_a_larger_sibling_names_none() -> None:
    a10g = {"serving__primary__instance_type": "ml.g5.xlarge", "serving__canary__instance_type": "ml.g5.xlarge"}
    assert config_error(**a10g, engine__kv_offloading_size_gib="300").endswith(
        "vLLM 0.26 pins 512 GiB for it (32 layer buffers, each rounded up to a power of two); at most 8 GiB fits"
    )


def test_an_inference_component_copy_must_reserve_its_offload() -> None:
    components = {"serving__mode": "inference_components", "engine__kv_offloading_size_gib": "16"}
    assert config_error(**components) == (
        "config error: engine.kv_offloading_size_gib = 16: an inference-component copy then needs 20.26 GiB of host "
        "memory (its processes 4, 3 CPU LoRA slots 0.26, 16 GiB pinned for the offload), above "
        "serving.inference_components.memory_per_copy_mib = 8192; raise it to >= 20745"
    )
    context = {k.replace("__", "."): v for k, v in components.items()}
    make_plan(
        load_config({**cdk_json_context(), **context, "serving.inference_components.memory_per_copy_mib": "20745"})
    )


def test_the_lmcache_backend_stops_synth_because_the_image_cannot_run_it() -> None:
    assert config_error(engine__kv_offloading_size_gib="8", engine__kv_offloading_backend="lmcache") == (
        "config error: engine.kv_offloading_backend = 'lmcache': vLLM 0.26 then hands the KV blocks to an LMCache "
        "server (LMCacheMPConnector, tcp://localhost:5555 unless configured; vllm/config/vllm.py), which needs the "
        "lmcache package and a running server; the image installs neither (container/requirements.lock) and the "
        "container starts none; use native"
    )
    # Without a size vLLM reads no backend, so the value is harmless.
    make_plan(load_config({**cdk_json_context(), "engine.kv_offloading_backend": "lmcache"}))


def test_the_report_prints_the_host_tier_only_with_offload_on() -> None:
    on = load_config({**cdk_json_context(), "engine.kv_offloading_size_gib": "16"})
    lines = memory_report.render(memory_report.build(on, make_plan(on)))
    assert (
        lines.count(
            "    host tier: 32 GiB - OS 2 - the engine's (processes 4 + 3 CPU LoRA slots 0.26) = 25.74 GiB per engine; "
            "KV offload (native) 16 GiB pins 16 GiB and holds 131,072 tokens (the GPU's: 280,176); at most 16 GiB fits"
        )
        == 2
    )  # primary and canary
    off = load_config(cdk_json_context())
    assert not [line for line in memory_report.render(memory_report.build(off, make_plan(off))) if "host tier" in line]


def test_the_shape_in_config_is_the_one_these_figures_use() -> None:
    shape = load_config(cdk_json_context()).model.shape.to_shape()
    assert (shape.num_hidden_layers, shape.num_key_value_heads, shape.head_dim) == (32, 8, 128)
    assert shape.kv_bytes_per_token() == LLAMA3_8B.kv_bytes_per_token() == 128 * 1024
