"""Canned ListModelPackages / DescribeModelPackage answers (botocore Stubber, real API shapes)."""

import datetime as dt
from typing import Any

from botocore.stub import Stubber

REGION = "us-east-1"
ACCOUNT = "123456789012"
NOW = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)


def package_arn(group: str, version: int) -> str:
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/{group}/{version}"


def add_model_package(
    stub: Stubber, group: str, artifact: str, pin: str, *, status: str = "Approved", version: int = 1
) -> str:
    """One registered package of ``artifact`` at ``pin`` in ``group``: its listing, then its description."""
    arn = package_arn(group, version)
    summary = {
        "ModelPackageGroupName": group,
        "ModelPackageVersion": version,
        "ModelPackageArn": arn,
        "ModelPackageDescription": f"{artifact} {pin}",
        "CreationTime": NOW,
        "ModelPackageStatus": "Completed",
        "ModelApprovalStatus": status,
    }
    stub.add_response(
        "list_model_packages",
        {"ModelPackageSummaryList": [summary]},
        {"ModelPackageGroupName": group, "SortBy": "CreationTime", "SortOrder": "Descending"},
    )
    stub.add_response(
        "describe_model_package", describe_package(group, artifact, pin, status, version), {"ModelPackageName": arn}
    )
    return arn


def describe_package(group: str, artifact: str, pin: str, status: str = "Approved", version: int = 1) -> dict[str, Any]:
    return {
        "ModelPackageName": group,
        "ModelPackageGroupName": group,
        "ModelPackageVersion": version,
        "ModelPackageArn": package_arn(group, version),
        "CreationTime": NOW,
        "ModelPackageStatus": "Completed",
        "ModelPackageStatusDetails": {"ValidationStatuses": []},
        "ModelApprovalStatus": status,
        "CustomerMetadataProperties": {"artifact": artifact, "version": pin.split("/", 1)[0], "pin": pin},
    }


def add_described(
    stub: Stubber, group: str, artifact: str, pin: str, *, status: str = "Approved", version: int = 1
) -> str:
    """DescribeModelPackage of the package ``version`` of ``group`` (what the deploy's lookup asks); its ARN."""
    arn = package_arn(group, version)
    stub.add_response(
        "describe_model_package", describe_package(group, artifact, pin, status, version), {"ModelPackageName": arn}
    )
    return arn


def add_no_package(stub: Stubber, group: str) -> None:
    stub.add_response(
        "list_model_packages",
        {"ModelPackageSummaryList": []},
        {"ModelPackageGroupName": group, "SortBy": "CreationTime", "SortOrder": "Descending"},
    )
