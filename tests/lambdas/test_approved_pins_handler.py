"""The deploy's approval check (``Custom::ApprovedPins``) against botocore's Stubber, with SageMaker's real
DescribeModelPackage and CloudFormation's DescribeStacks shapes: the package the release registered for each pin
(``release.registered_packages``) is looked up on every create and update; PendingManualApproval and Rejected fail the
deploy naming the package and its status, Approved passes; a package that is not the one recorded, another group's
or another account's, is refused; only CloudFormation's rollback to the pins it deployed before passes without a
lookup. The Stubber fails any call not queued: the handler never lists the group."""

import datetime as dt
from types import ModuleType
from typing import Any

import pytest
from botocore.stub import Stubber

from tests.unit.ops.model_package_stubs import ACCOUNT, REGION, add_described, package_arn

HANDLER_MODULE = "cdk_constructs.approval.runtime.index"
STUBBED_CLIENTS = ("SAGEMAKER", "CLOUDFORMATION")

ADAPTERS = "mangaassist-prod-adapters"
BASE = "mangaassist-prod-base-model"
V4 = "v4/" + "4" * 64
V3 = "v3/" + "3" * 64
BASE_PIN = "v1/" + "1" * 64
STACK_ID = (
    f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/MangaAssist-prod-Serving/5b7c0e00-0000-11ef-0000-0a1b2c3d4e5f"
)
PACKAGE_VERSIONS = {V4: 7, V3: 5}
"""Which package of the adapters' group the release registered each adapter pin as."""


def _pins(adapter_pin: str = V4, adapter_package: str | None = None) -> list[dict[str, str]]:
    package = package_arn(ADAPTERS, PACKAGE_VERSIONS[adapter_pin]) if adapter_package is None else adapter_package
    return [
        {"Key": "image.build.primary.base_model", "Group": BASE, "Artifact": "llama-3-8b-instruct-awq",
         "Pin": BASE_PIN, "Package": package_arn(BASE, 1)},
        {"Key": "image.build.primary.adapters.manga_domain_v3", "Group": ADAPTERS, "Artifact": "manga_domain_v3",
         "Pin": adapter_pin, "Package": package},
    ]  # fmt: skip


def _event(request: str, pins: list[dict[str, str]], physical_id: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "RequestType": request,
        "StackId": STACK_ID,
        "ResourceProperties": {"ServiceToken": "arn:aws:lambda:...", "Pins": pins},
    }
    if physical_id is not None:
        event["PhysicalResourceId"] = physical_id
    return event


def _stack_status(stub: Stubber, status: str) -> None:
    stack = {
        "StackId": STACK_ID,
        "StackName": "MangaAssist-prod-Serving",
        "CreationTime": dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
        "StackStatus": status,
    }
    stub.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": STACK_ID})


def _base_approved(stub: Stubber) -> None:
    add_described(stub, BASE, "llama-3-8b-instruct-awq", BASE_PIN)


def _digest(handler: ModuleType, pins: list[dict[str, str]]) -> str:
    return str(handler.pins_digest(handler.parse_pins({"Pins": pins})))


def test_a_pending_package_fails_the_deploy_naming_it_and_what_to_do(
    handler: ModuleType, stubs: tuple[Stubber, ...]
) -> None:
    sagemaker, _ = stubs
    _base_approved(sagemaker)
    add_described(sagemaker, ADAPTERS, "manga_domain_v3", V4, status="PendingManualApproval", version=7)
    with pytest.raises(handler.ApprovalError) as raised:
        handler.on_event(_event("Create", _pins()))
    assert str(raised.value) == (
        f"1 of 2 pinned version(s) not approved: image.build.primary.adapters.manga_domain_v3 = '{V4}': model package "
        f"{package_arn(ADAPTERS, 7)} is PendingManualApproval, not Approved; approve it (aws sagemaker "
        "update-model-package --model-approval-status Approved) or pin an approved version"
    )


def test_a_rejected_package_fails_the_deploy_saying_it_was_rejected(
    handler: ModuleType, stubs: tuple[Stubber, ...]
) -> None:
    sagemaker, _ = stubs
    _base_approved(sagemaker)
    add_described(sagemaker, ADAPTERS, "manga_domain_v3", V4, status="Rejected", version=7)
    with pytest.raises(handler.ApprovalError) as raised:
        handler.on_event(_event("Create", _pins()))
    assert str(raised.value) == (
        f"1 of 2 pinned version(s) not approved: image.build.primary.adapters.manga_domain_v3 = '{V4}': model package "
        f"{package_arn(ADAPTERS, 7)} was rejected (ModelApprovalStatus Rejected): a rejected version may not deploy; "
        "pin another version"
    )
    assert "approve it" not in str(raised.value)


def test_approved_pins_pass_and_the_physical_id_names_them(handler: ModuleType, stubs: tuple[Stubber, ...]) -> None:
    sagemaker, _ = stubs
    _base_approved(sagemaker)
    add_described(sagemaker, ADAPTERS, "manga_domain_v3", V4, version=7)
    answer = handler.on_event(_event("Create", _pins()))
    assert answer == {"PhysicalResourceId": f"approved-pins-{_digest(handler, _pins())}", "Data": {"Checked": "2"}}


def test_a_deploy_back_to_pins_rejected_since_they_were_deployed_is_looked_up_and_fails(
    handler: ModuleType, stubs: tuple[Stubber, ...]
) -> None:
    """Issue 53, finding 7: v3 then v4 deployed; v3 rejected; a new deploy back to v3 passed with Checked 0,
    because the physical id named v3's set as accepted before."""
    sagemaker, cloudformation = stubs
    old, new = _digest(handler, _pins(V3)), _digest(handler, _pins(V4))
    _stack_status(cloudformation, "UPDATE_IN_PROGRESS")  # a deploy, not a rollback
    _base_approved(sagemaker)
    add_described(sagemaker, ADAPTERS, "manga_domain_v3", V3, status="Rejected", version=5)
    with pytest.raises(handler.ApprovalError, match=r"manga_domain_v3 = 'v3/3+': model package .*/5 was rejected"):
        handler.on_event(_event("Update", _pins(V3), f"approved-pins-{new}-{old}"))


def test_every_update_looks_every_pin_up(handler: ModuleType, stubs: tuple[Stubber, ...]) -> None:
    sagemaker, cloudformation = stubs
    live = f"approved-pins-{_digest(handler, _pins())}"
    _stack_status(cloudformation, "UPDATE_IN_PROGRESS")
    _base_approved(sagemaker)
    add_described(sagemaker, ADAPTERS, "manga_domain_v3", V4, version=7)
    assert handler.on_event(_event("Update", _pins(), live)) == {"PhysicalResourceId": live, "Data": {"Checked": "2"}}


def test_cloudformations_rollback_to_the_pins_it_had_passes_without_a_lookup(
    handler: ModuleType, stubs: tuple[Stubber, ...]
) -> None:
    """A later resource of the stack update failed; CloudFormation updates this resource back to v3, rejected since:
    refusing it would leave the stack UPDATE_ROLLBACK_FAILED. Nothing is asked of SageMaker (no call queued)."""
    _, cloudformation = stubs
    live = f"approved-pins-{_digest(handler, _pins(V4))}"
    _stack_status(cloudformation, "UPDATE_ROLLBACK_IN_PROGRESS")
    assert handler.on_event(_event("Update", _pins(V3), live)) == {"PhysicalResourceId": live, "Data": {"Checked": "0"}}


def test_a_package_that_registered_another_pin_does_not_approve_this_one(
    handler: ModuleType, stubs: tuple[Stubber, ...]
) -> None:
    """Issue 53, finding 9: any package whose description and metadata named the pin counted. Now only the package
    recorded for the version does, and it must have registered this very pin."""
    sagemaker, _ = stubs
    _base_approved(sagemaker)
    add_described(sagemaker, ADAPTERS, "manga_domain_v3", V3, version=7)  # package 7 registered v3, approved
    with pytest.raises(handler.ApprovalError) as raised:
        handler.on_event(_event("Create", _pins()))
    assert str(raised.value).endswith(
        f"model package {package_arn(ADAPTERS, 7)} (release.registered_packages.manga_domain_v3/v4) registered "
        f"manga_domain_v3 '{V3}', not this pin; record the package the release registered for it"
    )


@pytest.mark.parametrize(
    ("package", "expected"),
    [
        (
            "",
            "release.registered_packages.manga_domain_v3/v4 is not set: record the model package ARN "
            "`mangaassist-ops release` printed for manga_domain_v3 v4 (a package in mangaassist-prod-adapters; "
            "docs/model-release.md)",
        ),
        (
            package_arn("mangaassist-dev-adapters", 7),
            f"release.registered_packages.manga_domain_v3/v4 = '{package_arn('mangaassist-dev-adapters', 7)}' is a "
            "package of mangaassist-dev-adapters, not of mangaassist-prod-adapters, where the release registers "
            "manga_domain_v3",
        ),
        (
            f"arn:aws:sagemaker:{REGION}:210987654321:model-package/{ADAPTERS}/7",
            f"release.registered_packages.manga_domain_v3/v4 = 'arn:aws:sagemaker:{REGION}:210987654321:model-package/"
            f"{ADAPTERS}/7' is in account 210987654321, not this one ({ACCOUNT}): a central model registry in another "
            "account is not supported (docs/model-release.md, 'A central model registry')",
        ),
    ],
)
def test_a_missing_or_foreign_package_is_refused_without_a_lookup(
    handler: ModuleType, stubs: tuple[Stubber, ...], package: str, expected: str
) -> None:
    sagemaker, _ = stubs
    _base_approved(sagemaker)
    with pytest.raises(handler.ApprovalError) as raised:
        handler.on_event(_event("Create", _pins(adapter_package=package)))
    assert str(raised.value) == (
        f"1 of 2 pinned version(s) not approved: image.build.primary.adapters.manga_domain_v3 = '{V4}': {expected}"
    )


def test_a_recorded_package_that_does_not_exist_is_named(handler: ModuleType, stubs: tuple[Stubber, ...]) -> None:
    sagemaker, _ = stubs
    _base_approved(sagemaker)
    arn = package_arn(ADAPTERS, 7)
    sagemaker.add_client_error(
        "describe_model_package",
        service_error_code="ValidationException",
        service_message=f"ModelPackage {arn} does not exist.",
        expected_params={"ModelPackageName": arn},
    )
    with pytest.raises(handler.ApprovalError, match=rf"model package {arn} \(.*\) does not exist$"):
        handler.on_event(_event("Create", _pins()))


def test_delete_looks_nothing_up(handler: ModuleType, stubs: tuple[Stubber, ...]) -> None:
    assert handler.on_event(_event("Delete", _pins(), "approved-pins-abc")) == {
        "PhysicalResourceId": "approved-pins-abc"
    }


def test_malformed_pins_are_refused_naming_the_field(handler: ModuleType, stubs: tuple[Stubber, ...]) -> None:
    with pytest.raises(ValueError, match=r"Pins item .*: Group, Pin must be non-empty strings$"):
        handler.on_event(_event("Create", [{"Key": "k", "Artifact": "a", "Group": ""}]))
    with pytest.raises(ValueError, match=r"^Pins must be a list of objects, got str$"):
        handler.on_event({"RequestType": "Create", "ResourceProperties": {"Pins": "v4"}})
