"""The scaling simulation's engine and policies on small, hand-checkable scenarios."""

import pytest
from pydantic import ValidationError

from app_config.scaling_policies import ScalingStepConfig, StepScalingConfig, TargetTrackingConfig
from app_config.traffic import TrafficConfig
from planning.scaling_sim import demand, report
from planning.scaling_sim.engine import MinuteRecord, SimInputs, run
from planning.scaling_sim.fleet import ServiceModel
from planning.weekly_plan import Bounds

SERVICE = ServiceModel(concurrency=41, requests_per_minute=1200, base_ttft_ms=250)
PROVISION, STARTUP = 8, 3
NO_TT = TargetTrackingConfig(enabled=False)
STEPS = (
    ScalingStepConfig(lower=50, upper=100, adjustment=2),
    ScalingStepConfig(lower=100, upper=200, adjustment=4),
    ScalingStepConfig(lower=200, upper=None, adjustment=8),
)


def _inputs(
    *,
    bounds: tuple[Bounds, ...] = (Bounds(0, 1, 20, "test"),),
    tt: TargetTrackingConfig | None = NO_TT,
    step: StepScalingConfig | None = None,
    initial: int | None = None,
) -> SimInputs:
    return SimInputs(
        service=SERVICE,
        provision_min=PROVISION,
        startup_min=STARTUP,
        timeline=bounds,
        target_tracking=tt,
        step_scaling=step
        if step is not None
        else StepScalingConfig(scale_in_running_requests=8, scale_out_steps=STEPS),
        ttft_slo_ms=500,
        initial_capacity=initial,
    )


def _desired(records: list[MinuteRecord]) -> list[int]:
    return [r.desired for r in records]


def test_flat_demand_below_one_instance_never_queues_or_scales_out() -> None:
    tt = TargetTrackingConfig(metric="invocations_per_instance", invocations_per_instance_target=1000)
    records = run(_inputs(tt=tt), [900.0] * 300)
    assert all(r.queued == 0 and r.in_service == 1 and r.desired == 1 for r in records)
    assert not any(r.above_slo for r in records)
    # 900 req/min at 2.05 s each: 30.75 sequences in flight (Little's law).
    assert records[-1].running_per_instance == pytest.approx(900 / 60 * 60 * 41 / 1200)


def test_demand_beyond_capacity_queues_until_new_instances_are_in_service() -> None:
    records = run(_inputs(bounds=(Bounds(0, 1, 3, "test"),)), [600.0] * 10 + [3000.0] * 50)
    step_minute = 10
    assert all(r.queued == 0 for r in records[:step_minute])
    # The first breaching minute (1,800 queued >= 200) takes the +8 step, clamped to max 3.
    assert records[step_minute].policy_change == 2 and records[step_minute].desired == 3
    arrival = step_minute + PROVISION + STARTUP
    assert [r.in_service for r in records[step_minute:arrival]] == [1] * (PROVISION + STARTUP)
    assert all(r.queued > 0 and r.above_slo for r in records[step_minute:arrival])
    assert records[arrival].in_service == 3
    # 3,600/min of capacity drains the backlog against 3,000/min of demand.
    assert records[-1].queued == 0


def test_long_cooldown_does_not_compound_steps_a_short_one_overshoots() -> None:
    bounds = (Bounds(0, 1, 100, "test"),)
    flood = [20_000.0] * 12

    def desired_after(cooldown_s: int) -> list[int]:
        step = StepScalingConfig(scale_in_running_requests=8, scale_out_steps=STEPS, scale_out_cooldown_s=cooldown_s)
        return _desired(run(_inputs(bounds=bounds, step=step), flood))

    long = desired_after(3600)
    short = desired_after(60)
    # Long: the initiating +8 counts toward every later +8 of the cooldown.
    assert long == [9] * 12
    # Short: each minute out of cooldown adds 8 to a desired count whose instances are still launching.
    assert short[:4] == [9, 17, 25, 33]
    assert short[10] == 89


def test_larger_step_during_cooldown_adds_only_the_difference() -> None:
    step = StepScalingConfig(scale_in_running_requests=8, scale_out_steps=STEPS, scale_out_cooldown_s=3600)
    # Minute 0 leaves 60 queued (+2 step); minute 1 leaves 150 (+4 step); minute 2 keeps 150.
    records = run(_inputs(step=step), [1260.0, 1290.0, 1200.0, 1200.0])
    assert [r.queued for r in records[:3]] == [60, 150, 150]
    assert _desired(records) == [3, 5, 5, 5]


def test_target_tracking_scales_out_after_three_breaching_minutes_proportionally() -> None:
    tt = TargetTrackingConfig(
        metric="invocations_per_instance", invocations_per_instance_target=600, scale_out_cooldown_s=600
    )
    step = StepScalingConfig(scale_in_running_requests=8, scale_out_steps=STEPS, enabled=False)
    records = run(_inputs(tt=tt, step=step, initial=2), [2400.0] * 20)
    # 1,200 invocations per instance = 2x the target: 2 -> ceil(2 x 1200 / 600) = 4 on the third datapoint.
    assert _desired(records)[:4] == [2, 2, 4, 4]
    # Still in cooldown with the metric unchanged: the initiating +2 counts, no compounding.
    assert _desired(records)[10] == 4


def test_high_resolution_concurrency_target_scales_out_on_the_first_minute() -> None:
    tt = TargetTrackingConfig(metric="concurrent_requests_high_resolution", concurrent_requests_target=20)
    step = StepScalingConfig(scale_in_running_requests=8, scale_out_steps=STEPS, enabled=False)
    records = run(_inputs(tt=tt, step=step, initial=2), [2400.0] * 5)
    # 41 in flight per instance against a target of 20: ceil(2 x 41 / 20) = 5.
    assert records[0].desired == 5


def test_scale_in_fires_under_low_load_and_not_at_full_load() -> None:
    bounds = (Bounds(0, 1, 10, "test"),)
    low = run(_inputs(bounds=bounds, initial=4), [60.0] * 40)
    # RunningRequests ~0.5 < 8 for 5 minutes: -1, then every 10 minutes (scale-in cooldown 600 s) down to min 1.
    assert [r.minute for r in low if r.policy_change < 0] == [4, 14, 24]
    assert low[-1].desired == 1
    full = run(_inputs(bounds=bounds, initial=4), [4 * 1200.0] * 40)
    assert all(r.at_full_load and r.policy_change == 0 for r in full)


def test_scheduled_max_cut_at_full_load_counts_as_a_scale_in_at_full_load() -> None:
    bounds = (Bounds(0, 1, 4, "day"), Bounds(5, 1, 2, "night"))
    records = run(_inputs(bounds=bounds, initial=4), [4 * 1200.0] * 10)
    assert records[5].scheduled_change == -2 and records[5].in_service == 2
    summary = report.summarize("t", [], records, price_usd_per_hour=1.0, hours_per_month=730, events=[])
    assert summary.scale_ins_at_full_load == 1
    assert summary.queue_minutes == 5  # minutes 5-9: 2 instances for 4 instances' demand


def test_scheduled_min_raise_lifts_desired_at_the_cron_minute() -> None:
    bounds = (Bounds(0, 1, 10, "night"), Bounds(30, 5, 10, "business-hours"))
    records = run(_inputs(bounds=bounds), [600.0] * 60)
    assert records[29].desired == 1 and records[30].desired == 5
    assert records[30].scheduled_change == 4
    assert records[30 + PROVISION + STARTUP - 1].in_service == 1
    assert records[30 + PROVISION + STARTUP].in_service == 5


def test_default_week_carries_seed_003s_volume_with_the_release_spikes() -> None:
    week = demand.default_week()
    assert len(week) == 10_080
    assert sum(week) / 7 == pytest.approx(50_000)  # seed 003: ~50K requests/day
    friday_1815 = 4 * 1440 + 18 * 60 + 15
    assert week[friday_1815] == pytest.approx(2 * demand.base_rate(18 * 60 + 15))
    thursday_1815 = 3 * 1440 + 18 * 60 + 15
    assert week[thursday_1815] == pytest.approx(demand.base_rate(18 * 60 + 15))


def test_a_peak_rate_replays_seed_001s_week() -> None:
    # The week the simulation used before the traffic section: 8,000 req/min at the busiest
    # minute, 500 at 03:00 (seed 001 user story 4).
    week = demand.week(TrafficConfig(peak_requests_per_minute=8000))
    assert max(week) == pytest.approx(8000)
    assert week[3 * 60] == pytest.approx(500)
    assert sum(week) / 7 == pytest.approx(3.23e6, rel=0.01)  # ~65x seed 003 50K a day


def test_traffic_errors_name_the_key_and_what_is_allowed() -> None:
    with pytest.raises(ValidationError) as error:
        TrafficConfig.model_validate({"daily_shape": [["00:00", 1.0], ["12:00", 2.0]]})
    assert "must start at 00:00 and end at 24:00" in str(error.value)
    with pytest.raises(ValidationError) as error:
        TrafficConfig.model_validate(
            {"releases": [{"name": "x", "day_of_week": "MON", "time": "25:00", "multiplier": 2}]}
        )
    assert "'25:00': must be HH:MM between 00:00 and 24:00" in str(error.value)


def _patient(patience_s: float | None) -> SimInputs:
    service = ServiceModel(concurrency=41, requests_per_minute=1200, base_ttft_ms=250, patience_s=patience_s)
    inputs = _inputs(bounds=(Bounds(0, 1, 1, "test"),), step=StepScalingConfig(enabled=False))
    return SimInputs(**{**inputs.__dict__, "service": service})


def test_clients_give_up_on_a_queue_instead_of_waiting_all_week() -> None:
    # Issue 40 item 13: one instance (1,200/min) under 1,500/min for 60 minutes, then 600/min.
    demand = [1500.0] * 60 + [600.0] * 60
    forever = run(_patient(None), demand)
    patient = run(_patient(55), demand)
    assert forever[59].queued == pytest.approx(60 * 300)  # without patience the backlog grows all hour
    assert sum(r.abandoned for r in forever) == 0
    # With 55 s the queue is served oldest first and grows by 300 a minute until its oldest requests
    # have waited more than a minute (mean wait > 55 s): from then on, as many leave as the fleet
    # cannot serve (1,500 - 1,200 a minute), and the queue holds one minute of arrivals.
    assert [r.queued for r in patient[:6]] == [300.0, 600.0, 900.0, 1200.0, 1500.0, 1500.0]
    assert [r.abandoned for r in patient[:5]] == [0.0] * 5
    assert {r.abandoned for r in patient[5:60]} == {300.0}
    assert {r.queued for r in patient[5:60]} == {1500.0}
    # Served + abandoned + still queued = demand: nothing lost or made up.
    assert sum(r.served for r in patient) + sum(r.abandoned for r in patient) + patient[-1].queued == pytest.approx(
        sum(demand)
    )
    assert patient[-1].queued == 0


def test_the_report_counts_abandoned_requests() -> None:
    records = run(_patient(55), [1500.0] * 10)
    summary = report.summarize("t", [], records, price_usd_per_hour=1.0, hours_per_month=730, events=[])
    assert summary.abandoned == pytest.approx(5 * 300)
    assert summary.abandoned_share == pytest.approx(1500 / 15000)
    text = report.format_summary(summary)
    assert "  abandoned requests           1,500 (10.00% of 15,000)" in text.splitlines()


def test_the_plot_legends_sit_outside_the_axes() -> None:
    # Issue 40 item 13: a legend inside the fleet panel hid the desired/InService lines.
    from planning.scaling_sim import plot

    fig = plot.figure(run(_inputs(), [900.0] * 120), [("release", 30)], "t")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for axis in fig.axes:
        legend = axis.get_legend().get_window_extent(renderer)
        assert legend.x0 >= axis.get_window_extent(renderer).x1, axis.get_ylabel()
        assert legend.x1 <= fig.bbox.x1, axis.get_ylabel()
