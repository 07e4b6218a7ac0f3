"""migration.*: the Bedrock-to-endpoint migration's store, gates and ramp (issue 54), with seed 002's defaults and
one-line refusals naming the key, the value and what is allowed."""

import pytest

from app_config import load_config
from tests.config_helpers import config_error
from tests.synth_helpers import cdk_json_context


def test_off_by_default_with_seed_002s_phases() -> None:
    migration = load_config(cdk_json_context()).migration
    assert not migration.enabled
    assert migration.shadow_percent == 10  # "10% shadow-copied to vLLM"
    steps = [(step.percent, step.hold_hours) for step in migration.ramp.steps]
    # canary 5 % for a week; 25, 50, 75 % each held 2-3 days; 24 h at 100 % (seed 000)
    assert steps == [(5, 168), (25, 60), (50, 60), (75, 60), (100, 24)]
    assert (migration.gates.ttft_p95_ms, migration.embedding_model_id) == (500, "amazon.titan-embed-text-v2:0")


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            {"migration.ramp.steps": '[{"percent": 50, "hold_hours": 2}, {"percent": 25, "hold_hours": 2}]'},
            "config error: migration.ramp.steps = [{'percent': 50, 'hold_hours': 2}, {'percent': 25, 'hold_hours': "
            "2}]: percents [50, 25]: must rise from step to step",
        ),
        (
            {"migration.ramp.steps": '[{"percent": 50, "hold_hours": 2}]'},
            "config error: migration.ramp.steps = [{'percent': 50, 'hold_hours': 2}]: percents [50]: the last step "
            "must be 100 (full, Bedrock as the fallback)",
        ),
        (
            {"migration.ramp.steps[0].hold_hours": "0.5"},
            "config error: migration.ramp.steps.0.hold_hours = '0.5': must be >= 1",
        ),
        ({"migration.gates.length_ks_max": "2"}, "config error: migration.gates.length_ks_max = '2': must be <= 1"),
        ({"migration.store.retention_days": "0"}, "config error: migration.store.retention_days = '0': must be >= 1"),
        (
            {"migration.ramp.check_interval_min": "5"},
            "config error: migration.ramp: check_interval_min = 5: the steps' holds (372 h) take ~40,221 history "
            "events, above 90 % of one Step Functions execution's 25,000; set it to at least 9, or shorten the holds",
        ),
        (
            {"migration.ramp.stepz": "1"},
            "config error: migration.ramp.stepz: unknown key; did you mean 'migration.ramp.steps'?",
        ),
    ],
)
def test_a_bad_value_is_one_line(overrides: dict[str, str], line: str) -> None:
    assert config_error(overrides) == line
