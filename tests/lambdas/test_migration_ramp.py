"""The migration's ramp (issue 54, item 5): the synthesized state machine run step by step against the real step
function, the state machine's own definition (its Amazon States Language from the template) walked by a small
interpreter of the five state types it uses, the step function imported as Lambda imports it with the environment
the template gives it, its SSM, CloudWatch and S3 clients under botocore Stubbers (each answer queued as its call
is made, from the test's account state), and the clock stubbed: a Wait state moves it.

Forward (5 -> 25 -> 50 -> 75 -> 100 % after each hold and a fresh passing report), hold (no report, an
alarm missing) and rollback (an alarm, a failing report) are each run to the execution's end."""

from __future__ import annotations

import datetime as dt
import importlib.util
import io
import itertools
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber

from stacks.jsii_node import prefer_pinned_node

prefer_pinned_node()

import aws_cdk as cdk  # noqa: E402
from aws_cdk import assertions  # noqa: E402

from app_config import load_config  # noqa: E402
from stacks.migration_stack import MigrationStack  # noqa: E402
from tests.lambdas.conftest import FAKE_AWS  # noqa: E402
from tests.synth_helpers import cdk_json_context  # noqa: E402

RUNTIME = Path(__file__).resolve().parents[2] / "cdk_constructs" / "migration" / "runtime" / "index.py"
PARAMETER, BUCKET = "/cfn/ramp-state", "comparison-store"
START = dt.datetime(2026, 11, 16, 9, 0, tzinfo=dt.UTC)
ALARMS = ("mangaassist-vllm-prod-critical", "mangaassist-vllm-prod-client-fallback-rate")


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    config = load_config({**cdk_json_context(), "migration.enabled": "true"})
    stack = MigrationStack(cdk.App(), "MangaAssist-prod-Migration", config=config)
    return dict(assertions.Template.from_stack(stack).to_json())


def _only(template: dict[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    (found,) = [(lid, r) for lid, r in template["Resources"].items() if r["Type"] == kind]
    return found


@pytest.fixture(scope="module")
def definition(template: dict[str, Any]) -> dict[str, Any]:
    _, machine = _only(template, "AWS::StepFunctions::StateMachine")
    parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    return dict(json.loads("".join(p if isinstance(p, str) else "<step function>" for p in parts)))


@pytest.fixture(scope="module")
def step(template: dict[str, Any]) -> Iterator[ModuleType]:
    """runtime/index.py imported with the template's environment (its Refs as the test's names)."""
    _, function = _only(template, "AWS::Lambda::Function")
    refs = {"AWS::SSM::Parameter": PARAMETER, "AWS::S3::Bucket": BUCKET}
    environment = {}
    for name, value in function["Properties"]["Environment"]["Variables"].items():
        environment[name] = refs[template["Resources"][value["Ref"]]["Type"]] if isinstance(value, dict) else value
    with mock.patch.dict(os.environ, {**FAKE_AWS, **environment}):
        spec = importlib.util.spec_from_file_location("migration_ramp_step", RUNTIME)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up while it runs
        spec.loader.exec_module(module)
        yield module
    sys.modules.pop(spec.name, None)


@dataclass
class Account:
    """What the step function's AWS calls see: the parameter, the alarms, the published report, the time."""

    now: dt.datetime = START
    state: dict[str, Any] = field(
        default_factory=lambda: {"step": -1, "percent": 0, "status": "shadow", "since": None, "reason": "deployed"}
    )
    alarms: dict[str, str] = field(default_factory=lambda: dict.fromkeys(ALARMS, "OK"))
    report: dict[str, Any] | None = None
    written: list[dict[str, Any]] = field(default_factory=list)

    def publish(self, verdict: str) -> None:
        self.report = {"at": self.now.isoformat().replace("+00:00", "Z"), "verdict": verdict, "pairs": 500}


class Ramp:
    """The step function's clients under Stubbers, each answer queued from :class:`Account` just before its call."""

    def __init__(self, step: ModuleType, account: Account) -> None:
        self.step, self.account = step, account
        self.stubs = {name: Stubber(getattr(step, name)) for name in ("SSM", "CLOUDWATCH", "S3")}
        events = {
            ("SSM", "ssm.GetParameter"): self._get_parameter,
            ("SSM", "ssm.PutParameter"): self._put_parameter,
            ("CLOUDWATCH", "cloudwatch.DescribeAlarms"): self._describe_alarms,
            ("S3", "s3.GetObject"): self._get_object,
        }
        self._handlers = [
            (getattr(step, client), f"provide-client-params.{event}", h) for (client, event), h in events.items()
        ]

    def __enter__(self) -> Ramp:
        for client, event, handler in self._handlers:
            client.meta.events.register(event, handler)
        for stub in self.stubs.values():
            stub.activate()
        return self

    def __exit__(self, *exc: object) -> None:
        for client, event, handler in self._handlers:
            client.meta.events.unregister(event, handler)
        for stub in self.stubs.values():
            stub.assert_no_pending_responses()
            stub.deactivate()

    def _get_parameter(self, **_: Any) -> None:
        value = {"Name": PARAMETER, "Type": "String", "Value": json.dumps(self.account.state), "Version": 1}
        self.stubs["SSM"].add_response("get_parameter", {"Parameter": value}, {"Name": PARAMETER})

    def _put_parameter(self, params: dict[str, Any], **_: Any) -> None:
        self.account.state = json.loads(params["Value"])
        self.account.written.append(self.account.state)
        expected = {"Name": PARAMETER, "Value": ANY, "Type": "String", "Overwrite": True}
        self.stubs["SSM"].add_response("put_parameter", {"Version": 2, "Tier": "Standard"}, expected)

    def _describe_alarms(self, params: dict[str, Any], **_: Any) -> None:
        alarms = [
            {"AlarmName": n, "StateValue": s} for n, s in self.account.alarms.items() if n in params["AlarmNames"]
        ]
        expected = {"AlarmNames": list(ALARMS), "AlarmTypes": ["MetricAlarm", "CompositeAlarm"]}
        self.stubs["CLOUDWATCH"].add_response("describe_alarms", {"MetricAlarms": alarms}, expected)

    def _get_object(self, **_: Any) -> None:
        expected = {"Bucket": BUCKET, "Key": "reports/latest.json"}
        if self.account.report is None:
            self.stubs["S3"].add_client_error("get_object", "NoSuchKey", "no such key", 404, expected_params=expected)
            return
        body = json.dumps(self.account.report).encode()
        self.stubs["S3"].add_response("get_object", {"Body": StreamingBody(io.BytesIO(body), len(body))}, expected)


@dataclass
class Execution:
    """How an execution ended (``Succeeded`` or ``Failed <error>``), the states it went through, the decisions."""

    end: str
    visited: list[str]
    decisions: list[str]


def run(
    definition: dict[str, Any], step: ModuleType, account: Account, on_wait: Callable[[Account], None] = lambda a: None
) -> Execution:
    """Walk ``definition`` from StartAt: Task (the step function, Parameters resolved: ``key.$`` is a path into
    the state's input), Wait (moves the clock, then ``on_wait``), Choice (StringEquals on ``$.<field>``, else
    Default), Succeed, Fail."""
    states, name = definition["States"], definition["StartAt"]
    data: dict[str, Any] = {}
    visited: list[str] = []
    decisions: list[str] = []
    with Ramp(step, account), mock.patch.object(step, "now", lambda: account.now):
        for _ in range(20_000):  # a bound: the default ramp takes ~1,500 checks
            state = states[name]
            visited.append(name)
            kind = state["Type"]
            if kind == "Task":
                payload = {
                    k.removesuffix(".$"): data[v.removeprefix("$.")] if k.endswith(".$") else v
                    for k, v in state["Parameters"].items()
                }
                data = step.handler(payload, None)
                if payload["action"] == "check":
                    decisions.append(data["decision"])
                name = state["Next"]
            elif kind == "Wait":
                account.now += dt.timedelta(seconds=state["Seconds"])
                on_wait(account)
                name = state["Next"]
            elif kind == "Choice":
                matches = [
                    c["Next"] for c in state["Choices"] if data[c["Variable"].removeprefix("$.")] == c["StringEquals"]
                ]
                name = matches[0] if matches else state["Default"]
            elif kind == "Succeed":
                return Execution("Succeeded", visited, decisions)
            else:
                assert kind == "Fail", kind
                return Execution(f"Failed {state['Error']}", visited, decisions)
    raise AssertionError("the execution did not end within 20,000 states")


def _hours(moment: str) -> float:
    return (dt.datetime.fromisoformat(moment.replace("Z", "+00:00")) - START).total_seconds() / 3600


def test_the_ramp_moves_forward_after_each_hold_and_a_fresh_passing_report_and_ends_at_full(
    definition: dict[str, Any], step: ModuleType
) -> None:
    account = Account()
    account.publish("pass")  # the shadow phase's report

    def publish_near_the_end_of_each_hold(a: Account) -> None:
        since = a.state["since"]
        if since and (a.report is None or a.report["at"] <= since) and a.state["step"] >= 0:
            held = (a.now - dt.datetime.fromisoformat(since.replace("Z", "+00:00"))).total_seconds()
            if held >= step.SETTINGS.steps[a.state["step"]][1] - 3600:  # (percent, hold seconds)
                a.publish("pass")

    execution = run(definition, step, account, publish_near_the_end_of_each_hold)
    assert execution.end == "Succeeded" and execution.visited[-1] == "Full"
    assert [(s["percent"], s["status"]) for s in account.written] == [
        (5, "ramping"),
        (25, "ramping"),
        (50, "ramping"),
        (75, "ramping"),
        (100, "full"),
    ]
    # Each step began only once the one before had been held its hours (seed 002: a week, then 2.5 days each).
    began = [_hours(s["since"]) for s in account.written]
    assert [b - a for a, b in itertools.pairwise(began)] == [168.0, 60.0, 60.0, 60.0]
    assert execution.decisions.count("advance") == 5 and "rollback" not in execution.decisions
    assert _hours(account.now.isoformat()) == pytest.approx(began[-1] + 24, abs=0.25)  # 24 h at 100 %


def test_a_step_is_held_until_a_passing_report_newer_than_the_step_is_published(
    definition: dict[str, Any], step: ModuleType
) -> None:
    account = Account(
        state={"step": 0, "percent": 5, "status": "ramping", "since": "2026-11-16T09:00:00Z", "reason": "step 1"}
    )
    account.publish("pass")  # at the step's start: not newer than the step

    def publish_after_nine_days(a: Account) -> None:
        if a.now >= START + dt.timedelta(days=9) and a.report and a.report["at"] <= "2026-11-16T09:00:00Z":
            a.publish("pass")
        if a.state["percent"] == 25:  # stop the example here: make the next check a rollback
            a.alarms[ALARMS[0]] = "ALARM"

    execution = run(definition, step, account, publish_after_nine_days)
    (advanced,) = [s for s in account.written if s["percent"] == 25]
    # The week's hold ended on day 7; the step still waited for the report published on day 9.
    assert _hours(advanced["since"]) == pytest.approx(9 * 24, abs=0.25)
    assert "hold" in execution.decisions and execution.end == "Failed RolledBack"


def test_an_alarm_during_a_hold_rolls_back_to_zero_and_fails_the_execution(
    definition: dict[str, Any], step: ModuleType
) -> None:
    account = Account(
        state={"step": 1, "percent": 25, "status": "ramping", "since": "2026-11-16T09:00:00Z", "reason": "step 2"}
    )

    def fire_after_two_hours(a: Account) -> None:
        if a.now >= START + dt.timedelta(hours=2):
            a.alarms[ALARMS[1]] = "ALARM"

    execution = run(definition, step, account, fire_after_two_hours)
    assert execution.end == "Failed RolledBack" and execution.visited[-2:] == ["Rollback", "RolledBack"]
    (rolled,) = account.written
    assert (rolled["percent"], rolled["status"], rolled["step"]) == (0, "rolled_back", 1)
    assert rolled["reason"] == f"alarm(s) in ALARM: {ALARMS[1]}"
    assert _hours(rolled["since"]) == 2.0  # at the first check after it fired (check_interval_min 15)


def test_a_failing_report_during_a_step_rolls_back(definition: dict[str, Any], step: ModuleType) -> None:
    account = Account(
        state={"step": 2, "percent": 50, "status": "ramping", "since": "2026-11-16T09:00:00Z", "reason": "step 3"}
    )

    def fail_on_day_two(a: Account) -> None:
        if a.now >= START + dt.timedelta(days=2) and a.report is None:
            a.publish("fail")

    execution = run(definition, step, account, fail_on_day_two)
    assert execution.end == "Failed RolledBack"
    assert account.written[-1]["percent"] == 0
    assert account.written[-1]["reason"] == "the report published at 2026-11-18T09:00:00Z failed its gates"


def test_before_the_first_step_an_alarm_or_a_missing_alarm_holds_and_rolls_nothing_back(
    definition: dict[str, Any], step: ModuleType
) -> None:
    account = Account(alarms={ALARMS[0]: "ALARM"})  # the fallback-rate alarm does not exist yet
    account.publish("pass")
    seen: list[str] = []

    def clear_later(a: Account) -> None:
        seen.append(step.check()["reason"])  # the check's own words, between the machine's checks
        if a.now >= START + dt.timedelta(hours=1):
            a.alarms = dict.fromkeys(ALARMS, "OK")
        if a.state["percent"] == 5:
            a.alarms[ALARMS[0]] = "ALARM"  # end the example: the first step rolls back

    execution = run(definition, step, account, clear_later)
    assert seen[0] == f"alarm(s) in ALARM: {ALARMS[0]}"
    assert execution.decisions[:4] == ["hold"] * 4 and execution.decisions[4] == "advance"
    assert [s["percent"] for s in account.written] == [5, 0]


def test_an_execution_started_after_a_rollback_stops_at_once(definition: dict[str, Any], step: ModuleType) -> None:
    account = Account(
        state={
            "step": 1,
            "percent": 0,
            "status": "rolled_back",
            "since": "2026-11-16T09:00:00Z",
            "reason": "alarm(s) in ALARM: x",
        }
    )
    execution = run(definition, step, account)
    assert (execution.end, execution.visited, account.written) == (
        "Failed AlreadyRolledBack",
        ["Check", "Decide", "Stopped"],
        [],
    )


def test_a_state_that_is_not_the_contracts_fails_the_task_naming_it(step: ModuleType) -> None:
    account = Account(state={"step": 9, "percent": 0, "status": "shadow", "since": None, "reason": "x"})
    with Ramp(step, account), pytest.raises(ValueError, match=rf"^{PARAMETER}: status 'shadow' or step 9 out of range"):
        step.handler({"action": "check"}, None)
    with pytest.raises(ValueError, match=r"^action = 'jump': allowed check, advance, rollback"):
        step.handler({"action": "jump"}, None)
