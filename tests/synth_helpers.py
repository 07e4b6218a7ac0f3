"""Synthesize the app the way ``npx cdk synth`` does, for tests and benchmarks."""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import assertions

from app_config import AppConfig, load_config
from app_config.loader import cdk_json_context
from planning import memory_report
from planning.make_plan import make_plan
from planning.plan import Plan
from stacks.composition import AppStacks, build_app

REPO = Path(__file__).resolve().parent.parent


__all__ = [
    "SEEDS_G5",
    "SEEDS_G5_ARGS",
    "SEEDS_G5_FLAGS",
    "Synth",
    "cdk_json_context",
    "distinct_templates",
    "synthesize",
]

SEEDS_G5: dict[str, str] = {
    "serving.primary.instance_type": "ml.g5.xlarge",
    "serving.canary.instance_type": "ml.g5.xlarge",
    "slo.cold.ttft_p95_ms": "800",
}
"""The seeds' fleet: seed 003's ml.g5.xlarge (one A10G), with the cold TTFT objective it holds.

The defaults are the fleet ``make plan`` recommends (ml.g6e.xlarge); a test whose figures are the
A10G's (memory plan, quotas, the scaling simulation) pins these overrides (docs/planning.md,
"The seeds' fleet").
"""

SEEDS_G5_ARGS: tuple[str, ...] = tuple(f"{key}={value}" for key, value in SEEDS_G5.items())
"""``SEEDS_G5`` as ``key=value`` overrides (``load_cli_config``, the scaling simulation)."""

SEEDS_G5_FLAGS: tuple[str, ...] = tuple(arg for pair in SEEDS_G5_ARGS for arg in ("-c", pair))
"""``SEEDS_G5`` as command-line flags: ``-c key=value`` each, as ``make plan`` or ``ops`` take them."""


@dataclass(frozen=True)
class Synth:
    """One synthesized app: its config, its plan, stacks, output directory and templates."""

    config: AppConfig
    plan: Plan
    stacks: AppStacks
    outdir: Path
    templates: dict[str, assertions.Template]

    def template(self, unit: str) -> assertions.Template:
        """Template of a deployment unit, e.g. ``"Serving"``."""
        return self.templates[self.config.stack_name(unit)]

    def template_json(self, unit: str) -> dict[str, Any]:
        return dict(self.template(unit).to_json())


def synthesize(outdir: Path, overrides: Mapping[str, Any] | None = None) -> Synth:
    """Synthesize every stack with ``cdk.json``'s context plus ``overrides`` (like ``-c``)."""
    context = {**cdk_json_context(), **(overrides or {})}
    app = cdk.App(outdir=str(outdir), context=context)
    config = load_config(app.node.get_all_context())
    plan = make_plan(config)
    stacks = build_app(app, config, plan)
    assembly = app.synth()
    memory_report.write(memory_report.build(config, plan), outdir)  # as app.py does
    templates = {stack.stack_name: assertions.Template.from_json(stack.template) for stack in assembly.stacks}
    return Synth(config=config, plan=plan, stacks=stacks, outdir=outdir, templates=templates)


def distinct_templates(synths: list[Synth], into: Path) -> dict[str, str]:
    """Copy each distinct template of ``synths`` into ``into`` once (many configs share one, e.g.
    the ECR stack's); returns file name -> the synth it came from (stage / serving mode / outdir)."""
    seen: set[str] = set()
    origin: dict[str, str] = {}
    for synth in synths:
        for template in sorted(synth.outdir.glob("*.template.json")):
            digest = hashlib.sha256(template.read_bytes()).hexdigest()
            if digest in seen:
                continue
            name = f"{synth.outdir.name}-{template.name}"
            (into / name).write_bytes(template.read_bytes())
            seen.add(digest)
            origin[name] = f"{synth.config.stage} / {synth.config.serving.mode} ({synth.outdir.name})"
    return origin
