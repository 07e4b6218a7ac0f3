"""The deploy's approval check (``Custom::ApprovedPins``) against botocore's Stubber, with SageMaker's real
ListModelPackages / DescribeModelPackage shapes: PendingManualApproval and Rejected fail the deploy naming the
package and its status, Approved passes, and CloudFormation's rollback to the pins it deployed before passes
without a lookup."""

from types import ModuleType
from typing import Any

import pytest
from botocore.stub import Stubber

from tests.unit.ops.model_package_stubs import add_model_package, add_no_package, package_arn

HANDLER_MODULE = "cdk_constructs.approval.runtime.index"
STUBBED_CLIENTS = ("SAGEMAKER",)

ADAPTERS = "mangaassist-prod-adapters"
BASE = "mangaassist-prod-base-model"
V4 = "v4/" + "4" * 64
V3 = "v3/" + "3" * 64
BASE_PIN = "v1/" + "1" * 64


def _pins(adapter_pin: str = V4) -> list[dict[str, str]]:
    return [
        {"Key": "image.build.primary.base_model", "Group": BASE, "Artifact": "llama-3-8b-instruct-awq",
         "Pin": BASE_PIN},
        {"Key": "image.build.primary.adapters.manga_domain_v3", "Group": ADAPTERS, "Artifact": "manga_domain_v3",
         "Pin": adapter_pin},
    ]  # fmt: skip


def _event(request: str, pins: list[dict[str, str]], physical_id: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "RequestType": request,
        "ResourceProperties": {"ServiceToken": "arn:aws:lambda:...", "Pins": pins},
    }
    if physical_id is not None:
        event["PhysicalResourceId"] = physical_id
    return event


def _base_approved(stub: Stubber) -> None:
    add_model_package(stub, BASE, "llama-3-8b-instruct-awq", BASE_PIN)


@pytest.mark.parametrize("status", ["PendingManualApproval", "Rejected"])
def test_a_pin_whose_package_is_not_approved_fails_the_deploy_naming_it_and_its_status(
    handler: ModuleType, stubs: tuple[Stubber, ...], status: str
) -> None:
    (sagemaker,) = stubs
    _base_approved(sagemaker)
    add_model_package(sagemaker, ADAPTERS, "manga_domain_v3", V4, status=status, version=7)
    with pytest.raises(handler.ApprovalError) as raised:
        handler.on_event(_event("Create", _pins()))
    assert str(raised.value) == (
        f"1 of 2 pinned version(s) not approved: image.build.primary.adapters.manga_domain_v3 = '{V4}': model package "
        f"{package_arn(ADAPTERS, 7)} is {status}, not Approved; approve it (aws sagemaker update-model-package "
        "--model-approval-status Approved) or pin an approved version"
    )


def test_approved_pins_pass_and_the_physical_id_records_them(handler: ModuleType, stubs: tuple[Stubber, ...]) -> None:
    (sagemaker,) = stubs
    _base_approved(sagemaker)
    add_model_package(sagemaker, ADAPTERS, "manga_domain_v3", V4)
    answer = handler.on_event(_event("Create", _pins()))
    assert answer == {
        "PhysicalResourceId": f"approved-pins-{handler.pins_digest(handler.parse_pins({'Pins': _pins()}))}",
        "Data": {"Checked": "2"},
    }


def test_a_pin_no_release_registered_fails_with_what_to_run(handler: ModuleType, stubs: tuple[Stubber, ...]) -> None:
    (sagemaker,) = stubs
    _base_approved(sagemaker)
    add_no_package(sagemaker, ADAPTERS)
    with pytest.raises(handler.ApprovalError, match=r"no model package in mangaassist-prod-adapters registers it"):
        handler.on_event(_event("Create", _pins()))


def _digest(handler: ModuleType, pins: list[dict[str, str]]) -> str:
    return str(handler.pins_digest(handler.parse_pins({"Pins": pins})))


def test_an_update_keeps_the_pins_it_replaces_so_that_a_rollback_to_them_passes_without_a_lookup(
    handler: ModuleType, stubs: tuple[Stubber, ...]
) -> None:
    (sagemaker,) = stubs
    old, new = _digest(handler, _pins(V3)), _digest(handler, _pins(V4))
    # Update v3 -> v4: both looked up, approved; the id now names the new set and the one it replaced.
    _base_approved(sagemaker)
    add_model_package(sagemaker, ADAPTERS, "manga_domain_v3", V4)
    answer = handler.on_event(_event("Update", _pins(V4), f"approved-pins-{old}"))
    assert answer["PhysicalResourceId"] == f"approved-pins-{new}-{old}"
    # A later resource of the same stack update fails (the endpoint's blue/green deployment rolled back):
    # CloudFormation updates this resource back to v3. v3 was rejected meanwhile; the rollback must still pass,
    # and no call is made (the Stubber has nothing queued and fails any call).
    back = handler.on_event(_event("Update", _pins(V3), answer["PhysicalResourceId"]))
    assert back == {"PhysicalResourceId": f"approved-pins-{new}-{old}", "Data": {"Checked": "0"}}


def test_a_refused_update_rolls_back_to_the_pins_it_had_without_a_lookup(
    handler: ModuleType, stubs: tuple[Stubber, ...]
) -> None:
    (sagemaker,) = stubs
    live = f"approved-pins-{_digest(handler, _pins(V3))}"
    _base_approved(sagemaker)
    add_model_package(sagemaker, ADAPTERS, "manga_domain_v3", V4, status="PendingManualApproval")
    with pytest.raises(handler.ApprovalError):
        handler.on_event(_event("Update", _pins(V4), live))
    # CloudFormation's rollback: the same resource, updated back to the v3 pins its physical id accepted.
    assert handler.on_event(_event("Update", _pins(V3), live))["PhysicalResourceId"] == live


def test_delete_looks_nothing_up(handler: ModuleType, stubs: tuple[Stubber, ...]) -> None:
    assert handler.on_event(_event("Delete", _pins(), "approved-pins-abc")) == {
        "PhysicalResourceId": "approved-pins-abc"
    }


def test_malformed_pins_are_refused_naming_the_field(handler: ModuleType, stubs: tuple[Stubber, ...]) -> None:
    with pytest.raises(ValueError, match=r"Pins item .*: Group, Pin must be non-empty strings$"):
        handler.on_event(_event("Create", [{"Key": "k", "Artifact": "a", "Group": ""}]))
    with pytest.raises(ValueError, match=r"^Pins must be a list of objects, got str$"):
        handler.on_event({"RequestType": "Create", "ResourceProperties": {"Pins": "v4"}})
