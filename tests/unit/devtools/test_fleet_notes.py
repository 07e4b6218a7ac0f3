"""``make diff``'s NOTE lines (devtools.fleet_notes) on real Serving templates, and its context split.

Issue 21, findings 5 and 6: an engine change replaced both models and the endpoint config with no
NOTE (the endpoint config's ``Fn::GetAtt`` of the model kept its logical id), a tags-only change
was noted as a new fleet, and ``-c`` applied to both sides of the diff.
"""

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest

from devtools import diff
from devtools.fleet_notes import fleet_replacement_notes
from tests.synth_helpers import Synth, synthesize


@pytest.fixture(scope="module")
def log_level_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("cdk-out-log-level"), {"engine.log_level": "debug"})


def _of_type(template: dict[str, Any], kind: str) -> list[str]:
    return [k for k, v in template["Resources"].items() if v["Type"] == kind]


def test_an_engine_setting_is_noted_as_a_new_fleet(default_synth: Synth, log_level_synth: Synth) -> None:
    before = default_synth.template_json("Serving")
    after = log_level_synth.template_json("Serving")
    (config_id,) = _of_type(before, "AWS::SageMaker::EndpointConfig")
    # What made the old code miss it: the endpoint config's template is unchanged.
    assert before["Resources"][config_id] == after["Resources"][config_id]
    (note,) = fleet_replacement_notes(before, after)
    assert note.startswith(f"{config_id}: a new endpoint config, because its model(s) are replaced (")
    assert "ENGINE_LOG_LEVEL info -> debug" in note
    assert "every instance of every variant is replaced" in note
    assert note.endswith("Only ENGINE_LOG_LEVEL changed: a whole new fleet for that; revert it unless it is meant.")


def test_tags_only_is_updated_in_place(default_synth: Synth) -> None:
    before = default_synth.template_json("Serving")
    after = copy.deepcopy(before)
    for logical_id in _of_type(after, "AWS::SageMaker::EndpointConfig") + _of_type(after, "AWS::SageMaker::Model"):
        after["Resources"][logical_id]["Properties"]["Tags"].append({"Key": "Owner", "Value": "sre"})
    (config_id,) = _of_type(before, "AWS::SageMaker::EndpointConfig")
    assert fleet_replacement_notes(before, after) == [
        f"{config_id}: only Tags changed; updated in place, no instance replaced."
    ]


def test_initial_instance_count_only_says_what_to_change_instead(default_synth: Synth) -> None:
    before = default_synth.template_json("Serving")
    after = copy.deepcopy(before)
    (config_id,) = _of_type(after, "AWS::SageMaker::EndpointConfig")
    after["Resources"][config_id]["Properties"]["ProductionVariants"][0]["InitialInstanceCount"] = 6
    (note,) = fleet_replacement_notes(before, after)
    assert note.startswith(f"{config_id}: only InitialInstanceCount changed.")
    assert "change serving.<variant>.min_capacity/max_capacity" in note


def test_context_overrides_apply_to_the_working_tree_only(monkeypatch: pytest.MonkeyPatch) -> None:
    synths: dict[str, list[str]] = {}

    def fake_synth(tree: Path, outdir: Path, context: list[str]) -> dict[str, Path]:
        synths["head" if tree == diff.REPO else "base"] = context
        return {}

    # Only the git worktree calls are faked: nothing is checked out or synthesized here.
    monkeypatch.setattr(diff, "synth", fake_synth)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0))
    code = diff.main(["--base", "HEAD", "-c", "serving.primary.max_capacity=24", "--base-context", "stage=dev"])
    assert code == 0
    assert synths == {"head": ["serving.primary.max_capacity=24"], "base": ["stage=dev"]}
