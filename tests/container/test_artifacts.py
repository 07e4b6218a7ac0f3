"""The build-time artifact check, run as the Dockerfile runs it (a subprocess, exit code +
one stderr line), against tiny fake model folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.container.conftest import REPO, make_artifacts, write_safetensors


def run_check(root: Path, *extra: str, rank: int = 16) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "container")])}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "serving_app.artifacts",
            "--model-dir",
            str(root / "base"),
            "--adapter-dir",
            str(root / "adapters"),
            "--max-lora-rank",
            str(rank),
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_complete_artifacts_pass(tmp_path: Path) -> None:
    result = run_check(make_artifacts(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "artifact check passed" in result.stdout
    assert "jp_style_v1 (r=16)" in result.stdout


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        (lambda r: (r / "base/config.json").unlink(), "required file config.json is missing"),
        (
            lambda r: (r / "base/tokenizer_config.json").unlink(),
            "required file tokenizer_config.json is missing",
        ),
        (
            lambda r: (r / "base/tokenizer.json").unlink(),
            "tokenizer.json or tokenizer.model is missing",
        ),
        (lambda r: (r / "base/model.safetensors").unlink(), "no *.safetensors weights"),
        (
            lambda r: (r / "base/model.safetensors").write_text(
                "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 123\n"
            ),
            "not a safetensors file",
        ),
        (
            lambda r: (r / "base/model.safetensors.index.json").write_text(
                json.dumps({"weight_map": {"a": "model-00002-of-00002.safetensors"}})
            ),
            "shards listed in the index are missing: model-00002-of-00002.safetensors",
        ),
        (
            lambda r: (r / "adapters/jp_style_v1/adapter_config.json").unlink(),
            "jp_style_v1: required file adapter_config.json is missing",
        ),
        (
            lambda r: (r / "adapters/jp_style_v1/adapter_model.safetensors").unlink(),
            "jp_style_v1: adapter weights are missing",
        ),
        (
            lambda r: (r / "adapters/jp_style_v1/adapter_config.json").write_text('{"r": "16"}'),
            "'r' (LoRA rank) must be a positive integer",
        ),
        (
            lambda r: (r / "base/config.json").write_text("{not json"),
            "config.json: unreadable JSON",
        ),
    ],
)
def test_broken_artifacts_fail_with_one_line(tmp_path: Path, break_it, message: str) -> None:
    root = make_artifacts(tmp_path)
    break_it(root)
    result = run_check(root)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("artifact check failed: ")
    assert message in lines[0]


def test_mixed_ranks_fail(tmp_path: Path) -> None:
    root = make_artifacts(tmp_path, {"a": 16, "b": 32})
    result = run_check(root, rank=64)
    assert result.returncode == 1
    assert "adapters differ in rank (a=r16, b=r32)" in result.stderr


def test_rank_above_max_lora_rank_fails(tmp_path: Path) -> None:
    root = make_artifacts(tmp_path, {"a": 32, "b": 32})
    result = run_check(root, rank=16)
    assert result.returncode == 1
    assert "adapter a has rank 32 > max_lora_rank 16" in result.stderr


def test_named_adapter_must_exist(tmp_path: Path) -> None:
    root = make_artifacts(tmp_path, {"a": 16})
    result = run_check(root, "--adapters", "a,missing")
    assert result.returncode == 1
    assert "missing: adapter folder is missing" in result.stderr


def test_sharded_checkpoint_with_index_passes(tmp_path: Path) -> None:
    root = make_artifacts(tmp_path, {})
    (root / "base/model.safetensors").unlink()
    for shard in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        write_safetensors(root / "base" / shard)
    (root / "base/model.safetensors.index.json").write_text(
        json.dumps(
            {
                "weight_map": {
                    "a": "model-00001-of-00002.safetensors",
                    "b": "model-00002-of-00002.safetensors",
                }
            }
        )
    )
    result = run_check(root)
    assert result.returncode == 0, result.stderr
    assert "adapters: none" in result.stdout
