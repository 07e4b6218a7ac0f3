"""The client package stands on its own: boto3 is its only dependency, it imports nothing of the app, and it
runs in an interpreter that holds only it and boto3's own dependencies."""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "client"
PACKAGE = CLIENT / "mangaassist_client"
BOTO3_CLOSURE = ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "urllib3", "six")
"""boto3 and what it needs (boto3's and botocore's own requirements: s3transfer, jmespath, python-dateutil
with six, urllib3)."""


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_package_imports_only_the_standard_library_and_boto3() -> None:
    """boto3, botocore, and urllib3, botocore's HTTP layer: an event stream raises urllib3's own timeout and
    connection errors, which the client sorts (errors.classify)."""
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) >= 10  # not an empty glob
    allowed = {"mangaassist_client", "boto3", "botocore", "urllib3"}
    for path in modules:
        outside = _imported_roots(path) - set(sys.stdlib_module_names) - allowed
        assert not outside, f"{path.relative_to(REPO)} imports {sorted(outside)}"


def test_its_only_dependency_is_boto3_at_the_version_the_repo_tests() -> None:
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    app = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    (pin,) = [d for d in app["dependencies"] if d.startswith("boto3==")]
    assert project["dependencies"] == [pin.replace("==", ">=")]
    assert project["requires-python"] == app["requires-python"]


def test_it_runs_with_only_boto3_beside_it(tmp_path: Path) -> None:
    """A fresh virtualenv (no pip, no site-packages of ours) that sees only the package and boto3's closure:
    an import of anything else, the app's packages included, fails here."""
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    libs = tmp_path / "libs"
    libs.mkdir()
    for name in BOTO3_CLOSURE:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name
        origin = Path(spec.origin)
        source = origin.parent if origin.name == "__init__.py" else origin
        (libs / source.name).symlink_to(source)
    (libs / "mangaassist_client").symlink_to(PACKAGE)
    (site / "only.pth").write_text(f"{libs}\n")
    script = (
        "import json, mangaassist_client as m, sys; "
        "c = m.MangaAssistClient(m.ClientConfig(m.SageMakerEndpoint('e', region='us-east-1')), metrics=m.NullSink()); "
        "apps = [n for n in ('serving_contract', 'app_config', 'ops', 'cli_support') if n in sys.modules]; "
        "print(json.dumps([c.backends[0].name, apps]))"
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    run = subprocess.run([python, "-c", script], cwd=tmp_path, env=environ, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == '["sagemaker:e", []]'


def test_its_source_distribution_holds_the_package_and_names_boto3(tmp_path: Path) -> None:
    """The package's build backend (setuptools' PEP 517 hooks) builds it with no index, in a copy of the folder
    (the build writes its egg-info beside the sources). A wheel would need the ``wheel`` package beside this
    setuptools (65.5, Python 3.11's venv); a 3.12+ venv has no setuptools at all: then the test says so."""
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("setuptools is not in this interpreter's environment (Python 3.12+ venvs have none)")
    source = tmp_path / "client"
    shutil.copytree(CLIENT, source, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    hook = f"from setuptools import build_meta; print(build_meta.build_sdist({str(tmp_path)!r}))"
    build = subprocess.run([sys.executable, "-c", hook], cwd=source, capture_output=True, text=True, check=False)
    assert build.returncode == 0, build.stderr[-2000:]
    archive_name = build.stdout.strip().splitlines()[-1]
    with tarfile.open(tmp_path / archive_name) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
        requires = archive.extractfile(
            f"{archive_name.removesuffix('.tar.gz')}/mangaassist_client.egg-info/requires.txt"
        )
        assert requires is not None
        dependencies = requires.read().decode().split()
    assert {"mangaassist_client/py.typed", "mangaassist_client/client.py", "pyproject.toml"} <= names
    assert not any(name.startswith(("tests", "serving_contract", "app_config")) for name in names)
    assert dependencies == ["boto3>=1.44.5"]
