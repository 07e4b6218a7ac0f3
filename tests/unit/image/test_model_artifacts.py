"""The pointer digest and the build-time fetch (serving_contract.model_artifacts)."""

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from serving_contract import model_artifacts


def _version(folder: Path) -> Path:
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text('{"r": 16}')
    (folder / "adapter_model.safetensors").write_bytes(bytes(range(256)) * 10)
    (folder / "sub" / "Zeta.txt").write_text("z")
    (folder / "sub" / "alpha.txt").write_text("a")
    return folder


@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="needs coreutils")
def test_digest_equals_the_documented_coreutils_pipeline(tmp_path: Path) -> None:
    folder = _version(tmp_path / "v3")
    shell = subprocess.run(
        "find . -type f -printf '%P\\0' | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum",
        shell=True,
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[0]
    assert model_artifacts.artifact_sha256(folder) == shell


def test_digest_changes_with_bytes_names_and_files(tmp_path: Path) -> None:
    folder = _version(tmp_path / "v3")
    base = model_artifacts.artifact_sha256(folder)
    (folder / "config.json").write_text('{"r": 32}')
    edited = model_artifacts.artifact_sha256(folder)
    (folder / "config.json").rename(folder / "config2.json")
    renamed = model_artifacts.artifact_sha256(folder)
    (folder / "extra").write_text("")
    added = model_artifacts.artifact_sha256(folder)
    assert len({base, edited, renamed, added}) == 4


@pytest.mark.parametrize("text", ["v3", "v3/abc", "/" + "a" * 64, "v3/" + "A" * 64])
def test_bad_pointer_text_is_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="must be '<version>/<64 lowercase hex sha256>'"):
        model_artifacts.parse_pointer(text)


def _fake_s3(store: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []

    def run(argv: list[str], check: bool) -> Any:
        calls.append(argv)
        source, target = argv[-2], argv[-1]
        key = source.removeprefix("s3://bucket/")
        if (store / key).is_dir():
            shutil.copytree(store / key, target)
        return None

    monkeypatch.setattr("serving_contract.model_artifacts.subprocess.run", run)
    return calls


def test_fetch_lays_out_the_model_context_and_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "s3"
    base = _version(store / "base-models" / "llama" / "v1")
    adapter = _version(store / "adapters" / "manga_domain_v3" / "v3")
    calls = _fake_s3(store, monkeypatch)
    pins = {
        "base": f"v1/{model_artifacts.artifact_sha256(base)}",
        "manga_domain_v3": f"v3/{model_artifacts.artifact_sha256(adapter)}",
    }
    model_artifacts.fetch(
        bucket="bucket",
        base_models_prefix="base-models",
        adapters_prefix="adapters",
        base_model="llama",
        pins=pins,
        destination=tmp_path / "ctx",
    )
    assert (tmp_path / "ctx" / "base" / "config.json").is_file()
    assert (tmp_path / "ctx" / "adapters" / "manga_domain_v3" / "sub" / "alpha.txt").is_file()
    assert [c[-2] for c in calls] == ["s3://bucket/base-models/llama/v1/", "s3://bucket/adapters/manga_domain_v3/v3/"]


def test_fetch_fails_on_a_digest_mismatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "s3"
    adapter = _version(store / "adapters" / "jp_style_v1" / "v1")
    actual = model_artifacts.artifact_sha256(adapter)
    _fake_s3(store, monkeypatch)
    pin = "v1/" + "f" * 64
    with pytest.raises(SystemExit) as info:
        model_artifacts.fetch(
            bucket="bucket",
            base_models_prefix="b",
            adapters_prefix="adapters",
            base_model="m",
            pins={"jp_style_v1": pin},
            destination=tmp_path / "ctx",
        )
    assert str(info.value) == (
        f"artifact jp_style_v1: s3://bucket/adapters/jp_style_v1/v1/ has sha256 {actual}, "
        f"but the pin {pin} expects {'f' * 64}"
    )


def test_fetch_fails_on_a_missing_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_s3(tmp_path / "s3", monkeypatch)
    with pytest.raises(SystemExit, match="artifact base: s3://bucket/b/m/v9/ is empty or missing"):
        model_artifacts.fetch(
            bucket="bucket",
            base_models_prefix="b",
            adapters_prefix="a",
            base_model="m",
            pins={"base": "v9/" + "1" * 64},
            destination=tmp_path / "ctx",
        )


def test_digest_of_per_file_digests_equals_the_folder_digest(tmp_path: Path) -> None:
    # preflight rebuilds the digest from S3's per-object SHA-256 checksums through digest_of.
    import hashlib

    folder = _version(tmp_path / "v3")
    per_file = {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*")
        if p.is_file()
    }
    assert model_artifacts.digest_of(per_file) == model_artifacts.artifact_sha256(folder)
    assert model_artifacts.manifest_of(per_file).splitlines()[-1].endswith("  sub/alpha.txt")  # byte order: Z < a
