"""Find the deployed endpoint and watch its state.

The endpoint and variant names come from the serving stack's outputs (keys in
``serving_contract.outputs``): a ``cdk deploy --outputs-file`` JSON file, or
``DescribeStacks`` on ``<project>-<stage>-Serving``, or explicit flags. Never hard-coded.
"""

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from ops.exit_codes import ExitCode, OpsError
from serving_contract import outputs

IN_SERVICE = "InService"


@dataclass(frozen=True)
class EndpointRef:
    """Names of the endpoint and its variants, as the serving stack published them."""

    endpoint_name: str
    primary_variant: str | None
    canary_variant: str | None


def _ref_from_outputs(values: Mapping[str, Any], source: str) -> EndpointRef:
    endpoint = values.get(outputs.ENDPOINT_NAME)
    if not endpoint:
        raise OpsError(f"{source}: no output {outputs.ENDPOINT_NAME!r}", ExitCode.USAGE)
    return EndpointRef(
        endpoint_name=str(endpoint),
        primary_variant=values.get(outputs.PRIMARY_VARIANT_NAME),
        canary_variant=values.get(outputs.CANARY_VARIANT_NAME),
    )


def ref_from_outputs_file(path: Path, stack_name: str) -> EndpointRef:
    """Read ``cdk deploy --outputs-file`` JSON: ``{"<stack>": {"<OutputKey>": "<value>"}}``.

    Uses ``stack_name``'s block; when that stack is absent but exactly one stack carries an
    ``EndpointName`` output, uses that one. Raises OpsError (USAGE) otherwise.
    """
    try:
        data = json.loads(path.read_text())
    except OSError as error:
        raise OpsError(f"--stack-outputs {path}: cannot read ({error.strerror})", ExitCode.USAGE) from error
    except ValueError as error:
        raise OpsError(f"--stack-outputs {path}: not JSON ({error})", ExitCode.USAGE) from error
    if not isinstance(data, dict):
        raise OpsError(f"--stack-outputs {path}: expected an object of stacks", ExitCode.USAGE)
    if isinstance(data.get(stack_name), dict):
        return _ref_from_outputs(data[stack_name], f"--stack-outputs {path}: stack {stack_name}")
    candidates = [name for name, block in data.items() if isinstance(block, dict) and outputs.ENDPOINT_NAME in block]
    if len(candidates) == 1:
        return _ref_from_outputs(data[candidates[0]], f"--stack-outputs {path}: stack {candidates[0]}")
    found = ", ".join(sorted(data)) or "none"
    raise OpsError(
        f"--stack-outputs {path}: no stack {stack_name!r} with output {outputs.ENDPOINT_NAME!r} (stacks: {found})",
        ExitCode.USAGE,
    )


def ref_from_stack(cloudformation: Any, stack_name: str) -> EndpointRef:
    """Read the outputs of a deployed stack with ``DescribeStacks``."""
    try:
        stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as error:
        message = error.response.get("Error", {}).get("Message", str(error))
        raise OpsError(f"stack {stack_name}: {message}", ExitCode.USAGE) from error
    except BotoCoreError as error:
        raise OpsError(f"stack {stack_name}: {error}", ExitCode.AWS_ERROR) from error
    values = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])} if stacks else {}
    return _ref_from_outputs(values, f"stack {stack_name}")


@dataclass(frozen=True)
class VariantState:
    """One production variant as DescribeEndpoint reports it."""

    name: str
    current_weight: float
    desired_weight: float
    current_instances: int
    status: str  # the latest VariantStatus entry, or "Active" when none is reported


@dataclass(frozen=True)
class EndpointState:
    """DescribeEndpoint, reduced to what the commands act on."""

    name: str
    status: str
    failure_reason: str
    variants: tuple[VariantState, ...]

    def variant(self, name: str) -> VariantState | None:
        """The named variant, or None."""
        return next((v for v in self.variants if v.name == name), None)


def describe(sagemaker: Any, endpoint_name: str) -> EndpointState:
    """DescribeEndpoint; raises OpsError (AWS_ERROR) when the call fails."""
    try:
        response = sagemaker.describe_endpoint(EndpointName=endpoint_name)
    except ClientError as error:
        message = error.response.get("Error", {}).get("Message", str(error))
        raise OpsError(f"endpoint {endpoint_name}: {message}", ExitCode.AWS_ERROR) from error
    except BotoCoreError as error:
        raise OpsError(f"endpoint {endpoint_name}: {error}", ExitCode.AWS_ERROR) from error
    variants = []
    for item in response.get("ProductionVariants", []):
        statuses = item.get("VariantStatus") or []
        variants.append(
            VariantState(
                name=item["VariantName"],
                current_weight=float(item.get("CurrentWeight", 0.0)),
                desired_weight=float(item.get("DesiredWeight", item.get("CurrentWeight", 0.0))),
                current_instances=int(item.get("CurrentInstanceCount", 0)),
                status=str(statuses[-1].get("Status", "Active")) if statuses else "Active",
            )
        )
    return EndpointState(
        name=response["EndpointName"],
        status=response["EndpointStatus"],
        failure_reason=str(response.get("FailureReason", "")),
        variants=tuple(variants),
    )


def require_in_service(state: EndpointState, variants: tuple[str, ...] = ()) -> None:
    """Raise OpsError (NOT_READY) unless the endpoint is InService and every named variant exists.

    A variant whose latest VariantStatus is not ``Active`` (``Creating``, ``Updating``,
    ``Deleting``, ``ActivatingTraffic``, ``Baking``) is not ready either.
    """
    if state.status != IN_SERVICE:
        reason = f" ({state.failure_reason})" if state.failure_reason else ""
        raise OpsError(f"endpoint {state.name} is {state.status}, not {IN_SERVICE}{reason}", ExitCode.NOT_READY)
    known = ", ".join(v.name for v in state.variants) or "none"
    for name in variants:
        variant = state.variant(name)
        if variant is None:
            raise OpsError(f"endpoint {state.name} has no variant {name!r} (variants: {known})", ExitCode.NOT_READY)
        if variant.status != "Active":
            raise OpsError(f"variant {name} of {state.name} is {variant.status}, not Active", ExitCode.NOT_READY)


WAIT_ENDS: Final = frozenset({"Failed", "UpdateRollbackFailed", "OutOfService", "RollingBack", "Deleting"})
"""DescribeEndpoint ``EndpointStatus`` values from which waiting for InService is pointless
(enum in botocore's sagemaker/2017-07-24 service model: OutOfService, Creating, Updating,
SystemUpdating, RollingBack, InService, Deleting, Failed, UpdateRollbackFailed).
``UpdateRollbackFailed`` needs an operator (another UpdateEndpoint, or delete)."""


def wait_in_service(
    sagemaker: Any,
    endpoint_name: str,
    *,
    timeout_s: float,
    poll_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    settled: Callable[[EndpointState], bool] | None = None,
) -> EndpointState:
    """Poll DescribeEndpoint until InService (and ``settled(state)``, when given).

    SageMaker moves the endpoint to ``Updating`` during UpdateEndpointWeightsAndCapacities and
    back to ``InService`` when the new weights are active; ``settled`` guards against reading
    the old state before the update shows. Raises OpsError (NOT_READY) on Failed or timeout.
    """
    deadline = clock() + timeout_s
    while True:
        state = describe(sagemaker, endpoint_name)
        if state.status == IN_SERVICE and (settled is None or settled(state)):
            return state
        if state.status in WAIT_ENDS:
            reason = f" ({state.failure_reason})" if state.failure_reason else ""
            raise OpsError(f"endpoint {endpoint_name} is {state.status}{reason}", ExitCode.NOT_READY)
        if clock() >= deadline:
            what = state.status if state.status != IN_SERVICE else "InService with the old weights"
            raise OpsError(
                f"endpoint {endpoint_name} still {what} after {timeout_s:g} s (--update-timeout-s)",
                ExitCode.NOT_READY,
            )
        sleep(poll_s)
