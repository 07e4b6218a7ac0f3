"""The alarms a deployment rolls back on, as ``promote`` (variants) and the rolling update's watch (inference
components) read them: whether they exist, and which are firing (names in ``serving_contract.alarms``)."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ops.exit_codes import ExitCode, OpsError
from serving_contract.alarms import alarm_name_prefix, rollback_alarm_names

ALARM = "ALARM"
ALARM_TYPES = ["MetricAlarm", "CompositeAlarm"]


@dataclass(frozen=True)
class Runtime:
    """Clients and the injectable clock/sleep/printer (tests pass fakes; nothing really sleeps)."""

    sagemaker: Any
    cloudwatch: Any
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    out: Callable[[str], None]


def _alarm_pages(cloudwatch: Any, **params: Any) -> list[dict[str, Any]]:
    alarms: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = cloudwatch.describe_alarms(**params, AlarmTypes=ALARM_TYPES, **({"NextToken": token} if token else {}))
        alarms.extend(page.get("MetricAlarms", []))
        alarms.extend(page.get("CompositeAlarms", []))
        token = page.get("NextToken")
        if not token:
            return alarms


def missing_rollback_alarms(cloudwatch: Any, endpoint: str, guarded: str) -> list[str]:
    """Names from ``rollback_alarm_names`` that do not exist (the promotion would be unguarded).

    ``guarded`` is what the alarms guard: the canary variant, or ``components.BASE_SUFFIX``.
    """
    names = list(rollback_alarm_names(endpoint, guarded))
    found = {a["AlarmName"] for a in _alarm_pages(cloudwatch, AlarmNames=names)}
    return [name for name in names if name not in found]


def require_rollback_alarms(rt: Runtime, endpoint: str, guarded: str, *, allow_missing: bool) -> None:
    """Raise OpsError (NOT_READY) when a rollback alarm of ``guarded`` is missing, unless
    ``allow_missing`` (``--allow-missing-alarms``), which prints a warning instead."""
    missing = missing_rollback_alarms(rt.cloudwatch, endpoint, guarded)
    if missing and not allow_missing:
        raise OpsError(
            f"rollback alarm(s) not found: {', '.join(missing)}; deploy the alarms or pass --allow-missing-alarms",
            ExitCode.NOT_READY,
        )
    if missing:
        rt.out(f"WARNING: rollback alarm(s) not found, promoting unguarded by them: {', '.join(missing)}")


def firing_alarms(cloudwatch: Any, endpoint: str, guarded: str) -> list[str]:
    """Alarms in ALARM: every alarm named ``<endpoint>-*`` and the rollback alarms of ``guarded``
    (the canary variant, or ``components.BASE_SUFFIX``)."""
    try:
        by_prefix = _alarm_pages(cloudwatch, AlarmNamePrefix=alarm_name_prefix(endpoint), StateValue=ALARM)
        named = _alarm_pages(cloudwatch, AlarmNames=list(rollback_alarm_names(endpoint, guarded)))
    except (ClientError, BotoCoreError) as error:
        raise OpsError(f"DescribeAlarms failed: {error}", ExitCode.AWS_ERROR) from error
    names = {a["AlarmName"] for a in by_prefix if a.get("StateValue", ALARM) == ALARM}
    names |= {a["AlarmName"] for a in named if a.get("StateValue") == ALARM}
    return sorted(names)
