"""ops.waiting: the one poll-until-InService loop, through both of its users, against Stubber."""

import pytest

from ops.components import has_a_copy, wait_component
from ops.endpoint import wait_in_service
from ops.exit_codes import ExitCode, OpsError
from tests.unit.ops.ops_stubs import BASE, ENDPOINT, FakeClock, stubbed


def test_the_endpoint_is_polled_every_poll_s_until_in_service() -> None:
    clock = FakeClock()
    with stubbed() as stubs:
        for status in ("Creating", "Updating", "SystemUpdating", "InService"):
            stubs.describe_endpoint(status=status)
        state = wait_in_service(
            stubs.clients.sagemaker, ENDPOINT, timeout_s=600, poll_s=30, clock=clock, sleep=clock.sleep
        )
    assert state.status == "InService"
    assert clock.sleeps == [30.0, 30.0, 30.0]


def test_a_component_waits_for_in_service_and_the_settled_condition() -> None:
    """InService with no copy is not yet woken: ``settled`` holds the wait open."""
    clock = FakeClock()
    with stubbed() as stubs:
        stubs.describe_component(BASE, status="Updating", copies=0, desired=1)
        stubs.describe_component(BASE, status="InService", copies=0, desired=1)
        stubs.describe_component(BASE, status="InService", copies=1)
        state = wait_component(
            stubs.clients.sagemaker,
            BASE,
            timeout_s=600,
            poll_s=15,
            clock=clock,
            sleep=clock.sleep,
            timeout_flag="--wake-timeout-s",
            settled=has_a_copy,
        )
    assert state.current_copies == 1
    assert clock.sleeps == [15.0, 15.0]


def test_a_component_that_never_settles_times_out_naming_its_state_and_the_flag() -> None:
    clock = FakeClock()
    with stubbed() as stubs:
        for _ in range(3):  # at 0, 30 and 60 s: the deadline is reached at the third reading
            stubs.describe_component(BASE, status="InService", copies=0, desired=1)
        with pytest.raises(OpsError) as info:
            wait_component(
                stubs.clients.sagemaker,
                BASE,
                timeout_s=60,
                poll_s=30,
                clock=clock,
                sleep=clock.sleep,
                timeout_flag="--wake-timeout-s",
                settled=has_a_copy,
            )
    assert info.value.code == ExitCode.NOT_READY
    assert str(info.value) == (
        f"inference component {BASE} still InService, 0 copies (desired 1) after 60 s (--wake-timeout-s)"
    )


@pytest.mark.parametrize("status", ["OutOfService", "RollingBack", "Deleting"])
def test_an_endpoint_status_with_no_way_back_to_in_service_ends_the_wait_at_once(status: str) -> None:
    """Statuses botocore's endpoint_in_service waiter would poll through for an hour."""
    clock = FakeClock()
    with stubbed() as stubs:
        stubs.describe_endpoint(status=status)
        with pytest.raises(OpsError) as info:
            wait_in_service(stubs.clients.sagemaker, ENDPOINT, timeout_s=600, poll_s=30, clock=clock, sleep=clock.sleep)
    assert str(info.value) == f"endpoint {ENDPOINT} is {status}"
    assert clock.sleeps == []
