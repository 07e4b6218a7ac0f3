"""Monitoring config: seed defaults and one-line errors for bad input."""

import json
from pathlib import Path

import pytest

from app_config import AppConfig, load_config
from app_config.monitoring import (
    PREFIX_CACHE_DEGRADED_PERCENT,
    SHARED_PREFIX_TOKENS,
    TYPICAL_PROMPT_TOKENS,
    fresh_prefix_hit_percent,
)
from tests.config_helpers import config_error
from tests.synth_helpers import cdk_json_context

REPO = Path(__file__).resolve().parents[3]


def test_defaults_are_the_seeds_alerting_rules() -> None:
    monitoring = AppConfig().monitoring
    # Seed 002 "Alerting rules": threshold, window in seconds.
    assert monitoring.high_ttft.window_s == 300  # threshold: slo.<class>.ttft_p95_ms
    assert (monitoring.queue_build_up.threshold, monitoring.queue_build_up.window_s) == (80, 120)
    assert (monitoring.kv_cache_pressure.threshold, monitoring.kv_cache_pressure.window_s) == (95, 300)
    assert monitoring.engine_errors.window_s == 300
    # Window from seed 002; threshold from the prompt layout (issue 21, finding 10; test below).
    assert (monitoring.prefix_cache_degradation.threshold, monitoring.prefix_cache_degradation.window_s) == (20, 900)
    assert monitoring.adapter_latency.window_s == 600
    # Seed 000 canary gates: windows here, thresholds in the slo section.
    assert (monitoring.canary_error_rate.window_s, monitoring.canary_ttft_p95.window_s) == (300, 300)


def test_the_slo_defaults_are_the_seeds_figures_for_both_classes() -> None:
    slo = AppConfig().slo
    # Seed 002 (p50 < 200 ms; alert on p95 > 500 ms), seed 000 (canary TTFT p95 < 500 ms, errors < 0.5 %).
    # No seed gives a first-turn figure, so cold has warm's.
    for klass in (slo.cold, slo.warm):
        assert (klass.ttft_p50_ms, klass.ttft_p95_ms) == (200, 500)
    assert slo.max_error_rate == 0.005 and slo.max_error_rate_percent == 0.5
    assert (slo.availability_percent, slo.error_rate_percent) == (99.9, 0.1)


def test_a_class_p50_above_its_p95_is_refused_in_one_line() -> None:
    assert config_error({"slo.cold.ttft_p50_ms": "900"}) == (
        "config error: slo.cold: ttft_p50_ms = 900 must be <= ttft_p95_ms = 500 (a median above its p95 is no "
        "objective)"
    )


def test_adapter_ceiling_overrides_the_default() -> None:
    config = load_config({**cdk_json_context(), "monitoring.adapter_latency_ceilings_ms": '{"jp_style_v1": 900}'})
    assert config.monitoring.adapter_ceiling_ms("jp_style_v1") == 900
    assert config.monitoring.adapter_ceiling_ms("manga_domain_v3") == config.monitoring.adapter_latency.threshold


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"monitoring.high_ttft.period_s": "45"},
            "config error: monitoring.high_ttft: period_s = 45: must be a multiple of 60 (the alarmed metrics are "
            "standard resolution: 1 datapoint per minute)",
        ),
        (
            {"monitoring.high_ttft.period_s": "30"},
            "config error: monitoring.high_ttft: period_s = 30: must be a multiple of 60 (the alarmed metrics are "
            "standard resolution: 1 datapoint per minute)",
        ),
        (
            {"monitoring.queue_build_up.period_s": "10"},
            "config error: monitoring.queue_build_up: period_s = 10: must be a multiple of 60 (the alarmed metrics "
            "are standard resolution: 1 datapoint per minute)",
        ),
        (
            {"monitoring.adapter_latency.period_s": "3600", "monitoring.adapter_latency.evaluation_periods": "25"},
            "config error: monitoring.adapter_latency: period_s = 3600 x evaluation_periods = 25 = 90000 s: "
            "must be <= 86400 s (one day, CloudWatch alarms)",
        ),
        (
            {"monitoring.queue_build_up.datapoints_to_alarm": "3"},
            "config error: monitoring.queue_build_up: datapoints_to_alarm = 3 must be <= evaluation_periods = 2",
        ),
        (
            {"monitoring.kv_cache_pressure.threshold": "-1"},
            "config error: monitoring.kv_cache_pressure.threshold = '-1': must be >= 0",
        ),
        (
            {"monitoring.notifications.emails": '["not-an-email"]'},
            "config error: monitoring.notifications: emails: 'not-an-email' is not an email address",
        ),
        (
            {"monitoring.notifications.https_endpoints": '["http://hooks.example.com"]'},
            "config error: monitoring.notifications: https_endpoints: 'http://hooks.example.com' must be an "
            "https:// URL (plain http is not allowed)",
        ),
        (
            {"monitoring.adapter_latency_ceilings_ms": '{"manga_v9": 1000}'},
            "config error: monitoring.adapter_latency_ceilings_ms names unknown adapter(s) manga_v9; "
            "model.adapters are: general_support_v2, jp_style_v1, manga_domain_v3",
        ),
        (
            {"monitoring.gpu_memory_utilization.threshold": "90"},
            "config error: monitoring.gpu_memory_utilization.threshold = 90 must be above "
            "engine.gpu_memory_utilization = 0.92 x 100 (vLLM preallocates that share of GPU memory at start)",
        ),
        (
            {"monitoring.gpu_memory_utilization.threshold": "120"},
            "config error: monitoring.gpu_memory_utilization.threshold = 120: must be <= 100 (per GPU)",
        ),
        (
            {"monitoring.hight_ttft.threshold": "1"},
            "config error: monitoring.hight_ttft: unknown key; did you mean 'monitoring.high_ttft'?",
        ),
    ],
)
def test_bad_monitoring_input_is_one_clear_line(overrides: dict[str, str], expected: str) -> None:
    assert config_error(overrides) == expected


def test_prefix_cache_threshold_follows_the_prompt_layout_and_the_measurement() -> None:
    """Issue 21, finding 10: seed 002's 50 % sits above what fresh traffic can reach (the shared
    prefix is ~600 of ~2,380 prompt tokens), so the alarm would stay in ALARM on a healthy fleet."""
    floor = fresh_prefix_hit_percent(SHARED_PREFIX_TOKENS, TYPICAL_PROMPT_TOKENS, 16)
    assert round(floor, 1) == 24.9  # 592 block-aligned tokens of 2,380
    measured = json.loads((REPO / "benchmarks/results/h200-2026-11-25/capacity.json").read_text())
    fresh = [level["prefix_cache_hit_rate"] * 100 for level in measured["fresh"]]
    conversations = [level["prefix_cache_hit_rate"] * 100 for level in measured["conversations"]]
    assert all(abs(rate - floor) < 1.5 for rate in fresh)  # 23.5-24.9 % measured
    threshold = AppConfig().monitoring.prefix_cache_degradation.threshold
    assert threshold == PREFIX_CACHE_DEGRADED_PERCENT == 20
    assert threshold < min(fresh) and threshold < min(conversations)
    assert max(fresh) < 50  # the old threshold: fresh traffic alone kept the alarm in ALARM
