"""The README's deploy path (issue 20): `make deploy` runs the preflight before `cdk deploy`, the
foundation goes first, and the quick start links the step-by-step page."""

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _dry_run(target: str) -> list[str]:
    """The commands ``make -n <target>`` would run, setup excluded (it is already done or not needed)."""
    result = subprocess.run(
        ["make", "-n", "-o", "setup", "-o", ".venv/.installed", target, "ARGS=-c stage=dev"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in result.stdout.splitlines() if "cdk " in line or " -m ops " in line]


def test_make_deploy_runs_the_preflight_before_cdk_deploy() -> None:
    commands = _dry_run("deploy")
    assert commands == [
        "npx cdk synth --quiet -c stage=dev",
        ".venv/bin/python -m ops preflight -c stage=dev",
        "npx cdk deploy --all --outputs-file cdk-outputs.json -c stage=dev",
    ]


def test_make_deploy_foundation_deploys_only_the_stacks_that_hold_data() -> None:
    # The foundation's own preflight first (region, credentials, bootstrap), then only the data stacks.
    assert _dry_run("deploy-foundation") == [
        "npx cdk synth --quiet -c stage=dev",
        ".venv/bin/python -m ops preflight --foundation -c stage=dev",
        "npx cdk deploy -c stage=dev --outputs-file cdk-outputs.json '*-ImageRepository' '*-ModelArtifacts'",
    ]


def test_the_quick_start_names_the_deploy_path_and_links_the_deploy_page() -> None:
    readme = (REPO / "README.md").read_text()
    quick_start = readme[readme.index("## Quick start") : readme.index("## Configuration")]
    assert "make deploy-foundation" in quick_start and "make deploy " in quick_start
    assert "(docs/deploy.md)" in quick_start
    deploy_page = (REPO / "docs" / "deploy.md").read_text()
    # Every make target and doc the page sends the reader to exists.
    for target in set(re.findall(r"make ([a-z-]+)", deploy_page)):
        assert re.search(rf"^{target}:", (REPO / "Makefile").read_text(), re.MULTILINE), target
    for link in set(re.findall(r"\]\(([a-z-]+\.md)", deploy_page)):
        assert (REPO / "docs" / link).is_file(), link
