"""A measured capacity curve holds at the pause it was measured at (issue 52): one measured at
another pause than traffic.think_s stops synth in one line naming both."""

import json

import pytest

from app_config import ConfigError
from app_config.loader import load_cli_config
from serving_contract.capacity_job import RESULT_FORMAT


def _curve(think_s: float) -> dict[str, object]:
    return {
        "format": RESULT_FORMAT,
        "instance_type": "ml.g6e.xlarge",
        "date": "2026-11-29",
        "job": "capacity-test",
        "think_s": think_s,
        "kv_cache_tokens": 280176,
        "steps": [
            {
                "requests_per_minute": 120,
                "served_per_minute": 118,
                "completed_per_minute": 117,
                "requests": 59,
                "errors": 0,
                "cold": {"requests": 20, "ttft_p50_ms": 150, "ttft_p95_ms": 300},
                "warm": {"requests": 39, "ttft_p50_ms": 60, "ttft_p95_ms": 120},
            }
        ],
    }


def _override(think_s: float) -> str:
    return f"throughput.measured={json.dumps({'ml.g6e.xlarge': _curve(think_s)})}"


def test_a_curve_at_the_configured_pause_is_read_with_its_conditions() -> None:
    config = load_cli_config([_override(30)])
    curve = config.throughput.measured["ml.g6e.xlarge"]
    assert curve.think_s == 30 and curve.kv_cache_tokens == 280176  # type: ignore[union-attr]


def test_a_curve_at_another_pause_is_refused_naming_both_pauses() -> None:
    with pytest.raises(ConfigError) as info:
        load_cli_config([_override(12)])
    assert str(info.value) == (
        "config error: throughput.measured.ml.g6e.xlarge: measured with users pausing 12 s, traffic.think_s is 30 s; "
        "a curve holds only at its own pause: measure it again at 30 s (python -m ops throughput measure "
        "--instance-type ml.g6e.xlarge) or remove it"
    )
    # The pause it was measured at, configured, takes it.
    assert load_cli_config([_override(12), "traffic.think_s=12"]).traffic.think_s == 12
