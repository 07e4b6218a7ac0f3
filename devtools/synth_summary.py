"""Print where the templates are and a one-screen summary of a cloud assembly.

Usage: ``python -m devtools.synth_summary [cdk.out]``
"""

import json
import sys
import textwrap
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app_config import pins
from devtools.fleet_notes import variant_instance_types
from planning import memory_report


def _templates(outdir: Path) -> dict[str, dict[str, Any]]:
    manifest = json.loads((outdir / "manifest.json").read_text())
    templates = {}
    for artifact_id, artifact in sorted(manifest.get("artifacts", {}).items()):
        if artifact.get("type") == "aws:cloudformation:stack":
            template_file = artifact["properties"]["templateFile"]
            templates[artifact_id] = json.loads((outdir / template_file).read_text())
    return templates


def summarize(outdir: str | Path) -> str:
    """A short human summary: stacks and resource counts, endpoint, variants, instance types.

    Args:
        outdir: a synthesized cloud assembly directory (``cdk.out``).

    Raises:
        FileNotFoundError: when ``outdir`` holds no ``manifest.json`` (nothing synthesized).
    """
    outdir = Path(outdir)
    templates = _templates(outdir)
    lines = [f"Templates written to {outdir.resolve()}", "", *_stack_lines(templates)]
    bounds = _scalable_target_bounds(templates)
    lines += _endpoint_lines(templates, bounds)
    lines += _components(templates, bounds)
    lines += _deploy_refusals(templates)
    reports = memory_report.read(outdir)
    if reports:
        lines += ["", *memory_report.render(reports)]
    return "\n".join(lines)


def _resources(template: dict[str, Any]) -> Iterable[dict[str, Any]]:
    return template.get("Resources", {}).values()  # type: ignore[no-any-return]


def _stack_lines(templates: dict[str, dict[str, Any]]) -> list[str]:
    """A table of the stacks, each with its resource count and the count of each type."""
    lines = [f"{'Stack':<40} {'Resources':>9}"]
    for stack, template in templates.items():
        # CDK's own version-reporting resource is not part of the app (and only the CLI adds it).
        kinds = Counter(
            r["Type"].removeprefix("AWS::") for r in _resources(template) if r["Type"] != "AWS::CDK::Metadata"
        )
        types = ", ".join(f"{kind} x{count}" if count > 1 else kind for kind, count in sorted(kinds.items()))
        lines.append(f"{stack:<40} {sum(kinds.values()):>9}")
        lines += textwrap.wrap(types, width=96, initial_indent="    ", subsequent_indent="    ")
    return lines


def _scalable_target_bounds(templates: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Last part of each scalable target's ResourceId (a variant or a component) to ``scales min..max``."""
    bounds = {}
    for template in templates.values():
        for resource in _resources(template):
            props = resource.get("Properties", {})
            if resource["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget" and isinstance(
                props.get("ResourceId"), str
            ):
                bounds[props["ResourceId"].rsplit("/", 1)[-1]] = (
                    f"scales {props['MinCapacity']}..{props['MaxCapacity']}"
                )
    return bounds


def _endpoint_lines(templates: dict[str, dict[str, Any]], bounds: dict[str, str]) -> list[str]:
    """The endpoint's name and one line per production variant; adds managed instance pools to ``bounds``."""
    lines = []
    for template in templates.values():
        for resource in _resources(template):
            if resource["Type"] == "AWS::SageMaker::Endpoint":
                lines += ["", f"Endpoint: {resource['Properties'].get('EndpointName', '(generated)')}"]
        for resource in _resources(template):
            if resource["Type"] == "AWS::SageMaker::EndpointConfig":
                properties = resource["Properties"]
                lines += _variant_lines(properties["ProductionVariants"], bounds)
                lines += _shadow_lines(properties.get("ShadowProductionVariants", []), properties, bounds)
    return lines


def _shadow_lines(shadows: list[dict[str, Any]], properties: dict[str, Any], bounds: dict[str, str]) -> list[str]:
    """The shadow variant: the share of the production variant's requests it gets a copy of (its weight over the
    production variant's), and whether both variants' answers are captured."""
    lines = []
    primary = float(properties["ProductionVariants"][0].get("InitialVariantWeight", 1))
    captured = " answers captured" if properties.get("DataCaptureConfig", {}).get("EnableCapture") else ""
    for v in shadows:
        share = 100 * float(v.get("InitialVariantWeight", 1)) / primary
        lines.append(
            f"  shadow  {v['VariantName']:<10} {_types(v):<14} "
            f"x{v['InitialInstanceCount']:<3} at creation, copy {share:5.1f}%  {bounds.get(v['VariantName'], '')}"
            f"{captured}"
        )
    return lines


def _types(variant: dict[str, Any]) -> str:
    """``ml.g6e.xlarge``, or with instance pools ``ml.g6e.xlarge > ml.g6e.2xlarge`` (priority order)."""
    return " > ".join(variant_instance_types(variant))


def _variant_lines(variants: list[dict[str, Any]], bounds: dict[str, str]) -> list[str]:
    lines = []
    total = sum(float(v.get("InitialVariantWeight", 1)) for v in variants)
    for v in variants:
        share = 100 * float(v.get("InitialVariantWeight", 1)) / total
        managed = v.get("ManagedInstanceScaling")
        if managed:  # inference components: SageMaker sizes the instance pool
            bounds[v["VariantName"]] = (
                f"instances {managed['MinInstanceCount']}..{managed['MaxInstanceCount']} (managed)"
            )
        lines.append(
            f"  variant {v['VariantName']:<10} {_types(v):<14} "
            f"x{v['InitialInstanceCount']:<3} at creation, weight {share:5.1f}%  "
            f"{bounds.get(v['VariantName'], '')}"
        )
    return lines


def _components(templates: dict[str, dict[str, Any]], bounds: dict[str, str]) -> list[str]:
    """One line per inference component: base or adapter, copies and scaling bounds."""
    lines = []
    for template in templates.values():
        for resource in template.get("Resources", {}).values():
            if resource["Type"] != "AWS::SageMaker::InferenceComponent":
                continue
            props = resource["Properties"]
            name = props.get("InferenceComponentName", "(generated)")
            spec = props.get("Specification", {})
            if "BaseInferenceComponentName" in spec:
                lines.append(f"  component {name:<44} adapter of {spec['BaseInferenceComponentName']}")
            else:
                copies = props.get("RuntimeConfig", {}).get("CopyCount", "?")
                lines.append(f"  component {name:<44} x{copies:<3} copies  {bounds.get(name, '')}")
    return lines


def _deploy_refusals(templates: dict[str, dict[str, Any]]) -> list[str]:
    """What CloudFormation will refuse at deploy (placeholder pins), so synth says it first."""
    refusals = [
        f"  {stack}: {assertion['AssertDescription']}"
        for stack, template in templates.items()
        for assertion in template.get("Rules", {}).get(pins.RULE_ID, {}).get("Assertions", [])
    ]
    return ["", "Deploy refused until pinned:", *refusals] if refusals else []


def main(argv: list[str]) -> int:
    outdir = Path(argv[1] if len(argv) > 1 else "cdk.out")
    try:
        print(summarize(outdir))
    except FileNotFoundError:
        print(f"no cloud assembly in {outdir}: run the synth first", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
