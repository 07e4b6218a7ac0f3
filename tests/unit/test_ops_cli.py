"""The entry point and the documented exit codes stay in step with the code."""

import re
import subprocess
import sys
import tomllib

from ops.exit_codes import ExitCode


def test_exit_codes_table_in_docs_matches_the_enum(repo_root):
    text = (repo_root / "docs" / "operations.md").read_text()
    documented = {int(code) for code in re.findall(r"^\| (\d) \|", text, flags=re.MULTILINE)}
    assert documented == {int(code) for code in ExitCode}


def test_console_script_points_at_main(repo_root):
    project = tomllib.loads((repo_root / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["mangaassist-ops"] == "ops.cli:main"


def test_python_dash_m_ops_runs(repo_root):
    result = subprocess.run(
        [sys.executable, "-m", "ops", "--help"], cwd=repo_root, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert "usage: mangaassist-ops" in result.stdout
    assert "Exit codes: 0 ok, 1 check failed, 2 usage, 3 endpoint not ready, 4 rolled back, 5 AWS error." in (
        " ".join(result.stdout.split())
    )
