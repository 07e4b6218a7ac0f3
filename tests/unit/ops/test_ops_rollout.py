"""``promote`` and ``rollback`` against stubbed SageMaker and CloudWatch clients."""

import json
from pathlib import Path

import pytest

from ops.cli import main
from ops.endpoint import wait_in_service
from ops.exit_codes import ExitCode, OpsError
from ops.rollout import WEIGHTS_KEPT
from tests.synth_helpers import SEEDS_G5
from tests.unit.ops.ops_stubs import ADAPTERS, ENDPOINT, FakeClock, stubbed

REPO = Path(__file__).resolve().parents[3]

VARIANTS = ["--endpoint-name", ENDPOINT, "--primary-variant", "primary", "--canary-variant", "canary"]
FAST = ["--poll-s", "30", "--update-timeout-s", "300"]


def test_promote_steps_through_weights_and_prints_context():
    clock = FakeClock()
    with stubbed() as stubs:
        stubs.describe_endpoint()
        stubs.alarms_exist()
        stubs.invocations()
        stubs.alarm_check()  # before the first step
        stubs.update_weights({"primary": 50.0, "canary": 50.0})
        stubs.describe_endpoint(status="Updating", weights={"primary": 95.0, "canary": 5.0})
        stubs.describe_endpoint(weights={"primary": 50.0, "canary": 50.0})
        stubs.alarm_check()  # watch: checked once, watch period 0
        stubs.update_weights({"primary": 0.0, "canary": 100.0})
        stubs.describe_endpoint(weights={"primary": 0.0, "canary": 100.0})
        stubs.alarm_check()
        code = main(["promote", *VARIANTS, *FAST, "--steps", "50,100", "--watch-s", "0"], stubs.deps(clock))
    assert code == ExitCode.OK
    assert clock.sleeps == [30.0]  # one poll while the endpoint was Updating
    assert stubs.output.splitlines() == [
        f"promote {ENDPOINT}: canary at 5 % of traffic, steps 50, 100 %",
        "step 50 %: primary=50 canary=50",
        "step 50 %: InService; watching alarms for 0 s",
        "step 100 %: primary=0 canary=100",
        "step 100 %: InService; watching alarms for 0 s",
        "promoted: canary at 100 % of traffic",
        # Weights are runtime state now: nothing to commit (a weight change in config replaced the fleet).
        WEIGHTS_KEPT,
    ]


def test_promote_skips_steps_already_reached():
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 75.0, "canary": 25.0})
        stubs.alarms_exist()
        stubs.invocations()
        stubs.alarm_check()
        stubs.update_weights({"primary": 50.0, "canary": 50.0})
        stubs.describe_endpoint(weights={"primary": 50.0, "canary": 50.0})
        stubs.alarm_check()
        code = main(["promote", *VARIANTS, *FAST, "--steps", "10,25,50", "--watch-s", "0"], stubs.deps(FakeClock()))
    assert code == ExitCode.OK
    assert "step 10 %" not in stubs.output and "step 25 %" not in stubs.output
    assert stubs.lines[-1] == WEIGHTS_KEPT


def test_alarm_mid_promotion_rolls_back():
    clock = FakeClock()
    firing = f"{ENDPOINT}-canary-5xx-rate"
    with stubbed() as stubs:
        stubs.describe_endpoint()
        stubs.alarms_exist()
        stubs.invocations()
        stubs.alarm_check()
        stubs.update_weights({"primary": 75.0, "canary": 25.0})
        stubs.describe_endpoint(weights={"primary": 75.0, "canary": 25.0})
        stubs.alarm_check()  # watch t=0: quiet
        stubs.alarm_check(firing=(firing,))  # watch t=30: the canary's 5xx alarm fires
        # rollback: wait for InService, set 100/0, wait again
        stubs.describe_endpoint(weights={"primary": 75.0, "canary": 25.0})
        stubs.update_weights({"primary": 100.0, "canary": 0.0})
        stubs.describe_endpoint(weights={"primary": 100.0, "canary": 0.0})
        code = main(["promote", *VARIANTS, *FAST, "--steps", "25,100", "--watch-s", "600"], stubs.deps(clock))
    assert code == ExitCode.ROLLED_BACK
    assert clock.sleeps == [30.0]
    out = stubs.output
    assert "step 100 %" not in out
    assert f"ALARM: {firing}; rolling back" in out
    assert f"rollback {ENDPOINT}: primary=100 canary=0" in out
    assert WEIGHTS_KEPT in stubs.lines and "initial_weight=" not in out
    assert stubs.lines[-1] == "promotion stopped by alarm and rolled back"


def test_alarm_already_firing_rolls_back_without_a_step():
    with stubbed() as stubs:
        stubs.describe_endpoint()
        stubs.alarms_exist()
        stubs.invocations()
        stubs.alarm_check(firing=(f"{ENDPOINT}-primary-gpu-memory",))
        stubs.describe_endpoint()
        stubs.update_weights({"primary": 100.0, "canary": 0.0})
        stubs.describe_endpoint(weights={"primary": 100.0, "canary": 0.0})
        code = main(["promote", *VARIANTS, *FAST], stubs.deps(FakeClock()))
    assert code == ExitCode.ROLLED_BACK
    assert "step " not in stubs.output
    assert f"ALARM: {ENDPOINT}-primary-gpu-memory; rolling back" in stubs.output


def test_promote_refuses_without_rollback_alarms(capsys):
    with stubbed() as stubs:
        stubs.describe_endpoint()
        stubs.cloudwatch.add_response("describe_alarms", {"MetricAlarms": []})
        code = main(["promote", *VARIANTS, *FAST], stubs.deps(FakeClock()))
    assert code == ExitCode.NOT_READY
    assert capsys.readouterr().err.strip() == (
        f"error: rollback alarm(s) not found: {ENDPOINT}-canary-5xx-rate, {ENDPOINT}-canary-ttft-p95-cold, "
        f"{ENDPOINT}-canary-ttft-p95-warm, {ENDPOINT}-canary-model-latency-p99, {ENDPOINT}-canary-4xx-rate; "
        "deploy the alarms or pass --allow-missing-alarms"
    )


def test_promote_refuses_when_endpoint_not_in_service(capsys):
    with stubbed() as stubs:
        stubs.describe_endpoint(status="Creating")
        code = main(["promote", *VARIANTS, *FAST], stubs.deps(FakeClock()))
    assert code == ExitCode.NOT_READY
    assert f"error: endpoint {ENDPOINT} is Creating, not InService" in capsys.readouterr().err


def test_step_stuck_updating_rolls_back_and_reports_not_ready(capsys):
    clock = FakeClock()
    with stubbed() as stubs:
        stubs.describe_endpoint()
        stubs.alarms_exist()
        stubs.invocations()
        stubs.alarm_check()
        stubs.update_weights({"primary": 90.0, "canary": 10.0})
        for _ in range(3):  # t = 0, 30, 60 with a 60 s timeout
            stubs.describe_endpoint(status="Updating")
        stubs.describe_endpoint()  # rollback's wait
        stubs.update_weights({"primary": 100.0, "canary": 0.0})
        stubs.describe_endpoint(weights={"primary": 100.0, "canary": 0.0})
        code = main(
            ["promote", *VARIANTS, "--poll-s", "30", "--update-timeout-s", "60", "--steps", "10"], stubs.deps(clock)
        )
    assert code == ExitCode.NOT_READY
    assert f"error: endpoint {ENDPOINT} still Updating after 60 s (--update-timeout-s)" in capsys.readouterr().err
    assert "rolled back: all traffic on primary" in stubs.output


def test_rollback_sets_primary_to_100_and_smokes_the_primary():
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 50.0, "canary": 50.0})
        stubs.update_weights({"primary": 100.0, "canary": 0.0})
        stubs.describe_endpoint(weights={"primary": 100.0, "canary": 0.0})
        stubs.describe_endpoint(weights={"primary": 100.0, "canary": 0.0})  # smoke
        for adapter in ADAPTERS:
            stubs.invoke("primary", adapter)
            stubs.invoke_stream("primary", adapter)
        code = main(["rollback", *VARIANTS, *FAST, "--stage", "dev"], stubs.deps(FakeClock()))
    assert code == ExitCode.OK
    assert stubs.output.splitlines()[:3] == [
        f"rollback {ENDPOINT}: primary=100 canary=0",
        "rolled back: all traffic on primary",
        WEIGHTS_KEPT,
    ]
    assert stubs.lines[-1] == "smoke passed: 6 request(s), 3 adapter(s) x 1 variant(s)"


def test_rollback_verifies_the_primary_serves_its_pinned_versions(tmp_path):
    sha = "d" * 64
    pins = {"base_model": f"v1/{sha}", "adapters": {a: f"v3/{sha}" for a in ADAPTERS}}
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(
        json.dumps({"context": {"stage": "dev", "stages": {"dev": {"image": {"build": {"primary": pins}}}}}})
    )
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 50.0, "canary": 50.0})
        stubs.update_weights({"primary": 100.0, "canary": 0.0})
        stubs.describe_endpoint(weights={"primary": 100.0, "canary": 0.0})
        stubs.describe_endpoint(weights={"primary": 100.0, "canary": 0.0})  # smoke
        for adapter in ADAPTERS:
            # The primary still runs the candidate's manga_domain_v3 (v4): the rollback did not take.
            version = "v4" if adapter == "manga_domain_v3" else "v3"
            served = f"base_model=llama-3-8b-instruct-awq/v1/{sha};adapter={adapter}/{version}/{sha}"
            stubs.invoke("primary", adapter, custom_attributes=served)
            stubs.invoke_stream("primary", adapter, custom_attributes=served)
        argv = ["rollback", *VARIANTS, *FAST, "--stage", "dev", "--cdk-json", str(cdk_json)]
        code = main(argv, stubs.deps(FakeClock()))
    assert code == ExitCode.CHECK_FAILED
    assert (
        f"FAIL manga_domain_v3 on primary (sync): wrong version: served adapter 'manga_domain_v3/v4/{sha}', "
        f"pinned 'manga_domain_v3/v3/{sha}'"
    ) in stubs.lines


def test_rollback_reports_aws_error(capsys):
    with stubbed() as stubs:
        stubs.describe_endpoint()
        stubs.sagemaker.add_client_error(
            "update_endpoint_weights_and_capacities",
            service_error_code="ValidationException",
            service_message="Cannot update in-progress endpoint",
        )
        code = main(["rollback", *VARIANTS, *FAST, "--skip-smoke"], stubs.deps(FakeClock()))
    assert code == ExitCode.AWS_ERROR
    assert "error: UpdateEndpointWeightsAndCapacities on" in capsys.readouterr().err


def test_rollback_needs_variant_names(capsys):
    with stubbed() as stubs:
        code = main(["rollback", "--endpoint-name", ENDPOINT, "--skip-smoke"], stubs.deps(FakeClock()))
    assert code == ExitCode.USAGE
    assert "primary and canary variant names are needed" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ("50,25", "'50,25': steps must be strictly increasing percentages in (0, 100]"),
        ("10,150", "'10,150': steps must be strictly increasing percentages in (0, 100]"),
        ("ten", "'ten': expected comma-separated percentages, e.g. 10,25,50,100"),
    ],
)
def test_bad_steps_are_rejected(steps, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["promote", "--endpoint-name", ENDPOINT, "--steps", steps])
    assert exit_info.value.code == 2
    assert f"argument --steps: {message}" in capsys.readouterr().err


def test_weight_change_waits_until_current_weights_show_the_update():
    """An InService reading with the old CurrentWeight right after the call is not the end of the wait."""
    clock = FakeClock()
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 50.0, "canary": 50.0})
        stubs.update_weights({"primary": 100.0, "canary": 0.0})
        stubs.describe_endpoint(weights={"primary": 50.0, "canary": 50.0})  # not visible yet
        stubs.describe_endpoint(weights={"primary": 100.0, "canary": 0.0})
        code = main(["rollback", *VARIANTS, *FAST, "--skip-smoke"], stubs.deps(clock))
    assert code == ExitCode.OK
    assert clock.sleeps == [30.0]


def test_weights_never_applied_is_not_ready(capsys):
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 50.0, "canary": 50.0})
        stubs.update_weights({"primary": 100.0, "canary": 0.0})
        for _ in range(3):
            stubs.describe_endpoint(weights={"primary": 50.0, "canary": 50.0})
        code = main(
            ["rollback", *VARIANTS, "--poll-s", "30", "--update-timeout-s", "60", "--skip-smoke"],
            stubs.deps(FakeClock()),
        )
    assert code == ExitCode.NOT_READY
    assert capsys.readouterr().err.strip() == (
        f"error: endpoint {ENDPOINT} still InService with the old weights after 60 s (--update-timeout-s)"
    )


@pytest.mark.parametrize("status", ["UpdateRollbackFailed", "Failed"])
def test_wait_ends_at_once_on_a_terminal_status(status):
    """No polling until --update-timeout-s: one DescribeEndpoint, then a clear error."""
    clock = FakeClock()
    with stubbed() as stubs:
        stubs.describe_endpoint(status=status, FailureReason="rollback could not restore the old config")
        with pytest.raises(OpsError) as info:
            wait_in_service(stubs.clients.sagemaker, ENDPOINT, timeout_s=600, poll_s=30, clock=clock, sleep=clock.sleep)
    assert str(info.value) == f"endpoint {ENDPOINT} is {status} (rollback could not restore the old config)"


# --- finding 1: the traffic a promotion shifts must fit in what the canary can scale to ---------
# Stage prod on the seeds' fleet (SEEDS_G5): canary max_capacity 2; each ml.g5.xlarge carries the
# capacity ops load measured, 937 req/min within the SLO (throughput.measured, read through ops.canary_limit).
MEASURED = {"ml.g5.xlarge": {"concurrency": 8, "requests_per_minute": 937, "ttft_p50_ms": 90}}


@pytest.fixture(autouse=True)
def _measured_capacity(tmp_path_factory, monkeypatch):
    """Run in a folder whose cdk.json is the repo's on the seeds' fleet plus the measured g5 capacity
    above: with the projected g5 capacity (19 req/min) no promotion of these tests' traffic would fit."""
    folder = tmp_path_factory.mktemp("cdk")
    context = json.loads((REPO / "cdk.json").read_text())
    context["context"]["stages"]["prod"].setdefault("throughput", {})["measured"] = MEASURED
    context["context"].update(SEEDS_G5)
    (folder / "cdk.json").write_text(json.dumps(context))
    monkeypatch.chdir(folder)


def _cdk_json(tmp_path, **serving):
    path = tmp_path / "cdk.json"
    overlay = {"throughput": {"measured": MEASURED}, "serving": serving}
    path.write_text(json.dumps({"context": {"stage": "prod", "stages": {"prod": overlay}, **SEEDS_G5}}))
    return str(path)


def test_promote_refuses_a_step_the_canary_max_capacity_cannot_carry(capsys, tmp_path):
    """4,000 req/min at 100 % needs 5 canary instances; max_capacity 2 carries 47 %. Nothing moves."""
    with stubbed() as stubs:
        stubs.describe_endpoint()
        stubs.alarms_exist()
        stubs.invocations({"primary": [3_800.0, 3_000.0], "canary": [200.0, 150.0]})
        code = main(
            ["promote", *VARIANTS, *FAST, "--steps", "25,50,100", "--cdk-json", _cdk_json(tmp_path)],
            stubs.deps(FakeClock()),
        )
    assert code == ExitCode.USAGE
    assert stubs.lines == []  # no weight changed, nothing announced
    assert capsys.readouterr().err.strip() == (
        "error: step 100 % would send 4,000 req/min (busiest minute of the last 60 min: 4,000) to canary, which "
        "needs 5 instances at 937 req/min each; serving.canary.max_capacity = 2 carries 47 % at most: raise "
        "serving.canary.max_capacity to >= 5 and deploy, or end --steps at <= 46"
    )


def test_promote_follows_a_raised_canary_max_capacity(tmp_path):
    """The same traffic promotes once serving.canary.max_capacity is raised to 5."""
    cdk_json = _cdk_json(tmp_path, canary={"max_capacity": 5})
    with stubbed() as stubs:
        stubs.describe_endpoint()
        stubs.alarms_exist()
        stubs.invocations({"primary": [3_800.0], "canary": [200.0]})
        stubs.alarm_check()
        stubs.update_weights({"primary": 0.0, "canary": 100.0})
        stubs.describe_endpoint(weights={"primary": 0.0, "canary": 100.0})
        stubs.alarm_check()
        code = main(
            ["promote", *VARIANTS, *FAST, "--steps", "100", "--watch-s", "0", "--cdk-json", str(cdk_json)],
            stubs.deps(FakeClock()),
        )
    assert code == ExitCode.OK
    assert stubs.lines[-2] == "promoted: canary at 100 % of traffic"


def test_promote_resumed_past_every_step_reads_no_metrics():
    """Steps at or below the current share are skipped, so there is nothing to check (no GetMetricData)."""
    with stubbed() as stubs:
        stubs.describe_endpoint(weights={"primary": 0.0, "canary": 100.0})
        stubs.alarms_exist()
        stubs.alarm_check()
        code = main(["promote", *VARIANTS, *FAST, "--steps", "100"], stubs.deps(FakeClock()))
    assert code == ExitCode.OK
