"""Which model package registered a pin, and whether it is Approved: only approved versions deploy.

The release pipelines (cdk_constructs/release/) register each version that passed the quality gates in
its kind's model package group (``app_config.release.model_package_group_name``) with the description
``<artifact> <pin>`` and the customer metadata ``artifact``, ``version``, ``pin``. A pin in effect
(``app_config.pins.pins_in_effect``) deploys only when such a package exists and its
``ModelApprovalStatus`` is ``Approved``; ``ops preflight`` and ``ops pin_artifacts`` refuse it otherwise,
with one line naming the pin and its status.

Read-only: ListModelPackages (newest first, paginated) and DescribeModelPackage.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from app_config.pins import PinRef
from app_config.release import model_package_group_name
from app_config.root import AppConfig

APPROVED: Final = "Approved"


@dataclass(frozen=True)
class PinPackage:
    """The model package that registered one pin: its ARN and approval status."""

    arn: str
    approval_status: str


def pin_kind(config: AppConfig, ref: PinRef) -> tuple[str, str]:
    """``(release kind, artifact name)`` of a pin in effect: the base model or one adapter."""
    if ref.key.endswith(".base_model"):
        return "base_model", config.model.name
    return "adapter", ref.key.rsplit(".", 1)[-1]


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
            return PinPackage(package["ModelPackageArn"], package.get("ModelApprovalStatus", "PendingManualApproval"))
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


def approval_problem(sagemaker: Any, config: AppConfig, ref: PinRef) -> str | None:
    """:func:`pin_problem` of a pin in effect, in its kind's model package group."""
    kind, artifact = pin_kind(config, ref)
    group = model_package_group_name(config.project_name, config.stage, kind)
    return pin_problem(sagemaker, group=group, artifact=artifact, key=ref.key, pin=ref.pin)
