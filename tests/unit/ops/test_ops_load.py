"""``load``: statistics against a local HTTP server speaking ``/invocations`` (127.0.0.1, bounded)."""

import json
import math
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from app_config.loader import cdk_json_context, load_cli_config
from ops.cli import Deps, main
from ops.exit_codes import ExitCode
from ops.invoke import Answer
from ops.load import LevelResult, LoadPlan, Suggestion, capacity_override_line, significant, suggest
from planning.make_plan import make_plan
from planning.planner import Planner
from serving_contract.request_classes import RequestClass
from tests.unit.ops.ops_stubs import ENDPOINT, FakeClock, stubbed


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fail_every = 0  # answer HTTP 500 to every n-th request (0 = never)
    answer_after_s = 0.0  # a floor under every answer's latency: caps the rate on any runner
    served = 0
    models: list[str]
    lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_POST(self):
        assert self.path == "/invocations"
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.served += 1
            number = self.server.served
            self.server.models.append(request["model"])
        time.sleep(self.server.answer_after_s)
        if self.server.fail_every and number % self.server.fail_every == 0:
            self.send_error(500, "engine error")
            return
        if request["stream"]:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for word in ("Try ", "Dungeon ", "Meshi."):
                chunk = {"choices": [{"index": 0, "delta": {"content": word}}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            return
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "Try Dungeon Meshi."}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.models = []
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


GENEROUS_SLO = ("--cold-ttft-slo-ms", "60000", "--warm-ttft-slo-ms", "60000")


def _url(srv: _Server) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def _run(args: list[str]) -> tuple[int, list[str]]:
    lines: list[str] = []
    code = main(["load", *args], Deps(out=lines.append))
    return code, "\n".join(lines).splitlines()


def test_load_reports_each_level_and_a_target(server):
    # 10 ms per answer keeps the per-instance rate (<= 4 / 0.01 s = 24,000 req/min) inside what
    # throughput.measured accepts however fast the runner is; a microsecond server has its own tests.
    server.answer_after_s = 0.01
    # The SLO is not what this test is about (its own tests use synthetic levels): a generous one keeps
    # one stalled first token on a busy runner from failing the level.
    code, lines = _run(["--url", _url(server), "--levels", "1,4", "--requests-per-level", "8", *GENEROUS_SLO])
    assert code == ExitCode.OK
    assert server.served == 16  # bounded: exactly the request budget
    assert set(server.models) == {"manga_domain_v3"}  # first configured adapter
    header = next(i for i, line in enumerate(lines) if line.startswith("conc  sent"))
    rows = [line.split() for line in lines[header + 2 : header + 4]]
    assert [(r[0], r[1], r[2]) for r in rows] == [("1", "8", "0"), ("4", "8", "0")]
    assert all("ms" in r for r in rows)  # TTFT and latency percentiles measured (stream mode)
    suggestion = next(line for line in lines if line.startswith("suggested target"))
    match = re.search(
        r"\(SageMakerVariantConcurrentRequestsPerModelHighResolution\): (\d+) concurrent requests per instance "
        r"= floor\(([\d.]+) req/s x ([\d.]+) s mean latency / 1 instance\(s\)\) at concurrency (\d+)",
        suggestion,
    )
    assert match, suggestion
    rps, latency = float(match.group(2)), float(match.group(3))  # printed rounded: bound the exact value
    low = math.floor((rps - 0.005) * (latency - 0.0005))
    high = math.floor((rps + 0.005) * (latency + 0.0005))
    assert max(1, low) <= int(match.group(1)) <= max(1, high)
    assert int(match.group(1)) <= int(match.group(4))  # in flight never exceeds the client's concurrency
    override = next(line for line in lines if line.startswith("capacity at the SLO"))
    measured = json.loads(override.split("-c 'throughput.measured=", 1)[1].rstrip("'"))
    assert measured["<instance type>"]["concurrency"] == int(match.group(1))
    # The printed override is a value the config accepts, as the loader parses it from -c.
    # Measured on the primary's instance type, it sets the primary's target.
    instance_type = load_cli_config([]).serving.primary.instance_type
    config = load_cli_config([f"throughput.measured={json.dumps({instance_type: measured['<instance type>']})}"])
    assert Planner.of(config).throughput(instance_type).concurrency == int(match.group(1))
    assert make_plan(config).scaling.primary.target_tracking.concurrent_requests_target == int(match.group(1))


def test_load_counts_errors_and_refuses_to_suggest(server):
    server.fail_every = 4
    code, lines = _run(["--url", _url(server), "--levels", "1", "--requests-per-level", "8", "--mode", "sync"])
    assert code == ExitCode.CHECK_FAILED
    header = next(i for i, line in enumerate(lines) if line.startswith("conc  sent"))
    row = lines[header + 2].split()
    assert row[:3] == ["1", "8", "2"]
    assert row[4] == "-"  # no TTFT in sync mode
    assert "no: error rate 25.0% > 0.5%" in lines[header + 2]
    assert "concurrency 1: 2 x HTTP 500" in lines
    assert lines[-1] == "no level met the SLO: no target-tracking suggestion"


@pytest.mark.parametrize(("max_error_rate", "code"), [(0.005, ExitCode.CHECK_FAILED), (0.3, ExitCode.OK)])
def test_the_verdict_follows_the_configs_slo(server, tmp_path, max_error_rate, code):
    """ops load judges against the config's slo section (the one SLO declaration), not a copy of it."""
    server.fail_every = 4  # 25 % errors
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(json.dumps({"context": {**cdk_json_context(), "slo.max_error_rate": max_error_rate}}))
    args = ["--url", _url(server), "--levels", "1", "--requests-per-level", "8", "--mode", "sync"]
    exit_code, lines = _run([*args, "--cdk-json", str(cdk_json)])
    assert exit_code == code
    verdict = lines[next(i for i, line in enumerate(lines) if line.startswith("conc  sent")) + 2]
    if code == ExitCode.OK:
        assert verdict.endswith("yes"), verdict
    else:
        assert verdict.endswith(f"no: error rate 25.0% > {max_error_rate:.1%}"), verdict


def _level(concurrency: int, count: int, wall_s: float, ttft_s: float, failed: int = 0) -> LevelResult:
    answers = [Answer(True, "ok", ttft_s * 4, ttft_s) for _ in range(count)]
    answers += [Answer(False, "ModelError 500", 0.1) for _ in range(failed)]
    return LevelResult(concurrency, tuple(answers), wall_s)


def test_suggestion_is_the_in_flight_requests_per_instance_of_the_best_level_within_slo():
    plan = LoadPlan(instances=2, cold_ttft_slo_ms=500, warm_ttft_slo_ms=500)
    results = [
        _level(1, 10, 10.0, 0.1),  # 1 req/s
        _level(16, 100, 10.0, 0.3),  # 10 req/s, within SLO
        _level(32, 150, 10.0, 0.9),  # 15 req/s but TTFT p95 900 ms > 500 ms
    ]
    best = suggest(results, plan)
    assert best is not None
    assert best.concurrency == 16
    assert best.per_instance_per_minute == pytest.approx(300.0)  # 10 req/s x 60 / 2 instances
    # Little's law: 10 req/s x 1.2 s mean latency (4 x TTFT) = 12 in flight over 2 instances.
    assert best.target == 6
    # These answers carry no usage, so no class: held to the stricter of the two objectives.
    assert results[2].meets(plan) == (False, "unclassified TTFT p95 900 ms > 500 ms")


def _answer(ttft_s: float, prompt: int, cached: int) -> Answer:
    usage = {"prompt_tokens": prompt, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": cached}}
    return Answer(True, "ok", ttft_s * 4, ttft_s, usage=usage)


def test_each_request_class_is_held_to_its_own_objective():
    # First turns (592 of 2,380 cached) at 1.2 s; follow-ups (1,984 of 2,200) at 150 ms.
    answers = [_answer(1.2, 2380, 592) for _ in range(5)] + [_answer(0.15, 2200, 1984) for _ in range(15)]
    level = LevelResult(8, tuple(answers), 10.0)
    assert [len(level.of_class(k, 0.5)) for k in RequestClass] == [5, 15]
    assert level.class_ttft(95, RequestClass.WARM, 0.5) == pytest.approx(0.15)
    assert level.meets(LoadPlan()) == (False, "cold TTFT p95 1200 ms > 500 ms")
    assert level.meets(LoadPlan(cold_ttft_slo_ms=1500)) == (True, "ok")
    assert level.meets(LoadPlan(cold_ttft_slo_ms=1500, warm_ttft_slo_ms=100)) == (
        False,
        "warm TTFT p95 150 ms > 100 ms",
    )
    # The threshold is the config's: at 0.95 the follow-ups are cold too.
    assert [len(level.of_class(k, 0.95)) for k in RequestClass] == [20, 0]


def test_level_with_errors_above_budget_is_not_sustainable():
    plan = LoadPlan()
    level = _level(4, 99, 1.0, 0.1, failed=1)  # 1 % > 0.5 %
    assert level.meets(plan) == (False, "error rate 1.0% > 0.5%")
    assert suggest([level], plan) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--levels", "1,4,16,32", "--requests-per-level", "600"],
            "error: --requests-per-level: 600 x 4 level(s) = 2400 requests; allowed 1..2000 in total",
        ),
        (
            ["--levels", "1,4,16,32", "--level-duration-s", "300"],
            "error: --level-duration-s: 300 x 4 level(s) = 1200 s; allowed > 0 and at most 900 s in total",
        ),
    ],
)
def test_hard_limits(args, message, capsys, server):
    code, _ = _run(["--url", _url(server), *args])
    assert code == ExitCode.USAGE
    assert capsys.readouterr().err.strip() == message
    assert server.served == 0


def test_concurrency_above_limit_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["load", "--url", "http://127.0.0.1:9", "--levels", "1,100"])
    assert info.value.code == 2
    assert "argument --levels: '1,100': each value must be within 1..64" in capsys.readouterr().err


def test_load_against_endpoint_counts_the_variants_instances():
    with stubbed() as stubs:
        stubs.describe_endpoint()
        for _ in range(2):
            stubs.invoke("canary", "jp_style_v1")
        code = main(
            [
                "load",
                "--endpoint-name",
                ENDPOINT,
                "--variant",
                "canary",
                "--adapter",
                "jp_style_v1",
                "--levels",
                "1",
                "--requests-per-level",
                "2",
                "--mode",
                "sync",
            ],
            stubs.deps(FakeClock(tick=0.05)),
        )
    assert code == ExitCode.OK
    assert stubs.lines[0].endswith("adapter jp_style_v1; sync; 1 instance(s)")
    assert "/ 1 instance(s)) at concurrency 1" in stubs.output


def test_every_command_has_help(capsys):
    for command in ("smoke", "promote", "rollback", "load"):
        with pytest.raises(SystemExit) as info:
            main([command, "--help"])
        assert info.value.code == 0
        assert f"usage: mangaassist-ops {command}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--level-duration-s", "nan"], "argument --level-duration-s: 'nan' is not a finite number"),
        (["--cold-ttft-slo-ms", "inf"], "argument --cold-ttft-slo-ms: 'inf' is not a finite number"),
        (["--timeout-s=-Infinity"], "argument --timeout-s: '-Infinity' is not a finite number"),
        (["--max-error-rate", "NaN"], "argument --max-error-rate: 'NaN' is not a finite number"),
        (["--level-duration-s", "0"], "argument --level-duration-s: 0 must be > 0"),
    ],
)
def test_non_finite_numbers_are_a_usage_error(args, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(["load", "--url", "http://127.0.0.1:9", *args])
    assert info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].endswith(message)


def test_repeated_adapter_spreads_requests_round_robin(server):
    adapters = ["--adapter", "jp_style_v1", "--adapter", "manga_domain_v3"]
    code, lines = _run(["--url", _url(server), "--levels", "1", "--requests-per-level", "4", "--mode=sync", *adapters])
    assert code == ExitCode.OK
    assert server.models == ["jp_style_v1", "manga_domain_v3", "jp_style_v1", "manga_domain_v3"]
    assert "; round-robin over jp_style_v1, manga_domain_v3; sync; 1 instance(s)" in lines[0]


def test_copies_with_url_suggests_concurrent_requests_per_copy(server):
    """A local container is one copy: --copies 1 gives the inference_components mode's target."""
    code, lines = _run(
        ["--url", _url(server), "--levels", "2", "--requests-per-level", "8", "--copies", "1", *GENEROUS_SLO]
    )
    assert code == ExitCode.OK
    assert lines[0].endswith("; adapter manga_domain_v3; stream; 1 copy(ies)")
    assert re.fullmatch(
        r"suggested target \(SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution\): \d+ concurrent "
        r"requests per copy = floor\([\d.]+ req/s x [\d.]+ s mean latency / 1 copy\(ies\) / 1.3\) at concurrency 2",
        lines[-1],
    )


def test_significant_keeps_three_figures_and_never_rounds_a_measurement_to_zero():
    assert significant(0.000412) == 0.000412  # 0.4 us in ms: round() printed 0
    assert significant(0.41234) == 0.412
    assert significant(87.65) == 87.7
    assert significant(268.4) == 268
    assert significant(1234.5) == 1234  # at and above 10**3, whole numbers stay whole
    assert significant(0.0) == 0.0


def _override(line: str) -> dict[str, Any]:
    return json.loads(line.split("-c 'throughput.measured=", 1)[1].rstrip("'"))


def test_a_server_answering_in_microseconds_prints_an_override_the_config_accepts():
    # A local stub: TTFT 2 us, 50 requests a second on one instance.
    line = capacity_override_line(Suggestion(1, 50.0 / 60.0, 50.0, 1), 2e-6, "ml.g5.xlarge")
    measured = _override(line)
    assert measured == {"ml.g5.xlarge": {"concurrency": 1, "requests_per_minute": 50.0, "ttft_p50_ms": 0.002}}
    config = load_cli_config([f"throughput.measured={json.dumps(measured)}"])
    assert Planner.of(config).throughput("ml.g5.xlarge").base_ttft_ms == 0.002


def test_a_level_slower_than_one_request_a_minute_keeps_its_rate():
    line = capacity_override_line(Suggestion(1, 0.004, 0.24, 1), 1.5, "ml.g5.xlarge")
    assert _override(line)["ml.g5.xlarge"]["requests_per_minute"] == 0.24  # round() printed 0
    load_cli_config([f"throughput.measured={json.dumps(_override(line))}"])


def test_a_rate_the_config_refuses_is_explained_not_printed():
    line = capacity_override_line(Suggestion(4, 5000.0, 300000.0, 4), 1e-4, None)
    assert line == (
        "no throughput.measured override: the config would refuse it (requests_per_minute = 300000.0: must be "
        "<= 100000)"
    )
