"""docs/operations.md's "raise one event's floor for one week" runbook runs as written (issue 40 item 8):
the plan command prints what the runbook says, and the deploy command's override is the same event."""

import datetime as dt
import shlex
from pathlib import Path

import pytest

from app_config import ConfigError, dated_events, load_config
from planning import cost_plan
from planning.dated_schedule import one_off_actions
from planning.make_plan import make_plan
from tests.synth_helpers import cdk_json_context

OPERATIONS = Path(__file__).resolve().parents[3] / "docs" / "operations.md"
A_WEEK_BEFORE = dt.datetime(2027, 1, 4, 9, 0)
"""Monday a week before the runbook's Monday 2027-01-11, local time: when an SRE would run it."""


def _commands() -> list[list[str]]:
    text = OPERATIONS.read_text()
    section = text.split("## Runbook: raise one event's floor for one week")[1].split("\n## ")[0]
    blocks = section.split("```")[1::2]  # the fenced blocks' contents
    return [shlex.split(line) for block in blocks for line in block.strip().splitlines()]


def _overrides(words: list[str]) -> list[str]:
    return [words[i + 1] for i, word in enumerate(words[:-1]) if word in {"-c", "--context"}]


@pytest.fixture(autouse=True)
def _a_week_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dated_events, "clock", lambda _timezone: A_WEEK_BEFORE)


def test_the_runbook_shows_a_plan_and_a_deploy_of_the_same_override() -> None:
    plan, deploy = _commands()
    assert plan[:3] == ["python", "-m", "planning.cost_plan"]
    config = load_config(cdk_json_context())
    assert deploy[:4] == ["npx", "cdk", "deploy", config.stack_name("Serving")]
    assert _overrides(plan) == _overrides(deploy)
    assert len(_overrides(plan)) == 1


def test_the_documented_plan_command_prints_the_lift_and_the_restore(capsys: pytest.CaptureFixture[str]) -> None:
    plan, _ = _commands()
    assert cost_plan.main(plan[3:]) == 0
    printed = capsys.readouterr().out.splitlines()
    event = [line for line in printed if line.startswith("  one-piece-1100: ")]
    assert len(event) == 1
    assert event[0].startswith(
        "  one-piece-1100: 2027-01-11 18:00 - 2027-01-11 22:00, demand x3, floor 4 (min_capacity; derived: ceil("
    )
    actions = [line.split() for line in printed if line.startswith("    at(2027-01-11")]
    # As the runbook says: the lift a minute after the weekly 16:00 pre-scale, back to that pre-scale's floor at 22:00.
    assert [(a[0], a[5].rstrip(":")) for a in actions] == [
        ("at(2027-01-11T16:01:00)", "one-piece-1100-lift"),
        ("at(2027-01-11T22:00:00)", "one-piece-1100-end"),
    ]
    lift_floor, end_floor = int(actions[0][2]), int(actions[1][2])
    events = make_plan(load_config(cdk_json_context())).scaling.primary.events
    weekly = next(e for e in events if e.name == "shonen-jump")
    assert weekly.min_capacity is not None  # derived by the plan
    assert end_floor == weekly.min_capacity < lift_floor == 4


def test_the_documented_deploy_override_loads_into_the_same_actions() -> None:
    _, deploy = _commands()
    key, value = _overrides(deploy)[0].split("=", 1)
    config = load_config({**cdk_json_context(), key: value})
    primary = make_plan(config).variant("primary")
    actions = one_off_actions(primary.scaling, primary.serving.min_capacity, primary.serving.max_capacity)
    assert [a.name for a in actions] == ["one-piece-1100-lift", "one-piece-1100-end"]


def test_after_the_event_the_documented_override_stops_synth_with_the_line_the_runbook_quotes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dated_events, "clock", lambda _timezone: dt.datetime(2027, 1, 12, 9, 0))
    _, deploy = _commands()
    key, value = _overrides(deploy)[0].split("=", 1)
    with pytest.raises(ConfigError) as info:
        make_plan(load_config({**cdk_json_context(), key: value}))
    quoted = "scaling.primary.dated_events one-piece-1100: ends 2027-01-11 22:00, which has passed"
    assert quoted in OPERATIONS.read_text()
    assert str(info.value).startswith(f"config error: {quoted} (now 2027-01-12 09:00 Asia/Tokyo)")
