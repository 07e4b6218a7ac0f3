"""MangaAssist's LoRA kernel shapes, the search space, vLLM 0.26's defaults and its table layout.

vLLM reads ``<gpu>_SHRINK.json`` and ``<gpu>_EXPAND_TRUE.json`` from ``VLLM_TUNED_CONFIG_FOLDER``
(``vllm/lora/ops/triton_ops/README_TUNING.md``, ``utils.py``: ``load_lora_op_config``), each
``config[max_loras][num_slices][m][k][n] = {block_m, ...}``, where vLLM looks ``max_loras`` up as
``lora_ids.size(0)`` (the engine's ``max_loras`` + 1, with or without
``--specialize-active-lora``: ``LoRAKernelMeta.meta_args``) and every other key by the nearest
value (``get_lora_op_configs``). ``EXPAND_FALSE`` is read only with
``VLLM_LORA_ENABLE_DUAL_STREAM`` (rejected, docs/performance.md), so it is not written.

Shapes: a Llama-3-8B layer with rank-16 adapters on every linear layer (seed 000: q, k, v, o,
gate, up, down). vLLM 0.26 calls the kernels once per wrapped layer
(``vllm/lora/punica_wrapper/punica_gpu.py``): shrink of the hidden state (k = 4096) for qkv
(3 slices), gate_up (2) and o (1), of the MLP state (k = 14336) for down (1); expand to
n = 4096 (qkv: 3 slices of 4096/1024/1024; o, down: 1) and n = 14336 (gate_up: 2 slices).

Batches of up to ``DECODE_MAX_M`` tokens get a config each: they run inside CUDA graphs that vLLM
captures at start (``engine.max_cudagraph_capture_size``), so every config they use is
compiled before ``/ping``. Larger batches (prefill) share one config, the one with the least
total time over ``PREFILL_MS``: every prefill size then runs one compiled kernel, which the
container's warm-up compiles before ``/ping`` (a second config would be a second lazy Triton
compile on the first user's long prompt).

Standard library only: the compile-cache job and CPU tests import it without torch.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

HIDDEN: Final = 4096
INTERMEDIATE: Final = 14336
KV: Final = 1024
RANK: Final = 16
ADAPTERS: Final = 3
DECODE_MS: Final = (1, 2, 4, 8, 16, 32, 64)
"""Batch sizes (tokens) tuned one by one: CUDA-graph sizes, compiled at engine start."""
DECODE_MAX_M: Final = DECODE_MS[-1]
PREFILL_MS: Final = (256, 1024, 2048, 4096)
"""Prefill batches the shared prefill config is chosen over; 2,048 is about MangaAssist's first
turn (600 + 1,400 + 40 tokens, benchmarks/conversations.py RequestShape)."""
PREFILL_KEY: Final = 128
"""The table key of the prefill config: vLLM picks the nearest key, so every batch of 96 tokens
or more gets it (vLLM's own default also switches at 128, utils.py get_lora_op_configs)."""

SHRINK: Final = "SHRINK"
EXPAND: Final = "EXPAND_TRUE"
"""File stems vLLM reads: ``shrink`` and ``expand`` with ``add_inputs=True`` (utils.py)."""
FILE_STEMS: Final = (SHRINK, EXPAND)


@dataclass(frozen=True)
class Shape:
    """One kernel call: ``op`` (shrink/expand), slices, k and n as vLLM keys them, output widths."""

    op: str
    name: str
    k: int
    n: int
    widths: tuple[int, ...]  # expand: each slice's output width; shrink: rank per slice


SHAPES: Final = (
    Shape("shrink", "qkv", HIDDEN, RANK, (RANK,) * 3),
    Shape("shrink", "gate_up", HIDDEN, RANK, (RANK,) * 2),
    Shape("shrink", "o", HIDDEN, RANK, (RANK,)),
    Shape("shrink", "down", INTERMEDIATE, RANK, (RANK,)),
    Shape("expand", "qkv", RANK, HIDDEN, (HIDDEN, KV, KV)),
    Shape("expand", "gate_up", RANK, INTERMEDIATE, (INTERMEDIATE, INTERMEDIATE)),
    Shape("expand", "o_down", RANK, HIDDEN, (HIDDEN,)),
)


def _shrink(block_m: int, block_k: int, split_k: int, stages: int) -> dict[str, Any]:
    return {
        "block_m": block_m,
        "block_n": 16,
        "block_k": block_k,
        "split_k": split_k,
        "num_warps": 4,
        "num_ctas": 1,
        "group_size_m": 8,
        "num_stages": stages,
        "max_nreg": None,
    }


def _expand(block_m: int, block_n: int, warps: int, stages: int) -> dict[str, Any]:
    return {
        "block_m": block_m,
        "block_n": block_n,
        "block_k": 16,
        "num_warps": warps,
        "num_ctas": 1,
        "num_stages": stages,
        "max_nreg": None,
    }


def space(op: str, phase: str, quick: bool) -> list[dict[str, Any]]:
    """Candidate configs (README_TUNING.md's ranges, trimmed so a sweep fits one device call:
    every distinct config is a Triton compile per slice count, about half a second each)."""
    grid: tuple[tuple[int, ...], ...]
    if op == "shrink":
        if phase == "prefill":
            grid = (
                ((16, 32, 64), (64, 128, 256), (8, 16, 32, 64), (2,)) if not quick else ((32,), (128,), (16, 64), (2,))
            )
        else:
            grid = ((16,), (128, 256), (16, 32, 64), (2,)) if not quick else ((16,), (256,), (64,), (2,))
        return [_shrink(*c) for c in itertools.product(*grid)]
    if phase == "prefill":
        grid = ((16, 32, 64, 128), (64, 128, 256), (4,), (2,)) if not quick else ((64,), (128, 256), (4,), (2,))
    else:
        grid = ((16, 32, 64), (64, 128, 256), (4,), (2,)) if not quick else ((16,), (128,), (4,), (2,))
    return [_expand(*c) for c in itertools.product(*grid)]


def token_mapping(m: int, adapters: int) -> list[int]:
    """Adapter index per token: decode batches spread round-robin over the adapters; a prefill
    batch is one prompt's chunk (adapter 0) plus seven decode tokens (8 concurrent users)."""
    if m <= DECODE_MAX_M:
        return [i % adapters for i in range(m)]
    decodes = [i % adapters for i in range(min(7, m))]
    return [0] * (m - len(decodes)) + decodes


def default_config(op: str, m: int) -> dict[str, Any]:
    """vLLM 0.26's default config (utils.py get_lora_op_configs, no tuned folder)."""
    if op == "shrink":
        return {
            "block_m": 32,
            "block_n": 16,
            "block_k": 256 if m < 128 else 32,
            "split_k": 64 if m < 128 else 8,
            "num_warps": 4,
            "num_ctas": 1,
            "group_size_m": 8,
            "num_stages": 2,
            "max_nreg": None,
        }
    return {
        "block_m": 64,
        "block_n": 128,
        "block_k": 32,
        "num_warps": 4,
        "num_ctas": 1,
        "num_stages": 2,
        "max_nreg": None,
    }


def default_configs() -> dict[Shape, dict[int, dict[str, Any]]]:
    """Every shape's table before tuning: vLLM's default at each decode size and the prefill key."""
    return {shape: {m: default_config(shape.op, m) for m in (*DECODE_MS, PREFILL_KEY)} for shape in SHAPES}


def build_tables(per_shape: Mapping[Shape, Mapping[int, dict[str, Any]]], max_loras: int) -> dict[str, Any]:
    """vLLM's tables by file stem (:data:`FILE_STEMS`) from each shape's config per batch size.

    Written under ``max_loras + 1`` (what vLLM looks up) and also 4 and 5, so one folder serves an
    engine of ``max_loras`` 3 or 4 alike.
    """
    tables: dict[str, Any] = {SHRINK: {}, EXPAND: {}}
    for shape, per_m in per_shape.items():
        table = tables[SHRINK if shape.op == "shrink" else EXPAND]
        for slots in sorted({max_loras + 1, 4, 5}):
            slices = table.setdefault(str(slots), {}).setdefault(str(len(shape.widths)), {})
            for m, config in sorted(per_m.items()):
                slices.setdefault(str(m), {}).setdefault(str(shape.k), {})[str(shape.n)] = config
    return tables


def file_prefix(device_name: str) -> str:
    """vLLM's file-name prefix for a GPU (utils.py ``load_lora_op_config``: ``torch.cuda.get_device_name()``
    with spaces and dashes as ``_``), e.g. ``NVIDIA A10G`` -> ``NVIDIA_A10G``."""
    return device_name.replace(" ", "_").replace("-", "_")


def file_names(prefix: str) -> list[str]:
    """The files vLLM reads for a GPU of ``prefix`` (:func:`file_prefix`)."""
    return [f"{prefix}_{stem}.json" for stem in FILE_STEMS]
