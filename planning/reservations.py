"""AWS's rules for the variants on reserved capacity, checked at synth (app_config/capacity_reservation.py lists
them and their sources): one plan per endpoint, the reservation's instance type alone, no more instances than it
holds, and since serving stops when it ends, neither an ended reservation nor a dated event that outlasts it.

Here rather than beside the config model: whether a reservation has ended depends on today's date, as the dated
events' past-date check does (``planning/checks.py`` passes ``now``).
"""

import datetime as dt

from app_config.capacity_reservation import CapacityReservationConfig
from app_config.root import AppConfig
from app_config.scaling import ScalingConfig
from app_config.serving import ServingConfig


def check_reservations(config: AppConfig, now: dt.datetime) -> None:
    """AWS's rules for the variants on a reservation (module docstring), ``now`` naive in ``scaling.timezone``.

    Raises:
        ValueError: one line naming the keys, their values and what is allowed.
    """
    serving = config.serving
    reservations = serving.reservations()
    if not reservations:
        return
    keys = [f"serving.{key}.capacity_reservation" for key in reservations]
    arns = sorted({reservation.ml_reservation_arn for reservation in reservations.values()})
    if len(arns) > 1:
        raise ValueError(
            f"{', '.join(keys)} name {len(arns)} reservations ({', '.join(arns)}): SageMaker takes exactly one plan "
            "per endpoint"
        )
    for key, reservation in reservations.items():
        _check_variant(serving, config.scaling, key, reservation, now)
    wanted = {key: getattr(serving, key).max_capacity for key in reservations}
    held = next(iter(reservations.values())).instance_count
    if sum(wanted.values()) > held:
        raise ValueError(
            f"{' + '.join(f'serving.{key}.max_capacity' for key in wanted)} = {sum(wanted.values())}: above the {held} "
            "instances the reservation holds (capacity_reservation.instance_count); instances beyond it fail to launch"
        )


def _check_variant(
    serving: ServingConfig,
    scaling: ScalingConfig,
    key: str,
    reservation: CapacityReservationConfig,
    now: dt.datetime,
) -> None:
    """One reserving variant: its type is the reservation's alone, the reservation has not ended, and none of the
    variant's dated events outlasts it."""
    shape = getattr(serving, key)
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
    events = getattr(scaling, key).dated_events if key != "shadow" else ()
    for event in events:
        if event.end > reservation.ends_at:
            raise ValueError(
                f"scaling.{key}.dated_events.{event.name} ends {event.end:%Y-%m-%d %H:%M}, after {where}.ends_at = "
                f"{reservation.ends_at:%Y-%m-%dT%H:%M}: the variant stops serving when the reservation ends"
            )
