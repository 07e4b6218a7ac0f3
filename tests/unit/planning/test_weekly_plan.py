"""The capacity plan's numbers against a hand calculation of the default schedule (the seeds' times, its floors).

The week is the default's at a peak busy enough that its floors differ (at the default traffic every
floor is the warm floor of 2), with a hard max of 20."""

import json
from pathlib import Path

import pytest

from app_config import AppConfig
from app_config.loader import CDK_JSON
from planning import cost_plan, instance_prices
from planning.make_plan import load_plan

BUSY = ["traffic.peak_requests_per_minute=3000", "serving.primary.max_capacity=20"]
BUSY_FLAGS = [flag for override in BUSY for flag in ("-c", override)]


def _floors() -> dict[str, int]:
    """The primary's floors by scheduled action or release day (derived by the plan: planning/resolved_plan.py)."""
    scaling = load_plan(BUSY)[1].scaling.primary
    floors: dict[str, int | None] = {
        **{action.name: action.min_capacity for action in scaling.schedule},
        **{event.day_of_week: event.min_capacity for event in scaling.events},
    }
    unset = [name for name, floor in floors.items() if floor is None]
    assert not unset, f"the plan left these floors unset: {unset}"
    return {name: floor for name, floor in floors.items() if floor is not None}


def _price() -> float:
    """USD per hour of the default primary's instance type (planning/instance_prices.json)."""
    return instance_prices.hourly_price(AppConfig().serving.primary.instance_type).usd_per_hour


def _primary(*overrides: str) -> cost_plan.VariantPlan:
    return cost_plan.plan(*load_plan([*BUSY, *overrides]))[0]


def test_primary_week_matches_the_hand_calculation() -> None:
    f = _floors()
    off, business, peak, end = f["off-peak"], f["business-hours"], f["jp-evening-peak"], f["jp-evening-end"]
    # Release days (MON, WED, FRI), hours in JST:
    #   00-01 jp-evening-end (of the day before), 01-08 off-peak, 08-16 business hours,
    #   16-23 the release floor (2 h pre-scale before the 18:00 release), 23-24 jp-evening-end.
    release_day_floor = sum(1 * end + 7 * off + 8 * business + 7 * f[day] + 1 * end for day in ("MON", "WED", "FRI"))
    # Ceilings: serving.primary.max_capacity (20) all day; no scheduled action caps it (issue 21, finding 3).
    release_day_ceiling = 24 * 20  # = 480
    # Other days (TUE, THU, SAT, SUN): 08-17:45 business hours (9.75 h), 17:45-23 evening peak
    # (5.25 h, 15 min early).
    other_day_floor = 1 * end + 7 * off + 9.75 * business + 5.25 * peak + 1 * end
    other_day_ceiling = 24 * 20  # = 480
    week_floor = release_day_floor + 4 * other_day_floor
    week_ceiling = 3 * release_day_ceiling + 4 * other_day_ceiling  # = 3360

    plan = _primary()
    assert plan.variant_name == "primary"
    assert plan.floor_hours_per_week == pytest.approx(week_floor)
    assert plan.ceiling_hours_per_week == pytest.approx(week_ceiling)
    # A month is 730 h, i.e. 730 / 168 weeks.
    assert plan.floor_hours_per_month == pytest.approx(week_floor * 730 / 168)
    low, high = plan.monthly_cost_band_usd
    assert low == pytest.approx(week_floor * 730 / 168 * _price())
    assert high == pytest.approx(week_ceiling * 730 / 168 * _price())


def test_hourly_grid_shows_the_bounds_after_every_action() -> None:
    f = _floors()
    plan = _primary()
    monday, tuesday = plan.hourly[0], plan.hourly[1]
    assert monday[0] == (f["jp-evening-end"], 20)  # carried over from SUN 23:00
    assert monday[3] == (f["off-peak"], 20)  # off-peak floor; the hard max stays the ceiling
    assert monday[16] == (f["MON"], 20)  # Shonen Jump pre-scale at 16:00
    assert tuesday[16] == (f["business-hours"], 20)
    assert tuesday[17] == (f["jp-evening-peak"], 20)  # evening peak at 17:45 is in force at 17:59
    assert tuesday[23] == (f["jp-evening-end"], 20)


def test_canary_runs_within_its_hard_bounds_all_week() -> None:
    canary = cost_plan.plan(*load_plan([]))[1]
    assert canary.variant_name == "canary"
    assert canary.floor_hours_per_week == 1 * 168
    assert canary.ceiling_hours_per_week == 2 * 168


def test_variant_without_scaling_runs_its_initial_count() -> None:
    plan = _primary("scaling.primary.enabled=false")
    count = AppConfig().serving.primary.initial_instance_count
    assert plan.floor_hours_per_week == plan.ceiling_hours_per_week == count * 168


def test_missing_price_is_a_config_error(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # Every accepted type is priced (tests/unit/planning/test_instance_prices.py); a table that lost a row
    # makes the plan stop with the type named, not print a blank (the recommender prices every type).
    table = instance_prices.price_table()
    prices = {name: row for name, row in table["prices"].items() if name != "ml.g6.xlarge"}
    monkeypatch.setattr(instance_prices, "price_table", lambda: {**table, "prices": prices})
    code = cost_plan.main(["-c", "serving.primary.instance_type=ml.g6.xlarge"])
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "config error: no price for ml.g6.xlarge in instance_prices.json (as of 2026-11-26); add it with "
        "make prices or -c 'scaling.hourly_price_usd={\"ml.g6.xlarge\": USD}'"
    )


def test_command_prints_the_week_and_the_band(capsys: pytest.CaptureFixture[str]) -> None:
    assert cost_plan.main(BUSY_FLAGS) == 0
    out = capsys.readouterr().out
    assert "times in Asia/Tokyo" in out
    assert f"MON 16:00  min {_floors()['MON']:3}  max  20  shonen-jump-prescale" in out
    low, high = _primary().monthly_cost_band_usd
    assert f"On-demand cost band per month: ${low:,.2f} .. ${high:,.2f}" in out


def test_compare_prints_baseline_against_the_override(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # The baseline is the cdk.json without -c: the busy week goes into the prod stage of a copy.
    cdk_json = json.loads(CDK_JSON.read_text())
    cdk_json["context"]["stages"]["prod"] = {
        "traffic": {"peak_requests_per_minute": 3000},
        "serving": {"primary": {"max_capacity": 20}},
    }
    busy_json = tmp_path / "cdk.json"
    busy_json.write_text(json.dumps(cdk_json))
    argv = ["--compare", "--cdk-json", str(busy_json), "-c", "scaling.primary.release_lead_time_min=180"]
    assert cost_plan.main(argv) == 0
    out = capsys.readouterr().out
    comparison = out[out.index("Comparison: baseline -> override") :]
    # One extra hour at the release floor instead of business hours' on each of three release days.
    f = _floors()
    week = _primary().floor_hours_per_week
    extra = sum(f[day] - f["business-hours"] for day in ("MON", "WED", "FRI"))
    assert f"floor hours/week:   {week:.2f} -> {week + extra:.2f} (+{extra:.2f})" in comparison
    assert "hours whose min-max changed: 3" in comparison
    assert f"MON 15:00  {f['business-hours']}-20 -> {f['MON']}-20" in comparison


def test_bad_override_syntax_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    assert cost_plan.main(["-c", "scaling.primary.enabled"]) == 2
    assert "expected key=value" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            [],
            "Instance start after provisioning: 83 s from the compile cache "
            "(serving.compile_cache.enabled; 206 s cold)",
        ),
        (
            ["-c", "serving.compile_cache.enabled=false", "-c", "scaling.instance_start_cold_s=250"],
            "Instance start after provisioning: 250 s cold (serving.compile_cache.enabled = false; 83 s cached)",
        ),
    ],
)
def test_the_plan_states_the_instance_start_it_assumes(
    capsys: pytest.CaptureFixture[str], overrides: list[str], line: str
) -> None:
    assert cost_plan.main(overrides) == 0
    assert capsys.readouterr().out.splitlines()[1] == line
