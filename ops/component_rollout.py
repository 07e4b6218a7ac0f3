"""``promote`` and ``rollback`` in inference_components mode: the base component's rolling update.

There is no canary variant and no traffic weight in this mode. ``cdk deploy`` changes the base
component's specification (image, environment) and CloudFormation's UpdateInferenceComponent
starts a rolling update (``DeploymentConfig.RollingUpdatePolicy``): SageMaker replaces copies a
batch at a time, bakes each batch for ``WaitIntervalInSeconds`` while it watches the
``AutoRollbackConfiguration`` alarms, and rolls the component back by itself when one fires
(research notes A2.6; rolling deployments exclude multi-variant endpoints).

``promote`` watches that update; it changes nothing. ``rollback`` has nothing to do and says so.

How the end of an update is judged (what DescribeInferenceComponent shows after SageMaker
rolled an update back is not documented, so the verdict leans on what is observable):

- Failed: the update failed and the component is broken -> CHECK_FAILED;
- InService and ``expect_image`` given: the component runs that image (``SpecifiedImage`` or
  ``ResolvedImage``) -> OK; it runs another -> ROLLED_BACK;
- InService otherwise: a rollback alarm was seen in ALARM during the update, or SageMaker set
  a ``FailureReason`` -> ROLLED_BACK; else OK.
"""

from ops.components import FAILED, IN_PROGRESS, ComponentState, describe_component
from ops.endpoint import EndpointRef
from ops.exit_codes import ExitCode, OpsError
from ops.guardrails import Runtime, firing_alarms, require_rollback_alarms
from ops.waiting import IN_SERVICE
from serving_contract.alarms import rollback_alarm_names
from serving_contract.components import BASE_SUFFIX

ROLLS_BACK = "a rollback alarm: SageMaker rolls the update back"


def rollback_refusal(ref: EndpointRef) -> OpsError:
    """The USAGE error of ``rollback`` in inference_components mode (there is no weight to move)."""
    return OpsError(
        f"rollback: endpoint {ref.endpoint_name} is in inference_components mode, which has no traffic weights to "
        f"move: a rolling update of {ref.base_component} rolls back by itself when its alarms fire, and a finished "
        "one is undone by deploying the previous pins (`cdk deploy` with the previous image/adapter pins)",
        ExitCode.USAGE,
    )


def watch_rolling_update(
    rt: Runtime,
    ref: EndpointRef,
    *,
    timeout_s: float,
    poll_s: float,
    allow_missing_alarms: bool,
    expect_image: str | None,
) -> ExitCode:
    """Watch the base component's rolling update until it ends; judge it (see the module docstring).

    Polls DescribeInferenceComponent every ``poll_s`` while the component is Creating/Updating
    and reports every alarm that enters ALARM meanwhile (the base component's rollback alarms,
    and any ``<endpoint>-*`` alarm). With no update in progress, judges the component as it is.
    Raises OpsError: NOT_READY when a rollback alarm is missing (unless ``allow_missing_alarms``)
    or the update outlasts ``timeout_s``; CHECK_FAILED when the component is Failed, or
    ``expect_image`` is not running and no update is in progress.
    """
    assert ref.base_component is not None
    endpoint, base = ref.endpoint_name, ref.base_component
    rollback_alarms = rollback_alarm_names(endpoint, BASE_SUFFIX)
    require_rollback_alarms(rt, endpoint, BASE_SUFFIX, allow_missing=allow_missing_alarms)
    state = describe_component(rt.sagemaker, base)
    if state.status not in IN_PROGRESS:
        rt.out(f"no rolling update in progress on {base}: {state.summary()}")
        return _judge(rt, state, watched=False, rolled_back_by=[], expect_image=expect_image)

    rt.out(
        f"watching the rolling update of {base} (up to {timeout_s:g} s; rollback alarms: "
        f"{', '.join(rollback_alarms)}): {state.summary()}"
    )
    deadline = rt.clock() + timeout_s
    seen: list[str] = []
    while True:
        for name in firing_alarms(rt.cloudwatch, endpoint, BASE_SUFFIX):
            if name not in seen:
                seen.append(name)
                guards = name in rollback_alarms
                rt.out(f"ALARM: {name} ({ROLLS_BACK if guards else 'not a rollback alarm'})")
        if rt.clock() >= deadline:
            raise OpsError(
                f"inference component {base} still {state.brief()} after {timeout_s:g} s (--rollout-timeout-s)",
                ExitCode.NOT_READY,
            )
        rt.sleep(poll_s)
        previous, state = state, describe_component(rt.sagemaker, base)
        if state.status not in IN_PROGRESS:
            break
        if state.brief() != previous.brief():
            rt.out(f"{base}: {state.brief()}")
    rt.out(f"rolling update of {base} ended: {state.summary()}")
    fired = [name for name in seen if name in rollback_alarms]
    return _judge(rt, state, watched=True, rolled_back_by=fired, expect_image=expect_image)


def _judge(
    rt: Runtime, state: ComponentState, *, watched: bool, rolled_back_by: list[str], expect_image: str | None
) -> ExitCode:
    if state.status == FAILED:
        reason = f" ({state.failure_reason})" if state.failure_reason else ""
        raise OpsError(
            f"inference component {state.name} is {FAILED}{reason}; redeploy the previous pins (`cdk deploy`)",
            ExitCode.CHECK_FAILED,
        )
    if state.status != IN_SERVICE:
        raise OpsError(f"inference component {state.name} is {state.status}, not {IN_SERVICE}", ExitCode.NOT_READY)
    if expect_image:
        running = state.image or "no image"
        if expect_image in (state.image, state.resolved_image):
            rt.out(f"promoted: {state.name} runs {expect_image}")
            return ExitCode.OK
        if watched:
            rt.out(f"rolled back: {state.name} runs {running}, not {expect_image} (--expect-image)")
            return ExitCode.ROLLED_BACK
        raise OpsError(
            f"--expect-image {expect_image}: {state.name} runs {running} and no rolling update is in progress "
            "(not started yet, or already ended)",
            ExitCode.CHECK_FAILED,
        )
    if not watched:
        rt.out("nothing to watch")
        return ExitCode.OK
    if rolled_back_by or state.failure_reason:
        cause = ", ".join(rolled_back_by) or state.failure_reason
        rt.out(f"rolled back: SageMaker rolled the update of {state.name} back ({cause})")
        return ExitCode.ROLLED_BACK
    rt.out(f"promoted: the rolling update of {state.name} finished with no rollback alarm in ALARM")
    return ExitCode.OK
