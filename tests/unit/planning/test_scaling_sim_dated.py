"""``make simulate ARGS="--dated-event NAME"``: the week of one dated event, with its one-off actions (issue 40
item 8: the simulation shows dated events as it shows the weekly releases)."""

import datetime as dt
import json

import pytest

from app_config import dated_events
from app_config.loader import load_cli_config
from planning.make_plan import make_plan
from planning.scaling_sim import __main__ as cli

SPRING = json.dumps([{"name": "spring-anime", "date": "2027-04-01", "demand_multiplier": 2.5}])
THU = 3 * 1440  # 2027-04-01 is a Thursday


@pytest.fixture(autouse=True)
def _before_the_event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dated_events, "clock", lambda _timezone: dt.datetime(2027, 1, 1))


def _run(*argv: str):
    args = cli.parse_args(list(argv))
    config = load_cli_config(args.context)
    summary, records, events = cli.simulate(cli.build_scenario(args, config, make_plan(config)), "t")
    return config, summary, records, events


def test_the_event_holds_its_floor_all_day_through_the_weekly_actions_it_pauses() -> None:
    config, summary, records, events = _run(
        "--dated-event", "spring-anime", "-c", f"scaling.primary.dated_events={SPRING}"
    )
    scaling = make_plan(config).scaling.primary
    floor = scaling.dated_events[0].min_capacity
    (evening_end,) = [a.min_capacity for a in scaling.schedule if a.name == "jp-evening-end"]
    day = records[THU : THU + 1440]
    # The weekly 01:00, 08:00, 17:45 and 23:00 actions would lower the floor; paused, none of them does.
    assert {r.min_capacity for r in day} == {floor}
    assert min(r.in_service for r in day) == floor  # lifted 2 h early: every instance serves by 00:00
    assert ("spring-anime", THU) in events
    assert any(w.name == "spring-anime" for w in summary.releases)
    # Friday 00:00 gives the week back: jp-evening-end's floor until off-peak.
    assert records[THU + 1440].min_capacity == evening_end
    assert summary.queue_minutes == 0


def test_the_events_demand_is_the_usual_demand_times_its_multiplier() -> None:
    _, _, plain, _ = _run()
    _, _, event, _ = _run("--dated-event", "spring-anime", "-c", f"scaling.primary.dated_events={SPRING}")
    noon = THU + 12 * 60
    assert event[noon].demand == pytest.approx(plain[noon].demand * 2.5)
    assert event[THU - 60].demand == pytest.approx(plain[THU - 60].demand)  # before the event: the usual week


def test_an_unknown_event_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--dated-event", "golden-week", "-c", f"scaling.primary.dated_events={SPRING}"]) == 2
    assert capsys.readouterr().err.strip() == (
        "config error: --dated-event golden-week: scaling.primary.dated_events has no such event (spring-anime)"
    )
