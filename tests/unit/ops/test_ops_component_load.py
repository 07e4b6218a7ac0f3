"""``load`` in inference_components mode: round-robin over adapter components, per-copy suggestion."""

import pytest

from ops.cli import main
from ops.exit_codes import ExitCode
from ops.invoke import Answer
from ops.load import COPY_SCALING_METRIC, LevelResult, LoadPlan, suggest_per_copy
from tests.unit.ops.ops_stubs import ADAPTER_COMPONENTS, ADAPTERS, BASE, FakeClock, stubbed, write_component_outputs

SYNC_ONE_LEVEL = ["--levels", "1", "--mode", "sync"]
TWO_ADAPTERS = ["--adapter", "jp_style_v1", "--adapter", "manga_domain_v3"]


@pytest.fixture
def args(tmp_path):
    return ["load", "--stack-outputs", str(write_component_outputs(tmp_path)), *SYNC_ONE_LEVEL]


def test_load_spreads_requests_round_robin_over_the_adapter_components(args):
    with stubbed() as stubs:
        stubs.describe_component(BASE, copies=2)
        for _ in range(2):  # queued in the order the requests must arrive
            for adapter in ADAPTERS:
                stubs.invoke(None, adapter, component=ADAPTER_COMPONENTS[adapter])
        code = main([*args, "--requests-per-level", "6"], stubs.deps(FakeClock(tick=0.05)))
    assert code == ExitCode.OK
    round_robin = ", ".join(f"{a} -> {ADAPTER_COMPONENTS[a]}" for a in ADAPTERS)
    assert stubs.lines[0] == (
        f"load: levels 1; up to 6 requests or 60 s per level; round-robin over {round_robin}; sync; 2 copy(ies)"
    )
    # Clock ticks 50 ms per read: each request reads it 3 times (budget check, start, end), so a
    # request takes 50 ms and the level 6 x 3 + 1 reads = 950 ms: 6.32 req/s, 0.32 in flight.
    assert stubs.lines[-1] == (
        f"suggested target ({COPY_SCALING_METRIC}): 1 concurrent requests per copy "
        "= floor(6.32 req/s x 0.050 s mean latency / 2 copy(ies) / 1.3) at concurrency 1"
    )


def test_load_takes_an_adapter_subset_and_copies_flag(args):
    with stubbed() as stubs:
        stubs.describe_component(BASE, copies=2)
        stubs.invoke(None, "jp_style_v1", component=ADAPTER_COMPONENTS["jp_style_v1"])
        stubs.invoke(None, "manga_domain_v3", component=ADAPTER_COMPONENTS["manga_domain_v3"])
        code = main(
            [*args, "--requests-per-level", "2", "--copies", "3", *TWO_ADAPTERS],
            stubs.deps(FakeClock(tick=0.05)),
        )
    assert code == ExitCode.OK
    assert stubs.lines[0].endswith(
        f"round-robin over jp_style_v1 -> {ADAPTER_COMPONENTS['jp_style_v1']}, "
        f"manga_domain_v3 -> {ADAPTER_COMPONENTS['manga_domain_v3']}; sync; 3 copy(ies)"
    )
    assert "/ 3 copy(ies) / 1.3) at concurrency 1" in stubs.lines[-1]


def test_load_refuses_a_base_component_scaled_to_zero(args, capsys):
    with stubbed() as stubs:
        stubs.describe_component(BASE, copies=0)
        code = main(args, stubs.deps(FakeClock()))
    assert code == ExitCode.NOT_READY
    assert capsys.readouterr().err.strip() == (
        f"error: inference component {BASE} is scaled to zero (0 copies); wake it first with "
        "`mangaassist-ops smoke --wake`"
    )


def _level(concurrency: int, count: int, wall_s: float, latency_s: float) -> LevelResult:
    return LevelResult(concurrency, tuple(Answer(True, "ok", latency_s, latency_s / 4) for _ in range(count)), wall_s)


def test_per_copy_suggestion_is_littles_law_over_copies_with_headroom():
    plan = LoadPlan(copies=2, cold_ttft_slo_ms=500, warm_ttft_slo_ms=500)
    results = [
        _level(4, 40, 10.0, 1.0),  # 4 req/s
        _level(16, 200, 10.0, 1.2),  # 20 req/s x 1.2 s = 24 in flight, TTFT 300 ms
        _level(32, 250, 10.0, 2.4),  # 25 req/s but TTFT 600 ms > 500 ms
    ]
    best = suggest_per_copy(results, plan)
    assert best is not None
    assert best.concurrency == 16
    assert best.in_flight_per_copy == pytest.approx(12.0)  # 24 in flight / 2 copies
    assert best.target == 9  # floor(12 / 1.3)


def test_per_copy_suggestion_needs_a_level_within_the_slo():
    assert suggest_per_copy([_level(32, 250, 10.0, 2.4)], LoadPlan(copies=1)) is None
