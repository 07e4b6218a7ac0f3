"""Load a quantized checkpoint with vLLM's own config parser and weight loaders, without serving it.

    .venv-vllm/bin/python tests/release/vllm_load_check.py <checkpoint dir>

Prints one JSON object: the quantization vLLM read from the checkpoint, the scheme and the linear
kernel it chose for every quantized layer kind, the kernel library the CPU build loaded, and
whether that library has the W4A16 GEMM (``cpu_gemm_wna16``: the AVX-512 libraries have it,
``_C_AVX2`` has not). It goes as far as an engine start does before the first forward:
``EngineArgs`` -> ``VllmConfig`` (vLLM reads ``quantization_config``), one-rank gloo process group,
``get_model`` (the model built with the quantization method, every checkpoint tensor through its
parameter's weight loader: vLLM raises on a tensor it cannot place and on a parameter left
unloaded, then ``process_weights_after_loading`` repacks for the kernel). Where the GEMM exists it
also runs one quantized layer on a random input and reports whether the output is finite.

Run with ``tests/engine/engine_shim`` on ``PYTHONPATH`` (its ``sitecustomize``): the same process
the real-engine tests start, and ``ENGINE_SHIM_CPU_ISA=avx2`` applies there too.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path


def main(checkpoint: Path) -> dict[str, object]:
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.distributed import ensure_model_parallel_initialized, init_distributed_environment
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader import get_model
    from vllm.platforms import current_platform

    current_platform.import_kernels()
    config = EngineArgs(model=str(checkpoint), enforce_eager=True, max_model_len=64).create_engine_config()
    with set_current_vllm_config(config), tempfile.TemporaryDirectory() as rendezvous:
        # A file rendezvous: no TCP port to pick for a world of one.
        init_distributed_environment(1, 0, f"file://{rendezvous}/store", 0, "gloo")
        ensure_model_parallel_initialized(1, 1)
        model = get_model(vllm_config=config)
        schemes: dict[str, dict[str, str]] = {}  # layer kind (qkv_proj, ...) -> what vLLM chose
        for name, module in model.named_modules():
            scheme = getattr(module, "scheme", None)
            kind = name.rsplit(".", 1)[-1]
            if scheme is not None and kind not in schemes:
                kernel = getattr(scheme, "kernel", None)
                schemes[kind] = {
                    "scheme": type(scheme).__name__,
                    "kernel": type(kernel).__name__ if kernel else "",
                    # What vLLM read from quantization_config (absent on schemes that have no such field).
                    **{
                        f: str(getattr(scheme, f))
                        for f in ("num_bits", "group_size", "symmetric")
                        if hasattr(scheme, f)
                    },
                }
        maps = Path("/proc/self/maps").read_text()
        report: dict[str, object] = {
            "quantization": config.model_config.quantization,
            "schemes": schemes,
            "kernel_library": sorted({line.rsplit("/", 1)[-1] for line in maps.splitlines() if "/vllm/_C" in line}),
            "cpu_gemm_wna16": hasattr(torch.ops._C, "cpu_gemm_wna16"),
        }
        if report["cpu_gemm_wna16"]:
            layer = model.model.layers[0].mlp.down_proj
            x = torch.randn(3, layer.input_size_per_partition, dtype=config.model_config.dtype)
            out, _ = layer(x)
            report["forward_finite"] = bool(torch.isfinite(out).all())
    return report


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
