"""At synth, per variant and request class: can the instance type hold the class's TTFT SLO
(issue 33)? The exact lines, the projection they read, and the flag that makes it stop synth."""

import math

import pytest

from app_config import AppConfig, ConfigError, load_config
from app_config.planning import memory_report
from app_config.planning.slo_holds import class_holds
from app_config.planning.throughput_at_slo import throughput_at_slo
from serving_contract.request_classes import RequestClass
from tests.synth_helpers import SEEDS_G5, cdk_json_context


def _fresh(instance_type: str) -> float:
    """The committed projection's cold-class TTFT p95 at one request (app_config/planning/instance_capacity.json)."""
    p95 = throughput_at_slo(instance_type, 500, AppConfig().capacity, curve="fresh").ttft_p95_ms
    assert p95 is not None
    return p95


G5_P95, G6_P95 = _fresh("ml.g5.xlarge"), _fresh("ml.g6.xlarge")
G5_COLD = (
    f"slo.cold.ttft_p95_ms = 500 ms: variant primary (ml.g5.xlarge) cannot hold it, projected TTFT p95 {G5_P95:.0f} ms "
    f"at 1 concurrent request (fresh curve projected to A10G); would hold: slo.cold.ttft_p95_ms >= "
    f"{math.ceil(G5_P95)} or serving.primary.instance_type = ml.g6.xlarge (projected {G6_P95:.0f} ms)"
)


G5_TYPES = {key: value for key, value in SEEDS_G5.items() if key.startswith("serving.")}
"""The seeds' ml.g5.xlarge on both variants, at the default SLOs (which it cannot hold at 500 ms cold)."""

G5_WARNED = {**G5_TYPES, "slo.require_holdable": "false"}
"""The same, with the check a warning: an experiment on a fleet that cannot hold the cold SLO."""


def _load(**overrides: str) -> AppConfig:
    return load_config({**cdk_json_context(), **overrides})


def test_an_unholdable_fleet_is_warned_for_each_class_and_variant() -> None:
    config = _load(**G5_WARNED)
    G5_WARM_P95 = throughput_at_slo("ml.g5.xlarge", 500, config.capacity, curve="conversations").ttft_p95_ms  # noqa: N806
    lines = [hold.line for hold in class_holds(config)]
    assert lines == [
        f"WARNING: {G5_COLD}",
        f"slo.warm.ttft_p95_ms = 500 ms: variant primary (ml.g5.xlarge) holds it up to TTFT p95 {G5_WARM_P95:.0f} ms "
        "at 1 concurrent request",
        f"WARNING: {G5_COLD}".replace("variant primary", "variant canary").replace("serving.primary", "serving.canary"),
        f"slo.warm.ttft_p95_ms = 500 ms: variant canary (ml.g5.xlarge) holds it up to TTFT p95 {G5_WARM_P95:.0f} ms "
        "at 1 concurrent request",
    ]
    # The synth summary prints them under each variant.
    rendered = memory_report.render(memory_report.build(config))
    assert f"    WARNING: {G5_COLD}" in rendered


def test_the_figures_are_the_class_curves_of_the_projection() -> None:
    config = _load(**G5_WARNED)
    cold, warm = (h for h in class_holds(config) if h.variant_name == "primary")
    fresh = throughput_at_slo("ml.g5.xlarge", 500, config.capacity, curve="fresh")
    conversations = throughput_at_slo("ml.g5.xlarge", 500, config.capacity, curve="conversations")
    assert (cold.ttft_p95_ms, warm.ttft_p95_ms) == (fresh.ttft_p95_ms, conversations.ttft_p95_ms)
    assert config.throughput_of("ml.g5.xlarge", RequestClass.COLD) == fresh


def test_the_suggested_slo_holds() -> None:
    suggested = math.ceil(G5_P95)
    (cold, *_) = class_holds(_load(**G5_TYPES, **{"slo.cold.ttft_p95_ms": str(suggested)}))
    assert cold.holds
    assert cold.line == (
        f"slo.cold.ttft_p95_ms = {suggested} ms: variant primary (ml.g5.xlarge) holds it up to TTFT p95 {G5_P95:.0f} "
        "ms at 1 concurrent request"
    )


def test_an_instance_type_that_holds_both_classes_says_so() -> None:
    config = _load(**{"serving.primary.instance_type": "ml.p5.48xlarge", "serving.canary.enabled": "false"})
    # Eight H100s, one engine each: the one-GPU curve's level times 8.
    fresh, conversations = (
        throughput_at_slo("ml.p5.48xlarge", 500, config.capacity, curve=curve) for curve in ("fresh", "conversations")
    )
    assert [hold.line for hold in class_holds(config)] == [
        f"slo.cold.ttft_p95_ms = 500 ms: variant primary (ml.p5.48xlarge) holds it up to TTFT p95 "
        f"{fresh.ttft_p95_ms:.0f} ms at {fresh.concurrency * 8} concurrent requests",
        f"slo.warm.ttft_p95_ms = 500 ms: variant primary (ml.p5.48xlarge) holds it up to TTFT p95 "
        f"{conversations.ttft_p95_ms:.0f} ms at {conversations.concurrency * 8} concurrent requests",
    ]


def test_require_holdable_turns_the_warning_into_a_one_line_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        _load(**G5_TYPES, **{"slo.require_holdable": "true"})
    assert str(info.value) == (
        f"config error: {G5_COLD} (slo.require_holdable: a guardrail that always fires is an outage trap)"
    )
    # A fleet that holds both classes passes with the flag on.
    _load(
        **{
            "slo.require_holdable": "true",
            "serving.primary.instance_type": "ml.p5.48xlarge",
            "serving.canary.instance_type": "ml.p5.48xlarge",
        }
    )
