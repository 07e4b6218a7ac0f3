"""The compile cache's manifest as the job writes it and the container reads it: its digests (issue 49)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from serving_contract import compile_cache as contract

SHA = "d" * 64


def test_digests_cover_every_file_of_the_verified_folders_and_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "vllm-cache" / "a").mkdir(parents=True)
    (tmp_path / "vllm-cache" / "a" / "graph.py").write_text("x = 1")
    (tmp_path / "lora-configs").mkdir()
    (tmp_path / "lora-configs" / "GPU_SHRINK.json").write_text("{}")
    (tmp_path / "manifest.json").write_text("{}")  # the manifest itself is pinned, not listed
    (tmp_path / "stray.txt").write_text("not loaded by anything")
    assert contract.file_digests(tmp_path) == {
        "lora-configs/GPU_SHRINK.json": hashlib.sha256(b"{}").hexdigest(),
        "vllm-cache/a/graph.py": hashlib.sha256(b"x = 1").hexdigest(),
    }


def test_a_symbolic_link_in_a_cache_is_refused(tmp_path: Path) -> None:
    (tmp_path / "vllm-cache").mkdir()
    (tmp_path / "vllm-cache" / "link").symlink_to("/etc/passwd")
    with pytest.raises(ValueError, match=r"^vllm-cache/link is a symbolic link$"):
        contract.file_digests(tmp_path)


@pytest.mark.parametrize(
    ("digests", "message"),
    [
        ([], "manifest.json digests must be an object of path to sha256"),
        (
            {"../etc/passwd": SHA},
            "manifest.json digests: '../etc/passwd' is not a file under ('vllm-cache', 'lora-configs')",
        ),
        ({"vllm-cache/../x": SHA}, "manifest.json digests: 'vllm-cache/../x' is not a file under"),
        ({"other/x": SHA}, "manifest.json digests: 'other/x' is not a file under"),
        ({"vllm-cache/x": "0" * 63}, "manifest.json digests: 'vllm-cache/x' has no sha256 (64 hex characters)"),
    ],
)
def test_a_manifest_with_bad_digests_is_refused_in_one_line(digests: object, message: str) -> None:
    text = json.dumps({"key": "0123456789abcdef", "status": "ready", "digests": digests})
    with pytest.raises(contract.ManifestError) as raised:
        contract.Manifest.from_json(text)
    assert str(raised.value).startswith(message)


def test_the_manifests_pin_is_the_sha256_of_its_bytes() -> None:
    manifest = contract.Manifest(key="0123456789abcdef", status="ready", digests={"vllm-cache/x": SHA})
    text = manifest.to_json().encode()
    assert contract.Manifest.from_json(text.decode()) == manifest
    assert contract.manifest_sha256(text) == hashlib.sha256(text).hexdigest()
