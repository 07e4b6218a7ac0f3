"""The CPU build's kernel choice by instruction set, and the AVX2 emulation the suite can run under (issue 44).

vLLM's CPU build loads one of three kernel libraries at start (``_C``: AVX-512 with BF16, ``_C_AVX512``,
``_C_AVX2``). The W4A16 GEMM is missing from ``_C_AVX2``, so what an engine can serve depends on the
runner; ``ENGINE_SHIM_CPU_ISA=avx2`` (tests/engine/engine_shim) makes this machine choose as an AVX2 host
does. Two probes of a few seconds each, side by side; no engine starts.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.engine.real_engine import REPO, SHIM, VLLM_PYTHON

pytestmark = pytest.mark.real_engine  # skipped with the reason without .venv-vllm (tests/engine/conftest.py)

PROBE = REPO / "tests" / "engine" / "cpu_isa_probe.py"


def _probes(*isas: str) -> dict[str, dict[str, object]]:
    running = {
        isa: subprocess.Popen(
            [str(VLLM_PYTHON), str(PROBE)],
            env={**os.environ, "PYTHONPATH": str(SHIM), "ENGINE_SHIM_CPU_ISA": isa},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for isa in isas
    }
    seen = {}
    for isa, process in running.items():
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err[-2000:]
        seen[isa] = json.loads(out.splitlines()[-1])
    return seen


def test_the_emulated_avx2_host_loads_the_avx2_library_which_has_the_int8_gemm_and_not_the_w4a16_one() -> None:
    seen = _probes("avx2", "native")
    assert seen["avx2"] == {
        "avx512": False,
        "avx512_bf16": False,
        "amx_tile": False,
        "aten_cpu_capability": "AVX2",
        "kernel_library": ["_C_AVX2.abi3.so"],
        "cpu_gemm_wna16": False,
        "onednn_scaled_mm": True,
    }
    native = seen["native"]
    # This host's own choice (platforms/cpu.py import_kernels): W8A8's GEMM everywhere, W4A16's with AVX-512.
    library = "_C.abi3.so" if native["avx512_bf16"] else "_C_AVX512.abi3.so" if native["avx512"] else "_C_AVX2.abi3.so"
    assert native["kernel_library"] == [library]
    assert native["onednn_scaled_mm"] is True
    assert native["cpu_gemm_wna16"] is (library != "_C_AVX2.abi3.so")


def test_an_unknown_emulated_instruction_set_stops_the_process_naming_the_allowed_values() -> None:
    done = subprocess.run(
        [str(VLLM_PYTHON), "-c", "pass"],
        env={**os.environ, "PYTHONPATH": str(SHIM), "ENGINE_SHIM_CPU_ISA": "avx512"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == "ENGINE_SHIM_CPU_ISA = 'avx512': expected avx2, native or unset"
