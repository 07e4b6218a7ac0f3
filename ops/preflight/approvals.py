"""The approvals check: every non-placeholder pin in effect is a model package the release approved (issue 36).

Read-only (ListModelPackages, DescribeModelPackage); see ops/model_packages.py.
"""

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from app_config.root import AppConfig
from ops.exit_codes import ExitCode
from ops.model_packages import approval_problem
from ops.preflight.pins import pins_in_effect
from ops.preflight.report import Finding, error, fail, ok, skip


def check_approvals(config: AppConfig, sagemaker: Any) -> list[Finding]:
    """One FAIL line per pin whose model package is missing or not Approved; one ok line when all are."""
    if not config.release.enabled:
        return [skip("approvals", "release.enabled = false: pins are not checked against the model registry")]
    refs = [ref for ref in pins_in_effect(config) if not ref.placeholder]
    if not refs:
        return [skip("approvals", "no non-placeholder artifact pins in effect")]
    findings = []
    for ref in refs:
        try:
            problem = approval_problem(sagemaker, config, ref)
        except (ClientError, BotoCoreError) as exc:
            findings.append(error("approvals", f"{ref.key}: model registry", exc))
            continue
        if problem is not None:
            findings.append(fail("approvals", problem, ExitCode.PREFLIGHT_ARTIFACTS))
    if not findings:
        findings.append(ok("approvals", f"{len(refs)} pin(s), each an Approved model package"))
    return findings
