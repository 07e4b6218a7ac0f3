"""``promote`` and ``rollback`` in inference_components mode: watching the base component's rolling update."""

import pytest

from ops.cli import main
from ops.exit_codes import ExitCode
from tests.unit.ops.ops_stubs import BASE, ENDPOINT, IMAGE, OLD_IMAGE, FakeClock, stubbed, write_component_outputs

FIVE_XX = f"{ENDPOINT}-base-5xx-rate"


@pytest.fixture
def args(tmp_path):
    return ["promote", "--stack-outputs", str(write_component_outputs(tmp_path)), "--poll-s", "30"]


def test_no_update_in_progress_says_so_and_exits_ok(args):
    with stubbed() as stubs:
        stubs.alarms_exist(guarded="base")
        stubs.describe_component(BASE)
        code = main(args, stubs.deps(FakeClock()))
    assert code == ExitCode.OK
    assert stubs.lines == [
        f"no rolling update in progress on {BASE}: InService, 2 copies (desired 2), {IMAGE}",
        "nothing to watch",
    ]


def test_watches_the_update_until_it_ends_in_service(args):
    clock = FakeClock()
    with stubbed() as stubs:
        stubs.alarms_exist(guarded="base")
        stubs.describe_component(BASE, status="Updating", copies=2, image=OLD_IMAGE)
        stubs.alarm_check(guarded="base")
        stubs.describe_component(BASE, status="Updating", copies=3, desired=2)  # a new batch is up
        stubs.alarm_check(guarded="base")
        stubs.describe_component(BASE, copies=2)
        code = main(args, stubs.deps(clock))
    assert code == ExitCode.OK
    assert clock.sleeps == [30.0, 30.0]
    assert stubs.lines == [
        f"watching the rolling update of {BASE} (up to 28800 s; rollback alarms: {FIVE_XX}, "
        f"{ENDPOINT}-base-ttft-p95-cold, {ENDPOINT}-base-ttft-p95-warm, {ENDPOINT}-base-model-latency-p99, "
        f"{ENDPOINT}-base-4xx-rate): "
        f"Updating, 2 copies (desired 2), {OLD_IMAGE}",
        f"{BASE}: Updating, 3 copies (desired 2)",
        f"rolling update of {BASE} ended: InService, 2 copies (desired 2), {IMAGE}",
        f"promoted: the rolling update of {BASE} finished with no rollback alarm in ALARM",
    ]


def test_rollback_alarm_during_the_update_means_rolled_back(args):
    with stubbed() as stubs:
        stubs.alarms_exist(guarded="base")
        stubs.describe_component(BASE, status="Updating")
        stubs.alarm_check(firing=(FIVE_XX,), guarded="base")
        stubs.describe_component(BASE, status="Updating")
        stubs.alarm_check(firing=(FIVE_XX,), guarded="base")  # reported once
        stubs.describe_component(BASE, image=OLD_IMAGE)
        code = main(args, stubs.deps(FakeClock()))
    assert code == ExitCode.ROLLED_BACK
    assert stubs.output.count("ALARM: ") == 1
    assert f"ALARM: {FIVE_XX} (a rollback alarm: SageMaker rolls the update back)" in stubs.lines
    assert stubs.lines[-1] == f"rolled back: SageMaker rolled the update of {BASE} back ({FIVE_XX})"


def test_other_endpoint_alarm_is_reported_but_does_not_roll_back(args):
    other = f"{ENDPOINT}-primary-gpu-memory"
    with stubbed() as stubs:
        stubs.alarms_exist(guarded="base")
        stubs.describe_component(BASE, status="Updating")
        stubs.alarm_check(firing=(other,), guarded="base")
        stubs.describe_component(BASE)
        code = main(args, stubs.deps(FakeClock()))
    assert code == ExitCode.OK
    assert f"ALARM: {other} (not a rollback alarm)" in stubs.lines


def test_failure_reason_after_the_update_means_rolled_back(args):
    with stubbed() as stubs:
        stubs.alarms_exist(guarded="base")
        stubs.describe_component(BASE, status="Updating")
        stubs.alarm_check(guarded="base")
        stubs.describe_component(BASE, FailureReason="Rolling update rolled back: new copies failed health checks")
        code = main(args, stubs.deps(FakeClock()))
    assert code == ExitCode.ROLLED_BACK
    assert stubs.lines[-1] == (
        f"rolled back: SageMaker rolled the update of {BASE} back "
        "(Rolling update rolled back: new copies failed health checks)"
    )


def test_update_ending_failed_is_check_failed(args, capsys):
    with stubbed() as stubs:
        stubs.alarms_exist(guarded="base")
        stubs.describe_component(BASE, status="Updating")
        stubs.alarm_check(guarded="base")
        stubs.describe_component(BASE, status="Failed", copies=0, FailureReason="rollback failed: no capacity")
        code = main(args, stubs.deps(FakeClock()))
    assert code == ExitCode.CHECK_FAILED
    assert capsys.readouterr().err.strip() == (
        f"error: inference component {BASE} is Failed (rollback failed: no capacity); redeploy the previous pins "
        "(`cdk deploy`)"
    )


def test_failed_component_with_no_update_is_check_failed(args, capsys):
    with stubbed() as stubs:
        stubs.alarms_exist(guarded="base")
        stubs.describe_component(BASE, status="Failed", copies=0)
        code = main(args, stubs.deps(FakeClock()))
    assert code == ExitCode.CHECK_FAILED
    assert capsys.readouterr().err.strip() == (
        f"error: inference component {BASE} is Failed; redeploy the previous pins (`cdk deploy`)"
    )


def test_update_outlasting_the_timeout_is_not_ready(args, capsys):
    clock = FakeClock()
    with stubbed() as stubs:
        stubs.alarms_exist(guarded="base")
        for _ in range(3):  # t = 0, 30, 60 with a 60 s limit
            stubs.describe_component(BASE, status="Updating")
            stubs.alarm_check(guarded="base")
        code = main([*args, "--rollout-timeout-s", "60"], stubs.deps(clock))
    assert code == ExitCode.NOT_READY
    assert clock.sleeps == [30.0, 30.0]
    assert capsys.readouterr().err.strip() == (
        f"error: inference component {BASE} still Updating, 2 copies (desired 2) after 60 s (--rollout-timeout-s)"
    )


def test_expect_image_running_after_the_update_is_ok(args):
    with stubbed() as stubs:
        stubs.alarms_exist(guarded="base")
        stubs.describe_component(BASE, status="Updating")
        stubs.alarm_check(guarded="base")
        stubs.describe_component(BASE, image=IMAGE)
        code = main([*args, "--expect-image", f"{IMAGE}@sha256:abc"], stubs.deps(FakeClock()))  # ResolvedImage
    assert code == ExitCode.OK
    assert stubs.lines[-1] == f"promoted: {BASE} runs {IMAGE}@sha256:abc"


def test_expect_image_not_running_after_the_update_is_rolled_back(args):
    with stubbed() as stubs:
        stubs.alarms_exist(guarded="base")
        stubs.describe_component(BASE, status="Updating")
        stubs.alarm_check(guarded="base")
        stubs.describe_component(BASE, image=OLD_IMAGE)
        code = main([*args, "--expect-image", IMAGE], stubs.deps(FakeClock()))
    assert code == ExitCode.ROLLED_BACK
    assert stubs.lines[-1] == f"rolled back: {BASE} runs {OLD_IMAGE}, not {IMAGE} (--expect-image)"


def test_expect_image_not_running_and_no_update_is_check_failed(args, capsys):
    with stubbed() as stubs:
        stubs.alarms_exist(guarded="base")
        stubs.describe_component(BASE, image=OLD_IMAGE)
        code = main([*args, "--expect-image", IMAGE], stubs.deps(FakeClock()))
    assert code == ExitCode.CHECK_FAILED
    assert capsys.readouterr().err.strip() == (
        f"error: --expect-image {IMAGE}: {BASE} runs {OLD_IMAGE} and no rolling update is in progress "
        "(not started yet, or already ended)"
    )


def test_promote_refuses_without_the_base_components_rollback_alarms(args, capsys):
    with stubbed() as stubs:
        stubs.cloudwatch.add_response("describe_alarms", {"MetricAlarms": []})
        code = main(args, stubs.deps(FakeClock()))
    assert code == ExitCode.NOT_READY
    assert capsys.readouterr().err.strip() == (
        f"error: rollback alarm(s) not found: {FIVE_XX}, {ENDPOINT}-base-ttft-p95-cold, "
        f"{ENDPOINT}-base-ttft-p95-warm, "
        f"{ENDPOINT}-base-model-latency-p99, {ENDPOINT}-base-4xx-rate; "
        "deploy the alarms or pass --allow-missing-alarms"
    )


def test_rollback_explains_there_is_no_weight_to_move(tmp_path, capsys):
    with stubbed() as stubs:
        code = main(["rollback", "--stack-outputs", str(write_component_outputs(tmp_path))], stubs.deps(FakeClock()))
    assert code == ExitCode.USAGE
    assert capsys.readouterr().err.strip() == (
        f"error: rollback: endpoint {ENDPOINT} is in inference_components mode, which has no traffic weights to move: "
        f"a rolling update of {BASE} rolls back by itself when its alarms fire, and a finished one is undone by "
        "deploying the previous pins (`cdk deploy` with the previous image/adapter pins)"
    )
    assert stubs.lines == []
