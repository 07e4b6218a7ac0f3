"""Which model package registered a pin, and whether it is Approved: only approved versions deploy.

The release pipelines (cdk_constructs/release/) register each version that passed the quality gates in
its kind's model package group with the description ``<artifact> <pin>`` and the customer metadata
``artifact``, ``version``, ``pin``; ``ops release`` prints the package's ARN, and the config records it:
``release.registered_packages["<artifact>/<version>"]`` (issue 53, finding 9). A pin deploys only when the
package recorded for its version is in the artifact's group, registered that very pin, and its
``ModelApprovalStatus`` is ``Approved``. The deploy looks up that one package, never "a package whose
description names the pin": anyone who may create a model package in the group can write any description
and metadata, so a search would let such a package approve a pin the release never registered.

Three parties ask, with the same lines:

- the Serving stack's ``Custom::ApprovedPins`` resource (cdk_constructs/approval/), which fails the deploy
  before the endpoint config changes (its Lambda bundles this module);
- ``ops preflight`` (ops/model_packages.py), before anything is deployed;
- ``ops pin_artifacts``, which finds the package of a pin it reads from a CURRENT pointer (:func:`find_packages`,
  refusing a pin two packages claim) and records it.

Read-only: DescribeModelPackage (ListModelPackages only for :func:`find_packages`). Standard library only (the
Lambda runtime's boto3 client is passed in).
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

APPROVED: Final = "Approved"
REJECTED: Final = "Rejected"
DEFAULT_STATUS: Final = "PendingManualApproval"
"""CreateModelPackage's default ModelApprovalStatus (botocore's SageMaker model): a package without one is pending."""
REGISTERED_PACKAGES_KEY: Final = "release.registered_packages"
"""The config map of ``<artifact>/<version>`` -> the ARN of the package the release registered."""
CENTRAL_REGISTRY_DOC: Final = "docs/model-release.md, 'A central model registry'"

_PACKAGE_ARN = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):sagemaker:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):"
    r"model-package/(?P<group>[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})/(?P<version>[1-9][0-9]*)$"
)
"""A versioned model package's ARN (``model-package/<group>/<version>``; group names: CreateModelPackageGroup's
pattern in botocore's SageMaker model)."""


@dataclass(frozen=True)
class PackageArn:
    """The parts of a versioned model package's ARN."""

    arn: str
    partition: str
    region: str
    account: str
    group: str
    version: int


def parse_package_arn(arn: str) -> PackageArn:
    """The parts of ``arn``.

    Raises:
        ValueError: not a versioned model package's ARN (one line naming the shape).
    """
    match = _PACKAGE_ARN.match(arn)
    if match is None:
        raise ValueError(
            f"{arn!r} is not a model package ARN, arn:aws:sagemaker:<region>:<account>:model-package/<group>/<version>"
        )
    return PackageArn(arn, match["partition"], match["region"], match["account"], match["group"], int(match["version"]))


def registered_key(artifact: str, version: str) -> str:
    """``<artifact>/<version>``: the key of ``release.registered_packages`` for one released version."""
    return f"{artifact}/{version}"


def stack_account(stack_id: str) -> str | None:
    """The account of a CloudFormation stack ARN (a custom resource event's ``StackId``), or None."""
    parts = stack_id.split(":")
    return parts[4] if len(parts) > 5 and parts[4].isdigit() else None


@dataclass(frozen=True)
class PinPackage:
    """The model package that registered one pin: its ARN and approval status."""

    arn: str
    approval_status: str


def _summaries(sagemaker: Any, group: str) -> Iterator[dict[str, Any]]:
    for page in sagemaker.get_paginator("list_model_packages").paginate(
        ModelPackageGroupName=group, SortBy="CreationTime", SortOrder="Descending"
    ):
        yield from page["ModelPackageSummaryList"]


def find_packages(sagemaker: Any, group: str, artifact: str, pin: str) -> list[PinPackage]:
    """Every package in ``group`` whose description and customer metadata name ``artifact`` at ``pin``, newest
    first. A search, for ``ops pin_artifacts`` to find what to record, never for the deploy (module docstring)."""
    found = []
    for summary in _summaries(sagemaker, group):
        if summary.get("ModelPackageDescription") != f"{artifact} {pin}":
            continue
        package = sagemaker.describe_model_package(ModelPackageName=summary["ModelPackageArn"])
        metadata = package.get("CustomerMetadataProperties", {})
        if metadata.get("artifact") == artifact and metadata.get("pin") == pin:
            found.append(PinPackage(package["ModelPackageArn"], package.get("ModelApprovalStatus", DEFAULT_STATUS)))
    return found


def released_versions(sagemaker: Any, group: str, artifact: str, version: str) -> list[PinPackage]:
    """Every package in ``group`` whose description names ``artifact`` at ``version`` (any digest), newest first:
    ``ops release`` refuses to release a version again (issue 53, finding 14)."""
    return [
        PinPackage(summary["ModelPackageArn"], summary.get("ModelApprovalStatus", DEFAULT_STATUS))
        for summary in _summaries(sagemaker, group)
        if str(summary.get("ModelPackageDescription", "")).startswith(f"{artifact} {version}/")
    ]


def _not_found(error: Exception) -> bool:
    """A botocore ``ClientError`` saying the package does not exist (SageMaker answers ValidationException)."""
    details = getattr(error, "response", {}).get("Error", {})
    return details.get("Code") in ("ValidationException", "ResourceNotFound") and "does not exist" in str(
        details.get("Message", "")
    )


def pin_problem(
    sagemaker: Any,
    *,
    group: str,
    artifact: str,
    key: str,
    pin: str,
    package_arn: str | None,
    account: str | None = None,
) -> str | None:
    """One line naming the pin ``key = pin`` and why it may not deploy, or None when the package the release
    registered for it (``package_arn``, from ``release.registered_packages``) is Approved.

    Args:
        group: the model package group the release registers ``artifact`` in.
        package_arn: the recorded package's ARN; None or empty when the config records none.
        account: the deploying account, when known: a package in another account is refused (a central model
            registry is not supported, :data:`CENTRAL_REGISTRY_DOC`).

    Raises:
        Exception: the client's own errors other than "does not exist" (throttling, access denied).
    """
    version = pin.split("/", 1)[0]
    recorded = f"{REGISTERED_PACKAGES_KEY}.{registered_key(artifact, version)}"
    if not package_arn:
        return (
            f"{key} = {pin!r}: {recorded} is not set: record the model package ARN `mangaassist-ops release` printed "
            f"for {artifact} {version} (a package in {group}; docs/model-release.md)"
        )
    try:
        parsed = parse_package_arn(package_arn)
    except ValueError as error:
        return f"{key} = {pin!r}: {recorded} = {error}"
    if account is not None and parsed.account != account:
        return (
            f"{key} = {pin!r}: {recorded} = {package_arn!r} is in account {parsed.account}, not this one "
            f"({account}): a central model registry in another account is not supported ({CENTRAL_REGISTRY_DOC})"
        )
    if parsed.group != group:
        return (
            f"{key} = {pin!r}: {recorded} = {package_arn!r} is a package of {parsed.group}, not of {group}, where the "
            f"release registers {artifact}"
        )
    try:
        package = sagemaker.describe_model_package(ModelPackageName=package_arn)
    except Exception as error:
        if not _not_found(error):
            raise
        return f"{key} = {pin!r}: model package {package_arn} ({recorded}) does not exist"
    metadata = package.get("CustomerMetadataProperties", {})
    registered = (metadata.get("artifact"), metadata.get("pin"))
    if registered != (artifact, pin):
        return (
            f"{key} = {pin!r}: model package {package_arn} ({recorded}) registered {registered[0]} "
            f"{registered[1]!r}, not this pin; record the package the release registered for it"
        )
    return status_problem(key, pin, PinPackage(package_arn, package.get("ModelApprovalStatus", DEFAULT_STATUS)))


def status_problem(key: str, pin: str, package: PinPackage) -> str | None:
    """One line when ``package``'s approval status keeps ``key = pin`` from deploying, else None: a Rejected package
    says it was rejected (approving it is not the way out), a pending one says how to approve it."""
    if package.approval_status == REJECTED:
        return (
            f"{key} = {pin!r}: model package {package.arn} was rejected (ModelApprovalStatus {REJECTED}): a rejected "
            "version may not deploy; pin another version"
        )
    if package.approval_status != APPROVED:
        return (
            f"{key} = {pin!r}: model package {package.arn} is {package.approval_status}, not {APPROVED}; approve it "
            "(aws sagemaker update-model-package --model-approval-status Approved) or pin an approved version"
        )
    return None


def unreleased_problem(key: str, pin: str, group: str, artifact: str) -> str:
    """The line for a pin no package in ``group`` registers: it did not pass the release's quality gates."""
    return (
        f"{key} = {pin!r}: no model package in {group} registers it (not released through the quality gates); run "
        f"`mangaassist-ops release` for {artifact} {pin.split('/', 1)[0]} (docs/model-release.md)"
    )
