"""CloudWatch metric alarms at minute granularity, as the scaling policies see them.

An alarm aggregates the per-minute metric over periods of ``period_min`` minutes (statistic
Average or Maximum), and is in ALARM while the last ``evaluation_periods`` datapoints all
breach the threshold (DatapointsToAlarm = EvaluationPeriods, as this project's step alarms
and the alarms Application Auto Scaling creates for target tracking use). A datapoint
completes at the end of its period; between period ends the state holds.
"""

import operator
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

Comparison = Literal[">", ">=", "<"]
_COMPARE: dict[str, Callable[[float, float], bool]] = {">": operator.gt, ">=": operator.ge, "<": operator.lt}


@dataclass
class Alarm:
    """One metric alarm; feed it one value per minute with :meth:`observe`."""

    threshold: float
    comparison: Comparison
    evaluation_periods: int
    period_min: int = 1
    statistic: Literal["Average", "Maximum"] = "Average"
    in_alarm: bool = False
    last_datapoint: float | None = None
    _minute_values: list[float] = field(default_factory=list)
    _breaches: deque[bool] = field(default_factory=deque)

    def observe(self, minute: int, value: float) -> bool:
        """Add the metric's value for ``minute`` (absolute); return whether the alarm is in ALARM."""
        self._minute_values.append(value)
        if (minute + 1) % self.period_min:
            return self.in_alarm
        values, self._minute_values = self._minute_values, []
        datapoint = max(values) if self.statistic == "Maximum" else sum(values) / len(values)
        self.last_datapoint = datapoint
        self._breaches.append(_COMPARE[self.comparison](datapoint, self.threshold))
        if len(self._breaches) > self.evaluation_periods:
            self._breaches.popleft()
        self.in_alarm = len(self._breaches) == self.evaluation_periods and all(self._breaches)
        return self.in_alarm
