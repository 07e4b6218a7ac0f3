"""The synth summary and the template diff used by CI."""

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from devtools.diff import diff_templates
from devtools.fleet_notes import fleet_replacement_notes
from devtools.synth_summary import summarize
from planning.planner import Planner
from tests.synth_helpers import Synth


def test_summary_names_stacks_endpoint_variants_and_instance_types(default_synth: Synth) -> None:
    text = summarize(default_synth.outdir)
    assert f"Templates written to {default_synth.outdir.resolve()}" in text
    assert "MangaAssist-prod-Serving" in text
    assert "MangaAssist-prod-ImageRepository" in text
    assert "Endpoint: mangaassist-vllm-prod" in text
    serving = default_synth.config.serving
    primary, canary = serving.primary.instance_type, serving.canary.instance_type  # make plan's fleet
    p, c = serving.primary, serving.canary
    assert (
        f"variant primary    {primary:<14} x{p.initial_instance_count:<3} at creation, weight  95.0%  "
        f"scales {p.min_capacity}..{p.max_capacity}" in text
    )
    assert (
        f"variant canary     {canary:<14} x{c.initial_instance_count:<3} at creation, weight   5.0%  "
        f"scales {c.min_capacity}..{c.max_capacity}" in text
    )


def test_summary_prints_the_memory_plan_of_each_variant(default_synth: Synth) -> None:
    text = summarize(default_synth.outdir)
    plan = Planner.of(default_synth.config).memory_plan(default_synth.config.serving.primary.instance_type)
    assert "Memory plan per engine" in text
    assert text.count(f"KV cache {plan.kv_tokens:,} tokens (128 KiB each)") == 2  # primary and canary
    assert f"{plan.sequences_at_max_len} sequences of 4,096 (max_model_len)" in text


def test_summary_of_an_empty_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        summarize(tmp_path)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_template_diff_reports_a_changed_property(tmp_path: Path, default_synth: Synth) -> None:
    old = default_synth.template_json("Serving")
    new = json.loads(json.dumps(old))
    for resource in new["Resources"].values():
        if resource["Type"] == "AWS::SageMaker::EndpointConfig":
            resource["Properties"]["ProductionVariants"][0]["InitialVariantWeight"] = 90
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    differs, text = diff_templates(tmp_path / "old.json", tmp_path / "new.json")
    assert differs
    assert "AWS::SageMaker::EndpointConfig" in text
    assert "requires replacement" in text
    same, text = diff_templates(tmp_path / "old.json", tmp_path / "old.json")
    assert not same
    assert "There were no differences" in text


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_template_diff_treats_a_missing_side_as_a_new_stack(tmp_path: Path, default_synth: Synth) -> None:
    (tmp_path / "new.json").write_text(json.dumps(default_synth.template_json("ImageRepository")))
    differs, text = diff_templates(None, tmp_path / "new.json")
    assert differs
    assert "[+] AWS::ECR::Repository" in text


def test_a_changed_endpoint_config_is_noted_as_a_new_fleet() -> None:
    def template(image: str, weight: float) -> dict[str, Any]:
        variant = {"VariantName": "primary", "ModelName": image, "InitialVariantWeight": weight}
        return {
            "Resources": {
                "Config": {"Type": "AWS::SageMaker::EndpointConfig", "Properties": {"ProductionVariants": [variant]}}
            }
        }

    assert fleet_replacement_notes(template("a", 95), template("a", 95)) == []
    (note,) = fleet_replacement_notes(template("a", 95), template("b", 95))
    assert note.startswith("Config: a new endpoint config. UpdateEndpoint deploys it to a new fleet")
    (note,) = fleet_replacement_notes(template("a", 95), template("a", 90))
    assert note.startswith("Config: only InitialVariantWeight changed.")
