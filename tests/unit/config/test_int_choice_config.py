"""Integer ``Literal`` fields accept the CLI's string form (``-c key=16``) and still reject wrong values."""

import pytest

from app_config import ConfigError, load_config
from app_config.root import AppConfig
from tests.synth_helpers import cdk_json_context


def _load(key: str, value: str) -> AppConfig:
    return load_config({**cdk_json_context(), key: value})


def _get(config: AppConfig, key: str) -> object:
    value: object = config
    for part in key.split("."):
        value = getattr(value, part)
    return value


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("engine.block_size", "32", 32),
        ("observability.log_retention_days", "90", 90),
        ("scaling.primary.step_scaling.scale_out_period_s", "120", 120),
        ("scaling.primary.step_scaling.scale_in_period_s", "300", 300),
        ("scaling.canary.step_scaling.scale_out_period_s", "300", 300),
    ],
)
def test_cli_string_form_loads_as_an_int(key: str, value: str, expected: int) -> None:
    assert _get(_load(key, value), key) == expected


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("engine.block_size", "12", "config error: engine.block_size = '12': must be one of 16, 32, 64 or 128"),
        ("engine.block_size", "abc", "config error: engine.block_size = 'abc': must be a whole number"),
        (
            "observability.log_retention_days",
            "10",
            "config error: observability.log_retention_days = '10': must be one of 1, 3, 5, 7, 14, 30, 60, 90,",
        ),
        # Sub-minute periods are gone: the queue-depth metric has 1-minute resolution.
        (
            "scaling.primary.step_scaling.scale_out_period_s",
            "30",
            "config error: scaling.primary.step_scaling.scale_out_period_s = '30': must be one of 60, 120 or 300",
        ),
        (
            "scaling.primary.step_scaling.scale_out_period_s",
            "10",
            "config error: scaling.primary.step_scaling.scale_out_period_s = '10': must be one of 60, 120 or 300",
        ),
        (
            "scaling.primary.step_scaling.scale_in_period_s",
            "90",
            "config error: scaling.primary.step_scaling.scale_in_period_s = '90': must be one of 60, 120 or 300",
        ),
    ],
)
def test_wrong_values_still_get_the_choices(key: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(key, value)
    assert str(info.value).startswith(expected), str(info.value)
