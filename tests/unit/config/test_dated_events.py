"""Dated one-off events (issue 40 item 8): seed 001's floor, the at(...) actions they become, and
one line per bad value."""

import datetime as dt
import json
import math
from collections.abc import Iterator
from typing import Any

import pytest

from app_config import AppConfig, dated_events, load_config
from planning.dated_schedule import one_off_actions, usual_peak_rpm, weekly_segments
from planning.demand_week import base_rate
from planning.make_plan import make_plan
from planning.planner import Planner
from tests.config_helpers import config_error
from tests.synth_helpers import cdk_json_context

NOW = dt.datetime(2027, 1, 1, 12, 0)
"""The pinned "now" of the past-date check, local time (Asia/Tokyo)."""

SPRING = {"name": "spring-anime", "date": "2027-04-01", "demand_multiplier": 2.5}
"""Seed 001 user story 7: "Spring anime announcement season", April 1, x2.5."""

BUSY = {"traffic.requests_per_day": "200000"}
"""Four times seed 003's volume. At the default traffic one instance of the default fleet holds an
event's x2.5 evening and every derived floor is the warm floor (2), so nothing is lifted; this
week makes an event's derived floor rise above the weekly floors it pauses."""


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(dated_events, "clock", lambda _timezone: NOW)
    yield


def _events(*events: dict[str, Any]) -> dict[str, str]:
    return {"scaling.primary.dated_events": json.dumps(events)}


def _load(*events: dict[str, Any], **context: str) -> AppConfig:
    return load_config({**cdk_json_context(), **_events(*events), **context})


def _busy(*events: dict[str, Any]) -> AppConfig:
    return load_config({**cdk_json_context(), **BUSY, **_events(*events)})


def _actions(config: AppConfig) -> list[tuple[str, str, int, int]]:
    variant = make_plan(config).variant("primary")
    found = one_off_actions(variant.scaling, variant.serving.min_capacity, variant.serving.max_capacity)
    return [(a.name, a.schedule, a.min_capacity, a.max_capacity) for a in found]


def test_the_default_config_has_no_dated_events() -> None:
    # Seed 001's seasons recur yearly and carry no year: a dated default would stop synth once its day passed.
    assert make_plan(AppConfig()).scaling.primary.dated_events == ()


def test_the_floor_is_seed_001s_usual_demand_x_multiplier_over_capacity_x_1_3() -> None:
    config = _busy(SPRING)
    event = make_plan(config).scaling.primary.dated_events[0]
    instance_rpm = Planner.of(config).throughput(config.serving.primary.instance_type).requests_per_minute
    # A whole day: the usual demand's busiest minute is the evening peak's (20:00 in the daily shape).
    assert usual_peak_rpm(event, config.traffic) == pytest.approx(base_rate(20 * 60, config.traffic))
    expected = math.ceil(base_rate(20 * 60, config.traffic) * 2.5 / instance_rpm * 1.3)
    assert event.min_capacity == expected
    # A real lift, within the hard bounds.
    assert config.serving.primary.min_capacity < expected <= config.serving.primary.max_capacity


def test_a_derived_floor_below_the_hard_min_is_the_hard_min() -> None:
    # The default week and a x1.5 day: one instance holds its evening (seed 001's formula gives 1), so
    # the floor stays the warm floor (2).
    quiet = {**SPRING, "demand_multiplier": 1.5}
    config = _load(quiet)
    instance_rpm = Planner.of(config).throughput(config.serving.primary.instance_type).requests_per_minute
    assert (
        math.ceil(base_rate(20 * 60, config.traffic) * 1.5 / instance_rpm * 1.3) < config.serving.primary.min_capacity
    )
    assert make_plan(config).scaling.primary.dated_events[0].min_capacity == config.serving.primary.min_capacity


def test_an_explicit_floor_overrides_the_derived_one() -> None:
    config = _load({**SPRING, "min_capacity": 5})
    assert make_plan(_load(SPRING)).scaling.primary.dated_events[0].min_capacity != 5
    assert make_plan(config).scaling.primary.dated_events[0].min_capacity == 5


def test_a_whole_day_event_lifts_early_holds_through_every_weekly_action_and_restores_the_week() -> None:
    config = _busy(SPRING)
    plan = make_plan(config)
    floor = plan.scaling.primary.dated_events[0].min_capacity
    weekly = {action.name: action.min_capacity for action in plan.scaling.primary.resolved_schedule}
    assert floor is not None and floor > max(weekly.values())  # every weekly action would lower it
    hard_max = config.serving.primary.max_capacity
    assert _actions(config) == [
        # 2 h before (release_lead_time_min); 2027-03-31 is a Wednesday.
        ("spring-anime-lift", "at(2027-03-31T22:00:00)", floor, hard_max),
        # In place of each weekly action that would lower the floor inside the window (paused there).
        ("spring-anime-hold-1", "at(2027-03-31T23:00:00)", floor, hard_max),  # jp-evening-end
        ("spring-anime-hold-2", "at(2027-04-01T01:00:00)", floor, hard_max),  # off-peak
        ("spring-anime-hold-3", "at(2027-04-01T08:00:00)", floor, hard_max),  # business-hours
        ("spring-anime-hold-4", "at(2027-04-01T17:45:00)", floor, hard_max),  # jp-evening-peak (THU)
        ("spring-anime-hold-5", "at(2027-04-01T23:00:00)", floor, hard_max),  # jp-evening-end
        # The weekly bounds in force at FRI 00:00: jp-evening-end's.
        ("spring-anime-end", "at(2027-04-02T00:00:00)", weekly["jp-evening-end"], hard_max),
    ]


def test_an_event_whose_floor_the_week_already_holds_needs_no_hold() -> None:
    # The default week: the derived floor is the warm floor, which no weekly action lowers.
    config = _load(SPRING)
    assert [name for name, *_ in _actions(config)] == ["spring-anime-lift", "spring-anime-end"]


def test_weekly_actions_are_paused_around_the_window_not_undone_a_minute_later() -> None:
    # Lowering the floor under an over-provisioned fleet scales it in at once (make simulate --dated-event
    # showed 12 -> 6 at 08:00 when a hold re-raised the floor a minute after business-hours).
    config = _busy(SPRING)
    variant = make_plan(config).variant("primary")
    segments = {s.name: (s.start, s.end) for s in weekly_segments(variant.scaling, variant.serving.min_capacity)}
    lift, end = dt.datetime(2027, 3, 31, 22, 0), dt.datetime(2027, 4, 2, 0, 0)
    for paused in ("off-peak", "business-hours", "jp-evening-peak", "jp-evening-end"):
        assert segments[paused] == (None, lift)
        assert segments[f"{paused}-after-spring-anime"] == (end, None)
    for untouched in ("shonen-jump-prescale", "shonen-magazine-prescale", "friday-release-prescale"):
        assert segments[untouched] == (None, None)  # none fires inside the window (THU)
    one = next(s for s in weekly_segments(variant.scaling, 2) if s.name == "off-peak")
    # StartTime/EndTime are UTC: 22:00 JST is 13:00 UTC.
    assert one.utc(one.end, "Asia/Tokyo") == dt.datetime(2027, 3, 31, 13, 0, tzinfo=dt.UTC)


def test_one_release_evening_raised_for_one_week() -> None:
    # The runbook's case: one Monday's Shonen Jump carries a One Piece chapter (seed 001: 3x).
    config = _busy({"name": "one-piece", "date": "2027-01-11", "start_time": "18:00", "end_time": "22:00",
                    "demand_multiplier": 3.0})  # fmt: skip
    plan = make_plan(config)
    floor = plan.scaling.primary.dated_events[0].min_capacity
    weekly = next(e for e in plan.scaling.primary.events if e.name == "shonen-jump").min_capacity
    assert floor is not None and weekly is not None and floor > weekly  # above the weekly shonen-jump floor
    hard_max = config.serving.primary.max_capacity
    assert _actions(config) == [
        # shonen-jump-prescale fires at MON 16:00 itself; AWS orders no two actions of one minute.
        ("one-piece-lift", "at(2027-01-11T16:01:00)", floor, hard_max),
        ("one-piece-end", "at(2027-01-11T22:00:00)", weekly, hard_max),  # back to shonen-jump-prescale's floor
    ]


def test_an_event_in_the_past_stops_synth() -> None:
    assert config_error(_events({**SPRING, "date": "2026-04-01"})) == (
        "config error: scaling.primary.dated_events spring-anime: ends 2026-04-02 00:00, which has passed (now "
        "2027-01-01 12:00 Asia/Tokyo); remove it: a one-off scheduled action in the past never fires"
    )


def test_overlapping_events_stop_synth() -> None:
    later = {"name": "late-night", "date": "2027-04-02", "start_time": "01:00", "demand_multiplier": 2}
    assert config_error(_events(SPRING, later)) == (
        "config error: scaling.primary.dated_events spring-anime (2027-04-01 00:00 - 2027-04-02 00:00) and "
        "late-night (lift at 2027-04-01 23:01) overlap; merge them into one event or move one"
    )


@pytest.mark.parametrize(
    ("multiplier", "allowed"), [(0.5, "must be >= 1"), (25, "must be <= 20")], ids=["below-1", "above-20"]
)
def test_the_multiplier_has_bounds(multiplier: float, allowed: str) -> None:
    assert config_error(_events({**SPRING, "demand_multiplier": multiplier})) == (
        f"config error: scaling.primary.dated_events.0.demand_multiplier = {multiplier:g}: {allowed}"
    )


def test_a_range_that_runs_backwards_or_a_date_that_does_not_exist_stops_synth() -> None:
    assert config_error(_events({**SPRING, "last_date": "2027-03-30"})) == (
        "config error: scaling.primary.dated_events.0: spring-anime: last_date = 2027-03-30 is before date = 2027-04-01"
    )
    assert config_error(_events({**SPRING, "start_time": "12:00", "end_time": "09:00"})) == (
        "config error: scaling.primary.dated_events.0: spring-anime: ends 2027-04-01 09:00, not after its start "
        "2027-04-01 12:00; set last_date or end_time later"
    )
    assert config_error(_events({**SPRING, "date": "2027-02-30"})) == (
        "config error: scaling.primary.dated_events.0.date = '2027-02-30': must be a date YYYY-MM-DD that exists"
    )


def test_floors_outside_the_hard_bounds_stop_synth() -> None:
    surge = {**SPRING, "demand_multiplier": 20}
    config = _load(surge)
    event = config.scaling.primary.dated_events[0]
    instance_rpm = Planner.of(config).throughput(config.serving.primary.instance_type).requests_per_minute
    floor = math.ceil(usual_peak_rpm(event, config.traffic) * 20 / instance_rpm * 1.3)
    hard_max = config.serving.primary.max_capacity
    assert floor > hard_max
    assert config_error(_events(surge)) == (
        f"config error: scaling.primary.dated_events spring-anime: floor {floor} exceeds "
        f"serving.primary.max_capacity = {hard_max}; raise the hard max (and the instance quota) or set the event's "
        "min_capacity lower"
    )
    assert config_error(_events({**SPRING, "min_capacity": 1})) == (
        "config error: scaling.primary.dated_events spring-anime: min_capacity = 1 is below "
        "serving.primary.min_capacity = 2 (the scalable target's hard min)"
    )


def test_repeated_names_and_aws_quota_stop_synth() -> None:
    assert config_error(_events(SPRING, {**SPRING, "date": "2027-05-01"})) == (
        "config error: scaling.primary: dated_events: names must be unique; repeated: spring-anime"
    )
    # Three 20-day events above every weekly floor (BUSY): each a lift, an end and a hold for each of the
    # 81 weekly firings in its window (3 daily actions x 20 days, jp-evening-end the evening before, and
    # one jp-evening-peak or release pre-scale every day): 249; the 7 weekly actions in 4 segments each
    # around the three windows: 28. Beyond 200 actions per target.
    long = [
        {"name": f"season-{i}", "date": f"2027-0{i + 2}-01", "last_date": f"2027-0{i + 2}-20", "demand_multiplier": 2}
        for i in range(3)
    ]
    assert config_error({**BUSY, **_events(*long)}) == (
        "config error: scaling.primary.dated_events: 277 scheduled actions (249 of dated events); Application Auto "
        "Scaling allows 200 per scalable target (not adjustable); shorten or drop an event"
    )


def test_one_event_is_set_by_its_name() -> None:
    # Issue 40 item 3's naming works for dated events in a stage overlay too.
    config = load_config(
        {
            **cdk_json_context(),
            "scaling.primary.dated_events": json.dumps([SPRING]),
            "scaling.primary.dated_events.spring-anime.min_capacity": "5",
        }
    )
    assert make_plan(config).scaling.primary.dated_events[0].min_capacity == 5
