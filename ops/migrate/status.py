"""``ops migrate status``: where the ramp is, its next step and that step's gates (docs/migration.md, "The ramp").

It prints the plan from config (the steps, their holds, the gates the report judges), then, from the account,
the ramp's state (the SSM parameter the clients read), what the next step waits for (the hold's end, a passing
report published after the step began, the watched alarms) and whether an execution of the state machine is
running. The parameter's name, the store and the state machine come from ``--stack-outputs`` (the Migration
stack's outputs) or ``--parameter-name``. Without a region the plan is printed and one line says what needs AWS
(exit 10).
"""

import argparse
import datetime as dt
import json
from collections.abc import Callable
from typing import Any

from app_config.root import AppConfig
from ops.endpoint import output_of
from ops.exit_codes import ExitCode, OpsError
from serving_contract import migration, outputs
from serving_contract.alarms import migration_ramp_alarm_names


def _time(text: object) -> dt.datetime | None:
    return None if text is None else dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))


def _at(moment: dt.datetime) -> str:
    return f"{moment.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC"


def plan_lines(config: AppConfig) -> list[str]:
    """The ramp's plan and the report's gates, from config."""
    settings, gates = config.migration, config.migration.gates
    steps = " -> ".join(f"{step.percent} % {step.hold_hours:g} h" for step in settings.ramp.steps)
    return [
        f"migration ramp of {config.endpoint_name} (stage {config.stage}): shadow phase, then {steps}",
        f"gates the report judges (migration.gates), over at least {gates.min_pairs} pairs: error rate <= "
        f"{config.slo.max_error_rate:.1%}, length KS D <= {gates.length_ks_max:g}, TTFT p95 <= {gates.ttft_p95_ms:g} "
        f"ms, latency p95 endpoint/Bedrock <= {gates.latency_p95_max_ratio:g}, guardrail share >= Bedrock's - "
        f"{gates.guardrail_share_tolerance * 100:g} points, similarity median >= {gates.similarity_min_median:g}, "
        f"preference won or tied >= {gates.preference_min_share:.0%} of >= {gates.min_labels} labels",
    ]


def _names(args: argparse.Namespace, config: AppConfig) -> tuple[str, str | None, str | None]:
    stack = config.stack_name("Migration")
    found = {
        key: output_of(args.stack_outputs, stack, key) if args.stack_outputs else None
        for key in (
            outputs.MIGRATION_STATE_PARAMETER_NAME,
            outputs.MIGRATION_STORE_BUCKET_NAME,
            outputs.MIGRATION_RAMP_STATE_MACHINE_ARN,
        )
    }
    parameter = args.parameter_name or found[outputs.MIGRATION_STATE_PARAMETER_NAME]
    if not parameter:
        raise OpsError(
            f"--parameter-name: name the ramp's state parameter, or pass --stack-outputs with stack {stack}'s "
            f"{outputs.MIGRATION_STATE_PARAMETER_NAME} (migration.enabled deploys it)",
            ExitCode.USAGE,
        )
    return parameter, found[outputs.MIGRATION_STORE_BUCKET_NAME], found[outputs.MIGRATION_RAMP_STATE_MACHINE_ARN]


def _report(s3: Any, bucket: str | None) -> dict[str, Any] | None:
    if bucket is None:
        return None
    from botocore.exceptions import ClientError  # noqa: PLC0415

    try:
        return dict(json.loads(s3.get_object(Bucket=bucket, Key=migration.LATEST_REPORT_KEY)["Body"].read()))
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise


def _alarm_line(cloudwatch: Any, names: list[str]) -> str:
    states: dict[str, str] = {}
    for page in cloudwatch.get_paginator("describe_alarms").paginate(
        AlarmNames=names, AlarmTypes=["MetricAlarm", "CompositeAlarm"]
    ):
        for alarm in [*page.get("MetricAlarms", []), *page.get("CompositeAlarms", [])]:
            states[alarm["AlarmName"]] = alarm["StateValue"]
    shown = ", ".join(f"{name} {states.get(name, 'MISSING')}" for name in names)
    return f"  gate: the watched alarms out of ALARM (any in ALARM rolls back): {shown}"


def state_lines(config: AppConfig, state: dict[str, Any], report: dict[str, Any] | None, now: dt.datetime) -> list[str]:
    """The phase, the next step and what it waits for (the hold, the report)."""
    steps, ramp = config.migration.ramp.steps, config.migration.ramp
    step, since = int(state["step"]), _time(state.get("since"))
    began = "" if since is None else f" since {_at(since)}"
    phase = "the shadow phase" if step < 0 else f"step {step + 1} of {len(steps)}"
    lines = [
        f"phase: {state['status']}, {phase}: the endpoint answers {state['percent']} % of calls{began} "
        f"({state.get('reason')})"
    ]
    if state["status"] == "rolled_back":
        lines.append(
            "next: none: rolled back; fix the cause, set the state back and start a new execution "
            "(docs/migration.md, 'After a rollback')"
        )
        return lines
    if step + 1 >= len(steps):
        held = since + dt.timedelta(hours=steps[step].hold_hours) if since else now
        lines.append(f"next: none: full; the execution succeeds once 100 % has been held until {_at(held)}")
        return lines
    upcoming = steps[step + 1]
    not_before = since + dt.timedelta(hours=steps[step].hold_hours) if since is not None and step >= 0 else now
    left = max(0.0, (not_before - now).total_seconds() / 3600)
    lines.append(
        f"next: step {step + 2}, {upcoming.percent} % of calls, not before {_at(not_before)} ({left:.1f} h left)"
    )
    if report is None:
        seen = "none published"
    else:
        at = _time(report.get("at"))
        fresh = (
            at is not None
            and (since is None or at > since)
            and now - at <= dt.timedelta(hours=ramp.report_max_age_hours)
        )
        seen = f"latest {report.get('verdict')} at {_at(at) if at else '?'} ({'counts' if fresh else 'too old'})"
    lines.append(
        f"  gate: a passing report published after the step began, at most {ramp.report_max_age_hours:g} h "
        f"old (ops migrate report --publish): {seen}"
    )
    return lines


def run_status(
    args: argparse.Namespace,
    config: AppConfig,
    clients: Callable[..., Any],
    *,
    now: Callable[[], dt.datetime],
    out: Callable[[str], None],
) -> ExitCode:
    """``migrate status`` (module docstring)."""
    for line in plan_lines(config):
        out(line)
    parameter, bucket, machine = _names(args, config)
    made = clients(args.region, args.profile, "`migrate status` (the ramp's parameter, alarms and report)")
    state = json.loads(made.ssm.get_parameter(Name=parameter)["Parameter"]["Value"])
    moment = now()
    for line in state_lines(config, state, _report(made.s3, bucket), moment):
        out(line)
    names = [*migration_ramp_alarm_names(config.endpoint_name), *config.migration.ramp.alarm_names]
    out(_alarm_line(made.cloudwatch, names))
    if machine:
        running = made.stepfunctions.list_executions(stateMachineArn=machine, statusFilter="RUNNING").get(
            "executions", []
        )
        out(
            f"execution: {running[0]['name']} running since {_at(running[0]['startDate'])}"
            if running
            else "execution: none running (start one: aws stepfunctions start-execution --state-machine-arn ...)"
        )
    return ExitCode.OK
