"""Custom resource ``Custom::ApprovedPins``: a Serving stack deploy goes on only when every pinned version is an
Approved model package.

Why a custom resource: ``ops preflight`` and ``ops pin_artifacts`` refuse an unapproved pin, but a plain
``cdk deploy`` runs neither (issue 47). The endpoint config (variants mode) or the inference components
depend on this resource, so CloudFormation creates or updates it first; when a pin's package is missing or
not ``Approved``, the resource fails with one line per pin naming the package and its status, and the stack
update stops before the endpoint changes (serving_contract/model_packages.py has the lookup and the lines).

Resource properties: ``Pins``, a list of ``{"Key", "Group", "Artifact", "Pin"}``: the config key, the model
package group, the artifact (model or adapter name) and the pin text ``{version}/{sha256}``.

Returns ``PhysicalResourceId`` = ``approved-pins-<digest of these pins>-<digest of the pins accepted before>``
and ``Data.Checked`` (how many pins were looked up).

Rollbacks: CloudFormation rolls a failed update back by updating this resource again with the pins it had
before (a custom resource whose update failed gets that update too). Those pins were accepted by an earlier
deploy, and the endpoint may be running them: whatever has happened to their packages since (one rejected
after the fact), refusing them now would leave the stack in UPDATE_ROLLBACK_FAILED. So an update to a pin
set this resource accepted (its own physical id carries the digests of the last two) passes without a
lookup; every other create or update looks each pin up. Delete does nothing (the resource holds nothing).
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
from serving_contract.model_packages import pin_problem

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

SAGEMAKER = boto3.client("sagemaker")

ID_PREFIX = "approved-pins"
DIGEST_CHARS = 16
"""Hex characters of SHA-256 kept per pin set in the physical id (64 bits: two sets never collide by chance)."""


class ApprovalError(RuntimeError):
    """At least one pin is not an Approved model package; the message has one clause per pin."""


@dataclass(frozen=True)
class PinCheck:
    """One pin to look up (the resource property's item)."""

    key: str
    group: str
    artifact: str
    pin: str

    @classmethod
    def from_property(cls, item: Mapping[str, Any]) -> PinCheck:
        """Raises ``ValueError`` naming a missing or empty field."""
        values = {name: item.get(name) for name in ("Key", "Group", "Artifact", "Pin")}
        missing = [name for name, value in values.items() if not isinstance(value, str) or not value]
        if missing:
            raise ValueError(f"Pins item {dict(item)!r}: {', '.join(missing)} must be non-empty strings")
        return cls(values["Key"], values["Group"], values["Artifact"], values["Pin"])  # type: ignore[arg-type]


def parse_pins(properties: Mapping[str, Any]) -> list[PinCheck]:
    """The ``Pins`` property, parsed. Raises ``ValueError`` on anything but a list of pin objects."""
    items = properties.get("Pins")
    if not isinstance(items, list) or not all(isinstance(item, Mapping) for item in items):
        raise ValueError(f"Pins must be a list of objects, got {type(items).__name__}")
    return [PinCheck.from_property(item) for item in items]


def pins_digest(pins: Sequence[PinCheck]) -> str:
    """A digest of the pin set, the same whatever the order."""
    text = json.dumps(sorted((p.key, p.group, p.artifact, p.pin) for p in pins))
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def accepted_digests(physical_id: str | None) -> set[str]:
    """The pin sets a physical id says were accepted: its current and its previous digest."""
    if not physical_id or not physical_id.startswith(f"{ID_PREFIX}-"):
        return set()
    return {part for part in physical_id.removeprefix(f"{ID_PREFIX}-").split("-") if part}


def live_digest(physical_id: str | None) -> str | None:
    """The digest of the pin set a physical id accepted last (its first), or None."""
    if not physical_id or not physical_id.startswith(f"{ID_PREFIX}-"):
        return None
    return physical_id.removeprefix(f"{ID_PREFIX}-").split("-")[0] or None


def problems(sagemaker: Any, pins: Sequence[PinCheck]) -> list[str]:
    """One line per pin whose model package is missing or not Approved (serving_contract/model_packages.py)."""
    found = []
    for pin in pins:
        line = pin_problem(sagemaker, group=pin.group, artifact=pin.artifact, key=pin.key, pin=pin.pin)
        if line is not None:
            found.append(line)
    return found


def on_event(event: Mapping[str, Any], _context: Any = None) -> dict[str, Any]:
    """CloudFormation's Create, Update and Delete (see the module docstring).

    Raises:
        ApprovalError: a pin whose package is missing or not Approved (the deploy fails with this message).
        ValueError: malformed properties.
    """
    request = event["RequestType"]
    physical_id = event.get("PhysicalResourceId")
    if request == "Delete":
        return {"PhysicalResourceId": physical_id}
    pins = parse_pins(event["ResourceProperties"])
    digest = pins_digest(pins)
    accepted = accepted_digests(physical_id) if request == "Update" else set()
    if digest in accepted:
        LOG.info("pins %s were accepted before (a rollback or a return to them): not looked up again", digest)
        return {"PhysicalResourceId": physical_id, "Data": {"Checked": "0"}}
    refused = problems(SAGEMAKER, pins)
    if refused:
        raise ApprovalError(f"{len(refused)} of {len(pins)} pinned version(s) not approved: " + "; ".join(refused))
    LOG.info("%d pin(s) approved: %s", len(pins), ", ".join(f"{p.key} = {p.pin}" for p in pins))
    # Keep the set this update replaces: a rollback of a later failure in this stack update returns to it.
    replaced = live_digest(physical_id) if request == "Update" else None
    return {
        "PhysicalResourceId": f"{ID_PREFIX}-{digest}" + (f"-{replaced}" if replaced else ""),
        "Data": {"Checked": str(len(pins))},
    }
