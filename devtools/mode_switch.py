"""Whether a Serving template change switches ``serving.mode`` under the same endpoint name.

The two modes build the endpoint from different resources (a model per production variant, or
inference components on a managed instance pool) under different logical ids. CloudFormation
creates a resource of a new logical id before it deletes the old one (CloudFormation user guide,
"Update behaviors of stack resources"), so the new mode's ``AWS::SageMaker::Endpoint`` is created
while the old one still holds the name, and the update fails ("already exists"). ``make diff``
refuses such a change with the procedure; ``ops preflight`` compares the deployed endpoint's mode
with the config's.
"""

from collections.abc import Mapping
from typing import Any

from serving_contract import outputs

PROCEDURE_DOC = "docs/deploy.md#switching-serving-mode"


def _output(template: Mapping[str, Any], key: str) -> str | None:
    value = template.get("Outputs", {}).get(key, {}).get("Value")
    return value if isinstance(value, str) else None


def mode_switch_refusal(before: Mapping[str, Any], after: Mapping[str, Any]) -> str | None:
    """One line saying why the change cannot deploy and what to do, or None when it can.

    Args:
        before, after: the Serving stack's templates (base and working tree).
    """
    old_mode, new_mode = _output(before, outputs.SERVING_MODE), _output(after, outputs.SERVING_MODE)
    old_name, new_name = _output(before, outputs.ENDPOINT_NAME), _output(after, outputs.ENDPOINT_NAME)
    if old_mode is None or new_mode is None or old_mode == new_mode or old_name != new_name:
        return None
    return (
        f"serving.mode changes from {old_mode} to {new_mode} on endpoint {new_name!r}: CloudFormation would create "
        "the new endpoint before deleting the old one, under the same name, and fail. Set a new "
        "serving.endpoint_name in the same change (both fleets run until the old one is deleted; callers read "
        f"the new name from the stack's {outputs.ENDPOINT_NAME} output), or destroy the Serving stack first "
        f"(downtime) ({PROCEDURE_DOC})"
    )
