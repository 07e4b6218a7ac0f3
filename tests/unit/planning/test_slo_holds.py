"""At synth, per variant and request class: can the instance type hold the class's TTFT SLO, up
to what arrival rate, measured or projected, with what margin (issues 33, 45)? The lines, the
figures they read, and the flag that makes an unholdable class stop synth."""

import json
import math

import pytest

from app_config import AppConfig, ConfigError, load_config
from devtools.measure_doc import PLANTED
from planning import memory_report
from planning.engine_fit import load_fit
from planning.fleet_planner import recommend
from planning.make_plan import make_plan
from planning.planner import Planner
from planning.slo_holds import class_holds
from serving_contract.request_classes import RequestClass
from tests.synth_helpers import SEEDS_G5, cdk_json_context

G5_TYPES = {key: value for key, value in SEEDS_G5.items() if key.startswith("serving.")}
"""The seeds' ml.g5.xlarge on both variants, at the default SLOs (which it cannot hold at 500 ms cold)."""

G5_WARNED = {**G5_TYPES, "slo.require_holdable": "false"}
"""The same, with the check a warning: an experiment on a fleet that cannot hold the cold SLO."""


def _load(**overrides: str) -> AppConfig:
    return load_config({**cdk_json_context(), **overrides})


def test_a_projected_fleet_that_cannot_hold_the_cold_slo_is_warned_with_its_figure_and_the_recommendation() -> None:
    config = _load(**G5_WARNED)
    plan = make_plan(config)
    cold, warm, canary_cold, canary_warm = class_holds(config, plan)
    capacity = Planner.of(config).throughput("ml.g5.xlarge", RequestClass.COLD)
    best = recommend(config, plan.planner)
    assert best is not None and not capacity.holds_slo and not capacity.measured
    assert capacity.lightest_ttft_p95_ms is not None
    assert cold.line == (
        f"WARNING: slo.cold.ttft_p95_ms = 500 ms: variant primary (ml.g5.xlarge) cannot hold it at any load: TTFT p95 "
        f"{capacity.lightest_ttft_p95_ms:,.0f} ms at one request a minute (projected, margin {capacity.margin:.0%}: "
        f"{capacity.source}); would hold: "
        f"slo.cold.ttft_p95_ms >= {math.ceil(capacity.lightest_ttft_p95_ms * (1 + capacity.margin)):,} or "
        f"serving.primary.instance_type = {best.instance_type} with throughput.routing = {best.routing} "
        f"({best.requests_per_minute:,.0f} req/min per instance, projected; make plan)"
    )
    assert "projected from the H200 runs to A10G (held-out error " in capacity.source
    # The warm class holds on the A10G: its line gives the rate, the model's before the margin, the p95 there.
    warm_capacity = Planner.of(config).throughput("ml.g5.xlarge", RequestClass.WARM)
    assert warm.holds and warm_capacity.ttft_p95_ms is not None and warm_capacity.model_requests_per_minute
    assert warm.line == (
        f"slo.warm.ttft_p95_ms = 500 ms: variant primary (ml.g5.xlarge) holds it up to "
        f"{warm_capacity.requests_per_minute:,.0f} req/min per instance (the model's "
        f"{warm_capacity.model_requests_per_minute:,.0f} less the {warm_capacity.margin:.0%} margin, TTFT p95 "
        f"{warm_capacity.ttft_p95_ms:,.0f} ms there); projected, margin {warm_capacity.margin:.0%}: "
        f"{warm_capacity.source}"
    )
    assert warm_capacity.requests_per_minute <= warm_capacity.model_requests_per_minute / (1 + warm_capacity.margin) + 1
    assert (canary_cold.variant_name, canary_warm.variant_name) == ("canary", "canary")
    # The synth summary prints them under each variant.
    rendered = memory_report.render(memory_report.build(config, plan))
    assert f"    {cold.line}" in rendered


def test_the_suggested_slo_holds_and_the_margin_is_what_decides() -> None:
    config = _load(**G5_WARNED)
    (cold, *_) = class_holds(config, make_plan(config))
    suggested = cold.suggested_slo_ms
    (held, *_) = class_holds(*_planned(**G5_TYPES, **{"slo.cold.ttft_p95_ms": str(suggested)}))
    assert held.holds and held.capacity.requests_per_minute > 0
    # One millisecond below it, the projection with its margin no longer holds at any load.
    (missed, *_) = class_holds(*_planned(**G5_WARNED, **{"slo.cold.ttft_p95_ms": str(suggested - 1)}))
    assert not missed.holds


def _planned(**overrides: str):
    config = _load(**overrides)
    return config, make_plan(config)


def test_a_measured_instance_type_says_measured_and_carries_no_margin() -> None:
    measured = '{"ml.g5.xlarge": {"concurrency": 4, "requests_per_minute": 120, "ttft_p50_ms": 300}}'
    config, plan = _planned(**G5_TYPES, **{"throughput.measured": measured})
    cold, warm, *_ = class_holds(config, plan)
    assert cold.holds and cold.capacity.measured and cold.capacity.margin == 0
    assert warm.capacity == cold.capacity  # one measured figure, whatever the class
    assert cold.line == (
        "slo.cold.ttft_p95_ms = 500 ms: variant primary (ml.g5.xlarge) holds it up to 120 req/min per instance, "
        "TTFT p50 300 ms; measured (ops load)"
    )


def test_a_measured_curve_is_judged_per_class_and_labelled_with_its_date_and_job() -> None:
    curve = json.loads(PLANTED.read_text())  # ml.g6.xlarge: cold p95 470 ms at 300 req/min, 1,900 at 360
    config, plan = _planned(**_on_g6(curve))
    cold, warm = class_holds(config, plan)
    assert (cold.capacity.requests_per_minute, warm.capacity.requests_per_minute) == (300, 300)
    assert cold.capacity.cliff_per_minute == 360 and cold.capacity.margin == 0
    assert cold.line.endswith("; measured 2026-11-27 (planted-example-not-a-measurement)")
    report = memory_report.render(memory_report.build(config, plan))
    assert not any("not measured" in line for line in report)  # nothing left to measure
    # A stricter cold SLO re-judges the same measurement: 410 ms at 240 req/min, 470 at 300.
    stricter, _ = class_holds(*_planned(**_on_g6(curve), **{"slo.cold.ttft_p95_ms": "450"}))
    assert stricter.capacity.requests_per_minute == 240


def _on_g6(curve: dict[str, object]) -> dict[str, str]:
    """The primary alone on ml.g6.xlarge, measured with ``curve``."""
    return {
        "serving.primary.instance_type": "ml.g6.xlarge",
        "serving.canary.enabled": "false",
        "throughput.measured": json.dumps({"ml.g6.xlarge": curve}),
    }


def test_a_projected_variant_names_the_command_that_would_measure_it() -> None:
    config, plan = _planned()
    report = memory_report.render(memory_report.build(config, plan))
    instance_type = config.serving.primary.instance_type
    assert (
        f"    {instance_type}'s figures are projected, not measured: measure them with "
        f"`python -m ops throughput measure --instance-type {instance_type}` "
        "(docs/planning.md, 'Measure before you buy')"
    ) in report


def test_the_gpu_the_runs_were_made_on_is_labelled_as_fitted_there_with_the_held_out_error_as_margin() -> None:
    config, plan = _planned(**{"serving.primary.instance_type": "ml.p5e.48xlarge", "serving.canary.enabled": "false"})
    cold, warm = class_holds(config, plan)
    assert cold.capacity.margin == load_fit().model_error > 0 and not cold.capacity.measured
    assert cold.capacity.label == "modelled"
    assert "modelled, margin " in cold.line and "model fitted on this GPU's open-loop runs (H200" in cold.line
    # Eight H200s, one engine each: eight engines' rate.
    one = Planner.of(config).throughput("ml.p5e.48xlarge", RequestClass.COLD)
    assert one.requests_per_minute % 8 == 0 and cold.holds and warm.holds


def test_require_holdable_turns_the_warning_into_a_one_line_config_error() -> None:
    warned = class_holds(*_planned(**G5_WARNED))[0]
    with pytest.raises(ConfigError) as info:
        make_plan(_load(**G5_TYPES, **{"slo.require_holdable": "true"}))
    assert str(info.value) == (
        f"config error: {warned.problem} (slo.require_holdable: a guardrail that always fires is an outage trap)"
    )
