"""Which model package registered a pin, and whether it is Approved: only approved versions deploy.

The release pipelines (cdk_constructs/release/) register each version that passed the quality gates in
its kind's model package group with the description ``<artifact> <pin>`` and the customer metadata
``artifact``, ``version``, ``pin``. A pin deploys only when such a package exists and its
``ModelApprovalStatus`` is ``Approved``. Three parties ask, with the same lines:

- the Serving stack's ``Custom::ApprovedPins`` resource (cdk_constructs/approval/), which fails the deploy
  before the endpoint config changes (its Lambda bundles this module);
- ``ops preflight`` and ``ops pin_artifacts`` (ops/model_packages.py), before anything is deployed.

Read-only: ListModelPackages (newest first, paginated) and DescribeModelPackage. Standard library only
(the Lambda runtime's boto3 client is passed in).
"""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

APPROVED: Final = "Approved"
DEFAULT_STATUS: Final = "PendingManualApproval"
"""CreateModelPackage's default ModelApprovalStatus (botocore's SageMaker model): a package without one is pending."""


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


def find_package(sagemaker: Any, group: str, artifact: str, pin: str) -> PinPackage | None:
    """The newest package in ``group`` that registered ``artifact`` at ``pin``, or None.

    The list's description (``<artifact> <pin>``) picks candidates; DescribeModelPackage's customer
    metadata confirms them (a description is free text anyone can edit).
    """
    for summary in _summaries(sagemaker, group):
        if summary.get("ModelPackageDescription") != f"{artifact} {pin}":
            continue
        package = sagemaker.describe_model_package(ModelPackageName=summary["ModelPackageArn"])
        metadata = package.get("CustomerMetadataProperties", {})
        if metadata.get("artifact") == artifact and metadata.get("pin") == pin:
            return PinPackage(package["ModelPackageArn"], package.get("ModelApprovalStatus", DEFAULT_STATUS))
    return None


def pin_problem(sagemaker: Any, *, group: str, artifact: str, key: str, pin: str) -> str | None:
    """One line naming the pin ``key = pin`` and why it may not deploy, or None when its package is Approved."""
    package = find_package(sagemaker, group, artifact, pin)
    if package is None:
        return (
            f"{key} = {pin!r}: no model package in {group} registers it (not released through the quality "
            f"gates); run `mangaassist-ops release` for {artifact} {pin.split('/', 1)[0]} (docs/model-release.md)"
        )
    if package.approval_status != APPROVED:
        return (
            f"{key} = {pin!r}: model package {package.arn} is {package.approval_status}, not {APPROVED}; approve "
            "it (aws sagemaker update-model-package --model-approval-status Approved) or pin an approved version"
        )
    return None
