"""Account checks: the region, the CDK bootstrap stack, and SageMaker's instance quotas.

Sources:

- Region: botocore's bundled endpoint data (``Session.get_available_partitions`` and
  ``get_available_regions('sagemaker', partition)``), offline.
- Bootstrap: CloudFormation ``DescribeStacks`` on ``CDKToolkit``, output ``BootstrapVersion``.
  The version a deploy needs is each artifact's ``requiresBootstrapStackVersion`` in
  ``cdk.out/manifest.json``; without a synthesized assembly, 6: aws-cdk-lib 2.275.0's
  ``DefaultStackSynthesizer`` (core/lib/stack-synthesizers/default-synthesizer.js,
  ``MIN_BOOTSTRAP_STACK_VERSION=6``; its lookup role needs 8, but this app does no lookups).
- Quotas: Service Quotas ``ListServiceQuotas`` (ServiceCode ``sagemaker``), quota
  ``<instance type> for endpoint usage`` (the name SageMaker's ResourceLimitExceeded error cites:
  "The account-level service limit 'ml.g4dn.xlarge for endpoint usage' is 0 Instances"), and
  with ``serving.compile_cache.enabled`` ``<instance type> for processing job usage`` for the
  cache-making jobs;
  ``ListAWSDefaultServiceQuotas`` for a quota with no applied value.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from app_config.root import AppConfig, DeploymentEnvConfig
from app_config.serving import ServingConfig, VariantShape
from app_config.variants import deployed_variant_keys, existing_variant_keys
from ops.endpoint import output_values
from ops.exit_codes import ExitCode
from ops.preflight.report import Finding, error, fail, ok

ACCOUNT = ExitCode.PREFLIGHT_ACCOUNT
TOOLKIT_STACK: Final = "CDKToolkit"
BOOTSTRAP_VERSION_OUTPUT: Final = "BootstrapVersion"
DEFAULT_BOOTSTRAP_VERSION: Final = 6
"""aws-cdk-lib 2.275.0, DefaultStackSynthesizer: MIN_BOOTSTRAP_STACK_VERSION=6."""
QUOTA_SERVICE_CODE: Final = "sagemaker"
# Stable states; ROLLBACK_COMPLETE is a failed creation and DELETE_COMPLETE a deleted stack.
_USABLE_TOOLKIT = frozenset(
    {"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE", "IMPORT_ROLLBACK_COMPLETE"}
)


ENDPOINT_USAGE: Final = "endpoint"
PROCESSING_USAGE: Final = "processing job"


def quota_name(instance_type: str, usage: str = ENDPOINT_USAGE) -> str:
    """Service Quotas' name of a per-type instance quota: ``<type> for endpoint usage`` or
    ``<type> for processing job usage``."""
    return f"{instance_type} for {usage} usage"


def sagemaker_offered(region: str) -> bool:
    """Whether botocore's bundled endpoint data lists SageMaker in ``region`` (any partition)."""
    session = boto3.session.Session()
    return any(region in session.get_available_regions("sagemaker", p) for p in session.get_available_partitions())


def check_region(env: DeploymentEnvConfig, region: str | None) -> Finding:
    """The region is set, SageMaker is offered there (botocore's endpoint data), and it is env.region."""
    if region is None:
        return fail(
            "region",
            "no region: pass --region, set AWS_REGION or a profile's region, or set env.region in cdk.json",
            ACCOUNT,
        )
    if not sagemaker_offered(region):
        return fail(
            "region",
            f"{region}: SageMaker is not offered there (botocore's endpoint data); pick another region "
            "(--region or env.region)",
            ACCOUNT,
        )
    if env.region is not None and env.region != region:
        return fail(
            "region",
            f"env.region = {env.region!r} but the checks ran in {region}: the stacks deploy to env.region; "
            "drop --region or change env.region",
            ACCOUNT,
        )
    return ok("region", f"{region}: SageMaker is offered")


def required_bootstrap_version(cdk_out: Path) -> tuple[int, str]:
    """``(version, where it came from)``: the highest ``requiresBootstrapStackVersion`` in the
    assembly's manifest.json, or :data:`DEFAULT_BOOTSTRAP_VERSION` when there is no readable one."""
    path = cdk_out / "manifest.json"
    try:
        artifacts: Mapping[str, Any] = json.loads(path.read_text()).get("artifacts", {})
    except (OSError, ValueError, AttributeError):
        return DEFAULT_BOOTSTRAP_VERSION, "aws-cdk-lib's DefaultStackSynthesizer; no readable " + str(path)
    versions = [
        int(a["properties"]["requiresBootstrapStackVersion"])
        for a in artifacts.values()
        if isinstance(a, Mapping) and "requiresBootstrapStackVersion" in a.get("properties", {})
    ]
    if not versions:
        return DEFAULT_BOOTSTRAP_VERSION, f"aws-cdk-lib's DefaultStackSynthesizer; {path} names none"
    return max(versions), str(path)


def stack_missing(exc: ClientError) -> bool:
    """DescribeStacks' answer for a stack that does not exist (ValidationError "... does not exist")."""
    details = exc.response.get("Error", {})
    return details.get("Code") == "ValidationError" and "does not exist" in details.get("Message", "")


def check_bootstrap(cloudformation: Any, region: str, cdk_out: Path) -> Finding:
    """``CDKToolkit`` exists, is in a stable state, and its BootstrapVersion is high enough."""
    needed, source = required_bootstrap_version(cdk_out)
    action = f"run `npx cdk bootstrap` with this account's credentials in {region}"
    try:
        stacks = cloudformation.describe_stacks(StackName=TOOLKIT_STACK)["Stacks"]
    except ClientError as exc:
        if stack_missing(exc):
            return fail("bootstrap", f"stack {TOOLKIT_STACK} does not exist in {region}: {action}", ACCOUNT)
        return error("bootstrap", f"stack {TOOLKIT_STACK}", exc)
    except BotoCoreError as exc:
        return error("bootstrap", f"stack {TOOLKIT_STACK}", exc)
    stack = stacks[0]
    status = stack["StackStatus"]
    if status not in _USABLE_TOOLKIT:
        return fail("bootstrap", f"stack {TOOLKIT_STACK} is {status}, not usable: wait for it or {action}", ACCOUNT)
    outputs = output_values(stack)
    text = outputs.get(BOOTSTRAP_VERSION_OUTPUT, "")
    if not text.isdigit():
        return fail(
            "bootstrap", f"stack {TOOLKIT_STACK} has no numeric output {BOOTSTRAP_VERSION_OUTPUT}: {action}", ACCOUNT
        )
    if int(text) < needed:
        return fail(
            "bootstrap",
            f"{TOOLKIT_STACK} {BOOTSTRAP_VERSION_OUTPUT} = {text}, the stacks need >= {needed} ({source}): {action}",
            ACCOUNT,
        )
    return ok("bootstrap", f"{TOOLKIT_STACK} {status}, {BOOTSTRAP_VERSION_OUTPUT} {text} >= {needed} ({source})")


@dataclass(frozen=True)
class QuotaDemand:
    """Instances of one type that a config can hold at once.

    ``needed`` is what the quota must allow: in variants mode a blue/green update provisions a
    second full fleet at the current count before shifting traffic (SageMaker developer guide,
    "Blue/Green Deployments"), so twice ``reach``; in inference_components mode SageMaker's managed
    instance scaling stays within MaxInstanceCount, so ``reach``.
    """

    instance_type: str
    creation: int
    reach: int
    needed: int
    keys: str  # the config keys ``reach`` sums
    detail: str  # how needed follows from reach
    usage: str = ENDPOINT_USAGE


def quota_demands(serving: ServingConfig) -> list[QuotaDemand]:
    """Per instance type: initial count, the count the bounds allow, and what the quota must allow;
    then the cache-making jobs' processing instances (:func:`processing_demands`)."""
    return _endpoint_demands(serving) + processing_demands(serving)


def processing_demands(serving: ServingConfig) -> list[QuotaDemand]:
    """With ``serving.compile_cache.enabled``: one processing instance per model of each type, all
    of one deploy's jobs running at once (one model per variant and per instance type of its
    ``instance_pools``; one in inference_components mode)."""
    if not serving.compile_cache.enabled:
        return []
    by_type: dict[str, list[str]] = {}
    keys: list[str] = [*deployed_variant_keys(serving), *(["shadow"] if serving.shadow.enabled else [])]
    for key in keys:  # the shadow's model gets its cache too
        shape: VariantShape = getattr(serving, key)
        for priority, instance_type in enumerate(shape.instance_types, start=1):
            by_type.setdefault(instance_type, []).append(f"{key}.{shape.instance_type_field(priority)}")
    return [
        QuotaDemand(
            instance_type,
            len(names),
            len(names),
            len(names),
            " + ".join(f"serving.{name}" for name in names),
            "one cache-making job per model; serving.compile_cache.enabled = false needs none",
            PROCESSING_USAGE,
        )
        for instance_type, names in by_type.items()
    ]


def _endpoint_demands(serving: ServingConfig) -> list[QuotaDemand]:
    if serving.hosts_inference_components:
        components = serving.inference_components
        key = "serving.inference_components.max_instance_count"
        return [
            QuotaDemand(
                serving.primary.instance_type,
                components.initial_instance_count,
                components.max_instance_count,
                components.max_instance_count,
                f"{key} {components.max_instance_count}",
                "inference components: no second fleet",
            )
        ]
    by_type: dict[str, list[tuple[str, int, int]]] = {}
    # The shadow's instances count toward the endpoint quota as a variant's do (a fleet of its own).
    fleets: list[tuple[str, VariantShape]] = [(key, getattr(serving, key)) for key in existing_variant_keys(serving)]
    fleets += [("shadow", serving.shadow)] if serving.shadow.enabled else []
    for key, bounds in fleets:
        # With instance_pools SageMaker starts on the first type and may fill the variant with any of them.
        for priority, instance_type in enumerate(bounds.instance_types, start=1):
            initial = bounds.initial_instance_count if priority == 1 else 0
            by_type.setdefault(instance_type, []).append((key, initial, bounds.max_capacity))
    demands = []
    for instance_type, variants in by_type.items():
        reach = sum(m for _, _, m in variants)
        demands.append(
            QuotaDemand(
                instance_type,
                sum(i for _, i, _ in variants),
                reach,
                2 * reach,
                " + ".join(f"serving.{name}.max_capacity {m}" for name, _, m in variants),
                f"blue/green {2 * reach}",
            )
        )
    return demands


def _quota_values(service_quotas: Any, operation: str) -> dict[str, float]:
    paginator = service_quotas.get_paginator(operation)
    return {
        q["QuotaName"]: float(q["Value"])
        for page in paginator.paginate(ServiceCode=QUOTA_SERVICE_CODE)
        for q in page.get("Quotas", [])
        if "Value" in q
    }


def check_quotas(config: AppConfig, service_quotas: Any, region: str) -> list[Finding]:
    """One line per instance type: its endpoint quota against what the config can reach."""
    demands = quota_demands(config.serving)
    try:
        applied = _quota_values(service_quotas, "list_service_quotas")
        names = {quota_name(d.instance_type, d.usage) for d in demands}
        # ListServiceQuotas leaves out quotas that have no applied value; their AWS default applies.
        defaults = _quota_values(service_quotas, "list_aws_default_service_quotas") if names - set(applied) else {}
    except (ClientError, BotoCoreError) as exc:
        return [error("quotas", f"Service Quotas ({QUOTA_SERVICE_CODE})", exc)]
    findings = []
    for demand in demands:
        name = quota_name(demand.instance_type, demand.usage)
        value = applied.get(name, defaults.get(name))
        if value is None:
            findings.append(
                fail(
                    "quotas",
                    f"quota {name!r} not found in Service Quotas ({QUOTA_SERVICE_CODE}, {region}): the instance type "
                    f"may not be offered for {demand.usage}s there; pick another instance_type or region",
                    ACCOUNT,
                )
            )
            continue
        origin = "" if name in applied else " (AWS default)"
        text = (
            f"{name}: quota {value:g}{origin}, config reaches {demand.reach} "
            f"(creation {demand.creation}, {demand.detail})"
        )
        if value >= demand.needed:
            findings.append(ok("quotas", text))
            continue
        findings.append(
            fail(
                "quotas",
                f"{text} from {demand.keys}; request an increase to >= {demand.needed} in Service Quotas "
                f"({QUOTA_SERVICE_CODE}, {region}) or lower those values",
                ACCOUNT,
            )
        )
    return findings
