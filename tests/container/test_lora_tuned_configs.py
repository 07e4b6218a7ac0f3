"""``LORA_TUNED_CONFIG_DIR`` reaches vLLM 0.26.0 as ``VLLM_TUNED_CONFIG_FOLDER`` and vLLM reads it.

The folder is the tuner's real output from an H200 (``benchmarks/lora_tune.py``, committed under
``benchmarks/results/h200-2026-11-26-lora-levers/``). vLLM's CPU build runs no Triton kernel, so
the check calls vLLM's own config lookup (``vllm/lora/ops/triton_ops/utils.py``
``get_lora_op_configs``, what every LoRA kernel launch calls) in the engine's environment, with
the GPU name it keys the files by set to the H200's. The folder reaches vLLM either by hand
(``LORA_TUNED_CONFIG_DIR``) or from a loaded compile cache, whose job tuned it
(``lora-configs/``, issue 35).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from serving_app.engine import compile_cache
from serving_app.settings import Settings
from serving_app.vllm_args import TUNED_CONFIG_FOLDER, engine_environment
from serving_contract import compile_cache as contract
from tests.container.conftest import REPO
from tests.container.vllm_parser import VLLM_PYTHON

pytestmark = pytest.mark.skipif(
    not VLLM_PYTHON.exists() and not os.environ.get("REQUIRE_VLLM_CONTRACT"),
    reason=f"{VLLM_PYTHON} is absent: run container/scripts/install_vllm_venv.sh",
)

TUNER_OUTPUT = REPO / "benchmarks" / "results" / "h200-2026-11-26-lora-levers"

LOOKUP = """
import json, sys, torch
from vllm.lora.ops.triton_ops import utils
answers = {}
for gpu_name in sys.argv[1:]:  # one vLLM import for every GPU name (~12 s each on 2 cores)
    torch.cuda.get_device_name = lambda *args: gpu_name  # the name vLLM keys the files by
    # Both lookups are lru_caches keyed without the GPU name: forget the previous name's answers.
    utils.load_lora_op_config.cache_clear()
    utils.get_lora_op_configs.cache_clear()
    # A 2,040-token prefill through the down projection (k = 14336) and the gate_up expand, max_loras 3.
    shrink = utils.get_lora_op_configs("shrink", max_loras=4, batch=2040, hidden_size=14336, rank=16, num_slices=1)
    expand = utils.get_lora_op_configs(
        "expand", max_loras=4, batch=2040, hidden_size=14336, rank=16, num_slices=2, add_inputs=True
    )
    answers[gpu_name] = {"shrink": shrink, "expand": expand}
print(json.dumps(answers))
"""


def lookup(environ: dict[str, str], *gpu_names: str) -> tuple[dict[str, dict[str, dict[str, object]]], str]:
    """vLLM's configs for each GPU name (name -> {"shrink": ..., "expand": ...}), and its log."""
    done = subprocess.run(
        [str(VLLM_PYTHON), "-c", LOOKUP, *gpu_names],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    # vLLM logs to stdout; the lookup's answer is the last line.
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stdout + done.stderr


def test_the_tuned_folder_is_passed_to_vllm_and_read(tmp_path: Path) -> None:
    folder = tmp_path / "lora-configs"
    folder.mkdir()
    for name in ("NVIDIA_H200_SHRINK.json", "NVIDIA_H200_EXPAND_TRUE.json"):
        (folder / name).write_text((TUNER_OUTPUT / name).read_text())
    settings = Settings.from_env({"LORA_ADAPTERS": "manga_domain_v3", "LORA_TUNED_CONFIG_DIR": str(folder)})
    environ = engine_environment(settings, dict(os.environ))
    assert environ[TUNED_CONFIG_FOLDER] == str(folder)

    found, log = lookup(environ, "NVIDIA H200", "NVIDIA A10G")
    configs = found["NVIDIA H200"]
    table = json.loads((folder / "NVIDIA_H200_SHRINK.json").read_text())
    # The tuner writes one prefill config under batch key 128; vLLM takes the nearest key.
    assert configs["shrink"] == table["4"]["1"]["128"]["14336"]["16"]
    expand_table = json.loads((folder / "NVIDIA_H200_EXPAND_TRUE.json").read_text())
    assert configs["expand"] == expand_table["4"]["2"]["128"]["16"]["14336"]
    assert f"Using tuned LoRA kernel configs from {folder}/NVIDIA_H200_SHRINK.json" in log

    # Another GPU finds no file of its name and keeps vLLM's defaults (logged, not fatal).
    assert found["NVIDIA A10G"]["shrink"] != configs["shrink"]
    assert f"No LoRA kernel configs found in {folder}/NVIDIA_A10G_SHRINK.json" in log


def test_a_loaded_compile_cache_passes_its_lora_configs_and_vllm_reads_them(tmp_path: Path) -> None:
    """The compile-cache job's output (``lora-configs/`` beside ``vllm-cache/``, made by the job's
    tuning step) as SageMaker downloads it: the container's cache check points vLLM at it."""
    made = tmp_path / "model-data"
    (made / contract.CACHE_SUBDIR).mkdir(parents=True)
    (made / contract.CACHE_SUBDIR / "graph").write_text("compiled")
    folder = made / contract.LORA_CONFIGS_SUBDIR
    folder.mkdir()
    for name in ("NVIDIA_H200_SHRINK.json", "NVIDIA_H200_EXPAND_TRUE.json", "lora-tune.json"):
        (folder / name).write_text((TUNER_OUTPUT / name).read_text())
    manifest = contract.Manifest(
        key="0123456789abcdef",
        status=contract.STATUS_READY,
        files=1,
        lora_configs=2,
        digests=contract.file_digests(made),  # as the job records them (issue 49)
    )
    (made / contract.MANIFEST_NAME).write_text(manifest.to_json())
    settings = Settings.from_env({"LORA_ADAPTERS": "manga_domain_v3"})
    environ = engine_environment(settings, dict(os.environ))
    environ |= {
        contract.COMPILE_CACHE_DIR: str(made),
        contract.COMPILE_CACHE_KEY: manifest.key,
        "VLLM_CACHE_ROOT": str(tmp_path / "root"),
    }
    plan = compile_cache.prepare(environ)
    assert (plan.state, plan.lora_configs) == ("loaded", folder)
    assert environ[TUNED_CONFIG_FOLDER] == str(folder)

    found, log = lookup(environ, "NVIDIA H200")
    table = json.loads((folder / "NVIDIA_H200_SHRINK.json").read_text())
    assert found["NVIDIA H200"]["shrink"] == table["4"]["1"]["128"]["14336"]["16"]
    assert f"Using tuned LoRA kernel configs from {folder}/NVIDIA_H200_SHRINK.json" in log
