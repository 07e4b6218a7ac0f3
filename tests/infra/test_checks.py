"""cfn-lint and cdk-nag over every synthesized template."""

import hashlib
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import ManualArgs, lint_by_config

from cdk_constructs.common.nag_report import findings, format_validation_failure
from tests.synth_helpers import Synth


def _template_files(synth: Synth) -> list[Path]:
    files = sorted(synth.outdir.glob("*.template.json"))
    assert files, f"no templates in {synth.outdir}"
    return files


def test_cfn_lint_finds_no_errors_or_warnings(
    all_synths: list[Synth], vpc_single_variant_synth: Synth, extra_synths: list[Synth]
) -> None:
    # Many configs share identical templates (e.g. the ECR stack): lint each distinct one once,
    # all in one cfn-lint run (its rule loading dominates a per-file run).
    distinct: dict[str, Path] = {}
    for synth in [*all_synths, vpc_single_variant_synth, *extra_synths]:
        for template in _template_files(synth):
            distinct.setdefault(hashlib.sha256(template.read_bytes()).hexdigest(), template)
    matches = lint_by_config(ManualArgs(templates=[str(path) for path in distinct.values()]))
    assert [f"{m.filename}: {m}" for m in matches] == []


def test_cdk_nag_report_is_clean(
    all_synths: list[Synth], vpc_single_variant_synth: Synth, extra_synths: list[Synth]
) -> None:
    for synth in [*all_synths, vpc_single_variant_synth, *extra_synths]:
        assert findings(synth.outdir) == []


def test_cdk_nag_fails_synth_on_an_unacknowledged_finding(tmp_path: Path) -> None:
    # Proves the plugin is live: the same registration as build_app, on a non-compliant bucket.
    app = cdk.App(outdir=str(tmp_path))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    s3.Bucket(cdk.Stack(app, "Probe"), "Unencrypted")
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    summary = format_validation_failure(tmp_path)
    assert "AwsSolutions-S1: Probe/Unencrypted/Resource" in summary
    assert "AwsSolutions-S10: Probe/Unencrypted/Resource" in summary
