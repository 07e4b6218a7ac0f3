"""The engine model's fit on the committed H200 runs (issue 45): the committed parameters are what the
runs give, and the model is within 20 % of every run's SLO-holding rate (planning/engine_fit.py)."""

import json
import re

from planning import capacity as capacity_cli
from planning.engine_fit import FIT_FILE, RAMPS, check, fit, load_fit, report


def test_the_committed_fit_is_what_the_committed_runs_give() -> None:
    fresh = fit()
    assert fresh == load_fit(), "planning/engine_fit.json is stale: run make capacity-fit"
    assert json.loads(FIT_FILE.read_text())["generated_by"] == "python -m planning.engine_fit --write"


def test_the_model_is_within_20_percent_of_every_run() -> None:
    rows = check(load_fit())
    assert {row.run for row in rows} == set(RAMPS)
    for row in rows:
        assert row.measured_holds_per_min > 0, row
        assert abs(row.error) <= 0.20, row
    # Its error is the largest of them, and what a projection is held to.
    assert load_fit().model_error == round(max(abs(row.error) for row in rows), 4)


def test_the_report_states_each_part_and_each_runs_error() -> None:
    lines = report(load_fit())
    assert lines[0].startswith("fixed part ") and "us per uncached token" in lines[0]
    assert any(line.startswith("decode step on the GPU") and "host step" in line for line in lines)
    for run in RAMPS:
        assert any(run in line and "measured" in line and "model" in line for line in lines), run
    assert lines[-1] == f"model error (largest over the runs): {load_fit().model_error:.0%}"


def test_make_capacity_prints_the_line_a_check_reads(capsys) -> None:
    assert capacity_cli.main(["--gpu", "H200", "--kv-cache-tokens", "111104", "--think-s", "4"]) == 0
    header, holds, cliff = capsys.readouterr().out.splitlines()
    assert header.startswith("H200, KV cache 111,104 tokens, users pause 4 s on average, prefix_aware routing: ")
    assert re.match(r"holds both SLOs up to [0-9,]+ req/min per engine \(", holds), holds
    assert cliff.startswith("cliff starts at ")


def test_make_capacity_answers_every_gpu_family(capsys) -> None:
    for gpu in ("H100", "H200", "L4", "L40S", "A10G"):
        assert capacity_cli.main(["--gpu", gpu]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[1].startswith("holds both SLOs up to "), (gpu, lines)
    # An unknown GPU is one line on stderr, exit 2.
    assert capacity_cli.main(["--gpu", "B300"]) == 2
    assert capsys.readouterr().err.startswith("error: --gpu 'B300': unknown; known GPUs: A100-SXM4-40GB, ")
