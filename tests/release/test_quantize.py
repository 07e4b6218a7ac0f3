"""The quantize step: seed 000's calibration gotchas (here, always), and llm-compressor on a tiny checkpoint
in both release schemes (where ``.venv-llmcompressor`` exists; CI builds it and sets
``REQUIRE_LLMCOMPRESSOR``, which makes its absence a failure rather than a skip): the W4A16 output loaded by
vLLM's own config parser and weight loaders, the W8A8 output served by the container on the real CPU engine.

Why not serve W4A16 (issue 44): vLLM's CPU build loads ``_C_AVX2`` on a CPU without AVX-512, and that
library has no W4A16 GEMM (``cpu_gemm_wna16``); the engine then fails at its first forward, so the test
passed or failed with the runner's instruction set. W8A8's GEMM is in every library. Both tests pass with
``ENGINE_SHIM_CPU_ISA=avx2`` (tests/engine/engine_shim: an AVX2 host's kernel choices on this one).

Make that environment with ``make llmcompressor-venv`` (requirements-llmcompressor.txt: 53-91 s, 1.5 GB).

Measured on the shared 2-core machine: 64 calibration samples quantized the 2-layer tiny model (W4A16, AWQ)
in 8-20 s at a load average of ~2 (2026-11-26 08:08-08:10), 160 s at a higher load earlier that day; the
container started vLLM 0.22.0's CPU build on the result in ~50 s (112 s under load) and answered.
"""

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from cdk_constructs.release.runtime.quantize import CalibrationError, check_calibration, check_llmcompressor
from local_gateway import explain_exit, wait_for_line
from tests.engine.real_engine import ENGINE_ENV, SHIM, VLLM_PYTHON, RealGateway, engine_missing_reason

REPO = Path(__file__).resolve().parents[2]
LLMC_PYTHON = REPO / ".venv-llmcompressor" / "bin" / "python"
MIX = {"en": 0.7, "ja": 0.3}


def _samples(count: int, ja_every: int = 10, ja_per: int = 3) -> list[dict[str, object]]:
    return [{"text": "manga", "lang": "ja" if i % ja_every < ja_per else "en"} for i in range(count)]


def test_too_few_calibration_samples_stop_the_step_with_both_numbers() -> None:
    with pytest.raises(CalibrationError) as info:
        check_calibration(_samples(128), min_samples=256, language_mix=MIX, tolerance=0.05)
    assert str(info.value) == (
        "calibration samples = 128 < 256 (release.quantize.min_calibration_samples): too few give unstable "
        "quantization (seed 000)"
    )


def test_an_all_english_set_is_refused_for_a_30_percent_japanese_production_mix() -> None:
    with pytest.raises(CalibrationError) as info:
        check_calibration(_samples(300, ja_per=0), min_samples=256, language_mix=MIX, tolerance=0.05)
    assert str(info.value) == (
        "calibration language en = 1.00 of samples, production mix 0.70 (release.quantize.language_mix, "
        "tolerance 0.05): the set must match production traffic"
    )
    assert check_calibration(_samples(300), min_samples=256, language_mix=MIX, tolerance=0.05) == {
        "en": 0.7,
        "ja": 0.3,
    }


def test_another_quantizer_version_is_refused() -> None:
    with pytest.raises(CalibrationError, match=r"^llmcompressor is not installed; the release pins 0.14.0.1$"):
        check_llmcompressor("0.14.0.1")  # the app's environment has none


QUANTIZE_TIMEOUT_S = 900
"""A liveness bound: 8-20 s at a load average of ~2, 160 s at a higher one (module docstring)."""

_needs_llmcompressor = pytest.mark.skipif(
    not LLMC_PYTHON.exists() and not os.environ.get("REQUIRE_LLMCOMPRESSOR"),
    reason=f"{LLMC_PYTHON} is absent: run `make llmcompressor-venv`",
)
_needs_engine = pytest.mark.skipif(engine_missing_reason() is not None, reason=str(engine_missing_reason()))


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The unquantized tiny model and a 64-sample calibration set in the production language mix."""
    if not LLMC_PYTHON.exists():  # only reached with REQUIRE_LLMCOMPRESSOR set (CI)
        pytest.fail(f"REQUIRE_LLMCOMPRESSOR is set but {LLMC_PYTHON} is absent: run `make llmcompressor-venv`")
    root = tmp_path_factory.mktemp("tiny")
    subprocess.run(
        [str(VLLM_PYTHON), str(REPO / "benchmarks" / "synthetic_model.py"), "--preset", "tiny", "--dest", str(root)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (root / "calibration.jsonl").write_text(
        "".join(
            json.dumps({"messages": [{"role": "user", "content": f"manga volume {i}"}], "lang": s["lang"]}) + "\n"
            for i, s in enumerate(_samples(64))
        )
    )
    return root


SCHEMES = ("W4A16", "W8A8")
"""``release.quantize.scheme``'s values (app_config/release.py)."""


@pytest.fixture(scope="module")
def releases(tiny_checkpoint: Path) -> dict[str, Path]:
    """The release's quantize step (its CLI, llm-compressor's venv) on the tiny model in each scheme,
    both at once (one core each): scheme -> the checkpoint folder (``<root>/base``)."""
    running = {}
    for scheme in SCHEMES:
        out = tiny_checkpoint / scheme / "base"
        argv = [
            str(LLMC_PYTHON), "-m", "cdk_constructs.release.runtime.quantize", "--model-dir",
            str(tiny_checkpoint / "base"), "--calibration", str(tiny_checkpoint / "calibration.jsonl"),
            "--out-dir", str(out), "--scheme", scheme, "--samples", "64", "--min-samples", "64",
            "--language-mix", json.dumps(MIX), "--language-tolerance", "0.05", "--max-sequence-length", "64",
            "--llmcompressor-version", "0.14.0.1",
        ]  # fmt: skip
        shim = str(REPO / "tests" / "release" / "llmc_shim")
        running[scheme] = subprocess.Popen(
            argv,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": shim},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    for scheme, process in running.items():
        _, stderr = process.communicate(timeout=QUANTIZE_TIMEOUT_S)
        assert process.returncode == 0, f"{scheme}: {stderr[-2000:]}"
    return {scheme: tiny_checkpoint / scheme / "base" for scheme in SCHEMES}


def _provenance(checkpoint: Path) -> tuple[str, str, int]:
    provenance = json.loads((checkpoint / "release_provenance.json").read_text())
    return provenance["llmcompressor"], provenance["scheme"], provenance["calibration_samples"]


@pytest.mark.real_engine  # after the other tests (tests/engine/conftest.py): not beside the gateways' start
@_needs_llmcompressor
@_needs_engine
def test_a_w4a16_release_is_what_vllms_own_config_and_weight_loaders_load(releases: dict[str, Path]) -> None:
    """The production scheme (AWQ INT4, group 128), checked as far as the CPU build can on any host:
    vLLM reads its ``quantization_config``, picks the W4A16 scheme for every linear layer, loads every
    tensor through its weight loaders and repacks it for its kernel (tests/release/vllm_load_check.py).
    Serving it needs ``cpu_gemm_wna16``, which only the AVX-512 kernel libraries have (issue 44: an
    AVX2-only runner failed); where the host's library has it, one quantized layer also runs."""
    checkpoint = releases["W4A16"]
    assert _provenance(checkpoint) == ("0.14.0.1", "W4A16", 64)
    quantization = json.loads((checkpoint / "config.json").read_text())["quantization_config"]
    weights = quantization["config_groups"]["group_0"]["weights"]
    assert (weights["num_bits"], weights["group_size"], weights["symmetric"]) == (4, 128, False)
    done = subprocess.run(
        [str(VLLM_PYTHON), str(REPO / "tests" / "release" / "vllm_load_check.py"), str(checkpoint)],
        env={**os.environ, **ENGINE_ENV, "PYTHONPATH": str(SHIM)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, explain_exit([*done.stdout.splitlines(), *done.stderr.splitlines()])
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert loaded["quantization"] == "compressed-tensors"
    w4a16 = {"scheme": "CompressedTensorsWNA16", "kernel": "CPUWNA16LinearKernel"}
    w4a16 |= {"num_bits": "4", "group_size": "128", "symmetric": "False"}
    assert loaded["schemes"] == dict.fromkeys(("qkv_proj", "o_proj", "gate_up_proj", "down_proj"), w4a16)
    if loaded["cpu_gemm_wna16"]:
        assert loaded["forward_finite"] is True
    else:  # the one library without the GEMM: an AVX2 host (or ENGINE_SHIM_CPU_ISA=avx2)
        assert loaded["kernel_library"] == ["_C_AVX2.abi3.so"], loaded


@pytest.mark.real_engine
@_needs_llmcompressor
@_needs_engine
def test_a_w8a8_release_is_served_by_the_real_engine_on_avx2_and_avx512_alike(releases: dict[str, Path]) -> None:
    """The release's other scheme (SmoothQuant + GPTQ INT8): its GEMM (oneDNN's, ``onednn_scaled_mm``)
    is in every kernel library of the CPU build, so the container serves the quantize step's output on
    any runner, through ``/invocations`` with the release's version header."""
    checkpoint = releases["W8A8"]
    assert _provenance(checkpoint) == ("0.14.0.1", "W8A8", 64)
    (checkpoint.parent / "adapters").mkdir()
    versions = {"MODEL_VERSIONS": json.dumps({"base": "v2/" + "f" * 64})}
    gateway = RealGateway(checkpoint.parent, env={"LORA_ADAPTERS": "", **versions})
    try:
        gateway.wait_ready(timeout_s=600)
        answer = httpx.post(
            gateway.url + "/invocations",
            json={"model": "base", "messages": [{"role": "user", "content": "manga"}], "max_tokens": 4},
            timeout=120,
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-amzn-sagemaker-custom-attributes"] == "base_model=base/v2/" + "f" * 64
        # vLLM's own line (compressed_tensors schemes, the INT8 kernel on CPU), in the engine's stdout.
        wait_for_line(gateway.log_lines, "Selected CPUInt8ScaledMMLinearKernel", "W8A8Int8", timeout_s=10)
    finally:
        gateway.stop()
