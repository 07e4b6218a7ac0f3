"""The entry point and the documented exit codes stay in step with the code."""

import re
import subprocess
import sys
import tomllib

from ops.exit_codes import ExitCode


def test_exit_codes_table_in_docs_matches_the_enum(repo_root):
    text = (repo_root / "docs" / "operations.md").read_text()
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", text, flags=re.MULTILINE)}
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
    assert (
        "Exit codes: 0 ok, 1 check failed, 2 usage, 3 endpoint not ready, 4 rolled back, 5 AWS error; preflight: "
        "6 config, 7 account, 8 artifacts, 9 conflict."
    ) in " ".join(result.stdout.split())


def test_preflight_help_documents_every_check_and_exit_code(repo_root):
    result = subprocess.run(
        [sys.executable, "-m", "ops", "preflight", "--help"], cwd=repo_root, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    checks = [line.split()[0] for line in result.stdout.splitlines() if line.startswith("  ") and ": " in line[:26]]
    assert checks[:9] == [
        "pins", "region", "bootstrap", "quotas", "artifacts", "approvals", "image", "endpoint", "log-groups",
    ]  # fmt: skip
    text = " ".join(result.stdout.split())
    for code in ExitCode:
        if ExitCode.AWS_ERROR <= code <= ExitCode.PREFLIGHT_CONFLICT:  # preflight's own; 10-12 are the reports'
            assert f" {int(code)} " in text.split("Exit codes:")[1]


def test_preflight_section_in_docs_lists_every_check(repo_root):
    text = (repo_root / "docs" / "operations.md").read_text()
    section = text.split("## `preflight`")[1].split("\n## ")[0]
    for check in ("pins", "region", "bootstrap", "quotas", "artifacts", "approvals", "image", "endpoint", "log-groups"):
        assert f"| `{check}` |" in section


def test_every_command_registers_its_own_parser_and_handler(repo_root):
    """One convention (issue 55): each command's module adds its subparser and sets its handler; the front end
    only builds the parser from them and calls the handler, with no branch per command."""
    import argparse

    from ops.cli import COMMANDS, build_parser

    (subparsers,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(subparsers.choices) == {
        "smoke",
        "promote",
        "rollback",
        "load",
        "preflight",
        "release",
        "shadow",
        "migrate",
        "throughput",
        "capacity",  # throughput's old name, an alias for one release
    }
    for name, parser in subparsers.choices.items():
        handler = parser.get_default("handler")
        assert callable(handler), name
        assert handler.__module__.startswith("ops.") and handler.__module__ != "ops.cli", (name, handler.__module__)
    assert len(COMMANDS) == 8  # promote and rollback share ops.rollout's register
    assert "args.command" not in (repo_root / "ops" / "cli.py").read_text()


def test_the_old_capacity_command_still_runs_and_says_its_new_name(tmp_path):
    from ops.cli import Deps, main

    lines: list[str] = []
    argv = ["capacity", "measure", "--instance-type", "ml.g6e.xlarge", "--cdk-json", "cdk.json"]
    assert main(argv, Deps(out=lines.append, measure_clients=lambda r, p: None)) == 2  # no --yes: nothing started
    assert lines[0] == "NOTE: `capacity measure` is now `throughput measure`; the old name goes in the next release"
