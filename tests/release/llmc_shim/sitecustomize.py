"""Test-only: lets llm-compressor 0.14.0.1 quantize on a machine without an accelerator.

Its AWQ smoothing pins the cached calibration activations for faster host-to-GPU copies
(``IntermediatesCache.pin_memory``, llmcompressor/pipelines/cache.py); pinning needs an accelerator, so on
CPU it raises "Cannot access accelerator device when none is available". Without a GPU there is no copy to
speed up: pinning is skipped. The quantization itself is unchanged. The GPU Processing job never loads this.
"""

import torch

if not torch.accelerator.is_available():
    from llmcompressor.pipelines.cache import IntermediatesCache

    IntermediatesCache.pin_memory = lambda self, *args, **kwargs: None  # type: ignore[method-assign]
