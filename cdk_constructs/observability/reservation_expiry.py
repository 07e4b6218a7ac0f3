"""The warning before a variant's reserved capacity ends: it stops serving then.

A variant on an ML capacity reservation or a training plan launches instances only into it, and "when the
training plan reservation expires ... the endpoint stops serving traffic" (SageMaker developer guide, "Using
training plans for SageMaker inference endpoints"). Nothing SageMaker publishes crosses a threshold before
that, so the warning is a date: an EventBridge Scheduler one-time schedule (``at(...)`` in
``scaling.timezone``) that publishes one message to the alarm topic ``warn_before_end_h`` hours before the end,
the same topic and subscribers every alarm notifies.
"""

import datetime as dt

from aws_cdk import TimeZone
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from aws_cdk import aws_sns as sns
from constructs import Construct

from app_config.capacity_reservation import CapacityReservationConfig
from cdk_constructs.common.nag import acknowledge
from cdk_constructs.common.trust import account_service_principal
from serving_contract.outputs import pascal_case

SCHEDULER_PRINCIPAL = "scheduler.amazonaws.com"


class ReservationExpiryWarning(Construct):
    """A one-time schedule that tells ``topic`` a variant's reservation is about to end.

    Attributes:
        schedule: the ``AWS::Scheduler::Schedule``.
        role: what it publishes with: ``sns:Publish`` on ``topic``, and ``key`` for the topic and the message.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        variant_key: str,
        reservation: CapacityReservationConfig,
        timezone: str,
        topic: sns.ITopic,
        key: kms.IKey,
    ) -> None:
        """
        Args:
            endpoint_name: the endpoint, named in the message.
            variant_key: ``primary``, ``canary`` or ``shadow``: the variant on the reservation.
            reservation: ``serving.<variant>.capacity_reservation`` (its end and the warning's lead).
            timezone: ``scaling.timezone``, the zone its times are in.
            topic: the alarm topic.
            key: the topic's KMS key; it also encrypts the schedule's input (the message).
        """
        super().__init__(scope, construct_id)
        message = (
            f"{endpoint_name}: serving.{variant_key} runs on reserved capacity {reservation.ml_reservation_arn}, which "
            f"ends {reservation.ends_at:%Y-%m-%d %H:%M} {timezone} ({reservation.warn_before_end_h} h from now): the "
            f"variant stops serving then. Deploy it off the reservation before (remove serving.{variant_key}."
            "capacity_reservation; docs/scaling.md, 'Reserved capacity')."
        )
        # The target's role, here rather than the one SnsPublish makes at the stack's root: an id of this
        # construct, trusted by EventBridge Scheduler for this account only.
        self.role = iam.Role(self, "Role", assumed_by=account_service_principal(SCHEDULER_PRINCIPAL))
        self.schedule = scheduler.Schedule(
            self,
            "Schedule",
            description=f"Warns {endpoint_name}'s alarm topic before serving.{variant_key}'s reserved capacity ends",
            schedule=scheduler.ScheduleExpression.at(_wall_clock(reservation.warn_at), TimeZone.of(timezone)),
            target=targets.SnsPublish(topic, input=scheduler.ScheduleTargetInput.from_text(message), role=self.role),
            key=key,
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]",
            "Topic.grant_publish's pair for an encrypted topic (GenerateDataKey and GenerateDataKeyWithoutPlaintext), "
            "on the alarm topic's key alone.",
        )


def _wall_clock(moment: dt.datetime) -> dt.datetime:
    """``moment`` (naive, in the schedule's zone) as aws-cdk-lib's ``ScheduleExpression.at`` takes it: it writes the
    date's UTC fields into ``at(...)`` and the zone beside them, so the wall-clock time goes in labelled UTC (jsii
    refuses a naive datetime)."""
    return moment.replace(tzinfo=dt.UTC)


def construct_id_for(variant_key: str) -> str:
    """``PrimaryReservationExpiry``: one warning per reserving variant."""
    return f"{pascal_case(variant_key)}ReservationExpiry"
