"""The one poll-until-InService loop: endpoints (``ops.endpoint.wait_in_service``) and inference
components (``ops.components.wait_component``) both wait through it.

Why not botocore's waiters (sagemaker/2017-07-24 ``waiters-2.json``): there is no waiter for
inference components; ``endpoint_in_service`` fails only on ``Failed`` (it would poll through
``UpdateRollbackFailed``, ``OutOfService`` or ``RollingBack`` for its full 120 x 30 s), cannot
hold out for a condition besides the status (the new weights in ``CurrentWeight``, a running
copy), and counts attempts with ``time.sleep`` where the commands take a timeout in seconds
(``--update-timeout-s``) and tests pass a fake clock.
"""

from collections.abc import Callable, Collection
from typing import Final, Protocol, TypeVar

from ops.exit_codes import ExitCode, OpsError

IN_SERVICE: Final = "InService"


class Described(Protocol):
    """What a Describe* call is reduced to: a status, and why it failed (may be "")."""

    @property
    def status(self) -> str: ...

    @property
    def failure_reason(self) -> str: ...


StateT = TypeVar("StateT", bound=Described)


def wait_until_in_service(
    describe: Callable[[], StateT],
    *,
    what: str,
    ends: Collection[str],
    timeout_s: float,
    poll_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    timeout_flag: str,
    still: Callable[[StateT], str],
    settled: Callable[[StateT], bool] | None = None,
) -> StateT:
    """Call ``describe()`` every ``poll_s`` seconds until the status is InService and
    ``settled(state)`` holds (when given); return that state.

    ``what`` names the resource in errors (``endpoint my-endpoint``). Raises OpsError (NOT_READY):
    at once on a status in ``ends`` (``<what> is Failed (<FailureReason>)``), and after
    ``timeout_s`` seconds by ``clock`` (``<what> still <still(state)> after 60 s (<timeout_flag>)``).
    """
    deadline = clock() + timeout_s
    while True:
        state = describe()
        if state.status == IN_SERVICE and (settled is None or settled(state)):
            return state
        if state.status in ends:
            reason = f" ({state.failure_reason})" if state.failure_reason else ""
            raise OpsError(f"{what} is {state.status}{reason}", ExitCode.NOT_READY)
        if clock() >= deadline:
            raise OpsError(f"{what} still {still(state)} after {timeout_s:g} s ({timeout_flag})", ExitCode.NOT_READY)
        sleep(poll_s)
