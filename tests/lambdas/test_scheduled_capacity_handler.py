"""The scheduled-capacity handler against botocore's Stubber (requests validated against the
real Application Auto Scaling model), fed a planned timeline the way CloudFormation passes it
(numbers as strings).

The week is the default's at a peak busy enough that its floors differ (the default's all sit at
the warm floor of 2), and a hard max of 20."""

from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import pytest
from botocore.stub import Stubber

from app_config import AppConfig, load_config
from app_config.scheduled_actions import ResolvedAction
from planning.make_plan import make_plan
from planning.weekly_plan import effective_bounds
from tests.synth_helpers import cdk_json_context

HANDLER_MODULE = "cdk_constructs.scaling.runtime.index"
STUBBED_CLIENTS = ("AUTOSCALING",)
RESOURCE_ID = "endpoint/mangaassist-vllm-prod/variant/primary"


@pytest.fixture
def autoscaling(stubs: tuple[Stubber]) -> Stubber:
    return stubs[0]


def _config() -> AppConfig:
    return load_config(
        {**cdk_json_context(), "traffic.peak_requests_per_minute": "3000", "serving.primary.max_capacity": "20"}
    )


def _schedule() -> tuple[ResolvedAction, ...]:
    """The primary's planned weekly actions (their floors derived by the plan)."""
    return make_plan(_config()).scaling.primary.resolved_schedule


def _event(request_type: str = "Update", timezone: str = "Asia/Tokyo") -> dict[str, Any]:
    timeline = effective_bounds(_schedule(), 2, 20)
    return {
        "RequestType": request_type,
        "PhysicalResourceId": f"{RESOURCE_ID}/scheduled-capacity",
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:...",
            "ServiceNamespace": "sagemaker",
            "ResourceId": RESOURCE_ID,
            "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
            "Timezone": timezone,
            "Timeline": [
                {
                    "Start": str(b.start),
                    "MinCapacity": str(b.min_capacity),
                    "MaxCapacity": str(b.max_capacity),
                    "SetBy": b.set_by,
                }
                for b in timeline
            ],
            "HardBounds": ["2", "20"],
        },
    }


def _floor(action: str) -> int:
    """The primary floor that ``action`` sets (derived: planning/resolved_plan.py)."""
    (found,) = [a.min_capacity for a in _schedule() if a.name == action]
    return found


def _expect_register(stubber: Stubber, min_capacity: int, max_capacity: int) -> None:
    stubber.add_response(
        "register_scalable_target",
        {},
        {
            "ServiceNamespace": "sagemaker",
            "ResourceId": RESOURCE_ID,
            "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
            "MinCapacity": min_capacity,
            "MaxCapacity": max_capacity,
        },
    )


def test_a_deploy_at_friday_17_jst_keeps_the_release_floor(handler: ModuleType, autoscaling: Stubber) -> None:
    # FRI 17:00 JST = 08:00 UTC: friday-release-prescale set its floor at 16:00; the template says 2.
    floor = _floor("friday-release-prescale")
    assert floor > 2
    _expect_register(autoscaling, floor, 20)
    result = handler.on_event(_event(), now=datetime(2026, 11, 27, 8, 0, tzinfo=UTC))
    assert result["Data"] == {"MinCapacity": str(floor), "MaxCapacity": "20", "SetBy": "friday-release-prescale"}
    assert result["PhysicalResourceId"] == f"{RESOURCE_ID}/scheduled-capacity"


def test_off_peak_on_creation_registers_the_night_bounds(handler: ModuleType, autoscaling: Stubber) -> None:
    # TUE 03:00 JST = MON 18:00 UTC: off-peak (01:00) holds its floor; its ceiling is the hard max 20, so a
    # surge at night can scale to it (issue 21, finding 3: it used to be re-applied as 2-6 after every deploy).
    _expect_register(autoscaling, _floor("off-peak"), 20)
    result = handler.on_event(_event("Create"), now=datetime(2026, 11, 23, 18, 0, tzinfo=UTC))
    assert result["Data"]["SetBy"] == "off-peak"


def test_monday_before_the_first_action_has_last_weeks_bounds(handler: ModuleType, autoscaling: Stubber) -> None:
    # MON 00:30 JST: still the SUN 23:00 jp-evening-end bounds (the week wraps).
    _expect_register(autoscaling, _floor("jp-evening-end"), 20)
    result = handler.on_event(_event(), now=datetime(2026, 11, 22, 15, 30, tzinfo=UTC))
    assert result["Data"]["SetBy"] == "jp-evening-end (previous week)"


def test_delete_calls_nothing(handler: ModuleType, autoscaling: Stubber) -> None:
    assert handler.on_event(_event("Delete")) == {"PhysicalResourceId": f"{RESOURCE_ID}/scheduled-capacity"}


def test_an_unknown_time_zone_fails_the_deploy_with_its_name(handler: ModuleType, autoscaling: Stubber) -> None:
    with pytest.raises(ValueError) as error:
        handler.on_event(_event(timezone="Asia/Atlantis"), now=datetime(2026, 11, 27, 8, 0, tzinfo=UTC))
    assert str(error.value) == "Timezone 'Asia/Atlantis' is not a known IANA time zone"


def test_a_timeline_without_monday_midnight_is_refused(handler: ModuleType) -> None:
    with pytest.raises(ValueError) as error:
        handler.parse_timeline([{"Start": "60", "MinCapacity": "2", "MaxCapacity": "6", "SetBy": "x"}])
    assert str(error.value) == "Timeline must start at minute 0 (Monday 00:00), got [60]"


def _with_event(request_type: str = "Update") -> dict[str, Any]:
    event = _event(request_type)
    # As the construct passes it: local times in the Timezone, the floor a number CloudFormation stringifies.
    event["ResourceProperties"]["DatedEvents"] = [
        {"Name": "spring-anime", "Lift": "2027-03-31T22:00", "End": "2027-04-02T00:00", "MinCapacity": "12"}
    ]
    return event


def test_a_deploy_during_a_dated_event_keeps_its_floor(handler: ModuleType, autoscaling: Stubber) -> None:
    # Issue 40 item 8: THU 2027-04-01 10:00 JST = 01:00 UTC: business-hours' weekly floor, but the event's 12 holds.
    assert _floor("business-hours") < 12
    _expect_register(autoscaling, 12, 20)
    result = handler.on_event(_with_event(), now=datetime(2027, 4, 1, 1, 0, tzinfo=UTC))
    assert result["Data"] == {"MinCapacity": "12", "MaxCapacity": "20", "SetBy": "spring-anime (dated event)"}


def test_after_a_dated_event_the_weekly_floor_is_back(handler: ModuleType, autoscaling: Stubber) -> None:
    # FRI 2027-04-02 00:30 JST (THU 15:30 UTC): the event ended at 00:00; jp-evening-end's floor again.
    _expect_register(autoscaling, _floor("jp-evening-end"), 20)
    result = handler.on_event(_with_event(), now=datetime(2027, 4, 1, 15, 30, tzinfo=UTC))
    assert result["Data"]["SetBy"] == "jp-evening-end"
