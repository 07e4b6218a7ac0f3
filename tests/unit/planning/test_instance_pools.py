"""Instance pools (issue 55): ``serving.<variant>.instance_pools``, each type planned and judged on its own, the
variant's targets and floors holding for every type."""

import pytest

from app_config import ConfigError
from app_config.loader import load_cli_config
from planning import cost_plan
from planning.make_plan import load_plan, make_plan
from tests.config_helpers import config_error

POOLS = 'serving.primary.instance_pools=["ml.g6e.xlarge","ml.g6e.2xlarge"]'
MIXED = 'serving.primary.instance_pools=["ml.g6e.xlarge","ml.g6e.12xlarge"]'
"""One L40S, and four: one engine per instance against four (vLLM data parallel)."""


@pytest.mark.parametrize(
    ("pools", "message"),
    [
        (
            '["ml.g6e.2xlarge","ml.g6e.xlarge"]',
            "config error: serving.primary: instance_pools[0] = ml.g6e.2xlarge must be instance_type = ml.g6e.xlarge: "
            "the first pool is the variant's own type (priority 1); list the fallbacks after it",
        ),
        (
            '["ml.g6e.xlarge"]',
            "config error: serving.primary: instance_pools = [ml.g6e.xlarge] names instance_type alone: list at least "
            "one fallback type after it, or leave instance_pools empty",
        ),
        (
            '["ml.g6e.xlarge","ml.g6e.2xlarge","ml.g6e.xlarge"]',
            "config error: serving.primary: instance_pools lists ml.g6e.xlarge more than once: each type is one pool",
        ),
    ],
)
def test_a_bad_pool_list_stops_synth_in_one_line(pools: str, message: str) -> None:
    assert config_error({"serving.primary.instance_pools": pools}) == message


def test_at_most_five_pools() -> None:
    six = '["ml.g6e.xlarge","ml.g6e.2xlarge","ml.g6e.4xlarge","ml.g6e.8xlarge","ml.g6e.16xlarge","ml.g6e.12xlarge"]'
    message = config_error({"serving.primary.instance_pools": six})
    assert message.startswith("config error: serving.primary.instance_pools = ['ml.g6e.xlarge', 'ml.g6e.2xlarge', ")
    assert message.endswith("...: must have at most 5 items")  # the value is cut to fit one line


def test_the_provision_timeout_is_aws_range() -> None:
    assert config_error({"serving.primary.instance_provision_timeout_s": "299"}) == (
        "config error: serving.primary.instance_provision_timeout_s = '299': must be >= 300"
    )


def test_a_member_that_cannot_hold_the_slo_stops_synth_naming_it() -> None:
    # The L4 prefills a first turn too slowly for a 500 ms cold p95 at any load (docs/planning.md).
    message = config_error({"serving.primary.instance_pools": '["ml.g6e.xlarge","ml.g6.xlarge"]'})
    assert message.startswith(
        "config error: slo.cold.ttft_p95_ms = 500 ms: variant primary (ml.g6.xlarge, pool 2) cannot hold it at any load"
    )
    assert "would hold: slo.cold.ttft_p95_ms >= " in message
    assert message.endswith(
        "or serving.primary.instance_pools without ml.g6.xlarge (slo.require_holdable: a guardrail that always fires "
        "is an outage trap)"
    )


def test_inference_components_mode_refuses_pools_in_one_line() -> None:
    from tests.conftest import COMPONENTS

    assert config_error({**COMPONENTS, "serving.primary.instance_pools": '["ml.g6e.xlarge","ml.g6e.2xlarge"]'}) == (
        "config error: serving.primary.instance_pools = [ml.g6e.xlarge, ml.g6e.2xlarge]: instance pools are planned "
        "for serving.mode = variants only; leave them empty in inference_components mode"
    )


def test_each_type_gets_its_own_engines_memory_plan_and_figure() -> None:
    _, plan = load_plan([MIXED])
    small, large = plan.hardware["primary"].pools
    assert (small.instance_type, small.priority, small.config_key) == (
        "ml.g6e.xlarge",
        1,
        "serving.primary.instance_type",
    )
    assert (large.instance_type, large.priority, large.config_key) == (
        "ml.g6e.12xlarge",
        2,
        "serving.primary.instance_pools[1]",
    )
    assert (small.engines, large.engines) == (1, 4)
    assert small.memory == large.memory  # one L40S per engine either way
    assert large.throughput.concurrency > small.throughput.concurrency
    assert large.throughput.requests_per_minute > small.throughput.requests_per_minute
    assert [pool.instance_type for pool in plan.hardware["canary"].pools] == ["ml.g6e.xlarge"]


def test_mixed_types_scale_on_targets_that_hold_for_every_member() -> None:
    """SageMaker's routing spreads requests by outstanding requests, not by what an instance holds, and target
    tracking averages the metric over the variant: the concurrency target must be the weakest member's, the
    KV-cache target (a share of each instance's own cache) the lowest member's share, and the floors count
    instances that may all be of the weakest type (planning/hardware.py)."""
    _, mixed = load_plan([MIXED])
    _, small = load_plan([])  # ml.g6e.xlarge alone
    _, large = load_plan(["serving.primary.instance_type=ml.g6e.12xlarge"])
    small_pool, large_pool = mixed.hardware["primary"].pools

    def targets(plan_scaling):  # type: ignore[no-untyped-def]
        return (
            plan_scaling.target_tracking.concurrent_requests_target,
            plan_scaling.kv_cache_tracking.target_percent,
            plan_scaling.step_scaling.scale_in_running_requests,
        )

    concurrency, kv_percent, scale_in = targets(mixed.scaling.primary)
    assert concurrency == small_pool.throughput.concurrency == targets(small.scaling.primary)[0]
    assert concurrency < targets(large.scaling.primary)[0]
    lowest_share = min(small_pool.throughput.kv_cache_usage or 1, large_pool.throughput.kv_cache_usage or 1)
    assert kv_percent == pytest.approx(max(1, -(-lowest_share * 100 // 1)))
    assert kv_percent < targets(small.scaling.primary)[1]  # the larger cache runs emptier at its own rate
    assert scale_in == targets(small.scaling.primary)[2]
    mixed_floors = [a.min_capacity for a in mixed.scaling.primary.schedule]
    assert mixed_floors == [a.min_capacity for a in small.scaling.primary.schedule]
    assert mixed.prefix_routing == small.prefix_routing  # its concurrency threshold is the weakest's too


def test_the_cost_plan_prices_the_worst_case() -> None:
    config, plan = load_plan([POOLS])
    primary = cost_plan.plan(config, plan)[0]
    assert primary.instance_type == "ml.g6e.xlarge > ml.g6e.2xlarge"
    prices = dict(primary.pool_prices)
    assert primary.price_usd_per_hour == max(prices.values()) == prices["ml.g6e.2xlarge"] > prices["ml.g6e.xlarge"]
    (line,) = cost_plan.pool_lines(primary)  # format_plan prints it under the variant's heading
    assert line.startswith(
        f"Instance pools (ml.g6e.xlarge ${prices['ml.g6e.xlarge']:.3f}/h, ml.g6e.2xlarge "
        f"${prices['ml.g6e.2xlarge']:.3f}/h): priced at the worst case, every instance the dearest type"
    )


def test_without_pools_the_plan_is_one_type() -> None:
    config = load_cli_config([])
    plan = make_plan(config)
    assert config.serving.primary.instance_types == ("ml.g6e.xlarge",)
    assert not plan.hardware["primary"].is_mixed
    with pytest.raises(ConfigError):
        load_cli_config(["serving.primary.instance_pools=[]", "serving.primary.instance_provision_timeout_s=3601"])
