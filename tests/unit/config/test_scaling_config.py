"""Scaling and rollout config: cron parsing, step bounds, schedule cross-checks, messages."""

import json

import pytest

from app_config import AppConfig, load_config
from app_config.scaling import VariantScalingConfig
from app_config.scheduled_actions import ReleaseEventConfig
from planning.fleet_planner import recommend, scheduled_floors
from planning.make_plan import make_plan
from planning.weekly_cron import parse_weekly_cron, weekly_cron
from planning.weekly_plan import effective_bounds
from tests.config_helpers import config_error
from tests.synth_helpers import SEEDS_G5, cdk_json_context


def _context(overrides: dict[str, str]) -> dict[str, object]:
    return {**cdk_json_context(), **overrides}


def _schedule(*actions: dict[str, object]) -> str:
    return json.dumps(list(actions))


def test_cron_days_map_to_minutes_of_the_week() -> None:
    # Monday 00:00 is minute 0; cron day-of-week 1 = SUN, 2 = MON (EventBridge numbering).
    assert parse_weekly_cron("cron(0 16 ? * MON *)").minutes_of_week == (16 * 60,)
    assert parse_weekly_cron("cron(30 6 ? * 1 *)").minutes_of_week == (6 * 1440 + 6 * 60 + 30,)
    daily = parse_weekly_cron("cron(0 1 * * ? *)").minutes_of_week
    assert daily == tuple(day * 1440 + 60 for day in range(7))
    assert len(parse_weekly_cron("cron(0/15 8-9 ? * MON-FRI *)").minutes_of_week) == 4 * 2 * 5


def test_weekly_cron_round_trips() -> None:
    for minute in (0, 16 * 60, 6 * 1440 + 23 * 60 + 45):
        assert parse_weekly_cron(weekly_cron(minute)).minutes_of_week == (minute,)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("0 1 * * ? *", "'0 1 * * ? *' must look like cron(min hour day-of-month month day-of-week year)"),
        ("cron(0 1 * * ?)", "'cron(0 1 * * ?)' has 5 fields; Application Auto Scaling cron has 6"),
        ("cron(0 1 * * MON *)", "exactly one of day-of-month ('*') and day-of-week ('MON') must be '?'"),
        ("cron(0 1 ? * ? *)", "exactly one of day-of-month ('?') and day-of-week ('?') must be '?'"),
        ("cron(61 1 * * ? *)", "'cron(61 1 * * ? *)': 61 is outside 0-59"),
        ("cron(0 24 * * ? *)", "'cron(0 24 * * ? *)': 24 is outside 0-23"),
        ("cron(0 1 ? * FUN *)", "'FUN' is not a number or name"),
        ("cron(0 1 15 * ? *)", "day-of-month '15' is not weekly"),
        ("cron(0 1 ? * MON 2027)", "year '2027' is not weekly"),
        ("cron(0 1 ? * 6#3 *)", "'L' and '#' are not weekly"),
    ],
)
def test_bad_cron_is_rejected_with_its_reason(expression: str, expected: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_weekly_cron(expression)
    assert expected in str(info.value)


def test_bad_cron_in_config_names_the_key() -> None:
    message = config_error(
        {
            "scaling.primary.schedule": _schedule(
                {"name": "x", "schedule": "cron(0 1 * * MON *)", "min_capacity": 2, "max_capacity": 6}
            )
        }
    )
    assert message == (
        "config error: scaling.primary.schedule.0.schedule = 'cron(0 1 * * MON *)': 'cron(0 1 * * MON *)': exactly "
        "one of day-of-month ('*') and day-of-week ('MON') must be '?'"
    )


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (
            [{"lower": 50, "upper": 100, "adjustment": 2}, {"lower": 120, "adjustment": 4}],
            "scale_out_steps[0].upper = 100 must equal scale_out_steps[1].lower = 120 (steps must be contiguous "
            "and non-overlapping)",
        ),
        (
            [{"lower": 50, "upper": 150, "adjustment": 2}, {"lower": 100, "adjustment": 4}],
            "scale_out_steps[0].upper = 150 must equal scale_out_steps[1].lower = 100",
        ),
        (
            [{"lower": 50, "adjustment": 2}, {"lower": 100, "adjustment": 4}],
            "scale_out_steps[0].upper is unbounded but step 1 follows; only the last step may have upper = null",
        ),
        (
            [{"lower": 50, "upper": 100, "adjustment": 2}],
            "scale_out_steps[0].upper = 100: the last step must be unbounded (null)",
        ),
        (
            [{"lower": 100, "upper": 50, "adjustment": 2}, {"lower": 50, "adjustment": 4}],
            "scale_out_steps[0]: lower = 100 must be < upper = 50",
        ),
        (
            [{"lower": 50, "upper": 100, "adjustment": 4}, {"lower": 100, "adjustment": 2}],
            "scale_out_steps[1].adjustment = 2 is below scale_out_steps[0].adjustment = 4",
        ),
    ],
)
def test_step_bounds_must_be_ordered_and_contiguous(steps: list[dict[str, object]], expected: str) -> None:
    message = config_error({"scaling.primary.step_scaling.scale_out_steps": json.dumps(steps)})
    assert message.startswith("config error: scaling.primary.step_scaling: ")
    assert expected in message


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {
                "scaling.primary.schedule": _schedule(
                    {"name": "big", "schedule": "cron(0 9 * * ? *)", "min_capacity": 4, "max_capacity": 30}
                ),
                "serving.primary.max_capacity": "20",
            },
            "config error: scaling.primary: scheduled action(s) big max_capacity = 30 exceed "
            "serving.primary.max_capacity = 20 (the scalable target's hard max); leave their max_capacity unset to "
            "follow it",
        ),
        (
            {
                "stage": "dev",
                "scaling.primary.schedule": _schedule(
                    {"name": "low", "schedule": "cron(0 9 * * ? *)", "min_capacity": 0, "max_capacity": 2}
                ),
            },
            "config error: scaling.primary: scheduled action low min_capacity = 0 is below "
            "serving.primary.min_capacity = 1 (the scalable target's hard min)",
        ),
        (
            {
                "scaling.primary.schedule": _schedule(
                    {"name": "inverted", "schedule": "cron(0 9 * * ? *)", "min_capacity": 6, "max_capacity": 4}
                )
            },
            "config error: scaling.primary.schedule.0: inverted: min_capacity = 6 must be <= max_capacity = 4",
        ),
        (
            {
                "scaling.primary.schedule": _schedule(
                    {"name": "a", "schedule": "cron(0 9 * * ? *)", "min_capacity": 2, "max_capacity": 4},
                    {"name": "a", "schedule": "cron(0 10 * * ? *)", "min_capacity": 2, "max_capacity": 4},
                )
            },
            "config error: scaling.primary: scheduled action names must be unique; repeated: a",
        ),
        (
            {
                "scaling.primary.schedule": _schedule(
                    {"name": "a", "schedule": "cron(0 9 * * ? *)", "min_capacity": 2, "max_capacity": 4},
                    {"name": "b", "schedule": "cron(0 9 ? * MON *)", "min_capacity": 3, "max_capacity": 4},
                )
            },
            "config error: scaling.primary: scheduled actions a and b both fire at MON 09:00; AWS gives no order "
            "between them, move one",
        ),
        (
            # The daily evening peak at 17:45 would lower the 16:00 release lift before 18:00.
            {
                "scaling.primary.schedule": _schedule(
                    {"name": "jp-evening-peak", "schedule": "cron(45 17 * * ? *)", "min_capacity": 3}
                ),
                "scaling.primary.events.shonen-jump.min_capacity": "5",
            },
            "config error: scaling.primary.events shonen-jump: at MON 18:00 the floor is 3 (set by jp-evening-peak), "
            "below the event's min_capacity = 5; a later scheduled action undoes the pre-scale",
        ),
        (
            {
                "scaling.primary.target_tracking.metric": "concurrent_requests_high_resolution",
                "scaling.primary.target_tracking.concurrent_requests_target": "128",
            },
            "config error: scaling.primary.target_tracking.concurrent_requests_target = 128 must be below "
            "engine.max_num_seqs = 128, or the engine queues before the fleet scales",
        ),
        (
            {
                "scaling.rollout.traffic_routing": "LINEAR",
                "scaling.rollout.linear_step_percent": "10",
                "scaling.rollout.wait_interval_s": "600",
            },
            "config error: scaling.rollout: maximum_execution_timeout_s = 3600 must exceed the traffic shifting "
            "time (10 step(s) x wait_interval_s = 600 = 6000 s)",
        ),
        (
            # Shifting alone fits (5 x 600 = 3000 < 3600), but not with provisioning and the startup check.
            {"scaling.rollout.traffic_routing": "LINEAR", "scaling.rollout.linear_step_percent": "20"},
            "config error: scaling.rollout.maximum_execution_timeout_s = 3600 must exceed "
            "scaling.rollout.green_provisioning_allowance_s = 480 + serving.container_startup_health_check_timeout_s "
            "= 600 + traffic shifting (5 step(s) x scaling.rollout.wait_interval_s = 600) = 4080 s",
        ),
        (
            # At or above the sequences a full engine runs, the low-load alarm fires at full load (below the
            # target, so the target check passes). On the seeds' fleet: the bound is the A10G's memory plan.
            {
                **SEEDS_G5,
                "scaling.primary.target_tracking.concurrent_requests_target": "40",
                "scaling.primary.step_scaling.scale_in_running_requests": "30",
            },
            "config error: scaling.primary.step_scaling.scale_in_running_requests = 30: must be <= 21.5, half the "
            "43 sequences the engine runs on ml.g5.xlarge (memory plan at 2,560 tokens, engine.max_num_seqs = 128); "
            "removing one of two instances doubles the survivor's load, and a threshold at the ceiling scales in at "
            "full load",
        ),
        (
            # The canary's own instance type sets its bound (ml.g6e.xlarge: an L40S with 48 GB).
            {
                "serving.canary.instance_type": "ml.g6e.xlarge",
                "scaling.canary.target_tracking.concurrent_requests_target": "120",
                "scaling.canary.step_scaling.scale_in_running_requests": "100",
            },
            "config error: scaling.canary.step_scaling.scale_in_running_requests = 100: must be <= 54.5, half the "
            "109 sequences the engine runs on ml.g6e.xlarge (memory plan at 2,560 tokens, engine.max_num_seqs = "
            "128); removing one of two instances doubles the survivor's load, and a threshold at the ceiling scales "
            "in at full load",
        ),
        (
            {"serving.container_startup_health_check_timeout_s": "2700"},
            "config error: scaling.rollout.maximum_execution_timeout_s = 3600 must exceed "
            "scaling.rollout.green_provisioning_allowance_s = 480 + serving.container_startup_health_check_timeout_s "
            "= 2700 + traffic shifting (1 step(s) x scaling.rollout.wait_interval_s = 600) = 3780 s",
        ),
    ],
)
def test_schedule_and_rollout_cross_checks_explain_themselves(overrides: dict[str, str], expected: str) -> None:
    assert config_error(overrides) == expected


def test_scheduled_floors_keep_the_prod_warm_floor() -> None:
    message = config_error(
        {
            "scaling.primary.events": "[]",
            "scaling.primary.schedule": _schedule(
                {"name": "night", "schedule": "cron(0 1 * * ? *)", "min_capacity": 1, "max_capacity": 4}
            ),
        }
    )
    assert message == (
        "config error: scaling.primary: scheduled action night min_capacity = 1: must be >= 2 in prod "
        "(the warm floor, seed 001 user story 3)"
    )


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (
            "scaling.timezone",
            "Tokyo/Japan",
            "config error: scaling.timezone = 'Tokyo/Japan': must be an IANA time zone name such as Asia/Tokyo",
        ),
        (
            "scaling.rollout.canary_size_percent",
            "60",
            "config error: scaling.rollout.canary_size_percent = '60': must be <= 50",
        ),
        (
            "scaling.rollout.linear_step_percent",
            "5",
            "config error: scaling.rollout.linear_step_percent = '5': must be >= 10",
        ),
        (
            "scaling.rollout.wait_interval_s",
            "3601",
            "config error: scaling.rollout.wait_interval_s = '3601': must be <= 3600",
        ),
        (
            "scaling.rollout.maximum_execution_timeout_s",
            "599",
            "config error: scaling.rollout.maximum_execution_timeout_s = '599': must be >= 600",
        ),
        (
            "scaling.rollout.traffic_routing",
            "ROLLING",
            "config error: scaling.rollout.traffic_routing = 'ROLLING': "
            "must be one of 'CANARY', 'LINEAR' or 'ALL_AT_ONCE'",
        ),
        (
            "scaling.primary.target_tracking.metric",
            "cpu",
            "config error: scaling.primary.target_tracking.metric = "
            "'cpu': must be one of 'invocations_per_instance' or 'concurrent_requests_high_resolution'",
        ),
        (
            "scaling.primary.release_lead_time_min",
            "-1",
            "config error: scaling.primary.release_lead_time_min = '-1': must be >= 0",
        ),
        (
            "scaling.primary.events",
            '[{"name": "x", "day_of_week": "MONDAY", "min_capacity": 4, "max_capacity": 8}]',
            "config error: scaling.primary.events.0.day_of_week = 'MONDAY': must be one of 'MON', 'TUE'",
        ),
        (
            "scaling.primary.events",
            '[{"name": "x", "day_of_week": "MON", "time": "25:00", "min_capacity": 4, "max_capacity": 8}]',
            "config error: scaling.primary.events.0.time = '25:00': must match",
        ),
        (
            "scaling.hourly_price_usd",
            '{"ml.g5.xlarge": 0}',
            "config error: scaling.hourly_price_usd: ml.g5.xlarge: price = 0.0 must be > 0 USD per hour",
        ),
    ],
)
def test_bad_scaling_value_names_key_value_and_allowed(key: str, value: str, expected: str) -> None:
    assert config_error({key: value}).startswith(expected)


def test_defaults_hold_the_seeds_times_at_the_floors_the_plan_needs() -> None:
    config = load_config(cdk_json_context())
    actions = {a.name: a for a in make_plan(config).scaling.primary.resolved_schedule}
    # Floors only (issue 21, finding 3): every ceiling is serving.primary.max_capacity.
    assert actions["off-peak"].schedule == "cron(0 1 * * ? *)"
    assert {a.max_capacity for a in actions.values()} == {None}
    assert actions["business-hours"].schedule == "cron(0 8 * * ? *)"
    assert actions["jp-evening-peak"].schedule == "cron(45 17 ? * TUE,THU,SAT,SUN *)"
    # 18:00 release minus the 2 h lead (seed 001 user story 7).
    assert actions["shonen-jump-prescale"].schedule == "cron(0 16 ? * MON *)"
    assert actions["shonen-magazine-prescale"].schedule == "cron(0 16 ? * WED *)"
    assert actions["friday-release-prescale"].schedule == "cron(0 16 ? * FRI *)"
    # Each floor is what make plan says the busiest of its segments needs on the default fleet, no
    # more (tests/unit/planning/test_default_fleet.py checks that none is less).
    plan = make_plan(config)
    best = recommend(config, plan.planner)
    assert best is not None
    needs: dict[str, int] = {}
    for when_and_action, _, needed in scheduled_floors(config, plan, best):
        name = when_and_action.split(" ", 2)[2].removesuffix(" (previous week)")
        needs[name] = max(needs.get(name, 0), needed)
    assert {name: action.min_capacity for name, action in actions.items()} == needs


def test_a_lead_time_past_midnight_moves_the_lift_to_the_previous_day() -> None:
    scaling = VariantScalingConfig(
        events=(ReleaseEventConfig(name="jump", day_of_week="MON", min_capacity=8, max_capacity=20),),
        release_lead_time_min=18 * 60 + 30,
    )
    # MON 18:00 - 18 h 30 min = SUN 23:30 (the week wraps).
    assert [a.schedule for a in scaling.resolved_schedule] == ["cron(30 23 ? * SUN *)"]


def test_a_lift_that_the_nightly_floor_undoes_is_rejected() -> None:
    # With the seeds' schedule, a lift at SUN 23:30 is undone by MON 01:00 off-peak and 08:00 business hours.
    message = config_error(
        {
            "scaling.primary.release_lead_time_min": str(18 * 60 + 30),
            "scaling.primary.schedule.business-hours.min_capacity": "3",
            "scaling.primary.events.shonen-jump.min_capacity": "5",
        }
    )
    assert message == (
        "config error: scaling.primary.events shonen-jump: at MON 18:00 the floor is 3 (set by business-hours), "
        "below the event's min_capacity = 5; a later scheduled action undoes the pre-scale"
    )


def test_a_derived_lift_keeps_its_floor_until_the_event() -> None:
    # Left to the plan, the lift's floor is what the busiest minute until the next action needs, so a
    # lift far ahead of the release adds nothing a later action could undo: the plan is accepted.
    config = load_config(_context({"scaling.primary.release_lead_time_min": str(18 * 60 + 30)}))
    actions = {a.name: a for a in make_plan(config).scaling.primary.resolved_schedule}
    assert actions["shonen-jump-prescale"].schedule == "cron(30 23 ? * SUN *)"
    assert actions["shonen-jump-prescale"].min_capacity <= actions["off-peak"].min_capacity


# --- issue 21, finding 3: serving.<variant>.max_capacity and the schedule agree by construction ----


def _ceilings(config: AppConfig) -> set[int]:
    hard = config.serving.primary
    timeline = effective_bounds(
        make_plan(config).scaling.primary.resolved_schedule, hard.min_capacity, hard.max_capacity
    )
    return {bounds.max_capacity for bounds in timeline}


def test_raising_max_capacity_raises_every_scheduled_ceiling() -> None:
    """The README's own example: max_capacity=24 used to stay capped at 20 (6 at night) by the schedule."""
    assert _ceilings(load_config(_context({"serving.primary.max_capacity": "24"}))) == {24}


def test_lowering_max_capacity_is_one_edit() -> None:
    """Lowering it used to fail on one schedule entry at a time; now the schedule follows it."""
    assert _ceilings(load_config(_context({"serving.primary.max_capacity": "4"}))) == {4}


def test_lowering_max_capacity_below_a_scheduled_floor_names_every_floor() -> None:
    # Derived floors never exceed the hard max (the plan caps them); floors set by hand can.
    message = config_error(
        {
            "scaling.primary.schedule.jp-evening-peak.min_capacity": "5",
            "scaling.primary.events.shonen-jump.min_capacity": "6",
            "scaling.primary.events.friday-release.min_capacity": "6",
            "serving.primary.max_capacity": "4",
        }
    )
    assert message == (
        "config error: scaling.primary: scheduled action(s) jp-evening-peak min_capacity = 5, shonen-jump-prescale "
        "min_capacity = 6, friday-release-prescale min_capacity = 6 exceed serving.primary.max_capacity = 4; lower "
        "those floors or raise the hard max"
    )


def test_a_derived_floor_is_capped_at_the_hard_max() -> None:
    # Seed 001's volume needs far more than the default fleet's hard max at its peak: the floors stop
    # there (make plan's NOTE says to raise it) instead of stopping synth.
    config = load_config(_context({"traffic.peak_requests_per_minute": "8000"}))
    floors = [a.min_capacity for a in make_plan(config).scaling.primary.resolved_schedule]
    assert max(floors) == config.serving.primary.max_capacity


def test_an_explicit_scheduled_ceiling_is_still_honoured() -> None:
    schedule = _schedule({"name": "night", "schedule": "cron(0 1 * * ? *)", "min_capacity": 2, "max_capacity": 4})
    config = load_config(_context({"scaling.primary.schedule": schedule, "scaling.primary.events": "[]"}))
    assert config.serving.primary.max_capacity != 4
    assert _ceilings(config) == {4}


def test_the_scale_in_threshold_follows_the_concurrency_target() -> None:
    # Issue 37 item 3: 'RunningRequests < 8' sat above a derived target of 1, so step scale-in removed
    # what target tracking added. Unset, it is a quarter of the target the variant tracks.
    config = load_config(cdk_json_context())
    for variant in make_plan(config).variants():
        target = variant.scaling.target_tracking.target_value
        assert variant.scaling.step_scaling.scale_in_threshold == target / 4
    raised = load_config({**cdk_json_context(), "scaling.primary.target_tracking.concurrent_requests_target": "16"})
    assert make_plan(raised).scaling.primary.step_scaling.scale_in_threshold == 4


def test_a_scale_in_threshold_at_the_target_stops_synth() -> None:
    message = config_error(
        {
            "scaling.primary.target_tracking.concurrent_requests_target": "4",
            "scaling.primary.step_scaling.scale_in_running_requests": "4",
        }
    )
    assert message == (
        "config error: scaling.primary.step_scaling.scale_in_running_requests = 4: must be below "
        "scaling.primary.target_tracking.concurrent_requests_target = 4, or step scale-in removes the instances "
        "target tracking adds (leave it unset: a quarter of the target)"
    )


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, "config error: serving.primary.min_capacity = 2: must be >= 3 in prod"),
        (
            {"serving.mode": "inference_components"},
            "config error: serving.inference_components.min_copy_count = 2, scale_to_zero = false: prod keeps at "
            "least 3 warm copies",
        ),
        (
            {
                "serving.primary.min_capacity": "3",
                "serving.primary.initial_instance_count": "3",
                "scaling.primary.events": "[]",
                "scaling.primary.schedule": _schedule(
                    {"name": "night", "schedule": "cron(0 1 * * ? *)", "min_capacity": 2, "max_capacity": 4}
                ),
            },
            "config error: scaling.primary: scheduled action night min_capacity = 2: must be >= 3 in prod",
        ),
    ],
    ids=["instances", "copies", "scheduled-floors"],
)
def test_every_warm_floor_check_reads_the_one_declaration(
    monkeypatch: pytest.MonkeyPatch, overrides: dict[str, str], expected: str
) -> None:
    """Raising PROD_WARM_FLOOR (seed 001's 2) moves all three prod checks: none holds its own copy of the
    number (the config's checks and the plan's import the one declaration of app_config/scaling.py)."""
    for module in ("app_config.cross_section_checks", "planning.checks"):
        monkeypatch.setattr(f"{module}.PROD_WARM_FLOOR", 3)
    assert config_error({"stage": "prod", **overrides}).startswith(expected)
