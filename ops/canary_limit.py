"""The canary's limit: what one instance carries and whether a variant can carry a share of the endpoint's traffic.

``promote`` asks this before it moves any weight: the traffic a step shifts to the canary must
fit in the instances ``serving.canary.max_capacity`` lets Application Auto Scaling reach, or
100 % of production lands on a fleet that cannot grow past it (issue 21, finding 1: 7,489
minutes a week above the TTFT SLO in ``make simulate`` with the canary at 100 %).

Per-instance throughput is read through :func:`instance_capacity_rpm` only, which reads the
config's throughput at the TTFT SLOs (planning/throughput_at_slo.py), as the scaling target and the
simulation do. (This module was ``ops/capacity.py`` until issue 55 gave each "capacity" a name of its own.)
"""

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from app_config.root import AppConfig
from app_config.serving import VariantConfig
from ops.exit_codes import ExitCode, OpsError, aws_error
from planning.planner import Planner

INVOCATIONS_NAMESPACE: Final = "AWS/SageMaker"
DEFAULT_LOOKBACK_MIN: Final = 60
"""Minutes of ``Invocations`` whose busiest minute is the demand a promotion is checked against."""


def instance_capacity_rpm(config: AppConfig, variant: VariantConfig) -> float:
    """Requests per minute one instance of ``variant`` carries within the TTFT SLO.

    The fleet's one per-instance figure (``Planner.throughput``, planning/throughput_at_slo.py): a
    capacity measured with ``ops load`` (``throughput.measured``), else the open-loop engine model's
    arrival rate at the SLOs on the variant's instance type. On an instance type that cannot hold
    the SLO it is 0.
    """
    return Planner.of(config).throughput(variant.instance_type).requests_per_minute


def peak_demand_rpm(
    cloudwatch: Any,
    endpoint: str,
    variants: Sequence[str],
    *,
    lookback_min: int = DEFAULT_LOOKBACK_MIN,
    now: dt.datetime | None = None,
) -> float:
    """The busiest minute of the endpoint's ``Invocations`` (summed over ``variants``) in the last
    ``lookback_min`` minutes, requests per minute (0.0 with no datapoints).

    One GetMetricData call (``AWS/SageMaker`` ``Invocations``, dimensions EndpointName and
    VariantName, Sum over 60 s). Raises OpsError (AWS_ERROR) when the call fails.
    """
    end = (now or dt.datetime.now(dt.UTC)).replace(second=0, microsecond=0)
    queries = [
        {
            "Id": f"v{index}",
            "MetricStat": {
                "Metric": {
                    "Namespace": INVOCATIONS_NAMESPACE,
                    "MetricName": "Invocations",
                    "Dimensions": [
                        {"Name": "EndpointName", "Value": endpoint},
                        {"Name": "VariantName", "Value": name},
                    ],
                },
                "Period": 60,
                "Stat": "Sum",
            },
        }
        for index, name in enumerate(variants)
    ]
    per_minute: dict[dt.datetime, float] = {}
    token: str | None = None
    try:
        while True:
            page = cloudwatch.get_metric_data(
                MetricDataQueries=queries,
                StartTime=end - dt.timedelta(minutes=lookback_min),
                EndTime=end,
                **({"NextToken": token} if token else {}),
            )
            for result in page.get("MetricDataResults", []):
                for stamp, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
                    per_minute[stamp] = per_minute.get(stamp, 0.0) + float(value)
            token = page.get("NextToken")
            if not token:
                break
    except (ClientError, BotoCoreError) as error:
        raise aws_error(f"GetMetricData Invocations of {endpoint}", error) from error
    return max(per_minute.values(), default=0.0)


@dataclass(frozen=True)
class CanaryLimit:
    """What bounds the canary's traffic: ``per_instance_rpm`` (instance_capacity_rpm) and its
    ``max_capacity`` (serving.canary.max_capacity, the scalable target's hard ceiling)."""

    per_instance_rpm: float
    max_capacity: int

    @classmethod
    def of(cls, config: AppConfig) -> "CanaryLimit":
        """The canary's limit in ``config``."""
        canary = config.serving.canary
        return cls(instance_capacity_rpm(config, canary), canary.max_capacity)


@dataclass(frozen=True)
class ShiftCheck:
    """Whether ``share`` percent of ``demand_rpm`` fits in a variant that reaches ``max_capacity``
    instances of ``per_instance_rpm`` each."""

    share: float
    demand_rpm: float
    per_instance_rpm: float
    max_capacity: int

    @property
    def needed_instances(self) -> int:
        """Instances the shifted traffic needs (ceil of shifted / per instance)."""
        return math.ceil(self.demand_rpm * self.share / 100.0 / self.per_instance_rpm - 1e-9)

    @property
    def fits(self) -> bool:
        return self.needed_instances <= self.max_capacity

    @property
    def max_share(self) -> float:
        """The largest share (percent, <= 100) that ``max_capacity`` instances carry."""
        if self.demand_rpm <= 0:
            return 100.0
        return min(100.0, 100.0 * self.max_capacity * self.per_instance_rpm / self.demand_rpm)


def require_canary_capacity(steps: Sequence[float], demand_rpm: float, limit: CanaryLimit, *, canary: str) -> None:
    """Raise OpsError (USAGE) when the largest of ``steps`` (percent) needs more canary instances
    than ``limit.max_capacity`` for ``demand_rpm``; the message is one line with the numbers and
    what to do. Checked before any weight moves."""
    if not steps:
        return
    per_instance_rpm, max_capacity = limit.per_instance_rpm, limit.max_capacity
    check = ShiftCheck(max(steps), demand_rpm, per_instance_rpm, max_capacity)
    if check.fits:
        return
    raise OpsError(
        f"step {check.share:g} % would send {demand_rpm * check.share / 100:,.0f} req/min (busiest minute of the "
        f"last {DEFAULT_LOOKBACK_MIN} min: {demand_rpm:,.0f}) to {canary}, which needs {check.needed_instances} "
        f"instances at {per_instance_rpm:,.0f} req/min each; serving.canary.max_capacity = {max_capacity} carries "
        f"{check.max_share:.0f} % at most: raise serving.canary.max_capacity to >= {check.needed_instances} and "
        f"deploy, or end --steps at <= {math.floor(check.max_share):d}",
        ExitCode.USAGE,
    )
