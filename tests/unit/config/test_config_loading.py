"""Defaults, stage overlays, section blocks and dotted overrides, in that precedence."""

import json

import pytest

from app_config import AppConfig, load_config
from app_config.scaling import PROD_WARM_FLOOR
from app_config.throughput_config import MeasuredThroughput
from tests.synth_helpers import cdk_json_context


def test_defaults_are_the_seeds_values() -> None:
    config = load_config(cdk_json_context())
    assert config.stage == "prod"
    assert config.endpoint_name == "mangaassist-vllm-prod"
    assert config.engine.gpu_memory_utilization == 0.92
    assert config.engine.max_num_seqs == 128
    assert config.engine.max_model_len == 4096
    assert config.engine.max_num_batched_tokens == 8192
    assert config.engine.block_size == 16
    assert config.serving.container_startup_health_check_timeout_s == 600
    assert [a.name for a in config.model.adapters] == [
        "manga_domain_v3",
        "general_support_v2",
        "jp_style_v1",
    ]
    assert {a.rank for a in config.model.adapters} == {16}
    primary, canary = config.serving.variants
    # Weight 95: seed 003 §8; min 2: seed 001's warm floor. The primary starts at that floor, and its
    # instance type and bounds are the planner's (tests/unit/planning/test_default_fleet.py).
    assert (primary.initial_weight, primary.min_capacity) == (95, PROD_WARM_FLOOR)
    assert primary.initial_instance_count == primary.min_capacity
    assert (canary.initial_instance_count, canary.initial_weight) == (1, 5)


def test_stage_overlay_changes_only_what_it_names() -> None:
    dev = load_config({**cdk_json_context(), "stage": "dev"})
    prod = load_config(cdk_json_context())
    assert dev.serving.primary.initial_instance_count == 1
    assert dev.endpoint_name == "mangaassist-vllm-dev"
    assert dev.engine == prod.engine
    assert dev.serving.primary.instance_type == prod.serving.primary.instance_type


def test_cli_strings_are_coerced() -> None:
    config = load_config(
        {
            **cdk_json_context(),
            "serving.primary.max_capacity": "24",
            "engine.gpu_memory_utilization": "0.9",
            "engine.enable_prefix_caching": "false",
            "serving.canary.enabled": "false",
        }
    )
    assert config.serving.primary.max_capacity == 24
    assert config.engine.gpu_memory_utilization == 0.9
    assert config.engine.enable_prefix_caching is False
    assert [v.variant_name for v in config.serving.variants] == ["primary"]


def test_dotted_override_beats_stage_overlay_and_section_block() -> None:
    config = load_config(
        {
            **cdk_json_context(),
            "stage": "dev",
            "serving": {"primary": {"max_capacity": 3}},
            "serving.primary.max_capacity": "4",
        }
    )
    assert config.serving.primary.max_capacity == 4
    assert config.serving.primary.min_capacity == 1  # from the dev overlay


def test_json_values_set_lists() -> None:
    # A new adapter set needs its pins too (image.source = build bakes exactly these adapters).
    pins = '{"seasonal_promo_v1": "v1/' + "1" * 64 + '"}'
    config = load_config(
        {
            **cdk_json_context(),
            "model.adapters": '[{"name": "seasonal_promo_v1"}]',
            "image.build.primary.adapters": pins,
        }
    )
    assert [a.name for a in config.model.adapters] == ["seasonal_promo_v1"]


def test_cdk_owned_context_keys_are_ignored() -> None:
    context = {
        **cdk_json_context(),
        "aws:cdk:enable-path-metadata": True,
        "@aws-cdk/core:newStyleStackSynthesis": True,
        "availability-zones:account=123456789012:region=ap-northeast-1": ["a"],
    }
    assert load_config(context) == load_config(cdk_json_context())


def test_config_is_frozen() -> None:
    config = load_config(cdk_json_context())
    with pytest.raises(Exception, match="frozen"):
        config.serving.primary.max_capacity = 3  # type: ignore[misc]


def test_model_defaults_validate_on_their_own() -> None:
    assert AppConfig().endpoint_name == "mangaassist-vllm-prod"


def test_a_variant_may_be_created_at_weight_zero() -> None:
    """A new endpoint may start with all traffic on one variant (SageMaker's VariantWeight minimum is 0)."""
    for primary, canary in (("100", "0"), ("0", "100")):
        config = load_config(
            {**cdk_json_context(), "serving.primary.initial_weight": primary, "serving.canary.initial_weight": canary}
        )
        assert (config.serving.primary.initial_weight, config.serving.canary.initial_weight) == (
            float(primary),
            float(canary),
        )


def _load(**overrides: str) -> AppConfig:
    return load_config({**cdk_json_context(), **overrides})


def test_a_map_key_with_dots_is_one_key() -> None:
    # Instance types hold dots: the key of a map of values is everything after the map's name.
    config = _load(**{"scaling.hourly_price_usd.ml.g6e.xlarge": "2.24"})
    assert config.scaling.hourly_price_usd["ml.g6e.xlarge"] == 2.24
    assert "ml" not in config.scaling.hourly_price_usd


def test_a_map_of_sections_takes_one_field_at_a_time() -> None:
    fields = {"concurrency": "12", "requests_per_minute": "240", "ttft_p50_ms": "310.5"}
    config = _load(**{f"throughput.measured.ml.g5.xlarge.{key}": value for key, value in fields.items()})
    measured = config.throughput.measured["ml.g5.xlarge"]
    assert isinstance(measured, MeasuredThroughput)
    assert (measured.concurrency, measured.requests_per_minute, measured.ttft_p50_ms) == (12, 240, 310.5)


@pytest.mark.parametrize(
    "key", ["scaling.primary.events[1].min_capacity", "scaling.primary.events.shonen-magazine.min_capacity"]
)
def test_one_list_item_is_set_by_position_or_name_and_the_rest_stay(key: str) -> None:
    default = _load().scaling.primary.events
    events = _load(**{key: "13"}).scaling.primary.events
    assert [e.name for e in events] == [e.name for e in default]
    assert events[1].min_capacity == 13
    assert [events[0], *events[2:]] == [default[0], *default[2:]]


def test_a_list_override_that_drops_items_warns(capsys: pytest.CaptureFixture[str]) -> None:
    events = _load(**{"scaling.primary.events": '[{"name": "shonen-jump", "day_of_week": "MON", "min_capacity": 4}]'})
    assert [e.name for e in events.scaling.primary.events] == ["shonen-jump"]
    assert capsys.readouterr().err == (
        "config warning: scaling.primary.events: 1 item(s) replace 3; to change one, name it "
        "(scaling.primary.events[0].<key> or scaling.primary.events.<name>.<key>)\n"
    )


@pytest.mark.parametrize("item_first", [True, False])
def test_a_list_item_override_applies_after_the_list_it_belongs_to(item_first: bool) -> None:
    # A path's depth counts [i] as a level: 'events[0].min_capacity' is deeper than 'events'.
    events = json.dumps(
        [
            {"name": "x", "day_of_week": "MON", "min_capacity": 11},
            {"name": "y", "day_of_week": "TUE", "min_capacity": 3},
        ]
    )
    pairs = [("scaling.primary.events[0].min_capacity", "12"), ("scaling.primary.events", events)]
    config = _load(**dict(pairs if item_first else pairs[::-1]))
    assert [(e.name, e.min_capacity) for e in config.scaling.primary.events] == [("x", 12), ("y", 3)]
