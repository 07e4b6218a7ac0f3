"""The quantize step: seed 000's calibration gotchas (here, always), and llm-compressor on a tiny checkpoint
that the real CPU engine then serves (where ``.venv-llmcompressor`` exists; CI builds it and sets
``REQUIRE_LLMCOMPRESSOR``, which makes its absence a failure rather than a skip).

Make that environment with ``make llmcompressor-venv`` (requirements-llmcompressor.txt: 53-91 s, 1.5 GB).

Measured on the shared 2-core machine: 64 calibration samples quantized the 2-layer tiny model (W4A16, AWQ)
in 8-20 s at a load average of ~2 (2026-11-26 08:08-08:10), 160 s at a higher load earlier that day; the
container started vLLM 0.22.0's CPU build on the result in ~50 s (112 s under load) and answered. The whole
test: 60 s at a load average of ~2.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from cdk_constructs.release.runtime.quantize import CalibrationError, check_calibration, check_llmcompressor
from tests.engine.real_engine import VLLM_PYTHON, RealGateway, engine_missing_reason

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


@pytest.mark.real_engine  # after the other tests (tests/engine/conftest.py): not beside the gateways' start
@pytest.mark.skipif(
    not LLMC_PYTHON.exists() and not os.environ.get("REQUIRE_LLMCOMPRESSOR"),
    reason=f"{LLMC_PYTHON} is absent: run `make llmcompressor-venv`",
)
@pytest.mark.skipif(engine_missing_reason() is not None, reason=str(engine_missing_reason()))
def test_a_tiny_checkpoint_quantized_by_llm_compressor_is_served_by_the_real_engine(tmp_path: Path) -> None:
    if not LLMC_PYTHON.exists():  # only reached with REQUIRE_LLMCOMPRESSOR set (CI)
        pytest.fail(f"REQUIRE_LLMCOMPRESSOR is set but {LLMC_PYTHON} is absent: run `make llmcompressor-venv`")
    subprocess.run(
        [
            str(VLLM_PYTHON),
            str(REPO / "benchmarks" / "synthetic_model.py"),
            "--preset",
            "tiny",
            "--dest",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    calibration = tmp_path / "calibration.jsonl"
    calibration.write_text(
        "".join(
            json.dumps({"messages": [{"role": "user", "content": f"manga volume {i}"}], "lang": s["lang"]}) + "\n"
            for i, s in enumerate(_samples(64))
        )
    )
    root = tmp_path / "served"
    argv = [
        str(LLMC_PYTHON), "-m", "cdk_constructs.release.runtime.quantize", "--model-dir", str(tmp_path / "base"),
        "--calibration", str(calibration), "--out-dir", str(root / "base"), "--scheme", "W4A16",
        "--samples", "64", "--min-samples", "64", "--language-mix", json.dumps(MIX), "--language-tolerance", "0.05",
        "--max-sequence-length", "64", "--llmcompressor-version", "0.14.0.1",
    ]  # fmt: skip
    shim = str(REPO / "tests" / "release" / "llmc_shim")
    done = subprocess.run(
        argv, cwd=REPO, env={**os.environ, "PYTHONPATH": shim}, capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    provenance = json.loads((root / "base" / "release_provenance.json").read_text())
    assert (provenance["llmcompressor"], provenance["scheme"], provenance["calibration_samples"]) == (
        "0.14.0.1",
        "W4A16",
        64,
    )
    quantization = json.loads((root / "base" / "config.json").read_text())["quantization_config"]
    weights = quantization["config_groups"]["group_0"]["weights"]
    assert (weights["num_bits"], weights["group_size"], weights["symmetric"]) == (4, 128, False)
    (root / "adapters").mkdir()
    gateway = RealGateway(root, env={"LORA_ADAPTERS": "", "MODEL_VERSIONS": json.dumps({"base": "v2/" + "f" * 64})})
    try:
        gateway.wait_ready(timeout_s=600)
        import httpx

        answer = httpx.post(
            gateway.url + "/invocations",
            json={"model": "base", "messages": [{"role": "user", "content": "manga"}], "max_tokens": 4},
            timeout=120,
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-amzn-sagemaker-custom-attributes"] == "base_model=base/v2/" + "f" * 64
    finally:
        gateway.proc.terminate()
        gateway.proc.wait(timeout=60)
