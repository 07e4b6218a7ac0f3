"""``python -m planning.scaling_sim``: output, --compare, CSV demand, --plot and errors."""

from pathlib import Path

import pytest

from app_config import AppConfig
from planning.planner import Planner
from planning.scaling_sim import __main__ as cli
from planning.scaling_sim import demand
from planning.scaling_sim.report import format_grid
from tests.synth_helpers import SEEDS_G5_FLAGS

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _csv(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "demand.csv"
    path.write_text(text)
    return path


def test_default_week_prints_the_headline_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    # The per-instance figures are the config's capacity at the SLO, not seed 001's 1,200/min.
    config = AppConfig()
    capacity = Planner.of(config).throughput(config.serving.primary.instance_type)
    for text in (
        f"C = {capacity.concurrency} concurrent",
        f"R = {capacity.requests_per_minute:,.0f} req/min at the TTFT SLO",
        f"cliff at {capacity.cliff_per_minute:,.0f} req/min per instance",
        "provisioning 8 min + start-up 2 min",  # the compile cache: scaling.instance_start_cached_s 83 s
        "minutes above the TTFT SLO",
        "peak queue at",
        "peak instances InService",
        "monthly cost (USD)",
        "minutes past the cliff",
        "KV-cache tracking (leading signal, scale-out only): on",
        "scaling activities",
        "friday-release     FRI 18:00",
    ):
        assert text in out


def _instance_hours(out: str) -> float:
    (row,) = [line for line in out.splitlines() if line.strip().startswith("instance-hours")]
    return float(row.split()[-1].replace(",", ""))


def test_a_measured_capacity_overrides_the_projection(capsys: pytest.CaptureFixture[str]) -> None:
    # What `ops load` prints after measuring 250 requests a minute within the SLO on a g5, above the
    # engine model's projection to the A10G (59 a minute at the seeds' 800 ms cold SLO).
    measured = '{"ml.g5.xlarge": {"concurrency": 8, "requests_per_minute": 250, "ttft_p50_ms": 90}}'
    # --demand-scale 65: about seed 001's volume (app_config/traffic.py), so that the capacity, not the
    # floors, sizes the fleet; seed 001's hard max of 20 (the default's 6 would cap both runs).
    flags = ["--demand-scale", "65", *SEEDS_G5_FLAGS, "-c", "serving.primary.max_capacity=20"]
    assert cli.main(flags) == 0
    projected = capsys.readouterr().out
    assert "(projected from the H200 runs to A10G" in projected
    assert cli.main([*flags, "-c", f"throughput.measured={measured}"]) == 0
    out = capsys.readouterr().out
    assert "C = 8 concurrent, R = 250 req/min at the TTFT SLO" in out
    assert "target 8," in out  # the concurrency target follows the measured capacity
    assert _instance_hours(out) < _instance_hours(projected)


def test_csv_demand_sets_the_duration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _csv(tmp_path, "minute,requests_per_minute\n" + "".join(f"{m},30\n" for m in range(90)))
    assert demand.load_csv(path) == [30.0] * 90
    assert cli.main(["--demand-csv", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Simulated 90 minutes" in out
    assert "minutes with a queue         0" in out
    assert "peak queue at                none" in out


def test_bad_csv_value_names_file_row_column_and_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _csv(tmp_path, "requests_per_minute\n600\nlots\n")
    with pytest.raises(demand.DemandError) as error:
        demand.load_csv(path)
    assert str(error.value) == (
        f"{path}: row 3, column requests_per_minute: 'lots' is not allowed; "
        "expected a finite number >= 0 (requests per minute)"
    )
    assert cli.main(["--demand-csv", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == str(error.value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("rpm\n1\n", "row 1: no 'requests_per_minute' column (found: rpm)"),
        ("requests_per_minute\n-5\n", "row 2, column requests_per_minute: '-5' is not allowed"),
        ("minute,requests_per_minute\n0,1\n2,1\n", "row 3, column minute: '2'; expected 1"),
        ("requests_per_minute\n", "no data rows"),
    ],
)
def test_bad_csv_shapes_are_one_line_errors(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(demand.DemandError, match=None) as error:
        demand.load_csv(_csv(tmp_path, text))
    assert fragment in str(error.value) and "\n" not in str(error.value)


def test_plot_writes_a_png(tmp_path: Path) -> None:
    path = _csv(tmp_path, "requests_per_minute\n" + "600\n" * 60 + "3000\n" * 60)
    png = tmp_path / "run.png"
    assert cli.main(["--demand-csv", str(path), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == PNG_SIGNATURE


def test_config_error_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["-c", "scaling.primary.target_tracking.invocations_per_instance_target=-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "invocations_per_instance_target" in err and "\n" not in err


def test_the_instance_grid_keeps_its_columns_apart_at_a_hundred_instances() -> None:
    # Issue 40 item 12: '100-100' in 7 columns ran into its neighbour ('100-100100-100').
    grid = [["00-03", *(["100-100"] * 6), "98-100"], ["03-06", *(["9-9"] * 7)]]
    header, wide, narrow = format_grid(grid)
    assert wide.split() == ["00-03", *(["100-100"] * 6), "98-100"]
    assert header.split() == ["hours", "MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"]
    assert len(header) == len(wide) == len(narrow)  # every row aligned under the days
    # Small fleets keep the familiar 7-wide columns.
    assert format_grid([["00-03", *(["3-4"] * 7)]])[1] == "  00-03 " + "".join(f"{'3-4':>7}" for _ in range(7))


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--demand-scale", "nan", "'nan' is not a finite number"),
        ("--demand-scale", "inf", "'inf' is not a finite number"),
        ("--instance-rpm", "0", "0 must be > 0"),
        ("--provision-min", "-1", "-1 must be >= 0"),
    ],
)
def test_a_bad_number_stops_with_one_line(
    flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.parse_args([flag, value])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"scaling-sim: error: argument {flag}: {message}"
