"""What a real-engine process sees of the CPU: run with .venv-vllm's interpreter and tests/engine/engine_shim
on PYTHONPATH, as the engine runs. Prints one JSON object: the features torch reports, ATen's kernel
level, the vLLM kernel library loaded (``CpuPlatform.import_kernels``) and the GEMMs it registered.

    PYTHONPATH=tests/engine/engine_shim [ENGINE_SHIM_CPU_ISA=avx2] .venv-vllm/bin/python tests/engine/cpu_isa_probe.py
"""

import json
from pathlib import Path

import torch
from vllm.platforms import current_platform

current_platform.import_kernels()
maps = Path("/proc/self/maps").read_text()
print(
    json.dumps(
        {
            "avx512": torch.cpu._is_avx512_supported(),
            "avx512_bf16": torch.cpu._is_avx512_bf16_supported(),
            "amx_tile": torch.cpu._is_amx_tile_supported(),
            "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "kernel_library": sorted({line.rsplit("/", 1)[-1] for line in maps.splitlines() if "/vllm/_C" in line}),
            # W4A16 (compressed-tensors WNA16, AWQ) and W8A8 INT8 GEMMs of the CPU build.
            "cpu_gemm_wna16": hasattr(torch.ops._C, "cpu_gemm_wna16"),
            "onednn_scaled_mm": hasattr(torch.ops._C, "onednn_scaled_mm"),
        }
    )
)
