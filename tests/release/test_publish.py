"""The publish step (issue 53, finding 14): the quantized checkpoint reaches its version folder only as the copy
Validate validated, after the gates; a copy that differs, or nothing to copy, publishes nothing."""

from pathlib import Path

import pytest

from cdk_constructs.release.runtime.model_artifacts import artifact_sha256
from cdk_constructs.release.runtime.publish import main


def _checkpoint(root: Path) -> Path:
    source = root / "scratch"
    (source / "shards").mkdir(parents=True)
    (source / "config.json").write_text('{"quantization_config": {"bits": 4}}')
    (source / "shards" / "model.safetensors").write_bytes(b"\x00\x01" * 512)
    return source


def test_the_checkpoint_validated_is_copied_with_every_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, out = _checkpoint(tmp_path), tmp_path / "out"
    digest = artifact_sha256(source)
    assert main(["--source-dir", str(source), "--out-dir", str(out), "--sha256", digest]) == 0
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "config.json",
        "shards/model.safetensors",
    ]
    assert artifact_sha256(out) == digest
    assert capsys.readouterr().out == f"ok   published {digest}\n"


def test_a_copy_that_is_not_what_validate_validated_exits_1_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _checkpoint(tmp_path)
    validated = artifact_sha256(source)
    (source / "config.json").write_text("{}")  # changed in the scratch folder after Validate read it
    assert main(["--source-dir", str(source), "--out-dir", str(tmp_path / "out"), "--sha256", validated]) == 1
    assert list((tmp_path / "out").iterdir()) == []  # nothing for SageMaker to upload
    err = capsys.readouterr().err
    assert err.startswith("FAIL publish: the copy in ") and err.endswith(f"but Validate validated {validated}\n")


def test_nothing_to_publish_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert (
        main(["--source-dir", str(tmp_path / "empty"), "--out-dir", str(tmp_path / "out"), "--sha256", "0" * 64]) == 2
    )
    assert capsys.readouterr().err == f"FAIL publish: {tmp_path / 'empty'}: no checkpoint to publish\n"
