"""``ApprovedPins``: the custom resource that fails a deploy whose pinned versions are not Approved model packages
(the capability's map: ``cdk_constructs/approval/__init__.py``)."""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_constructs.common.custom_resource_handlers import CustomResourceHandlers, Handler
from cdk_constructs.common.nag import acknowledge, resource_arn_placeholder
from serving_contract import model_packages

RESOURCE_TYPE = "Custom::ApprovedPins"
RUNTIME = Path(__file__).resolve().parent / "runtime"
"""The handler's folder: the Lambda asset is it plus ``serving_contract/model_packages.py``."""
HANDLER_TIMEOUT_S = 120
"""One DescribeStacks and a DescribeModelPackage per pin, for a handful of pins: seconds; two minutes leave room for
botocore's retries under throttling."""


@dataclass(frozen=True)
class PinToApprove:
    """One pin the deploy reads: its config key, its text, where the release registers it, and the package the
    release registered for it (``release.registered_packages``; empty when none is recorded: the deploy refuses)."""

    key: str
    pin: str
    group: str
    artifact: str
    package: str = ""


class ApprovedPins(Construct):
    """A ``Custom::ApprovedPins`` resource over ``pins``: its create or update fails, naming each pin's model
    package and its status, unless every pin is an Approved model package (runtime/index.py says how a rollback
    to the pins deployed before still passes).

    Make what deploys the pins depend on :attr:`resource` (the serving stack does: the endpoint config, or the
    inference components), so CloudFormation runs the check first and stops the update before they change.

    Attributes:
        resource: the custom resource.
        handlers: its provider (one onEvent function, synchronous).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pins: Sequence[PinToApprove],
        log_retention: logs.RetentionDays,
        log_removal_policy: cdk.RemovalPolicy,
    ) -> None:
        """
        Args:
            pins: every pin the deploy reads (``app_config.pins.pins_in_effect``), each with its model package
                group and artifact name (``app_config.pins.pin_package_group``).
            log_retention / log_removal_policy: of the handler's log groups.
        """
        super().__init__(scope, construct_id)
        self.handlers = CustomResourceHandlers(
            self,
            "Handlers",
            handler_dir=RUNTIME,
            shared_modules=[model_packages],
            on_event=Handler("OnEvent", "on_event", "Fails the deploy on a pin not an Approved model package"),
            timeout=cdk.Duration.seconds(HANDLER_TIMEOUT_S),
            log_retention=log_retention,
            log_removal_policy=log_removal_policy,
        )
        self._grant_lookups(sorted({pin.group for pin in pins}))
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=self.handlers.service_token,
            resource_type=RESOURCE_TYPE,
            properties={
                "Pins": [
                    {"Key": p.key, "Group": p.group, "Artifact": p.artifact, "Pin": p.pin, "Package": p.package}
                    for p in pins
                ]
            },
        )

    def _grant_lookups(self, groups: Sequence[str]) -> None:
        """DescribeModelPackage on the groups' packages (no ListModelPackages: the handler describes the one package
        recorded for each pin), and DescribeStacks on this stack (is CloudFormation rolling it back?)."""
        role = self.handlers.on_event_role
        stack = cdk.Stack.of(self)
        role.add_to_policy(
            iam.PolicyStatement(
                sid="DescribeReleasedPackages",
                actions=["sagemaker:DescribeModelPackage"],
                resources=[
                    stack.format_arn(service="sagemaker", resource="model-package", resource_name=f"{group}/*")
                    for group in groups
                ],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadOwnStackStatus",
                actions=["cloudformation:DescribeStacks"],
                resources=[stack.stack_id],  # AWS::StackId: this stack, no other
            )
        )
        for group in groups:
            packages = resource_arn_placeholder(self, "sagemaker", f"model-package/{group}/*")
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::{packages}]",
                f"The versions the release registered in {group}: their numbers are assigned at registration, so "
                "only the group is known at synth.",
            )
