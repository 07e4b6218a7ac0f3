"""Inference components of an endpoint in ``inference_components`` mode: describe, wait, wake.

Field and status names are those of ``DescribeInferenceComponent`` in botocore's
sagemaker/2017-07-24 service model: ``InferenceComponentStatus`` is one of InService,
Creating, Updating, Failed, Deleting; ``RuntimeConfig.CurrentCopyCount`` /
``DesiredCopyCount`` count the copies; ``FailureReason`` explains a Failed component;
``Specification.Container.DeployedImage`` names the image a base component runs.

A base component whose copies scaled to zero answers every invocation with SageMaker's
no-capacity error until Application Auto Scaling adds a copy (driven by
``NoCapacityInvocationFailures``); AWS measured about 5 minutes for an 8B model to wake.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from ops.exit_codes import ExitCode, OpsError, aws_error
from ops.invoke import Answer
from ops.waiting import IN_SERVICE, wait_until_in_service

FAILED: Final = "Failed"
IN_PROGRESS: Final = frozenset({"Creating", "Updating"})
"""Statuses of a component that SageMaker is still changing (a deployment, a rolling update)."""
WAIT_ENDS: Final = frozenset({FAILED, "Deleting"})
"""Statuses from which waiting for InService is pointless."""

NO_CAPACITY_MARKER: Final = "no capacity"
"""In the message of SageMaker's answer to an invocation of a component without copies:
"Inference Component has no capacity to process this request. ApplicationAutoScaling may be
in-progress (if configured) ..." (error code ValidationError; AWS scale-to-zero notebook and
blog, quoted in the research notes). Matched on the message, which names the cause."""


@dataclass(frozen=True)
class ComponentState:
    """DescribeInferenceComponent, reduced to what the commands act on.

    ``current_copies`` / ``desired_copies`` are None when SageMaker reports no RuntimeConfig
    (an adapter component runs on its base component's copies and has none of its own).
    ``image`` is the image as specified (``DeployedImage.SpecifiedImage``) and
    ``resolved_image`` its digest form; both are "" for an adapter component.
    """

    name: str
    status: str
    failure_reason: str
    current_copies: int | None
    desired_copies: int | None
    image: str
    resolved_image: str
    artifact_url: str

    @property
    def scaled_to_zero(self) -> bool:
        """No copy is running (copies reported, and 0)."""
        return self.current_copies == 0

    def brief(self) -> str:
        """``Updating, 1 copy (desired 2)``: status and copies, for progress lines and errors."""
        if self.current_copies is None:
            return self.status
        plural = "copy" if self.current_copies == 1 else "copies"
        return f"{self.status}, {self.current_copies} {plural} (desired {self.desired_copies})"

    def summary(self) -> str:
        """``brief()`` plus what the component runs (its image, or its adapter artifact)."""
        runs = self.image or self.artifact_url
        return f"{self.brief()}, {runs}" if runs else self.brief()


def _copies(runtime: Mapping[str, Any] | None, key: str) -> int | None:
    if not runtime or key not in runtime:
        return None
    return int(runtime[key])


def describe_component(sagemaker: Any, name: str) -> ComponentState:
    """DescribeInferenceComponent; raises OpsError (AWS_ERROR) when the call fails."""
    try:
        response = sagemaker.describe_inference_component(InferenceComponentName=name)
    except (ClientError, BotoCoreError) as error:
        raise aws_error(f"inference component {name}", error) from error
    container = (response.get("Specification") or {}).get("Container") or {}
    image = container.get("DeployedImage") or {}
    runtime = response.get("RuntimeConfig")
    return ComponentState(
        name=response["InferenceComponentName"],
        status=str(response.get("InferenceComponentStatus", "")),
        failure_reason=str(response.get("FailureReason", "")),
        current_copies=_copies(runtime, "CurrentCopyCount"),
        desired_copies=_copies(runtime, "DesiredCopyCount"),
        image=str(image.get("SpecifiedImage", "")),
        resolved_image=str(image.get("ResolvedImage", "")),
        artifact_url=str(container.get("ArtifactUrl", "")),
    )


def _reason(state: ComponentState) -> str:
    return f" ({state.failure_reason})" if state.failure_reason else ""


def require_component_in_service(state: ComponentState) -> None:
    """Raise OpsError (NOT_READY) unless the component is InService (its copies are not checked)."""
    if state.status != IN_SERVICE:
        raise OpsError(
            f"inference component {state.name} is {state.status}, not {IN_SERVICE}{_reason(state)}",
            ExitCode.NOT_READY,
        )


def wait_component(
    sagemaker: Any,
    name: str,
    *,
    timeout_s: float,
    poll_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    timeout_flag: str,
    settled: Callable[[ComponentState], bool] | None = None,
) -> ComponentState:
    """Poll DescribeInferenceComponent every ``poll_s`` until InService (and ``settled(state)``).

    Failed or Deleting ends the wait at once (NOT_READY, with FailureReason); so does
    ``timeout_s`` seconds without success (NOT_READY naming ``timeout_flag``).
    """
    return wait_until_in_service(
        lambda: describe_component(sagemaker, name),
        what=f"inference component {name}",
        ends=WAIT_ENDS,
        timeout_s=timeout_s,
        poll_s=poll_s,
        clock=clock,
        sleep=sleep,
        timeout_flag=timeout_flag,
        still=ComponentState.brief,
        settled=settled,
    )


def has_a_copy(state: ComponentState) -> bool:
    """At least one copy is running (the ``settled`` test of a wake-up)."""
    return (state.current_copies or 0) > 0


def is_no_capacity(answer: Answer) -> bool:
    """Whether a failed invocation is SageMaker's answer for a component without copies."""
    return not answer.ok and NO_CAPACITY_MARKER in answer.detail.lower()
