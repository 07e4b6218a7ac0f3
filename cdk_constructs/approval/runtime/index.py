"""Custom resource ``Custom::ApprovedPins``: a Serving stack deploy goes on only when every pinned version is an
Approved model package.

Why a custom resource: ``ops preflight`` and ``ops pin_artifacts`` refuse an unapproved pin, but a plain
``cdk deploy`` runs neither (issue 47). The endpoint config (variants mode) or the inference components
depend on this resource, so CloudFormation creates or updates it first; when a pin's package is missing,
not the one the release registered for it, or not ``Approved``, the resource fails with one line per pin
naming the package and its status, and the stack update stops before the endpoint changes
(serving_contract/model_packages.py has the lookup and the lines).

Resource properties: ``Pins``, a list of ``{"Key", "Group", "Artifact", "Pin", "Package"}``: the config key, the
model package group, the artifact (model or adapter name), the pin text ``{version}/{sha256}`` and the ARN of the
package the release registered for that version (``release.registered_packages``; empty when none is recorded,
which the lookup refuses).

Returns ``PhysicalResourceId`` = ``approved-pins-<digest of these pins>`` and ``Data.Checked`` (how many pins were
looked up).

Every Create and Update looks every pin up (issue 53, finding 7: an update back to a pin set accepted earlier used to
pass without a lookup, so a version rejected since deployed again). The one exception is CloudFormation's rollback:
it rolls a failed update back by updating this resource again with the pins it had (a custom resource whose update
failed gets that update too), while the stack is ``UPDATE_ROLLBACK_IN_PROGRESS``. Those pins were deployed before,
and the endpoint may be running them: whatever has happened to their packages since (one rejected after the fact),
refusing them then would leave the stack in ``UPDATE_ROLLBACK_FAILED``. So the handler asks CloudFormation for its
stack's status (DescribeStacks on the event's ``StackId``) and passes a rollback's update without a lookup; a
new deploy back to the same pins is a plain update and is looked up. Delete does nothing (the resource holds
nothing).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import boto3

# The same import in the Lambda and in the repo: the asset bundles the lookup at this path (ApprovedPins).
from serving_contract.model_packages import pin_problem, stack_account

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

SAGEMAKER = boto3.client("sagemaker")
CLOUDFORMATION = boto3.client("cloudformation")

ID_PREFIX = "approved-pins"
DIGEST_CHARS = 16
"""Hex characters of SHA-256 kept per pin set in the physical id (64 bits: two sets never collide by chance)."""
ROLLBACK_STATUSES = frozenset({"UPDATE_ROLLBACK_IN_PROGRESS"})
"""The stack status in which CloudFormation sends this resource the pins it had (CloudFormation API reference,
``StackStatus``): a rollback, not a deploy."""


class ApprovalError(RuntimeError):
    """At least one pin is not an Approved model package; the message has one clause per pin."""


@dataclass(frozen=True)
class PinCheck:
    """One pin to look up (the resource property's item)."""

    key: str
    group: str
    artifact: str
    pin: str
    package: str = ""

    @classmethod
    def from_property(cls, item: Mapping[str, Any]) -> PinCheck:
        """Raises ``ValueError`` naming a missing or empty field (``Package`` may be empty: the lookup refuses it)."""
        values = {name: item.get(name) for name in ("Key", "Group", "Artifact", "Pin")}
        missing = [name for name, value in values.items() if not isinstance(value, str) or not value]
        package = item.get("Package", "")
        if not isinstance(package, str):
            missing.append("Package")
        if missing:
            raise ValueError(f"Pins item {dict(item)!r}: {', '.join(missing)} must be non-empty strings")
        return cls(values["Key"], values["Group"], values["Artifact"], values["Pin"], package)  # type: ignore[arg-type]


def parse_pins(properties: Mapping[str, Any]) -> list[PinCheck]:
    """The ``Pins`` property, parsed. Raises ``ValueError`` on anything but a list of pin objects."""
    items = properties.get("Pins")
    if not isinstance(items, list) or not all(isinstance(item, Mapping) for item in items):
        raise ValueError(f"Pins must be a list of objects, got {type(items).__name__}")
    return [PinCheck.from_property(item) for item in items]


def pins_digest(pins: Sequence[PinCheck]) -> str:
    """A digest of the pin set, the same whatever the order."""
    text = json.dumps(sorted((p.key, p.group, p.artifact, p.pin, p.package) for p in pins))
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def rolling_back(stack_id: str) -> bool:
    """Whether CloudFormation is rolling this resource's stack back (:data:`ROLLBACK_STATUSES`).

    Raises:
        botocore.exceptions.ClientError: DescribeStacks failed (the deploy then fails: no lookup is skipped on a
            guess).
    """
    stacks = CLOUDFORMATION.describe_stacks(StackName=stack_id)["Stacks"]
    return bool(stacks) and stacks[0]["StackStatus"] in ROLLBACK_STATUSES


def problems(sagemaker: Any, pins: Sequence[PinCheck], account: str | None) -> list[str]:
    """One line per pin whose package may not deploy (serving_contract/model_packages.py)."""
    found = []
    for pin in pins:
        line = pin_problem(
            sagemaker,
            group=pin.group,
            artifact=pin.artifact,
            key=pin.key,
            pin=pin.pin,
            package_arn=pin.package,
            account=account,
        )
        if line is not None:
            found.append(line)
    return found


def on_event(event: Mapping[str, Any], _context: Any = None) -> dict[str, Any]:
    """CloudFormation's Create, Update and Delete (see the module docstring).

    Raises:
        ApprovalError: a pin whose package may not deploy (the deploy fails with this message).
        ValueError: malformed properties.
    """
    request = event["RequestType"]
    physical_id = event.get("PhysicalResourceId")
    if request == "Delete":
        return {"PhysicalResourceId": physical_id}
    pins = parse_pins(event["ResourceProperties"])
    stack_id = str(event.get("StackId", ""))
    if request == "Update" and rolling_back(stack_id):
        LOG.info("stack %s is rolling back to the pins it deployed before: not looked up again", stack_id)
        return {"PhysicalResourceId": physical_id, "Data": {"Checked": "0"}}
    refused = problems(SAGEMAKER, pins, stack_account(stack_id))
    if refused:
        raise ApprovalError(f"{len(refused)} of {len(pins)} pinned version(s) not approved: " + "; ".join(refused))
    LOG.info("%d pin(s) approved: %s", len(pins), ", ".join(f"{p.key} = {p.pin} ({p.package})" for p in pins))
    return {"PhysicalResourceId": f"{ID_PREFIX}-{pins_digest(pins)}", "Data": {"Checked": str(len(pins))}}
