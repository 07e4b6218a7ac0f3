"""The migration ramp's step function (issue 54, item 5): what the state machine asks before each step.

The ramp's state is one JSON object in an SSM String parameter (``serving_contract.migration``:
``RAMP_STATE_FIELDS``): the step (-1 before the first), the percent of calls the endpoint answers, the status
(``shadow``, ``ramping``, ``full``, ``rolled_back``), since when, and why. The clients read ``percent``
(client/mangaassist_client/ramp.py); this function is the only writer besides the stack's initial value.

Actions (the state machine's ``{"action": ...}``):

* ``check`` -> ``{"decision", "reason", "step", "percent"}``:
  ``rollback`` when a watched alarm is in ALARM, or a report published since the step began failed;
  ``stop`` when the state is ``rolled_back`` (a rollback ends the execution; after a fix, set the state back
  and start a new one: docs/migration.md);
  ``hold`` while the step's ``hold_s`` has not passed, a watched alarm is missing (an alarm that cannot be
  read cannot clear a step), or no passing report was published after the step began (and at most
  ``REPORT_MAX_AGE_S`` old: ``ops migrate report --publish``; before the first step, any recent one);
  before the first step an alarm or a failing report holds too: there is nothing to roll back;
  ``done`` at 100 % once its hold has passed; else ``advance``.
* ``advance``: the next step (its percent, status ``ramping``, or ``full`` at 100 %, since now).
* ``rollback``: percent 0, status ``rolled_back``, with the reason: every client answers from Bedrock again
  within its ramp refresh (60 s).

Environment: ``STATE_PARAMETER``, ``STEPS`` (JSON ``[[percent, hold_s], ...]``), ``ALARM_NAMES`` (JSON list),
``STORE_BUCKET``, ``REPORT_KEY``, ``REPORT_MAX_AGE_S``. Errors: a state or report that is not what it should
be raises ``ValueError`` naming it (the task fails; the state machine retries, then fails the execution);
AWS errors are botocore's.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import ClientError

# The same import in the Lambda and in the repo: the asset bundles the contract at this path (MigrationRamp).
from serving_contract import migration as contract

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)


@dataclass(frozen=True)
class Settings:
    """The function's environment, parsed at import (a cold start with a bad one fails at once)."""

    parameter: str
    steps: tuple[tuple[int, int], ...]  # (percent, hold seconds)
    alarms: tuple[str, ...]
    bucket: str
    report_key: str
    report_max_age_s: int

    @classmethod
    def from_env(cls, env: dict[str, str]) -> Settings:
        steps = tuple((int(p), int(h)) for p, h in json.loads(env["STEPS"]))
        if not steps or steps[-1][0] != 100:
            raise ValueError(f"STEPS = {env['STEPS']!r}: must end at 100 percent")
        return cls(
            parameter=env["STATE_PARAMETER"],
            steps=steps,
            alarms=tuple(json.loads(env["ALARM_NAMES"])),
            bucket=env["STORE_BUCKET"],
            report_key=env["REPORT_KEY"],
            report_max_age_s=int(env["REPORT_MAX_AGE_S"]),
        )


SETTINGS = Settings.from_env(dict(os.environ))
SSM = boto3.client("ssm")
CLOUDWATCH = boto3.client("cloudwatch")
S3 = boto3.client("s3")
now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)  # noqa: E731 - the clock tests replace


def _time(text: object, what: str) -> dt.datetime | None:
    if text is None:
        return None
    try:
        moment = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{what} = {text!r}: must be an ISO 8601 time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def read_state() -> dict[str, Any]:
    """The ramp's state from the parameter; raises ValueError when it is not the contract's object."""
    value = SSM.get_parameter(Name=SETTINGS.parameter)["Parameter"]["Value"]
    state = json.loads(value)
    if not isinstance(state, dict) or set(state) != set(contract.RAMP_STATE_FIELDS):
        raise ValueError(f"{SETTINGS.parameter} = {value[:200]!r}: must hold {', '.join(contract.RAMP_STATE_FIELDS)}")
    if state["status"] not in contract.RAMP_STATUSES or not -1 <= int(state["step"]) < len(SETTINGS.steps):
        raise ValueError(f"{SETTINGS.parameter}: status {state['status']!r} or step {state['step']!r} out of range")
    return state


def write_state(step: int, percent: int, status: str, reason: str) -> dict[str, Any]:
    state = {"step": step, "percent": percent, "status": status, "since": _iso(now()), "reason": reason[:500]}
    SSM.put_parameter(Name=SETTINGS.parameter, Value=json.dumps(state), Type="String", Overwrite=True)
    LOG.info("ramp state: %s", json.dumps(state))
    return state


def firing_alarms() -> tuple[list[str], list[str]]:
    """``(in ALARM, missing)`` among the watched alarms (DescribeAlarms, metric and composite alarms)."""
    states: dict[str, str] = {}
    for start in range(0, len(SETTINGS.alarms), 100):  # DescribeAlarms takes at most 100 names
        names = list(SETTINGS.alarms[start : start + 100])
        pages = CLOUDWATCH.get_paginator("describe_alarms").paginate(
            AlarmNames=names, AlarmTypes=["MetricAlarm", "CompositeAlarm"]
        )
        for page in pages:
            for alarm in [*page.get("MetricAlarms", []), *page.get("CompositeAlarms", [])]:
                states[alarm["AlarmName"]] = alarm["StateValue"]
    firing = sorted(name for name, value in states.items() if value == "ALARM")
    return firing, sorted(set(SETTINGS.alarms) - set(states))


def latest_report() -> dict[str, Any] | None:
    """``reports/latest.json`` (``ops migrate report --publish``), or None when none was published."""
    try:
        body = S3.get_object(Bucket=SETTINGS.bucket, Key=SETTINGS.report_key)["Body"].read()
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise
    report = json.loads(body)
    if report.get("verdict") not in contract.REPORT_VERDICTS:
        raise ValueError(f"s3://{SETTINGS.bucket}/{SETTINGS.report_key}: verdict {report.get('verdict')!r}")
    return dict(report)


def _decision(decision: str, reason: str, state: dict[str, Any]) -> dict[str, Any]:
    return {"decision": decision, "reason": reason, "step": state["step"], "percent": state["percent"]}


def check() -> dict[str, Any]:
    """The ``check`` action (module docstring)."""
    state = read_state()
    if state["status"] == "rolled_back":
        return _decision("stop", f"rolled back at {state['since']}: {state['reason']}", state)
    step = int(state["step"])
    trigger = "rollback" if step >= 0 else "hold"  # before the first step there is nothing to roll back
    firing, missing = firing_alarms()
    if firing:
        return _decision(trigger, f"alarm(s) in ALARM: {', '.join(firing)}", state)
    since = _time(state["since"], "since")
    report = latest_report()
    at = _time(report["at"], "report.at") if report else None
    if report and report["verdict"] == "fail" and at and (since is None or at >= since):
        return _decision(trigger, f"the report published at {report['at']} failed its gates", state)
    if step >= 0 and since is not None:
        until = since + dt.timedelta(seconds=SETTINGS.steps[step][1])
        if now() < until:
            return _decision("hold", f"step {step + 1} ({state['percent']} %) is held until {_iso(until)}", state)
    if missing:
        return _decision("hold", f"watched alarm(s) missing: {', '.join(missing)}", state)
    if state["status"] == "full":
        return _decision("done", "100 % held its time: the endpoint answers every call, Bedrock is the fallback", state)
    fresh = (
        at is not None and (since is None or at > since) and (now() - at).total_seconds() <= SETTINGS.report_max_age_s
    )
    if not (report and report["verdict"] == "pass" and fresh):
        hours = f"{SETTINGS.report_max_age_s / 3600:g}"
        why = (
            f"no passing report published since the step began and at most {hours} h old (ops migrate report --publish)"
        )
        return _decision("hold", why, state)
    return _decision("advance", f"gates held (report {report['at']}) and no alarm fired", state)


def advance() -> dict[str, Any]:
    """The ``advance`` action: the next step."""
    state = read_state()
    step = int(state["step"]) + 1
    if step >= len(SETTINGS.steps):
        raise ValueError(f"{SETTINGS.parameter}: step {state['step']} is the last; nothing to advance to")
    percent = SETTINGS.steps[step][0]
    return write_state(step, percent, "full" if percent == 100 else "ramping", f"step {step + 1}: gates held")


def rollback(reason: str) -> dict[str, Any]:
    """The ``rollback`` action: every call back to Bedrock."""
    state = read_state()
    return write_state(int(state["step"]), 0, "rolled_back", reason)


def handler(event: dict[str, Any], _context: object) -> dict[str, Any]:
    """The state machine's task (module docstring)."""
    action = event.get("action")
    if action == "check":
        return check()
    if action == "advance":
        return advance()
    if action == "rollback":
        return rollback(str(event.get("reason") or "rollback asked"))
    raise ValueError(f"action = {action!r}: allowed check, advance, rollback")
