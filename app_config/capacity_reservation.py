"""Reserved capacity for a dated event: a variant that runs on an ML capacity reservation or a training plan.

SageMaker can place an endpoint's instances in reserved capacity (``ProductionVariant.CapacityReservationConfig``:
``MlReservationArn`` and ``CapacityReservationPreference`` = ``capacity-reservations-only``, the only value; SageMaker
API reference, ProductionVariantCapacityReservationConfig). What AWS says of it, checked at synth where config can
tell (``check_reservations``):

* "You can use exactly one plan per inference endpoint" (developer guide, "Deploy an inference endpoint using
  the API"): every variant that reserves names the same ARN;
* the variant's ``InstanceType`` "must match the InstanceType of your training plan": the config states the
  reservation's type, and it must be the variant's, with no ``instance_pools`` (instances launch only into the
  reservation: a fallback type could never start);
* "If no capacity is available, the instances fail to launch": the variants on it may never ask for more
  instances than it holds;
* "When the training plan reservation expires ... the endpoint stops serving traffic and invocations fail with
  a capacity error" (developer guide, "Using training plans for SageMaker inference endpoints"): a reservation
  that has ended stops synth, so does a dated event of the variant that outlasts it, and the alarm topic gets a
  warning ``warn_before_end_h`` hours before the end (``cdk_constructs/observability/reservation_expiry.py``).

What config cannot tell, the plan's status (``Active`` to serve) and its price, the operator states or checks:
``upfront_fee_usd`` is what ``make plan`` prints as its cost.
"""

import datetime as dt
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from app_config.base import ConfigModel, InstanceType

if TYPE_CHECKING:
    from app_config.root import AppConfig

RESERVATION_ARN = r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:[a-z0-9\-]{1,14}/.+$"
"""SageMaker's pattern for ``MlReservationArn`` (API reference): an ``ml-reservation/...`` or ``training-plan/...``."""

CapacityReservationPreference = Literal["capacity-reservations-only"]


class CapacityReservationConfig(ConfigModel):
    """The reservation a variant runs on, from ``starts_at`` to ``ends_at`` in ``scaling.timezone``."""

    ml_reservation_arn: str = Field(
        pattern=RESERVATION_ARN,
        min_length=20,
        max_length=258,
        description=(
            "MlReservationArn: the ML capacity reservation or training plan (target resource 'endpoint') the variant "
            "runs on, e.g. arn:aws:sagemaker:us-east-1:123456789012:training-plan/release-day. One per endpoint."
        ),
    )
    instance_type: InstanceType = Field(
        description="The reservation's instance type; must be the variant's instance_type (AWS: they must match)."
    )
    instance_count: int = Field(ge=1, le=100, description="Instances the reservation holds.")
    starts_at: dt.datetime = Field(
        description="When the reservation starts, YYYY-MM-DDTHH:MM in scaling.timezone (deploy after it: the plan "
        "must be Active)."
    )
    ends_at: dt.datetime = Field(
        description="When it ends, YYYY-MM-DDTHH:MM in scaling.timezone: the variant stops serving then."
    )
    upfront_fee_usd: float = Field(
        ge=0,
        le=10_000_000,
        description="What the reservation costs, USD, paid whether used or not (the plan's quote): make plan's cost.",
    )
    preference: CapacityReservationPreference = Field(
        default="capacity-reservations-only",
        description="CapacityReservationPreference: launch only into the reservation (the API's only value).",
    )
    warn_before_end_h: int = Field(
        default=48,
        ge=1,
        le=720,
        description=(
            "Hours before ends_at the alarm topic is told the variant will stop serving. Default 48: a working day "
            "to redeploy the variant off the reservation (a blue/green update of the fleet) with a day to spare."
        ),
    )

    @model_validator(mode="after")
    def _ends_after_it_starts(self) -> "CapacityReservationConfig":
        if self.ends_at <= self.starts_at:
            raise ValueError(
                f"ends_at = {self.ends_at:%Y-%m-%dT%H:%M} must be after starts_at = {self.starts_at:%Y-%m-%dT%H:%M}"
            )
        return self

    @property
    def hours(self) -> float:
        """Its length, hours."""
        return (self.ends_at - self.starts_at).total_seconds() / 3600

    @property
    def warn_at(self) -> dt.datetime:
        """When the alarm topic is warned (naive, ``scaling.timezone``)."""
        return self.ends_at - dt.timedelta(hours=self.warn_before_end_h)


def check_reservations(config: "AppConfig", now: dt.datetime) -> None:
    """AWS's rules for the variants on a reservation (module docstring), ``now`` naive in ``scaling.timezone``.

    Raises:
        ValueError: one line naming the keys, their values and what is allowed.
    """
    serving = config.serving
    reservations = serving.reservations()
    if not reservations:
        return
    keys = [f"serving.{key}.capacity_reservation" for key in reservations]
    if serving.hosts_inference_components:
        raise ValueError(f"{keys[0]}: reserved capacity is planned for serving.mode = variants only")
    arns = sorted({reservation.ml_reservation_arn for reservation in reservations.values()})
    if len(arns) > 1:
        raise ValueError(
            f"{', '.join(keys)} name {len(arns)} reservations ({', '.join(arns)}): SageMaker takes exactly one plan "
            "per endpoint"
        )
    for key, reservation in reservations.items():
        _check_variant(config, key, reservation, now)
    wanted = {key: getattr(serving, key).max_capacity for key in reservations}
    held = next(iter(reservations.values())).instance_count
    if sum(wanted.values()) > held:
        raise ValueError(
            f"{' + '.join(f'serving.{key}.max_capacity' for key in wanted)} = {sum(wanted.values())}: above the {held} "
            "instances the reservation holds (capacity_reservation.instance_count); instances beyond it fail to launch"
        )


def _check_variant(config: "AppConfig", key: str, reservation: CapacityReservationConfig, now: dt.datetime) -> None:
    """One reserving variant: its type is the reservation's alone, the reservation has not ended, and none of the
    variant's dated events outlasts it."""
    shape = getattr(config.serving, key)
    where = f"serving.{key}.capacity_reservation"
    if reservation.instance_type != shape.instance_type or shape.instance_pools:
        pools = ", instance_pools set" if shape.instance_pools else ""
        raise ValueError(
            f"{where}.instance_type = {reservation.instance_type}: the variant must run on the reservation's type "
            f"alone (serving.{key}.instance_type = {shape.instance_type}{pools}); instances launch only into it"
        )
    if reservation.ends_at <= now:
        raise ValueError(
            f"{where}.ends_at = {reservation.ends_at:%Y-%m-%dT%H:%M}: the reservation has ended, and a variant on it "
            "serves nothing; remove the reservation to run on demand"
        )
    events = getattr(config.scaling, key).dated_events if key != "shadow" else ()
    for event in events:
        if event.end > reservation.ends_at:
            raise ValueError(
                f"scaling.{key}.dated_events.{event.name} ends {event.end:%Y-%m-%d %H:%M}, after {where}.ends_at = "
                f"{reservation.ends_at:%Y-%m-%dT%H:%M}: the variant stops serving when the reservation ends"
            )
