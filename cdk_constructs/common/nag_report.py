"""Read the cloud assembly's ``validation-report.json`` (written by cdk-nag v3 plugins)."""

import json
from pathlib import Path
from typing import Any

REPORT_FILE = "validation-report.json"


def findings(outdir: str | Path) -> list[dict[str, Any]]:
    """Every violation in the report as ``{rule, description, paths}``; [] when there is none.

    A missing report means no plugin failed (the CDK writes it only on failure).
    """
    path = Path(outdir) / REPORT_FILE
    if not path.exists():
        return []
    report = json.loads(path.read_text())
    result = []
    for plugin in report.get("pluginReports", []):
        for violation in plugin.get("violations", []):
            result.append(
                {
                    "rule": violation["ruleName"],
                    "description": violation["description"],
                    "paths": [c["constructPath"] for c in violation.get("violatingConstructs", [])],
                }
            )
    return result


def format_validation_failure(outdir: str | Path) -> str:
    """A short, readable summary of why synth failed validation."""
    lines = [f"cdk-nag: unacknowledged findings (full report: {Path(outdir) / REPORT_FILE}):"]
    for finding in findings(outdir):
        for construct_path in finding["paths"]:
            lines.append(f"  {finding['rule']}: {construct_path}: {finding['description']}")
    return "\n".join(lines)
