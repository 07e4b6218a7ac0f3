"""The default scaling policies, simulated over the seeds' week (issue 16's release-day check).

These drive ``planning.scaling_sim`` with the policies a synth deploys: no minute of queue in the
seeds' Friday release window, no scale-in while the engine is full, and no scale-out past the
instances the demand needs (the overshoot that seed 001's 60 s cooldowns produced while new
instances were still booting).

They check the policies' dynamics, so the fleet must be able to carry the week: the seeds' fleet
(tests/synth_helpers.py SEEDS_G5) with an instance that holds the SLO at 8 concurrent requests and
248 requests a minute (the H100 projection of planning/instance_capacity.json, given as a measured
capacity) and seed 001's week (traffic.peak_requests_per_minute = 8,000; the default traffic is seed
003's 50,000 a day) scaled by 248 / 1,200, the ratio to seed 001's per-instance figure that the
seeds' scheduled floors (SEEDS_FLOORS: 8 on release evenings) were sized with. The default floors
are make plan's for the default fleet and traffic (tests/unit/planning/test_default_fleet.py); under this
scaled week they would sit above what the demand needs and hide an overshoot. On ml.g5.xlarge the
projection holds no concurrency within the SLO at MangaAssist's request shape (docs/performance.md),
which test_capacity_model.py covers.
"""

import math

import pytest

from app_config.loader import load_cli_config
from planning.make_plan import make_plan
from planning.scaling_sim import __main__ as cli
from planning.scaling_sim import report
from planning.scaling_sim.engine import MinuteRecord
from tests.config_helpers import seeds_schedule
from tests.synth_helpers import SEEDS_G5_ARGS


@pytest.fixture(scope="module")
def default_week() -> tuple[cli.Scenario, report.Summary, list[MinuteRecord]]:
    measured = '{"ml.g5.xlarge": {"concurrency": 8, "requests_per_minute": 248, "ttft_p50_ms": 77}}'
    config = load_cli_config(
        [
            *SEEDS_G5_ARGS,
            *seeds_schedule(),
            f"throughput.measured={measured}",
            "traffic.peak_requests_per_minute=8000",
            "serving.primary.max_capacity=20",  # seed 001's hard max
        ]
    )
    scenario = cli.build_scenario(cli.parse_args(["--demand-scale", f"{248 / 1200:.4f}"]), config, make_plan(config))
    summary, records, _ = cli.simulate(scenario, "default")
    return scenario, summary, records


def test_the_friday_release_never_queues(default_week: tuple[cli.Scenario, report.Summary, list[MinuteRecord]]) -> None:
    _, summary, _ = default_week
    (friday,) = [window for window in summary.releases if window.name == "friday-release"]
    assert (friday.queue_minutes, friday.slo_minutes, friday.peak_queue) == (0, 0, 0)
    assert summary.queue_minutes == 0


def test_no_scale_in_while_the_engine_is_full(
    default_week: tuple[cli.Scenario, report.Summary, list[MinuteRecord]],
) -> None:
    _, summary, _ = default_week
    assert summary.scale_ins_at_full_load == 0
    assert summary.scale_ins > 0  # the check is not vacuous: the fleet does scale in, off-peak


def test_scale_out_stops_at_what_the_demand_needs(
    default_week: tuple[cli.Scenario, report.Summary, list[MinuteRecord]],
) -> None:
    scenario, summary, records = default_week
    tracking = make_plan(scenario.config).scaling.primary.target_tracking
    assert tracking.metric == "concurrent_requests_high_resolution"
    inputs, _, _ = cli.build_inputs(scenario)
    duration_s = inputs.service.request_duration_s
    # Little's law at the busiest minute, at the target concurrency, plus one for rounding.
    needed = math.ceil(max(r.demand for r in records) * duration_s / 60 / tracking.target_value)
    assert summary.peak_desired <= needed + 1
    # And the week does not flap: a scale-out within 30 min of a policy scale-in undoes it.
    policy_ins = [r.minute for r in records if r.policy_change < 0]
    outs = [r.minute for r in records if r.policy_change > 0]
    flaps = [m for m in policy_ins if any(m < o <= m + 30 for o in outs)]
    assert flaps == []
