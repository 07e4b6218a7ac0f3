"""Reserved capacity for dated events (issue 55): AWS's rules checked at synth, one line each, and its cost in
``make plan``."""

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pytest

from app_config import dated_events
from planning import cost_plan
from planning.make_plan import load_plan
from tests.config_helpers import config_error
from tests.conftest import COMPONENTS, RESERVATION

NOW = dt.datetime(2030, 3, 1, 12, 0)
"""The pinned "now", local time (Asia/Tokyo): a month before the reservation."""

KEY = "serving.primary.capacity_reservation"


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(dated_events, "clock", lambda _timezone: NOW)
    yield


def _reserve(**changes: Any) -> str:
    return json.dumps({**RESERVATION, **changes})


def test_one_plan_per_endpoint() -> None:
    other = str(RESERVATION["ml_reservation_arn"]).replace("release-day", "other")
    message = config_error(
        {KEY: _reserve(instance_count=8), "serving.canary.capacity_reservation": _reserve(ml_reservation_arn=other)}
    )
    assert message == (
        "config error: serving.primary.capacity_reservation, serving.canary.capacity_reservation name 2 reservations "
        f"({other}, {RESERVATION['ml_reservation_arn']}): SageMaker takes exactly one plan per endpoint"
    )


def test_the_variant_runs_on_the_reservations_type_alone() -> None:
    assert config_error({KEY: _reserve(instance_type="ml.g6e.2xlarge")}) == (
        "config error: serving.primary.capacity_reservation.instance_type = ml.g6e.2xlarge: the variant must run on "
        "the reservation's type alone (serving.primary.instance_type = ml.g6e.xlarge); instances launch only into it"
    )
    pools = '["ml.g6e.xlarge","ml.g6e.2xlarge"]'
    assert config_error({KEY: _reserve(), "serving.primary.instance_pools": pools}) == (
        "config error: serving.primary.capacity_reservation.instance_type = ml.g6e.xlarge: the variant must run on "
        "the reservation's type alone (serving.primary.instance_type = ml.g6e.xlarge, instance_pools set); instances "
        "launch only into it"
    )


def test_serving_stops_when_it_ends() -> None:
    ended = _reserve(starts_at="2030-02-01T00:00", ends_at="2030-02-03T00:00")
    assert config_error({KEY: ended}) == (
        "config error: serving.primary.capacity_reservation.ends_at = 2030-02-03T00:00: the reservation has ended, and "
        "a variant on it serves nothing; remove the reservation to run on demand"
    )
    event = {"name": "release", "date": "2030-04-02", "last_date": "2030-04-03", "demand_multiplier": 2.5}
    assert config_error({KEY: _reserve(), "scaling.primary.dated_events": json.dumps([event])}) == (
        "config error: scaling.primary.dated_events.release ends 2030-04-04 00:00, after "
        "serving.primary.capacity_reservation.ends_at = 2030-04-03T00:00: the variant stops serving when the "
        "reservation ends"
    )


def test_no_more_instances_than_it_holds() -> None:
    assert config_error({KEY: _reserve(instance_count=4)}) == (
        "config error: serving.primary.max_capacity = 6: above the 4 instances the reservation holds "
        "(capacity_reservation.instance_count); instances beyond it fail to launch"
    )


def test_a_window_that_ends_before_it_starts_and_the_other_mode() -> None:
    assert config_error({KEY: _reserve(ends_at="2030-03-31T00:00")}) == (
        "config error: serving.primary.capacity_reservation: ends_at = 2030-03-31T00:00 must be after starts_at = "
        "2030-04-01T00:00"
    )
    assert config_error({**COMPONENTS, KEY: _reserve()}) == (
        "config error: serving.primary.capacity_reservation: reserved capacity is planned for serving.mode = variants "
        "only"
    )


def test_make_plan_prints_its_cost_beside_the_on_demand_band() -> None:
    config, plan = load_plan([f"{KEY}={_reserve()}"])
    text = cost_plan.format_plan(config, plan, cost_plan.plan(config, plan))
    assert (
        f"Reserved capacity {RESERVATION['ml_reservation_arn']}: 6 x ml.g6e.xlarge 2030-04-01 00:00 - 2030-04-03 00:00 "
        "(48 h), $700.00 upfront, paid whether used or not ($2.431 per instance-hour); instances launch only into it, "
        "and the variant stops serving at its end (warning to the alarm topic 48 h before)"
    ) in text
