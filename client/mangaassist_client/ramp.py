"""The migration's ramp, as the client sees it: the share of calls the endpoint answers, read from the state
the Migration stack's state machine keeps in an SSM parameter (``MigrationStateParameterName``).

The parameter holds one JSON object (``serving_contract/migration.py``, ``RAMP_STATE_FIELDS``); the client
reads ``percent`` (0 in the shadow phase and after a rollback, 5, 25, 50, 75, then 100). It asks SSM at most
once every ``refresh_s`` seconds, on the calling thread (``GetParameter``, a few milliseconds in-region); a
failed read keeps the last state it read, and before any read succeeded the endpoint answers nothing (0 %):
an unreadable ramp never sends users to the endpoint. A rollback therefore reaches every client within
``refresh_s``. Needs ``ssm:GetParameter`` on the parameter.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import Any


class RampShare:
    """The endpoint's share of calls, 0 to 1, from the ramp's parameter (module docstring).

    Args:
        ssm: a boto3 ``ssm`` client in the parameter's region.
        parameter_name: the parameter (``MigrationStateParameterName``).
        refresh_s: seconds a read is used before the next.
        clock: monotonic seconds.
    """

    def __init__(self, ssm: Any, parameter_name: str, *, refresh_s: float, clock: Callable[[], float]) -> None:
        self._ssm, self.parameter_name, self._refresh_s, self._clock = ssm, parameter_name, refresh_s, clock
        self._share = 0.0
        self._read_at: float | None = None
        self._lock = threading.Lock()
        self.last_error: str | None = None

    def share(self) -> float:
        """The share now: the last read's ``percent`` / 100 (0 before any read succeeded)."""
        with self._lock:
            now = self._clock()
            if self._read_at is None or now - self._read_at >= self._refresh_s:
                self._read_at = now
                self._read()
            return self._share

    def _read(self) -> None:
        try:
            value = self._ssm.get_parameter(Name=self.parameter_name)["Parameter"]["Value"]
            percent = json.loads(value)["percent"]
            if isinstance(percent, bool) or not isinstance(percent, int | float) or not 0 <= percent <= 100:
                raise ValueError(f"percent = {percent!r}: must be from 0 to 100")
        except Exception as error:  # a ramp that cannot be read keeps what was read last
            self.last_error = f"{self.parameter_name}: {type(error).__name__}: {str(error)[:200]}"
            print(f"mangaassist_client: ramp state not read: {self.last_error}", file=sys.stderr)
            return
        self.last_error = None
        self._share = float(percent) / 100
