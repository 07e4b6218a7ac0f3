"""Reserved capacity for a dated event: a variant that runs on an ML capacity reservation or a training plan.

SageMaker can place an endpoint's instances in reserved capacity (``ProductionVariant.CapacityReservationConfig``:
``MlReservationArn`` and ``CapacityReservationPreference`` = ``capacity-reservations-only``, the only value; SageMaker
API reference, ProductionVariantCapacityReservationConfig). What AWS says of it, checked at synth where config can
tell (``planning/reservations.py``, against today's date):

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
from typing import Literal

from pydantic import Field, model_validator

from app_config.base import ConfigModel, InstanceType

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
