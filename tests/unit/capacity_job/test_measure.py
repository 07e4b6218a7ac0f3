"""The capacity job's entrypoint around its sweep: the files it reads, the image's server it starts and
always stops, and the curve it writes (the sweep itself, on the real CPU engine:
tests/engine/test_capacity_job_smoke.py).

The server is a stand-in ``serving_app`` package put first on the job's ``PYTHONPATH`` (through the
environment file, as the job applies it): its ``/ping`` and its exit are what the tests need, and a
real engine start cannot show an engine that dies at start or a sweep that fails while it serves.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import textwrap
from pathlib import Path

import pytest

from app_config.throughput_config import MeasuredCurve
from cdk_constructs.capacity_job.runtime import measure
from cdk_constructs.capacity_job.runtime.sweep import SweepResult
from cli_support.open_loop import ClassFigures, OpenLoopRun, StepSummary, Verdict
from local_gateway import reserve_ports

SWEEP = {
    "rates_per_minute": [30, 60],
    "step_s": 8,
    "think_s": 0.5,
    "slo_ms": {"cold": 500, "warm": 500},
    "warm_min_cached_fraction": 0.5,
    "shape": {"shared_prefix_tokens": 600, "conversation_tokens": 1400, "turn_tokens": 40, "output_tokens": 180},
}

STAND_IN = """
import argparse, http.server, os, pathlib, signal, sys
p = argparse.ArgumentParser()
p.add_argument("command"); p.add_argument("--port", type=int); p.add_argument("--engine-port", type=int)
args = p.parse_args()
if os.environ.get("STAND_IN_EXIT"):
    sys.exit(int(os.environ["STAND_IN_EXIT"]))

class Ping(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/ping" else 404); self.end_headers()
    def log_message(self, *_):
        pass

def stopped(*_):
    pathlib.Path(os.environ["STAND_IN_MARKER"]).write_text("SIGTERM")
    sys.exit(0)

signal.signal(signal.SIGTERM, stopped)
http.server.HTTPServer(("127.0.0.1", args.port), Ping).serve_forever()
"""


def _job(tmp_path: Path, *, environment: dict[str, str], sweep: object = SWEEP) -> list[str]:
    stand_in = tmp_path / "image" / "serving_app"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text("")
    (stand_in / "__main__.py").write_text(textwrap.dedent(STAND_IN))
    (tmp_path / "environment.json").write_text(
        json.dumps({"LORA_ADAPTERS": "a,b", "PYTHONPATH": str(tmp_path / "image"), **environment})
    )
    (tmp_path / "sweep.json").write_text(json.dumps(sweep))
    return [
        "--environment-file", str(tmp_path / "environment.json"),
        "--sweep-file", str(tmp_path / "sweep.json"),
        "--output-dir", str(tmp_path / "output"),
        "--instance-type", "ml.g6e.xlarge",
        "--job-name", "capacity-test-20261127-120000",
        "--startup-timeout-s", "60",
    ]  # fmt: skip


def test_a_server_that_dies_at_start_fails_the_job_in_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (port, engine_port) = reservations = reserve_ports(2)
    try:
        argv = _job(tmp_path, environment={"STAND_IN_EXIT": "3"})
        code = measure.main([*argv, "--port", str(port.port), "--engine-port", str(engine_port.port)], gpu="")
    finally:
        for reservation in reservations:
            reservation.release()
    assert code == 1
    assert capsys.readouterr().err.strip() == (
        "FAIL runtime.measure: the server exited with 3 before /ping answered 200"
    )
    assert not (tmp_path / "output").exists()


def test_a_sweep_that_fails_while_the_server_serves_stops_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "stopped"
    (port, engine_port) = reservations = reserve_ports(2)
    try:
        argv = _job(tmp_path, environment={"STAND_IN_MARKER": str(marker)})
        # Nothing listens on the engine's port (reserved, never served): the sweep cannot read /metrics.
        code = measure.main([*argv, "--port", str(port.port), "--engine-port", str(engine_port.port)], gpu="")
    finally:
        for reservation in reservations:
            reservation.release()
    assert code == 1
    assert capsys.readouterr().err.startswith("FAIL runtime.measure: <urlopen error [Errno 111] Connection refused>")
    assert marker.read_text() == "SIGTERM"  # stopped, not left running
    assert not (tmp_path / "output").exists()


@pytest.mark.parametrize(
    ("sweep", "message"),
    [
        ({**SWEEP, "step_s": None}, "runtime.measure: --sweep-file: step_s: TypeError: float() argument must be a "
         "string or a real number, not 'NoneType'"),
        ({k: v for k, v in SWEEP.items() if k != "think_s"}, "runtime.measure: --sweep-file: think_s: missing"),
        ([1, 2], "runtime.measure: --sweep-file {sweep}: must be a JSON object"),
    ],
)  # fmt: skip
def test_a_bad_sweep_file_is_refused_in_one_line_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sweep: object, message: str
) -> None:
    assert measure.main(_job(tmp_path, environment={}, sweep=sweep), gpu="") == 2
    assert capsys.readouterr().err.strip() == message.format(sweep=tmp_path / "sweep.json")


def test_an_environment_without_adapters_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert measure.main(_job(tmp_path, environment={"LORA_ADAPTERS": ""}), gpu="") == 2
    assert capsys.readouterr().err.strip() == "runtime.measure: --environment-file: LORA_ADAPTERS names no adapter"


def _summary(rate: float, cold_p95: float, warm_p95: float) -> StepSummary:
    return StepSummary(
        requests_per_min=rate,
        served_per_min=rate,
        completed_per_min=rate,
        requests=int(rate),
        errors=0,
        unfinished=0,
        ttft_p50_ms=None,
        ttft_p95_ms=max(cold_p95, warm_p95),
        classes={"cold": ClassFigures(int(rate) // 3, cold_p95 / 2, cold_p95), "warm": ClassFigures(0, None, None)},
        cold_share=None,
        itl_mean_ms=None,
        e2e_p50_ms=None,
        live_conversations_mean=None,
        in_flight_mean=None,
        engine={"running_mean": rate / 30, "kv_cache_usage_mean": rate / 1000},
    )


def test_the_curve_is_what_capacity_measured_validates() -> None:
    result = SweepResult(
        run=OpenLoopRun(steps=[], think_s=30, mean_turns=4.2, records=[], samples=[], steps_run=2),
        summaries=[_summary(120, 300, 200), _summary(240, 2400, 1800)],
        verdict=Verdict({"cold": 120, "warm": 240, "both": 120}, 240),
        wall_s=1.0,
    )
    data = measure.curve(
        result,
        instance_type="ml.g6.xlarge",
        job_name="capacity-x",
        gpu="NVIDIA L4",
        think_s=30,
        today=dt.date(2026, 11, 27),
    )
    curve = MeasuredCurve.model_validate(json.loads(json.dumps(data.to_json())))
    assert (curve.date, curve.gpu, curve.cliff_per_minute) == (dt.date(2026, 11, 27), "NVIDIA L4", 240)
    assert [(s.requests_per_minute, s.cold.ttft_p95_ms, s.warm.requests) for s in curve.steps] == [
        (120, 300, 0),
        (240, 2400, 0),
    ]
    assert curve.steps[1].running_mean == 8 and curve.steps[1].kv_cache_usage_mean == 0.24


def test_the_server_is_the_images_own_on_the_jobs_ports() -> None:
    args = measure.parser().parse_args(
        ["--environment-file", "e", "--sweep-file", "s", "--output-dir", "o", "--instance-type", "t", "--job-name", "j"]
    )
    assert measure.server_command(args) == [
        sys.executable, "-m", "serving_app", "serve", "--port", "8080", "--engine-port", "8081",
    ]  # fmt: skip
