"""The engine model's fit on the committed H200 runs (issues 45, 52): the committed parameters are what
the runs give; its error is measured on runs it was not fitted on (leave one run out), and that error,
not the in-sample one, is its margin (planning/engine_fit.py)."""

import json
import re
import statistics

import pytest

from planning import capacity as capacity_cli
from planning import engine_fit
from planning.engine_fit import (
    FIT_FILE,
    RUN_FILES,
    RUN_SLO_MS,
    RunData,
    StepPoint,
    _host_curve,
    _shape,
    check_run,
    fit,
    fit_and_validate,
    gateway_step_ratio,
    held_steps,
    load_fit,
    load_runs,
    report,
    steady_steps,
)
from planning.engine_model import capacity, solve


@pytest.fixture(scope="module")
def runs() -> list[RunData]:
    return load_runs()


@pytest.fixture(scope="module")
def fresh(runs: list[RunData]):
    return fit_and_validate(runs)


def test_the_committed_fit_is_what_the_committed_runs_give(fresh) -> None:
    assert fresh == load_fit(), "planning/engine_fit.json is stale: run make capacity-fit"
    assert json.loads(FIT_FILE.read_text())["generated_by"] == "python -m planning.engine_fit --write"


HELD_OUT_BOUND = 0.25
"""What the model reaches, with room for the next run: its worst held-out error is 22 % (the 4 s run on the
A10G-sized cache, where it is pessimistic), over issue 52's 20 % target (docs/planning.md says why)."""


def test_every_run_is_checked_on_a_model_that_never_saw_it_and_the_margin_is_the_worst(fresh) -> None:
    assert len(fresh.checks) == len(RUN_FILES) >= 5
    pauses = {row["think_s"] for row in fresh.checks}
    kv_sizes = {row["kv_cache_tokens"] for row in fresh.checks}
    assert min(pauses) <= 4 and max(pauses) >= 30 and len(kv_sizes) >= 2
    for row in fresh.checks:
        assert row["measured_holds_per_min"] > 0, row
        assert abs(row["held_out_error"]) <= HELD_OUT_BOUND, row
        # Optimistic errors are what a margin must cover: none reaches the pessimistic worst.
        assert row["held_out_error"] <= 0.15, row
    assert fresh.model_error == max(abs(row["held_out_error"]) for row in fresh.checks)
    # Held out is not in-sample: at least one run is predicted differently once it is left out.
    assert any(row["held_out_per_min"] != row["in_sample_per_min"] for row in fresh.checks)


def test_a_model_refitted_without_a_run_predicts_that_run_s_cold_share_through_its_pause(runs) -> None:
    """The pause enters through residency: the model fitted without the 30 s run must predict that
    run's cold share at each rate it held. The same model told the pause was 4 s (a model that
    ignores the pause) must not."""
    [held_out] = [run for run in runs if run.label == "ramp-think30-a10g-kv"]
    model = fit([run for run in runs if run is not held_out], load_fit().prefill_interference)
    parts = model.parts(held_out.kv_cache_tokens, host_scale=held_out.host_scale)
    points = held_steps(held_out)
    measured = {p.arrived_per_min: s.cold_share for p, s in zip(points, held_out.summaries, strict=False)}
    assert len(measured) >= 4

    def error(think_s: float) -> float:
        return max(abs(solve(parts, _shape(think_s), rate).cold_share - share) for rate, share in measured.items())

    assert error(held_out.think_s) <= 0.2
    assert error(4.0) >= 0.3
    # And the holding rate it predicts for that run is within 20 % of the measured one.
    assert abs(check_run(model, held_out).error) <= 0.20


def test_the_gateway_runs_on_two_cores_step_as_the_bare_runs_do_as_the_model_counts_them(fresh, runs) -> None:
    """engine_model.GATEWAY_BUSY_THREADS is a measurement: least squares over the steady steps puts the
    gateway runs' host step at ~1x the bare runs' (not 1.5x, a whole third busy thread on 2 cores), and
    the model's host scale for them agrees with it."""
    [gateway] = [run for run in runs if run.label == "ramp-think30-l40s-kv-gateway"]
    assert gateway.host_cores == 2 and gateway.gateway
    assert fresh.gateway_step_ratio == pytest.approx(gateway.host_scale, abs=0.15)
    assert gateway_step_ratio(runs, fresh.prefill_interference) < 1.25  # 1.5 would fit far worse


def test_an_independent_bare_run_at_30_s_on_the_l40s_sized_cache_is_within_20_percent() -> None:
    """shared/measurements/README.md (2026-11-29, an independent harness, not fitted on): a bare engine on 4
    cores with an L40S-sized KV cache (~280k tokens) at the default 30 s pause held both SLOs only up to
    a rate more than 25 % below the 650/min the model then gave (so below 487/min), and collapsed one step
    further at ~90 running requests and ITL ~64 ms. The model must not be more than 20 % above that."""
    parts = load_fit().parts(280_176)
    modelled = capacity(parts, _shape(30.0), RUN_SLO_MS).holds_per_min["both"]
    assert modelled <= 1.2 * 0.75 * 650, modelled


def test_the_report_states_each_part_and_each_runs_in_sample_and_held_out_error() -> None:
    lines = report(load_fit())
    assert lines[0].startswith("fixed part ") and "us per uncached token" in lines[0]
    assert any(line.startswith("decode step on the GPU") and "host step" in line for line in lines)
    for name in RUN_FILES:
        label = name.rsplit("/", 1)[-1].removesuffix(".json")
        [line] = [line for line in lines if line.strip().startswith(label + " ")]
        assert re.search(r"measured +\d+ .*in-sample +\d+ \([+-]\d+%\); held out +\d+ \([+-]\d+%\)", line), line
        assert " 0 " not in line.split("measured")[1].split("(")[0], line  # no run reads as 0 req/min
    assert lines[-1] == f"model error (largest held-out error, the projections' margin): {load_fit().model_error:.0%}"


def test_make_capacity_prints_the_line_a_check_reads(capsys) -> None:
    assert capacity_cli.main(["--gpu", "H200", "--kv-cache-tokens", "111104", "--think-s", "4"]) == 0
    header, holds, counted, cliff = capsys.readouterr().out.splitlines()
    assert header.startswith("H200, KV cache 111,104 tokens, users pause 4 s on average, prefix_aware routing, ")
    modelled = re.match(r"holds both SLOs up to ([0-9,]+) req/min per engine \(", holds)
    assert modelled, holds
    planned = re.match(
        r"the planner counts ([0-9,]+) req/min per engine: the model's ([0-9,]+) req/min with its (\d+)% margin",
        counted,
    )
    assert planned, counted
    rate, model_rate, margin = (int(g.replace(",", "")) for g in planned.groups())
    assert model_rate == int(modelled.group(1).replace(",", ""))
    assert margin == round(100 * load_fit().model_error)
    assert rate <= model_rate / (1 + load_fit().model_error) + 1
    assert cliff.startswith("cliff starts at ")


def test_make_capacity_answers_every_gpu_family(capsys) -> None:
    for gpu in ("H100", "H200", "L4", "L40S", "A10G"):
        assert capacity_cli.main(["--gpu", gpu]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[1].startswith("holds both SLOs up to "), (gpu, lines)
    # An unknown GPU is one line on stderr, exit 2.
    assert capacity_cli.main(["--gpu", "B300"]) == 2
    assert capsys.readouterr().err.startswith("error: --gpu 'B300': unknown; known GPUs: A100-SXM4-40GB, ")


def test_the_host_step_is_fitted_on_steady_steps_and_bends_upward_past_the_held_ones(runs, monkeypatch) -> None:
    """Steps past a run's first failure feed the host step while the engine queued nothing: the 4 s
    L40S-sized run's third step (95 running requests, ITL 50 ms, none waiting) does, the 12 s run's last
    (2.5 waiting, 12 preemptions) does not. They make the step bend: without them no fold has steps past
    ~50 running requests and the square term would not be measured."""
    by_label = {run.label: run for run in runs}
    l40s, think12 = by_label["ramp-think4-l40s-kv"], by_label["ramp-think12"]
    assert len(held_steps(l40s)) == 2 and max(p.running for p in steady_steps(l40s)) > 90
    assert len(steady_steps(think12)) == len(held_steps(think12)) == len(think12.summaries) - 1
    _, k1, k2 = load_fit().host_step_ms
    assert k2 > 0 and k1 > 0
    # A fit on the held steps alone has nothing past 48 running requests: unconstrained, its square term
    # comes out negative (a curve that turns negative past the data); with every coefficient >= 0 it is a line.
    beta = load_fit().prefill_interference
    assert fit(runs, beta).host_step_ms == load_fit().host_step_ms
    monkeypatch.setattr(engine_fit, "steady_steps", held_steps)
    line = fit(runs, beta).host_step_ms
    assert line[2] == 0.0 and line[1] > 0 and line != load_fit().host_step_ms


def test_the_host_curve_has_no_negative_coefficient_whatever_the_steps_say() -> None:
    """A step whose ITL falls as running requests grow is noise (a fold with few steps): unconstrained least
    squares would give k1 < 0 and a host step that goes negative, and TTFT a complex number; nnls holds
    every coefficient at 0 or above, here a flat step at the steps' mean."""
    points = [
        StepPoint(
            run="falling",
            think_s=30.0,
            host_scale=1.0,
            gateway=False,
            arrived_per_min=60.0,
            follow_up_miss=0.0,
            running=float(n),
            itl_ms=20.0 - 0.1 * n,
            ttft_p95_ms={"cold": None, "warm": None},
        )
        for n in (5, 10, 20, 40)
    ]
    (k0, k1, k2), residual = _host_curve(points, 0.0, 0.0275)
    assert k1 == k2 == 0.0
    assert k0 == pytest.approx(statistics.fmean(p.itl_ms for p in points))
    assert residual > 0


def test_a_fit_without_enough_steps_says_how_many_it_had_and_needs() -> None:
    with pytest.raises(ValueError) as info:
        fit([], 1.0)
    assert str(info.value) == "engine fit: 0 held and 0 steady step(s) in []; at least 2 and 3 are needed"
