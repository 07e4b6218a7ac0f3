"""Every invalid input gives one line naming the key, the value and what is allowed."""

import json

import pytest

from app_config import ConfigError, load_config
from tests.config_helpers import config_error
from tests.synth_helpers import cdk_json_context


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (
            "serving.primary.max_capacity",
            "abc",
            "config error: serving.primary.max_capacity = 'abc': must be a whole number",
        ),
        (
            "serving.primary.max_capacity",
            "101",
            "config error: serving.primary.max_capacity = '101': must be <= 100",
        ),
        (
            "engine.gpu_memory_utilization",
            "1.5",
            "config error: engine.gpu_memory_utilization = '1.5': must be <= 0.98",
        ),
        (
            "engine.gpu_memory_utilization",
            "0",
            "config error: engine.gpu_memory_utilization = '0': must be > 0",
        ),
        (
            "engine.enable_prefix_caching",
            "maybe",
            "config error: engine.enable_prefix_caching = 'maybe': must be true or false",
        ),
        (
            "serving.routing_strategy",
            "FASTEST",
            "config error: serving.routing_strategy = 'FASTEST': "
            "must be one of 'LEAST_OUTSTANDING_REQUESTS' or 'RANDOM'",
        ),
        (
            "engine.kv_offloading_size_gib",
            "-1",
            "config error: engine.kv_offloading_size_gib = '-1': must be >= 0",
        ),
        (
            "engine.kv_offloading_size_gib",
            "lots",
            "config error: engine.kv_offloading_size_gib = 'lots': must be a number",
        ),
        (
            "engine.kv_offloading_backend",
            "disk",
            "config error: engine.kv_offloading_backend = 'disk': must be one of native or lmcache",
        ),
        (
            "engine.block_size",
            "12",
            "config error: engine.block_size = '12': must be one of 16, 32, 64 or 128",
        ),
        (
            "serving.canary.initial_weight",
            "-5",
            "config error: serving.canary.initial_weight = '-5': must be >= 0",
        ),
        (
            "serving.primary.instance_type",
            "g5.xlarge",
            "config error: serving.primary.instance_type = 'g5.xlarge': must be a SageMaker instance type of the form "
            "ml.<family>.<size>, e.g. ml.g5.xlarge",
        ),
        (
            "serving.primary.instance_type",
            "ml.g5.xlargee",
            "config error: serving.primary.instance_type = 'ml.g5.xlargee': size 'xlargee' is not a SageMaker "
            "hosting instance size: medium, large, xlarge or <N>xlarge (2xlarge, 4xlarge, 8xlarge, 12xlarge, "
            "16xlarge, 24xlarge, 48xlarge, ...)",
        ),
        (
            "serving.canary.instance_type",
            "ml.g5.2xl",
            "config error: serving.canary.instance_type = 'ml.g5.2xl': size '2xl' is not a SageMaker hosting "
            "instance size",
        ),
        (
            "engine.max_lora_rank",
            "24",
            "config error: engine.max_lora_rank = '24': must be one of 1, 8, 16, 32, 64, 128, 256, 320 or 512",
        ),
        (
            "serving.container_startup_health_check_timeout_s",
            "30",
            "config error: serving.container_startup_health_check_timeout_s = '30': must be >= 60",
        ),
        (
            "container.drain_timeout_s",
            "30",
            "config error: container.drain_timeout_s = '30': must be <= 22",
        ),
        (
            "image.primary.digest",
            "sha256:abc",
            "config error: image.primary: digest = 'sha256:abc': "
            "must be sha256: followed by 64 lowercase hex characters",
        ),
        (
            "observability.log_retention_days",
            "10",
            "config error: observability.log_retention_days = '10': must be one of",
        ),
    ],
)
def test_bad_value_names_key_value_and_allowed(key: str, value: str, expected: str) -> None:
    assert config_error(**{key.replace(".", "__"): value}).startswith(expected)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"serving.primary.initial_instance_count": "25", "serving.primary.max_capacity": "20"},
            "config error: serving.primary: initial_instance_count = 25 must be within min_capacity = 2 .. "
            "max_capacity = 20",
        ),
        (
            {"serving.primary.min_capacity": "6", "serving.primary.max_capacity": "5"},
            "config error: serving.primary: min_capacity = 6 must be <= max_capacity = 5",
        ),
        (
            {"serving.canary.initial_instance_count": "3"},
            "config error: serving.canary: initial_instance_count = 3 must be within "
            "min_capacity = 1 .. max_capacity = 2",
        ),
        (
            {"serving.primary.min_capacity": "1"},
            "config error: serving.primary.min_capacity = 1: must be >= 2 in prod",
        ),
        (
            {
                "model.adapters": json.dumps([{"name": "a", "rank": 16}, {"name": "b", "rank": 32}]),
                "engine.max_lora_rank": "32",
            },
            "config error: model: adapters: ranks differ (a=16, b=32); all adapters must share one rank",
        ),
        (
            {"model.adapters": json.dumps([{"name": "a", "rank": 32}])},
            "config error: model.adapters rank 32 exceeds engine.max_lora_rank = 16",
        ),
        (
            {"container.warmup_prefill_tokens": "4095"},
            "config error: container.warmup_prefill_tokens = 4095: must be 0 (off) or from 128 to "
            "engine.max_model_len - 2 = 4094 (shorter prompts are not prefill-sized; the warm-up prompt and its "
            "answer must fit one sequence)",
        ),
        (
            {"container.warmup_prefill_tokens": "100"},
            "config error: container.warmup_prefill_tokens = 100: must be 0 (off) or from 128 to "
            "engine.max_model_len - 2 = 4094 (shorter prompts are not prefill-sized; the warm-up prompt and its "
            "answer must fit one sequence)",
        ),
        (
            {"model.adapters": json.dumps([{"name": "a"}, {"name": "a"}])},
            "config error: model: adapters: duplicate adapter name(s) a; each name must be unique",
        ),
        (
            {"model.adapters": json.dumps([{"name": "Manga-Domain"}])},
            "config error: model.adapters.0.name = 'Manga-Domain': must be 1-63 characters of lowercase letters",
        ),
        (
            {"engine.max_num_batched_tokens": "256", "engine.max_num_seqs": "512"},
            "config error: engine: max_num_batched_tokens = 256 must be >= max_num_seqs = 512",
        ),
        (
            {"serving.primary.initial_weight": "0", "serving.canary.initial_weight": "0"},
            "config error: serving: primary.initial_weight = 0, canary.initial_weight = 0: at least one variant "
            "needs initial_weight > 0 to receive traffic",
        ),
        (
            {"serving.primary.initial_weight": "0", "serving.canary.enabled": "false"},
            "config error: serving: primary.initial_weight = 0: at least one variant needs initial_weight > 0 "
            "to receive traffic",
        ),
        (
            {"serving.canary.variant_name": "primary"},
            "config error: serving: canary.variant_name = 'primary' must differ from primary.variant_name",
        ),
        (
            {"serving.vpc": json.dumps({"subnet_ids": ["vpc-1"], "security_group_ids": ["sg-1"]})},
            "config error: serving.vpc: subnet_ids: 'vpc-1' is not a subnet id (expected subnet-...)",
        ),
        (
            {"env.region": "tokyo"},
            "config error: env: region = 'tokyo': must be an AWS region name such as ap-northeast-1",
        ),
        ({"stage": "qa"}, "config error: stage = 'qa': unknown stage; allowed: dev, prod"),
    ],
)
def test_cross_field_rules_explain_themselves(overrides: dict[str, str], expected: str) -> None:
    context = {**cdk_json_context(), **overrides}
    with pytest.raises(ConfigError) as info:
        load_config(context)
    assert str(info.value).startswith(expected)


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("serving.primary.max_capcity", "serving.primary.max_capacity"),
        ("servng.primary.max_capacity", "serving.primary.max_capacity"),
        ("engine.gpu_memory_utilisation", "engine.gpu_memory_utilization"),
        ("serving.canary.weight", "serving.canary.initial_weight"),
    ],
)
def test_unknown_key_suggests_the_closest_known_key(key: str, suggestion: str) -> None:
    context = {**cdk_json_context(), key: "1"}
    with pytest.raises(ConfigError) as info:
        load_config(context)
    assert str(info.value) == f"config error: {key}: unknown key; did you mean '{suggestion}'?"


def test_unknown_key_in_a_stage_overlay_is_caught() -> None:
    context = cdk_json_context()
    context["stages"] = {**context["stages"], "prod": {"serving": {"primray": {"min_capacity": 3}}}}
    with pytest.raises(ConfigError) as info:
        load_config(context)
    assert str(info.value).startswith("config error: serving.primray: unknown key; did you mean 'serving.primary'")


def test_a_routing_strategy_that_prefix_aware_routing_would_ignore_stops_synth() -> None:
    assert config_error(serving__routing_strategy="RANDOM") == (
        "config error: serving.routing_strategy = 'RANDOM' has no effect while throughput.routing = 'prefix_aware' "
        "sets RoutingStrategy PREFIX_AWARE; set throughput.routing = least_outstanding (or session_affinity) to "
        "choose it, or leave it unset"
    )
    chosen = load_config(
        {**cdk_json_context(), "throughput.routing": "least_outstanding", "serving.routing_strategy": "RANDOM"}
    )
    assert chosen.serving.routing_strategy == "RANDOM"


def test_malformed_json_value_is_reported() -> None:
    context = {**cdk_json_context(), "model.adapters": "[{oops"}
    with pytest.raises(ConfigError) as info:
        load_config(context)
    assert str(info.value) == (
        "config error: model.adapters = '[{oops': looks like JSON but does not parse "
        "(Expecting property name enclosed in double quotes at character 2)"
    )


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (
            "scaling.primary.events.nope.min_capacity",
            "config error: scaling.primary.events.nope: no item named 'nope'; items: shonen-jump, "
            "shonen-magazine, friday-release, or a position 0..2",
        ),
        (
            "scaling.primary.events[9].min_capacity",
            "config error: scaling.primary.events.9: no item 9; the list holds 3 (0..2)",
        ),
        (
            "serving.primary.max_capacity.x",
            "config error: serving.primary.max_capacity.x: cannot set a key below serving.primary.max_capacity, "
            "which is not a section",
        ),
    ],
)
def test_a_path_through_a_list_or_a_value_names_what_it_holds(key: str, expected: str) -> None:
    context = {**cdk_json_context(), key: "1"}
    with pytest.raises(ConfigError) as info:
        load_config(context)
    assert str(info.value) == expected


def test_several_problems_give_one_line_each() -> None:
    context = {**cdk_json_context(), "engine.max_num_seqs": "x", "engine.block_size": "7"}
    with pytest.raises(ConfigError) as info:
        load_config(context)
    assert str(info.value).splitlines() == [
        "config error: engine.max_num_seqs = 'x': must be a whole number",
        "config error: engine.block_size = '7': must be one of 16, 32, 64 or 128",
    ]


def test_missing_stages_block_says_how_to_run_the_app() -> None:
    with pytest.raises(ConfigError) as info:
        load_config({})
    assert str(info.value) == (
        "config error: stages: missing from CDK context; run the app through the CDK CLI "
        "(npx cdk synth, make synth), which passes cdk.json's context"
    )


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (
            # Issue 53, finding 18: said "must be a mapping of keys to values".
            "throughput.measured.insance_type",
            "config error: throughput.measured.insance_type = '1': throughput.measured is keyed by instance type "
            "(e.g. throughput.measured.ml.g6e.xlarge), and 'insance_type' is not one; did you mean "
            "'throughput.measured.<instance type>.instance_type'?",
        ),
        (
            "throughput.measured.ml.g6e.xlargee.concurrency",
            "config error: throughput.measured.ml.g6e.xlargee.concurrency = '1': throughput.measured is keyed by "
            "instance type (e.g. throughput.measured.ml.g6e.xlarge), and 'ml.g6e.xlargee' is not one; "
            "did you mean 'throughput.measured.ml.g6e.xlarge'?",
        ),
    ],
)
def test_a_key_of_a_map_keyed_by_instance_type_that_is_none_says_so_and_names_the_nearest(
    key: str, expected: str
) -> None:
    context = {**cdk_json_context(), key: "1"}
    with pytest.raises(ConfigError) as info:
        load_config(context)
    assert str(info.value) == expected


def test_the_capacity_section_is_named_throughput_now() -> None:
    """Issue 55 gave each of the four things called capacity a name of its own: the per-instance throughput at the
    SLOs is the throughput section (class ThroughputConfig); an old key says where it went, in one line."""
    message = (
        "renamed throughput (issue 55: the per-instance throughput at the SLOs, its routing and measured curves): "
        "throughput.routing, throughput.measured, throughput.job"
    )
    assert config_error({"capacity.routing": "least_outstanding"}) == f"config error: capacity.routing: {message}"
    assert config_error({"capacity": '{"routing": "least_outstanding"}'}) == f"config error: capacity: {message}"
    # Issue 53's candidate instance types moved with their section.
    assert config_error({"capacity.job.instance_types": '["ml.g5.xlarge"]'}) == (
        f"config error: capacity.job.instance_types: {message}"
    )
