"""``shadow promote``: a passing shadow becomes the canary (seed 002 scenario 6: shadow, then canary, then ramp).

It runs the report first and stops unless every check passes, then requires each of the shadow's alarms to
exist and be out of ALARM (``serving_contract.alarms.shadow_alarm_names``). Then it changes the stage's
config, not the endpoint: the canary gets the shadow's image (``image.build.shadow`` -> ``image.build.canary``,
or ``image.shadow`` -> ``image.canary``) and instance type, the canary is enabled and the shadow disabled.
``--write`` sets these keys in ``cdk.json``'s ``stages.<stage>`` overlay and prints the diff; without it the
keys are printed. The deploy that follows (``make deploy``) is a new endpoint config with the primary and the
canary (SageMaker allows no canary beside a shadow); ``mangaassist-ops promote`` then moves traffic.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

from app_config.loader import set_in_stage_overlay
from app_config.root import AppConfig
from ops.exit_codes import ExitCode, OpsError
from serving_contract.alarms import shadow_alarm_names


def alarm_problem(cloudwatch: Any, endpoint: str, shadow: str) -> str | None:
    """One line when a shadow alarm is missing or in ALARM (or INSUFFICIENT_DATA is not a problem), else None."""
    names = shadow_alarm_names(endpoint, shadow)
    pages = cloudwatch.get_paginator("describe_alarms").paginate(AlarmNames=list(names), AlarmTypes=["MetricAlarm"])
    found = {alarm["AlarmName"]: alarm["StateValue"] for page in pages for alarm in page["MetricAlarms"]}
    missing = [name for name in names if name not in found]
    if missing:
        return f"shadow alarm(s) {', '.join(missing)} do not exist: is the shadow deployed (serving.shadow.enabled)?"
    firing = [name for name, state in found.items() if state == "ALARM"]
    if firing:
        return f"shadow alarm(s) in ALARM: {', '.join(firing)}; the shadow does not become the canary"
    return None


def promotion(config: AppConfig) -> dict[tuple[str, ...], Any]:
    """The config keys (as key paths) a promotion sets, and their values.

    Raises:
        OpsError: (CHECK_FAILED) the shadow runs the primary's image: there is nothing to promote.
    """
    shadow = config.serving.shadow
    changes: dict[tuple[str, ...], Any] = {}
    build = config.image.source == "build"
    image = config.image.build.shadow if build else config.image.shadow
    if image is None:
        key = "image.build.shadow" if build else "image.shadow"
        message = f"{key} is unset: the shadow runs the primary's image, nothing to promote"
        raise OpsError(message, ExitCode.CHECK_FAILED)
    changes[("image", "build", "canary") if build else ("image", "canary")] = image.model_dump(
        mode="json", exclude_none=True
    )
    if shadow.instance_type != config.serving.canary.instance_type:
        changes[("serving", "canary", "instance_type")] = shadow.instance_type
    changes[("serving", "canary", "enabled")] = True
    changes[("serving", "shadow", "enabled")] = False
    return changes


def write_promotion(
    config: AppConfig, changes: dict[tuple[str, ...], Any], *, cdk_json: Path | None, out: Callable[[str], None]
) -> None:
    """Set ``changes`` in ``cdk_json``'s stage overlay and print the diff, or print them (``cdk_json`` None)."""
    for keys, value in changes.items():
        if cdk_json is None:
            out(f"set in cdk.json (stages.{config.stage}): {'.'.join(keys)} = {value!r}")
            continue
        try:
            diff = set_in_stage_overlay(cdk_json, config.stage, keys, value)
        except ValueError as error:
            raise OpsError(str(error), ExitCode.USAGE) from None
        for line in diff or [f"{cdk_json}: {'.'.join(keys)} already holds {value!r}"]:
            out(line)
    out(
        "next: `make deploy` (a new endpoint config: the primary and the canary, the shadow and its capture gone; "
        "docs/operations.md, 'From shadow to full'), then `mangaassist-ops smoke` and "
        "`mangaassist-ops promote --steps 10 --watch-s 3600`"
    )
