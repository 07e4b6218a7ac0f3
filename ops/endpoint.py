"""Find the deployed endpoint and watch its state.

The endpoint's name, its serving mode and the names of what it hosts (variants, or inference
components) come from the serving stack's outputs (keys in ``serving_contract.outputs``): a
``cdk deploy --outputs-file`` JSON file, or ``DescribeStacks`` on ``<project>-<stage>-Serving``,
or, with ``--endpoint-name``, from the app config. Never hard-coded.
"""

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from ops.exit_codes import ExitCode, OpsError, aws_error
from ops.waiting import IN_SERVICE, wait_until_in_service
from serving_contract import components, outputs

VARIANTS: Final = "variants"
INFERENCE_COMPONENTS: Final = "inference_components"
SERVING_MODES: Final = (VARIANTS, INFERENCE_COMPONENTS)
"""Values of ``serving.mode`` and of the stack output ``ServingMode`` (serving_contract.outputs)."""


@dataclass(frozen=True)
class EndpointRef:
    """Names of the endpoint and of what it hosts, as the serving stack published them.

    ``variants`` mode: the primary and canary variants (None when unknown).
    ``inference_components`` mode: one variant (``primary_variant``) hosting ``base_component``
    and one component per adapter (``adapter_components``: adapter name -> component name).
    """

    endpoint_name: str
    primary_variant: str | None
    canary_variant: str | None
    mode: str = VARIANTS
    base_component: str | None = None
    adapter_components: Mapping[str, str] = field(default_factory=dict)

    @property
    def hosts_components(self) -> bool:
        """Whether the endpoint is in ``inference_components`` mode."""
        return self.mode == INFERENCE_COMPONENTS

    def adapter_component(self, adapter: str) -> str:
        """The component that serves ``adapter``; raises OpsError (USAGE) when there is none."""
        component = self.adapter_components.get(adapter)
        if component is None:
            known = ", ".join(sorted(self.adapter_components)) or "none"
            raise OpsError(
                f"adapter {adapter!r} has no inference component on {self.endpoint_name} (adapters with one: {known})",
                ExitCode.USAGE,
            )
        return component


def _ref_from_outputs(values: Mapping[str, Any], source: str, adapters: Sequence[str]) -> EndpointRef:
    endpoint = values.get(outputs.ENDPOINT_NAME)
    if not endpoint:
        raise OpsError(f"{source}: no output {outputs.ENDPOINT_NAME!r}", ExitCode.USAGE)
    # Stacks deployed before serving.mode existed publish no ServingMode: they are variants.
    mode = str(values.get(outputs.SERVING_MODE) or VARIANTS)
    if mode not in SERVING_MODES:
        raise OpsError(
            f"{source}: output {outputs.SERVING_MODE!r} is {mode!r}; expected one of {', '.join(SERVING_MODES)}",
            ExitCode.USAGE,
        )
    primary = values.get(outputs.PRIMARY_VARIANT_NAME)
    if mode == VARIANTS:
        return EndpointRef(str(endpoint), primary, values.get(outputs.CANARY_VARIANT_NAME))
    base = values.get(outputs.BASE_COMPONENT_NAME)
    if not base:
        raise OpsError(
            f"{source}: no output {outputs.BASE_COMPONENT_NAME!r} ({outputs.SERVING_MODE} is {mode})", ExitCode.USAGE
        )
    # Output keys carry the adapter in PascalCase, which cannot be turned back into the adapter's
    # name: look up the configured adapters. One without an output fails when a command needs it.
    keys = {adapter: outputs.adapter_component_output(adapter) for adapter in adapters}
    by_adapter = {adapter: str(values[key]) for adapter, key in keys.items() if key in values}
    return EndpointRef(str(endpoint), primary, None, mode, str(base), by_adapter)


def ref_from_config(endpoint_name: str, mode: str, adapters: Sequence[str]) -> EndpointRef:
    """The names an endpoint called ``endpoint_name`` has in ``mode`` (for ``--endpoint-name``).

    Component names follow ``serving_contract.components``, as the stack derives them. Raises
    OpsError (USAGE) when a derived name breaks SageMaker's naming rule.
    """
    if mode != INFERENCE_COMPONENTS:
        return EndpointRef(endpoint_name, None, None)
    try:
        base = components.base_component_name(endpoint_name)
        by_adapter = {adapter: components.adapter_component_name(endpoint_name, adapter) for adapter in adapters}
    except ValueError as error:
        raise OpsError(f"--endpoint-name {endpoint_name}: {error}", ExitCode.USAGE) from error
    return EndpointRef(endpoint_name, None, None, mode, base, by_adapter)


def _outputs_file(path: Path) -> dict[str, Any]:
    """The ``cdk deploy --outputs-file`` JSON, ``{"<stack>": {"<OutputKey>": "<value>"}}``; OpsError (USAGE) else."""
    try:
        data = json.loads(path.read_text())
    except OSError as error:
        raise OpsError(f"--stack-outputs {path}: cannot read ({error.strerror})", ExitCode.USAGE) from error
    except ValueError as error:
        raise OpsError(f"--stack-outputs {path}: not JSON ({error})", ExitCode.USAGE) from error
    if not isinstance(data, dict):
        raise OpsError(f"--stack-outputs {path}: expected an object of stacks", ExitCode.USAGE)
    return data


def outputs_in_file(path: Path, stack_name: str) -> dict[str, str]:
    """Every output of one stack in a ``cdk deploy --outputs-file`` JSON (empty when the stack is not there)."""
    block = _outputs_file(path).get(stack_name)
    return {str(key): str(value) for key, value in block.items()} if isinstance(block, dict) else {}


def output_of(path: Path, stack_name: str, key: str) -> str | None:
    """One output of one stack in a ``cdk deploy --outputs-file`` JSON, or None when it is not there."""
    block = _outputs_file(path).get(stack_name)
    value = block.get(key) if isinstance(block, dict) else None
    return str(value) if value else None


def ref_from_outputs_file(path: Path, stack_name: str, adapters: Sequence[str] = ()) -> EndpointRef:
    """Read ``cdk deploy --outputs-file`` JSON: ``{"<stack>": {"<OutputKey>": "<value>"}}``.

    Uses ``stack_name``'s block; when that stack is absent but exactly one stack carries an
    ``EndpointName`` output, uses that one. ``adapters`` (the configured adapter names) are
    looked up as ``AdapterInferenceComponent<Adapter>`` outputs in inference_components mode.
    Raises OpsError (USAGE) otherwise.
    """
    data = _outputs_file(path)
    if isinstance(data.get(stack_name), dict):
        return _ref_from_outputs(data[stack_name], f"--stack-outputs {path}: stack {stack_name}", adapters)
    candidates = [name for name, block in data.items() if isinstance(block, dict) and outputs.ENDPOINT_NAME in block]
    if len(candidates) == 1:
        return _ref_from_outputs(data[candidates[0]], f"--stack-outputs {path}: stack {candidates[0]}", adapters)
    found = ", ".join(sorted(data)) or "none"
    raise OpsError(
        f"--stack-outputs {path}: no stack {stack_name!r} with output {outputs.ENDPOINT_NAME!r} (stacks: {found})",
        ExitCode.USAGE,
    )


def output_values(stack: dict[str, Any]) -> dict[str, str]:
    """``{OutputKey: OutputValue}`` of one stack as ``DescribeStacks`` returns it."""
    return {o["OutputKey"]: o.get("OutputValue", "") for o in stack.get("Outputs", [])}


def ref_from_stack(cloudformation: Any, stack_name: str, adapters: Sequence[str] = ()) -> EndpointRef:
    """Read the outputs of a deployed stack with ``DescribeStacks`` (``adapters`` as in ref_from_outputs_file)."""
    try:
        stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as error:
        message = error.response.get("Error", {}).get("Message", str(error))
        raise OpsError(f"stack {stack_name}: {message}", ExitCode.USAGE) from error
    except BotoCoreError as error:
        raise OpsError(f"stack {stack_name}: {error}", ExitCode.AWS_ERROR) from error
    values = output_values(stacks[0]) if stacks else {}
    return _ref_from_outputs(values, f"stack {stack_name}", adapters)


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
    except (ClientError, BotoCoreError) as error:
        raise aws_error(f"endpoint {endpoint_name}", error) from error
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
    the old state before the update shows. Raises OpsError (NOT_READY) on a status in
    :data:`WAIT_ENDS` or timeout (``ops.waiting.wait_until_in_service``).
    """
    return wait_until_in_service(
        lambda: describe(sagemaker, endpoint_name),
        what=f"endpoint {endpoint_name}",
        ends=WAIT_ENDS,
        timeout_s=timeout_s,
        poll_s=poll_s,
        clock=clock,
        sleep=sleep,
        timeout_flag="--update-timeout-s",
        still=lambda state: state.status if state.status != IN_SERVICE else "InService with the old weights",
        settled=settled,
    )
