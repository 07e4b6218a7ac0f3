"""The validate step on tiny random-weight Llama checkpoints and PEFT adapters made at test time.

The step runs in the tools image (the serving image's environment: torch, safetensors, transformers);
here it runs under ``.venv-vllm``, which is that environment's pinned copy.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.engine.real_engine import VLLM_PYTHON

REPO = Path(__file__).resolve().parents[2]
BASE = "llama-3-8b-instruct-awq"

pytestmark = pytest.mark.skipif(
    not VLLM_PYTHON.exists() and not os.environ.get("REQUIRE_REAL_ENGINE"),
    reason=f"{VLLM_PYTHON} is absent: run container/scripts/install_vllm_venv.sh",
)

MAKE = """
import json, sys
from pathlib import Path
from synthetic_model import PRESETS, make_model, write_lora_adapter
root = Path(sys.argv[1])
make_model(root, PRESETS["tiny"])
trained_on = "s3://bucket/base-models/llama-3-8b-instruct-awq/v2"
write_lora_adapter(root / "adapters" / "manga_domain_v3", PRESETS["tiny"], rank=16, base_model=trained_on)
write_lora_adapter(root / "adapters" / "jp_style_v1", PRESETS["tiny"], rank=16, seed=2, base_model=trained_on)
write_lora_adapter(root / "wide" / "general_support_v2", PRESETS["tiny"], rank=32, base_model=trained_on)
write_lora_adapter(root / "old" / "general_support_v2", PRESETS["tiny"], rank=16, base_model="s3://b/base-models/llama-3-8b-instruct-awq/v1")
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    subprocess.run(
        [str(VLLM_PYTHON), "-c", MAKE, str(root)],
        env={**os.environ, "PYTHONPATH": str(REPO / "benchmarks")},
        check=True,
        capture_output=True,
        timeout=300,
    )
    return root


def _validate(model: Path, adapters: Path | None, out: Path, *, max_lora_rank: int = 16) -> tuple[int, list[str]]:
    argv = [
        str(VLLM_PYTHON),
        "-m",
        "cdk_constructs.release.runtime.validate",
        "--model-dir",
        str(model),
        "--max-lora-rank",
        str(max_lora_rank),
        "--base-name",
        BASE,
        "--base-version",
        "v2",
        "--report-dir",
        str(out),
    ]
    if adapters is not None:
        argv += ["--adapters-dir", str(adapters)]
    done = subprocess.run(
        argv,
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    report = json.loads((out / "validation.json").read_text())
    assert report["lines"] == done.stdout.splitlines()[:-1]
    return done.returncode, report["lines"]


def test_a_loadable_base_with_fitting_adapters_passes(tiny: Path, tmp_path: Path) -> None:
    code, lines = _validate(tiny / "base", tiny / "adapters", tmp_path)
    assert code == 0, lines
    assert "ok   base model.safetensors: 21 tensors" in lines
    assert "ok   base config.json: llama, 2 layers, none" in lines
    assert any(line.startswith("ok   base tokenizer: ") for line in lines)
    assert "ok   adapter manga_domain_v3: r = 16 <= engine.max_lora_rank = 16" in lines
    assert "ok   adapter jp_style_v1: trained on llama-3-8b-instruct-awq v2" in lines
    assert "ok   adapter jp_style_v1: 28 LoRA tensors fit the base at r = 16" in lines


def test_an_adapter_above_max_lora_rank_fails_with_both_numbers(tiny: Path, tmp_path: Path) -> None:
    code, lines = _validate(tiny / "base", tiny / "wide", tmp_path)
    assert code == 1
    assert "FAIL adapter general_support_v2: r = 32 > engine.max_lora_rank = 16; vLLM refuses to load it" in lines


def test_an_adapter_trained_on_another_base_version_fails(tiny: Path, tmp_path: Path) -> None:
    code, lines = _validate(tiny / "base", tiny / "old", tmp_path)
    assert code == 1
    assert (
        "FAIL adapter general_support_v2: trained on base_model_name_or_path = "
        "'s3://b/base-models/llama-3-8b-instruct-awq/v1', revision = None; this release's base is "
        "llama-3-8b-instruct-awq v2 (retrain it on this base, or set revision when it was)"
    ) in lines


def test_unknown_target_modules_and_a_wrong_tensor_shape_fail(tiny: Path, tmp_path: Path) -> None:
    bad = tmp_path / "adapters" / "manga_domain_v3"
    bad.mkdir(parents=True)
    source = tiny / "adapters" / "manga_domain_v3"
    (bad / "adapter_model.safetensors").write_bytes((source / "adapter_model.safetensors").read_bytes())
    config = json.loads((source / "adapter_config.json").read_text())
    (bad / "adapter_config.json").write_text(json.dumps({**config, "target_modules": ["q_proj", "qkv_proj"], "r": 8}))
    code, lines = _validate(tiny / "base", tmp_path / "adapters", tmp_path / "out")
    assert code == 1
    assert any(
        line.startswith("FAIL adapter manga_domain_v3: target_modules ['qkv_proj'] are not linear layers")
        for line in lines
    )
    assert any(
        line.startswith("FAIL adapter manga_domain_v3: 28 LoRA tensor(s) do not fit the base, e.g. ") for line in lines
    )


def test_a_base_without_weights_or_tokenizer_fails_each_check(tiny: Path, tmp_path: Path) -> None:
    broken = tmp_path / "base"
    broken.mkdir()
    (broken / "config.json").write_text((tiny / "base" / "config.json").read_text())
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    code, lines = _validate(broken, None, tmp_path / "out")
    assert code == 1
    assert lines[0].startswith("FAIL base model.safetensors: not a readable safetensors file (")
    assert lines[1] == "ok   base config.json: llama, 2 layers, none"
    assert lines[2].startswith("FAIL base tokenizer: does not load (")
