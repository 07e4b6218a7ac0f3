"""make diff's summary over real synthesized templates (issue 40 item 11): one max_capacity change
printed 313 lines with no summary; the summary names the change, its quota and what is replaced."""

import copy
from typing import Any

from devtools.diff_summary import shorten, summary, variant_bounds
from tests.synth_helpers import Synth


def _templates(synth: Synth) -> dict[str, dict[str, Any]]:
    return {name: copy.deepcopy(synth.template_json(name.rsplit("-", 1)[1])) for name in synth.templates}


def _with_max_capacity(templates: dict[str, dict[str, Any]], before: int, value: int) -> dict[str, dict[str, Any]]:
    changed = copy.deepcopy(templates)
    for resource in changed["MangaAssist-prod-Serving"]["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget" and props.get("MaxCapacity") == before:
            props["MaxCapacity"] = value
            for action in props.get("ScheduledActions", []):
                action["ScalableTargetAction"]["MaxCapacity"] = value
    return changed


def test_the_default_variants_are_read_from_the_template(default_synth: Synth) -> None:
    bounds = variant_bounds(_templates(default_synth)["MangaAssist-prod-Serving"])
    assert {name: (b.instance_type, b.min_capacity, b.max_capacity) for name, b in bounds.items()} == {
        name: (v.serving.instance_type, v.serving.min_capacity, v.serving.max_capacity)
        for name, v in ((v.name, v) for v in default_synth.plan.variants())
    }


def test_a_max_capacity_change_is_one_summary_line_with_its_quota(default_synth: Synth) -> None:
    base = _templates(default_synth)
    primary = variant_bounds(base["MangaAssist-prod-Serving"])["primary"]
    canary_max = variant_bounds(base["MangaAssist-prod-Serving"])["canary"].max_capacity or 0
    before = primary.max_capacity
    assert before is not None and before == default_synth.config.serving.primary.max_capacity
    after = before + 4
    head = _with_max_capacity(base, before, after)
    actions = len(primary.scheduled_actions)
    instance_type = primary.instance_type
    assert summary(base, head) == [
        "Summary:",
        "  MangaAssist-prod-Serving: modified 1 (ScalableTarget x1)",
        f"    variant primary ({instance_type}): max {before} -> {after}, {actions} scheduled action(s) change",
        f"    quota '{instance_type} for endpoint usage' needs {2 * (before + canary_max)} -> "
        f"{2 * (after + canary_max)} (2 x the sum of MaxCapacity: a blue/green update's second fleet)",
    ]
    assert summary(base, base) == ["Summary: no stack changes"]


def test_a_replaced_endpoint_config_and_an_added_stack_are_named(default_synth: Synth) -> None:
    base = _templates(default_synth)
    head = copy.deepcopy(base)
    serving = head["MangaAssist-prod-Serving"]["Resources"]
    config = next(r for r in serving.values() if r["Type"] == "AWS::SageMaker::EndpointConfig")
    other = "ml.g5.xlarge"  # the seeds' fleet: any type the primary does not run
    assert other != default_synth.config.serving.primary.instance_type
    config["Properties"]["ProductionVariants"][0]["InstanceType"] = other
    head["MangaAssist-prod-Extra"] = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic", "Properties": {}}}}
    lines = summary(base, head)
    assert lines[1] == "  MangaAssist-prod-Extra (added): added 1 (Topic x1)"
    assert lines[2] == "  MangaAssist-prod-Serving: modified 1 (EndpointConfig x1); replaced 1 (EndpointConfig x1)"
    assert lines[3].startswith(f"    variant primary ({other}): instance type ")


def test_a_long_changed_line_shows_where_it_changed() -> None:
    before = "{" + "x" * 500 + '"value":20' + "y" * 500 + "}"
    after = before.replace('"value":20', '"value":24')
    text = shorten(f"   [-] {before}\n   [+] {after}\n [ ] short")
    old, new, short = text.splitlines()
    assert '"value":20' in old and '"value":24' in new
    assert old.endswith(f"... ({len(before) + 7:,} characters)") and len(old) < 300
    assert short == " [ ] short"
