"""Keep the scheduled capacity bounds through a deploy (``runtime/`` beside this module).

A scalable target in CloudFormation carries the variant's hard bounds, and every create or
update of it registers those, overriding the bounds the active scheduled action set (min 8
before a release, say) until the next action fires. A ``Custom::ScheduledCapacity`` after
each target re-registers the bounds the schedule has in force at deploy time.
"""

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from app_config.dated_events import DatedEventConfig
from cdk_constructs.common.custom_resource_handlers import CustomResourceHandlers, Handler
from cdk_constructs.common.nag import acknowledge, pseudo_placeholder
from planning.weekly_plan import Bounds

RESOURCE_TYPE = "Custom::ScheduledCapacity"
SCALABLE_DIMENSION = "sagemaker:variant:DesiredInstanceCount"

RUNTIME = Path(__file__).resolve().parent / "runtime"
"""The custom resource's handlers: ``runtime/index.py`` beside this module (the Lambda asset)."""


class ScheduledCapacityKeeper(Construct):
    """One handler for the stack; :meth:`keep` adds a ``Custom::ScheduledCapacity`` per target.

    Attributes:
        handlers: the :class:`CustomResourceHandlers` of the handler (``index.on_event``), allowed
            to register SageMaker variant targets of this endpoint only.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        log_retention: logs.RetentionDays,
        log_removal_policy: cdk.RemovalPolicy,
    ) -> None:
        """
        Args:
            endpoint_name: the endpoint whose variants' targets this may re-register.
            log_retention / log_removal_policy: of the handler's and the provider framework's log groups.
        """
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.handlers = CustomResourceHandlers(
            # "Default": CDK leaves it out of logical ids, so the handler keeps the ids it had as this
            # construct's own child (CustomResourceHandlers).
            self,
            "Default",
            handler_dir=RUNTIME,
            on_event=Handler(
                "Handler",
                "on_event",
                "Re-registers the scheduled capacity bounds in force after a scalable target deploy",
            ),
            # One RegisterScalableTarget and the reads it makes: seconds.
            timeout=cdk.Duration.seconds(60),
            memory_mib=128,
            log_retention=log_retention,
            log_removal_policy=log_removal_policy,
        )
        role = self.handlers.on_event_role
        role.add_to_policy(
            iam.PolicyStatement(
                sid="RegisterVariantTargets",
                actions=["application-autoscaling:RegisterScalableTarget"],
                resources=["*"],
                conditions={
                    "StringEquals": {
                        "application-autoscaling:service-namespace": "sagemaker",
                        "application-autoscaling:scalable-dimension": SCALABLE_DIMENSION,
                    }
                },
            )
        )
        # What RegisterScalableTarget checks on the caller for a SageMaker variant (SageMaker
        # developer guide, "Auto scaling prerequisites"), scoped to this endpoint.
        role.add_to_policy(
            iam.PolicyStatement(
                sid="DescribeTheEndpoint",
                actions=[
                    "sagemaker:DescribeEndpoint",
                    "sagemaker:DescribeEndpointConfig",
                    "sagemaker:UpdateEndpointWeightsAndCapacities",
                ],
                resources=[
                    stack.format_arn(service="sagemaker", resource="endpoint", resource_name=endpoint_name),
                    stack.format_arn(service="sagemaker", resource="endpoint-config", resource_name="*"),
                ],
            )
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "RegisterScalableTarget takes no resource ARN for a target that exists under a generated id; the "
            "statement is limited to SageMaker variant targets by its service-namespace and scalable-dimension "
            "conditions.",
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::arn:{pseudo_placeholder(self, 'Partition')}:sagemaker:"
            f"{pseudo_placeholder(self, 'Region')}:<AWS::AccountId>:endpoint-config/*]",
            "The endpoint's config gets a generated name on every change; RegisterScalableTarget reads it.",
        )

    def keep(
        self,
        scope: Construct,
        construct_id: str,
        *,
        target: appscaling.ScalableTarget,
        resource_id: str,
        timeline: Sequence[Bounds],
        timezone: str,
        hard_bounds: tuple[int, int],
        dated_events: Sequence[DatedEventConfig] = (),
        lead_time_min: int = 0,
    ) -> cdk.CustomResource:
        """A ``Custom::ScheduledCapacity`` that runs after every create and update of ``target``.

        Args:
            target: the variant's scalable target (its scheduled actions are part of it).
            resource_id: ``endpoint/<endpoint>/variant/<variant>``.
            timeline: the week's bounds from ``weekly_plan.effective_bounds``.
            timezone: IANA name the scheduled actions fire in.
            hard_bounds: the target's template (min, max); a change re-registers the target,
                so it must re-run the handler too.
            dated_events: the variant's dated events (floors filled in): a deploy during one keeps
                its floor; ``lead_time_min`` before each start is when its lift fired.
        """
        events = [
            {
                "Name": event.name,
                "Lift": f"{event.start - dt.timedelta(minutes=lead_time_min):%Y-%m-%dT%H:%M}",
                "End": f"{event.end:%Y-%m-%dT%H:%M}",
                "MinCapacity": event.min_capacity,
            }
            for event in dated_events
        ]
        resource = cdk.CustomResource(
            scope,
            construct_id,
            service_token=self.handlers.service_token,
            resource_type=RESOURCE_TYPE,
            properties={
                "ServiceNamespace": "sagemaker",
                "ResourceId": resource_id,
                "ScalableDimension": SCALABLE_DIMENSION,
                "Timezone": timezone,
                "Timeline": [
                    {
                        "Start": bounds.start,
                        "MinCapacity": bounds.min_capacity,
                        "MaxCapacity": bounds.max_capacity,
                        "SetBy": bounds.set_by,
                    }
                    for bounds in timeline
                ],
                "HardBounds": list(hard_bounds),
                **({"DatedEvents": events} if events else {}),
            },
        )
        resource.node.add_dependency(target)
        return resource
