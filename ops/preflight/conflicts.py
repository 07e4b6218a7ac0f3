"""Conflict checks: the endpoint name, a serving-mode switch, and log groups left by an earlier deploy.

Sources: SageMaker ``DescribeEndpoint``, ``ListTags`` (CloudFormation tags every resource it creates
with ``aws:cloudformation:stack-name``) and ``DescribeEndpointConfig`` (an endpoint config hosting
inference components has ``ExecutionRoleArn`` and production variants without ``ModelName``);
CloudWatch Logs ``DescribeLogGroups``. The serving stack sets up ``/aws/sagemaker/Endpoints/<endpoint>``
(and in inference_components mode ``/aws/sagemaker/InferenceComponents/<base component>``) through
CDK's LogRetention, which adopts a group an earlier deploy left (retained on delete when
observability.retain_logs_on_delete is set): such a group is reported, not refused.
"""

from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from app_config.root import AppConfig
from ops.exit_codes import ExitCode
from ops.preflight.report import Finding, error, fail, ok, skip
from serving_contract.components import base_component_name
from serving_contract.log_groups import component_log_group_name, endpoint_log_group_name

CONFLICT = ExitCode.PREFLIGHT_CONFLICT
STACK_NAME_TAG: Final = "aws:cloudformation:stack-name"


@dataclass(frozen=True)
class DeployedEndpoint:
    """What the endpoint check learned: None fields when the endpoint does not exist or was not read."""

    exists: bool | None  # None: DescribeEndpoint failed
    owned: bool = False


def _endpoint_missing(exc: ClientError) -> bool:
    # SageMaker answers ValidationException "Could not find endpoint ..." for an unknown name.
    details = exc.response.get("Error", {})
    return details.get("Code") == "ValidationException" and "Could not find" in details.get("Message", "")


def deployed_mode(endpoint_config: dict[str, Any]) -> str:
    """``inference_components`` or ``variants``, from a DescribeEndpointConfig answer."""
    variants = endpoint_config.get("ProductionVariants", [])
    hosts_components = "ExecutionRoleArn" in endpoint_config and all("ModelName" not in v for v in variants)
    return "inference_components" if hosts_components else "variants"


def check_endpoint(config: AppConfig, sagemaker: Any) -> tuple[list[Finding], DeployedEndpoint]:
    """serving.endpoint_name is free, or this app's Serving stack owns it in the configured mode."""
    name, stack = config.endpoint_name, config.stack_name("Serving")
    try:
        endpoint = sagemaker.describe_endpoint(EndpointName=name)
    except ClientError as exc:
        if _endpoint_missing(exc):
            return [ok("endpoint", f"{name}: no such endpoint yet; the deploy creates it")], DeployedEndpoint(False)
        return [error("endpoint", f"endpoint {name}", exc)], DeployedEndpoint(None)
    except BotoCoreError as exc:
        return [error("endpoint", f"endpoint {name}", exc)], DeployedEndpoint(None)
    try:
        tags = sagemaker.list_tags(ResourceArn=endpoint["EndpointArn"]).get("Tags", [])
        owner = next((t["Value"] for t in tags if t["Key"] == STACK_NAME_TAG), None)
        if owner != stack:
            shown = f"stack {owner}" if owner else "not a CloudFormation stack's"
            return [
                fail(
                    "endpoint",
                    f"endpoint {name} exists and is not this app's ({shown}; this app's is {stack}): pick another "
                    "serving.endpoint_name",
                    CONFLICT,
                )
            ], DeployedEndpoint(True)
        described = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    except (ClientError, BotoCoreError) as exc:
        return [error("endpoint", f"endpoint {name}", exc)], DeployedEndpoint(True)
    mode = deployed_mode(described)
    if mode != config.serving.mode:
        return [
            fail(
                "endpoint",
                f"endpoint {name} runs serving.mode {mode}, the config says {config.serving.mode}: a mode switch "
                f"needs the endpoint re-created: `npx cdk destroy {stack}` (or change serving.endpoint_name), "
                "then deploy",
                CONFLICT,
            )
        ], DeployedEndpoint(True, owned=True)
    return [ok("endpoint", f"{name}: owned by {stack}, serving.mode {mode}")], DeployedEndpoint(True, owned=True)


def log_group_names(config: AppConfig) -> list[str]:
    """The log groups the serving stack creates under a fixed name."""
    names = [endpoint_log_group_name(config.endpoint_name)]
    if config.serving.hosts_inference_components:
        names.append(component_log_group_name(base_component_name(config.endpoint_name)))
    return names


def check_log_groups(config: AppConfig, logs: Any, endpoint: DeployedEndpoint) -> list[Finding]:
    """Whether a log group of the endpoint's names exists while the endpoint does not (adopted, reported)."""
    if endpoint.exists is None:
        return [skip("log-groups", "not checked: the endpoint check could not run")]
    if endpoint.exists:
        return [skip("log-groups", f"endpoint {config.endpoint_name} exists, so its log groups may too")]
    findings = []
    for name in log_group_names(config):
        try:
            pages = logs.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=name)
            found = any(g["logGroupName"] == name for page in pages for g in page.get("logGroups", []))
        except (ClientError, BotoCoreError) as exc:
            findings.append(error("log-groups", f"log group {name}", exc))
            continue
        if found:
            days = config.observability.log_retention_days
            findings.append(
                ok(
                    "log-groups",
                    f"{name}: left by an earlier deploy while endpoint {config.endpoint_name} does not exist; the "
                    f"stack adopts it (its events stay, retention set to {days} days)",
                )
            )
        else:
            findings.append(ok("log-groups", f"{name}: absent"))
    return findings
