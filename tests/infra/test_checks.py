"""cfn-lint and cdk-nag over every synthesized template."""

from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import lint_file

from devtools.validation_report import findings, format_validation_failure
from tests.synth_helpers import Synth


def _template_files(synth: Synth) -> list[Path]:
    files = sorted(synth.outdir.glob("*.template.json"))
    assert files, f"no templates in {synth.outdir}"
    return files


def test_cfn_lint_finds_no_errors_or_warnings(
    all_synths: list[Synth], vpc_single_variant_synth: Synth, canary_build_synth: Synth, prebuilt_uri_synth: Synth
) -> None:
    problems = []
    for synth in [*all_synths, vpc_single_variant_synth, canary_build_synth, prebuilt_uri_synth]:
        for template in _template_files(synth):
            problems += [f"{template.name}: {m}" for m in lint_file(template)]
    assert problems == []


def test_cdk_nag_report_is_clean(
    all_synths: list[Synth], vpc_single_variant_synth: Synth, canary_build_synth: Synth, prebuilt_uri_synth: Synth
) -> None:
    for synth in [*all_synths, vpc_single_variant_synth, canary_build_synth, prebuilt_uri_synth]:
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
