"""checkov, an IaC scanner independent of cdk-nag, over every synthesized template (issue 22 item 10).

checkov runs from its own virtualenv (``.venv-checkov``, ``make setup``; version in
``requirements-checkov.txt``) because its pins clash with the app's dev dependencies. Accepted
findings are acknowledged next to their resource with :func:`cdk_constructs.common.nag.checkov_skip`,
which writes the ``Metadata.checkov.skip`` entries checkov's CloudFormation runner reads.
"""

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.synth_helpers import REPO, Synth, distinct_templates

CHECKOV = REPO / ".venv-checkov" / "bin" / "checkov"

pytestmark = pytest.mark.skipif(
    not CHECKOV.exists() and not os.environ.get("REQUIRE_CHECKOV"),
    reason=f"{CHECKOV} is absent: run `make setup` (installs requirements-checkov.txt into .venv-checkov)",
)


def _run_checkov(directory: Path, *, quiet: bool = True) -> list[dict[str, Any]]:
    """One checkov run over ``directory``; returns its CloudFormation report(s).

    ``quiet`` reports failed checks only (no passed or skipped lists).
    """
    if not CHECKOV.exists():  # only reached with REQUIRE_CHECKOV set (CI)
        pytest.fail(f"REQUIRE_CHECKOV is set but {CHECKOV} is absent: run `make setup`")
    # --skip-download: no call to Prisma Cloud for guidelines (no network in tests or CI).
    args = ["-d", str(directory), "--framework", "cloudformation", "-o", "json", "--skip-download"]
    result = subprocess.run(
        [str(CHECKOV), *args, *(["--quiet"] if quiet else [])],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    # Exit status 1 means "failed checks"; anything else but 0 is checkov itself failing.
    assert result.returncode in {0, 1}, f"checkov exited {result.returncode}: {result.stderr[-2000:]}"
    report = json.loads(result.stdout)
    return report if isinstance(report, list) else [report]


def _failures(reports: list[dict[str, Any]]) -> list[str]:
    failed = [check for report in reports for check in report.get("results", {}).get("failed_checks", [])]
    return sorted(
        f"{check['check_id']} {check['resource']} {Path(check['file_path']).name}: {check['check_name']}"
        for check in failed
    )


def test_checkov_finds_nothing_unacknowledged(
    all_synths: list[Synth],
    vpc_single_variant_synth: Synth,
    extra_synths: list[Synth],
    tmp_path: Path,
) -> None:
    # The same stages and modes as cfn-lint and cdk-nag (tests/infra/test_checks.py); identical
    # templates (e.g. the ECR stack) are scanned once, in one checkov run.
    origin = distinct_templates([*all_synths, vpc_single_variant_synth, *extra_synths], tmp_path)
    reports = _run_checkov(tmp_path)
    summary = [report.get("summary", {}) for report in reports]
    assert sum(part.get("passed", 0) for part in summary) > 0, f"checkov checked nothing: {summary}"
    failures = _failures(reports)
    assert not failures, (
        f"{len(failures)} unacknowledged checkov finding(s) (check id, resource, template); fix each or "
        "acknowledge it next to its resource with cdk_constructs.common.nag.checkov_skip:\n"
        + "\n".join(failures)
        + f"\nscanned: {sorted(set(origin.values()))}"
    )


def test_checkov_reads_the_acknowledgement_metadata(tmp_path: Path) -> None:
    # Proves the scanner is live and that the helper's metadata shape is the one checkov honours:
    # the same unencrypted, unversioned bucket fails without it and is skipped with it.
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3

    from cdk_constructs.common.nag import checkov_skip

    app = cdk.App(outdir=str(tmp_path / "out"))
    stack = cdk.Stack(app, "Probe")
    plain = s3.Bucket(stack, "Plain")
    acknowledged = s3.Bucket(stack, "Acknowledged")
    checkov_skip(acknowledged, "CKV_AWS_21", "probe: versioning is not wanted here")
    app.synth()
    scan = tmp_path / "scan"
    scan.mkdir()
    (scan / "Probe.template.json").write_bytes((tmp_path / "out" / "Probe.template.json").read_bytes())
    reports = _run_checkov(scan, quiet=False)
    failed = {(c["check_id"], c["resource"]) for r in reports for c in r["results"]["failed_checks"]}
    skipped = [c for r in reports for c in r["results"]["skipped_checks"]]
    plain_id = stack.get_logical_id(plain.node.default_child)  # type: ignore[arg-type]
    acknowledged_id = stack.get_logical_id(acknowledged.node.default_child)  # type: ignore[arg-type]
    assert ("CKV_AWS_21", f"AWS::S3::Bucket.{plain_id}") in failed
    assert ("CKV_AWS_21", f"AWS::S3::Bucket.{acknowledged_id}") not in failed
    assert [(c["check_id"], c["check_result"]["suppress_comment"]) for c in skipped] == [
        ("CKV_AWS_21", "probe: versioning is not wanted here")
    ]
