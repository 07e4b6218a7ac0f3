"""AWS Control Tower's proactive controls (cfn-guard rules) over every synthesized template (issue 39).

Platform teams can turn these controls on as CloudFormation hooks that refuse a non-compliant
stack. The rule files and the cfn-guard binary come from the npm package
``@cdklabs/cdk-validator-cfnguard`` (version pinned in ``package.json``, installed by ``npm ci`` in
``make setup``): nothing is downloaded at test time. Each finding the design keeps is reasoned
next to its resource with :func:`cdk_constructs.common.nag.guard_suppress`; the rule files read no
suppression, so this test drops a finding only where that metadata reasons it (docs/deploy.md
lists those controls for teams that enforce them).
"""

import json
import os
import platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cdk_constructs.common.nag import GUARD_RULES_PACKAGE
from tests.synth_helpers import REPO, Synth, distinct_templates

PACKAGE = REPO / "node_modules" / GUARD_RULES_PACKAGE
RULES = PACKAGE / "rules" / "control-tower" / "cfn-guard"
# The package's own layout (its lib/plugin.js picks the binary the same way): bin/<os>/<arch>/cfn-guard.
_OS = {"Linux": "ubuntu", "Darwin": "macos"}.get(platform.system(), platform.system())
_ARCH = {"x86_64": "x86_64", "AMD64": "x86_64", "arm64": "aarch64", "aarch64": "aarch64"}.get(
    platform.machine(), platform.machine()
)
CFN_GUARD = PACKAGE / "bin" / _OS / _ARCH / "cfn-guard"

pytestmark = pytest.mark.skipif(
    not CFN_GUARD.exists() and not os.environ.get("REQUIRE_CFN_GUARD"),
    reason=f"{CFN_GUARD} is absent: run `make setup` (npm ci installs {GUARD_RULES_PACKAGE})",
)

_CONTROL = re.compile(r"\[(CT\.[A-Z0-9]+\.PR\.\d+)\]")


@dataclass(frozen=True, order=True)
class Finding:
    """One resource that fails one control in one template."""

    control: str  # e.g. CT.LAMBDA.PR.3
    template: str  # file name
    resource: str  # logical id
    rule: str  # the guard rule's name, e.g. lambda_inside_vpc_check

    def __str__(self) -> str:
        return f"{self.control} {self.resource} {self.template} ({self.rule})"


def _collect(node: Any, resources: set[str], controls: set[str]) -> None:
    """Every ``/Resources/<logical id>/...`` path and ``[CT.X.PR.n]`` message under a guard result."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "path" and isinstance(value, str) and value.startswith("/Resources/"):
                resources.add(value.split("/")[2])
            elif key == "custom_message" and isinstance(value, str):
                controls.update(_CONTROL.findall(value))
            else:
                _collect(value, resources, controls)
    elif isinstance(node, list):
        for value in node:
            _collect(value, resources, controls)


def run_guard(directory: Path) -> list[Finding]:
    """One cfn-guard run of every Control Tower rule over each template in ``directory``."""
    if not CFN_GUARD.exists():  # only reached with REQUIRE_CFN_GUARD set (CI)
        pytest.fail(f"REQUIRE_CFN_GUARD is set but {CFN_GUARD} is absent: run `make setup`")
    templates = sorted(directory.glob("*.template.json"))
    assert templates, f"no templates in {directory}"
    result = subprocess.run(
        [str(CFN_GUARD), "validate", "--rules", str(RULES)]
        + [arg for template in templates for arg in ("--data", str(template))]
        + ["--output-format", "json", "--show-summary", "none", "--structured"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    # cfn-guard 3.x exits 19 when a rule fails, 0 when all pass; anything else is guard itself failing.
    assert result.returncode in {0, 19}, f"cfn-guard exited {result.returncode}: {result.stderr[-2000:]}"
    findings: set[Finding] = set()
    for report in json.loads(result.stdout):
        failed = report.get("not_compliant") or []
        for entry in failed.values() if isinstance(failed, dict) else failed:
            rule = entry["Rule"]
            resources: set[str] = set()
            controls: set[str] = set()
            _collect(rule, resources, controls)
            assert len(controls) == 1 and resources, f"unparsed guard result for {rule['name']}: {controls} {resources}"
            (control,) = controls
            template = Path(report["name"]).name
            findings.update(Finding(control, template, resource, rule["name"]) for resource in resources)
    return sorted(findings)


def reasoned(finding: Finding, directory: Path) -> bool:
    """Whether the resource's ``Metadata.guard`` suppresses the finding's control with a reason."""
    template = json.loads((directory / finding.template).read_text())
    guard = template["Resources"][finding.resource].get("Metadata", {}).get("guard", {})
    return finding.control in guard.get("SuppressedRules", []) and bool(guard.get("Reasons", {}).get(finding.control))


def test_control_tower_controls_pass_or_are_reasoned(
    all_synths: list[Synth],
    vpc_single_variant_synth: Synth,
    extra_synths: list[Synth],
    tmp_path: Path,
) -> None:
    # The same stages and modes as cfn-lint, cdk-nag and checkov, each distinct template once.
    origin = distinct_templates([*all_synths, vpc_single_variant_synth, *extra_synths], tmp_path)
    findings = run_guard(tmp_path)
    unreasoned = [str(f) for f in findings if not reasoned(f, tmp_path)]
    assert not unreasoned, (
        f"{len(unreasoned)} unreasoned Control Tower finding(s) (control, resource, template); fix each or reason "
        "it next to its resource with cdk_constructs.common.nag.guard_suppress (and list the control in "
        "docs/deploy.md):\n" + "\n".join(unreasoned) + f"\nscanned: {sorted(set(origin.values()))}"
    )
    # A reason for a control the resource now passes is stale: it would hide a regression.
    failing = {(f.template, f.resource, f.control) for f in findings}
    stale = [
        f"{control} {resource} {template.name}"
        for template in sorted(tmp_path.glob("*.template.json"))
        for resource, body in json.loads(template.read_text())["Resources"].items()
        for control in body.get("Metadata", {}).get("guard", {}).get("SuppressedRules", [])
        if (template.name, resource, control) not in failing
    ]
    assert not stale, "reasoned Control Tower controls the resource passes; drop the guard_suppress:\n" + "\n".join(
        stale
    )


def test_a_planted_finding_fails_and_a_reasoned_one_does_not(tmp_path: Path) -> None:
    # Proves the rules are live and that guard_suppress's metadata is what the check above reads:
    # the same alarm without an action fails CT.CLOUDWATCH.PR.1 with and without a reason.
    import aws_cdk as cdk
    from aws_cdk import aws_cloudwatch as cloudwatch

    from cdk_constructs.common.nag import guard_suppress

    app = cdk.App(outdir=str(tmp_path / "out"))
    stack = cdk.Stack(app, "Probe")
    metric = cloudwatch.Metric(namespace="Probe", metric_name="Errors")
    plain = cloudwatch.Alarm(stack, "Plain", metric=metric, threshold=1, evaluation_periods=1)
    reasoned_alarm = cloudwatch.Alarm(stack, "Reasoned", metric=metric, threshold=1, evaluation_periods=1)
    guard_suppress(reasoned_alarm, "CT.CLOUDWATCH.PR.1", "probe: a composite alarm notifies for it")
    app.synth()
    scan = tmp_path / "scan"
    scan.mkdir()
    (scan / "Probe.template.json").write_bytes((tmp_path / "out" / "Probe.template.json").read_bytes())
    findings = [f for f in run_guard(scan) if f.control == "CT.CLOUDWATCH.PR.1"]
    plain_id = stack.get_logical_id(plain.node.default_child)  # type: ignore[arg-type]
    reasoned_id = stack.get_logical_id(reasoned_alarm.node.default_child)  # type: ignore[arg-type]
    assert sorted(f.resource for f in findings) == sorted([plain_id, reasoned_id])
    assert [f.resource for f in findings if not reasoned(f, scan)] == [plain_id]


def test_guard_suppress_refuses_an_empty_reason_and_a_malformed_control() -> None:
    import aws_cdk as cdk
    from aws_cdk import aws_sns as sns

    from cdk_constructs.common.nag import guard_suppress

    topic = sns.Topic(cdk.Stack(cdk.App(), "Probe"), "Topic")
    with pytest.raises(AssertionError, match=r"CT.SNS.PR.1 on Probe/Topic: a suppression needs a reason"):
        guard_suppress(topic, "CT.SNS.PR.1", " ")
    with pytest.raises(AssertionError, match=r"'ct-sns-pr-1' is not a Control Tower control id"):
        guard_suppress(topic, "ct-sns-pr-1", "a reason")
