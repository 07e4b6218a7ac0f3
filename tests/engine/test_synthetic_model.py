"""The synthetic AWQ checkpoint (what the GPU benchmark loads) has the size the memory plan uses."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from planning.memory_plan import ModelShape, awq_checkpoint_bytes
from tests.engine.real_engine import REPO, VLLM_PYTHON

pytestmark = pytest.mark.real_engine

# A small shape with the AWQ constraints of the real one: every input width a multiple of 128.
SHAPE = {
    "num_hidden_layers": 2,
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1024,
    "max_position_embeddings": 8192,
}

SCRIPT = """
import json, sys
from pathlib import Path
from synthetic_model import LlamaShape, make_model
summary = make_model(Path(sys.argv[1]), LlamaShape(**json.loads(sys.argv[2])), awq=True)
print(json.dumps(summary))
"""


def test_awq_checkpoint_bytes_match_the_plans_formula(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(VLLM_PYTHON), "-c", SCRIPT, str(tmp_path), json.dumps(SHAPE)],
        # The harness the benchmarks share (benchmarks/synthetic_model.py) is imported by module name.
        env={"PYTHONPATH": f"{REPO}:{REPO / 'benchmarks'}"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    written = json.loads(result.stdout.splitlines()[-1])["weights_bytes"]
    shape = ModelShape(**SHAPE, head_dim=64, weights_bytes=0)
    assert written == awq_checkpoint_bytes(shape)
    config = json.loads((tmp_path / "base" / "config.json").read_text())
    assert config["quantization_config"] == {
        "quant_method": "awq",
        "bits": 4,
        "group_size": 128,
        "zero_point": True,
        "version": "gemm",
    }
    # The file holds the tensors plus a small JSON header.
    assert 0 < (tmp_path / "base" / "model.safetensors").stat().st_size - written < 64 * 1024
