"""The open-loop engine model (issue 45): each part behaves as its docstring says, and together they
reproduce what the H200 runs showed: a flat TTFT, then a cliff (planning/engine_model.py)."""

import math
from dataclasses import replace

import pytest

from planning.engine_fit import load_fit
from planning.engine_model import (
    ConversationShape,
    EngineParts,
    capacity,
    characteristic_time,
    host_scale,
    return_probability,
    solve,
)
from planning.gpu_instances import A10G, H200, L4, L40S
from planning.gpu_projection import SINGLE_SOURCE_SPREAD, matmul_spread, project

SLO = {"cold": 500.0, "warm": 500.0}
A10G_KV = 110_592
"""An ml.g5.xlarge's KV cache (the memory plan's), what the H200 runs were made with."""


@pytest.fixture(scope="module")
def h200() -> EngineParts:
    return load_fit().parts(A10G_KV)


def test_the_shape_counts_turns_and_their_uncached_tokens() -> None:
    shape = ConversationShape()
    weights = shape.turn_weights()
    assert math.isclose(sum(share for _, share, _ in weights), 1.0)
    # Every conversation ends once: last turns are 1 / 4.2 of the requests.
    assert math.isclose(sum(last for _, _, last in weights), 1 / 4.2)
    assert shape.cached_prefix_tokens == 592  # 600 tokens in whole 16-token blocks
    assert shape.uncached_tokens(0, hit=True) == 1448  # a first turn is never warm (measured: 1,448)
    assert shape.uncached_tokens(2, hit=True) == 48  # the message and a partial block (measured: 44-56)
    assert shape.uncached_tokens(2, hit=False) == shape.prompt_tokens(2) - 592  # a miss is whole (measured)


def test_lru_characteristic_time_grows_with_free_room_and_shrinks_with_churn() -> None:
    base = characteristic_time(50_000, returning=5_000, gone=2_000, think_s=30)
    assert characteristic_time(100_000, 5_000, 2_000, 30) > base
    assert characteristic_time(50_000, 10_000, 2_000, 30) < base
    assert characteristic_time(0, 5_000, 2_000, 30) == 0
    # Nothing ever leaves for good and everything fits: nothing is evicted.
    assert characteristic_time(50_000, returning=100, gone=0, think_s=30) == math.inf


def test_least_outstanding_routing_returns_a_follow_up_one_time_in_n() -> None:
    assert return_probability("least_outstanding", 4) == 0.25
    assert return_probability("prefix_aware", 4) == return_probability("session_affinity", 4) == 1.0


def test_ttft_stays_flat_then_the_engine_falls_off_a_cliff(h200: EngineParts) -> None:
    shape = ConversationShape(think_s=4)
    light, busy = solve(h200, shape, 120), solve(h200, shape, 480)
    assert light.follow_up_miss < 0.05 and not light.saturated
    assert busy.ttft_p95_ms["cold"] < SLO["cold"] and busy.follow_up_miss > light.follow_up_miss
    result = capacity(h200, shape, SLO)
    below, past = solve(h200, shape, result.cliff_per_min - 1), solve(h200, shape, result.cliff_per_min)
    assert not below.saturated and past.saturated
    # The cascade: near the cliff the cache keeps fewer of the live conversations, so more prefill, longer
    # steps, more running requests: past it the fixed point runs away (the host step bends upward).
    assert below.follow_up_miss > 2 * busy.follow_up_miss and below.running > busy.running
    assert below.itl_ms > busy.itl_ms


def test_longer_pauses_make_more_follow_ups_cold_at_the_same_rate(h200: EngineParts) -> None:
    short, long_ = solve(h200, ConversationShape(think_s=4), 400), solve(h200, ConversationShape(think_s=12), 400)
    assert long_.follow_up_miss > short.follow_up_miss  # measured at 400/min: 44 % (12 s) against ~8 % (4 s)


def test_least_outstanding_routing_over_a_fleet_holds_less_per_engine() -> None:
    l40s = project(load_fit(), L40S, 280_176).parts
    shape = ConversationShape(think_s=30)
    affinity = capacity(l40s, shape, SLO).holds_per_min["both"]
    spread = capacity(l40s, shape, SLO, routing="least_outstanding", instances=10).holds_per_min["both"]
    assert 0 < spread < affinity


def test_a_margin_lowers_the_rate_an_engine_holds(h200: EngineParts) -> None:
    l40s = project(load_fit(), L40S, 280_176).parts
    shape = ConversationShape()
    assert (
        capacity(l40s, shape, SLO, margin=0.3).holds_per_min["both"] < capacity(l40s, shape, SLO).holds_per_min["both"]
    )
    with pytest.raises(ValueError, match=r"margin -0\.1 must be >= 0"):
        capacity(h200, shape, SLO, margin=-0.1)


def test_a_negative_rate_is_refused(h200: EngineParts) -> None:
    with pytest.raises(ValueError) as info:
        solve(h200, ConversationShape(), -1.0)
    assert str(info.value) == "requests_per_min: -1.0 must be a finite number >= 0"


def test_the_l4_is_projected_by_what_it_measures_not_its_datasheet() -> None:
    fit = load_fit()
    l4, a10g = project(fit, L4, A10G_KV), project(fit, A10G, A10G_KV)
    # Its datasheet says 1.7x an A10G's tensor throughput; measured, it prefills about like one.
    assert L4.dense_fp16_tflops / A10G.dense_fp16_tflops > 1.7
    ratio = l4.parts.gpu_prefill_ms_per_token / a10g.parts.gpu_prefill_ms_per_token
    assert ratio == pytest.approx(A10G.matmul_tflops / L4.matmul_tflops)
    assert 1.0 < ratio < 1.2
    # A projection carries the model's error, and the L4 the spread of its published measurements.
    assert l4.margin == pytest.approx(fit.model_error + matmul_spread(L4))
    assert matmul_spread(L4) == pytest.approx(1 - 53 / 61)
    assert "projected from the H200 runs to L4" in l4.source
    # The GPU the runs were made on carries the model's held-out error; a card one source measured,
    # a stated default spread until a second agrees.
    assert project(fit, H200, A10G_KV).margin == fit.model_error > 0
    assert matmul_spread(L40S) == SINGLE_SOURCE_SPREAD > 0
    assert "one source's matmul figure" in project(fit, L40S, 280_176).source


def test_the_margin_divides_the_rate_where_the_engine_saturates(h200: EngineParts) -> None:
    """On the H200 the SLO never binds before the engine saturates, so a margin on TTFT alone would
    change nothing (issue 52); it divides the rate."""
    shape = ConversationShape(think_s=30)
    bare = capacity(h200, shape, SLO)
    margined = capacity(h200, shape, SLO, margin=0.2)
    assert bare.at_holds is not None and bare.at_holds.ttft_p95_ms["cold"] * 1.2 < SLO["cold"]
    assert margined.model_holds_per_min == bare.model_holds_per_min == bare.holds_per_min
    assert margined.holds_per_min["both"] == pytest.approx(bare.holds_per_min["both"] / 1.2, abs=1)


def test_a_host_with_fewer_cores_than_busy_threads_steps_slower() -> None:
    assert host_scale(4, gateway=False) == host_scale(4, gateway=True) == 1.0
    # The gateway keeps no thread measurably busy (GATEWAY_BUSY_THREADS, measured): 2 cores hold vLLM's two.
    assert host_scale(2, gateway=True) == host_scale(2, gateway=False) == 1.0
    assert host_scale(1, gateway=False) == 2.0
    with pytest.raises(ValueError, match=r"cores: 0 must be > 0"):
        host_scale(0, gateway=True)


def test_at_a_500_ms_cold_slo_an_l4_holds_no_rate_and_an_l40s_does() -> None:
    fit = load_fit()
    shape = ConversationShape()
    l4 = project(fit, L4, 110_640)
    l40s = project(fit, L40S, 280_176)
    assert capacity(l4.parts, shape, SLO, margin=l4.margin).holds_per_min["cold"] == 0
    assert capacity(l40s.parts, shape, SLO, margin=l40s.margin).holds_per_min["both"] > 0
    # Loosened to 800 ms, the L4 holds a rate.
    assert capacity(l4.parts, shape, {**SLO, "cold": 800.0}, margin=l4.margin).holds_per_min["cold"] > 0


def test_no_room_for_one_sequence_holds_nothing(h200: EngineParts) -> None:
    empty = replace(h200, kv_cache_tokens=0)
    assert solve(empty, ConversationShape(), 10).saturated
    assert capacity(empty, ConversationShape(), SLO).holds_per_min["both"] == 0
