"""On-demand prices of every instance type the config accepts, from one dated table.

``instance_prices.json`` beside this module holds, per instance type, the SageMaker real-time
inference (hosting) on-demand price in us-east-1, USD per instance-hour, with the source of
each figure and whether it is approximate (derived, not read from an AWS price). Its ``as_of``
dates the table. ``python -m devtools.refresh_prices`` (``make prices``) rewrites it from the
AWS Price List API when credentials exist; ``scaling.hourly_price_usd`` overrides single types
(another region, a negotiated price).

The capacity plan and the simulation read prices only through :func:`hourly_price`; synth
never does.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

PRICE_TABLE = Path(__file__).with_name("instance_prices.json")


@dataclass(frozen=True, slots=True)
class InstancePrice:
    """One instance type's price.

    Attributes:
        instance_type: e.g. ``ml.g5.xlarge``.
        usd_per_hour: on-demand price of one instance-hour, USD.
        source: where the figure comes from (a table row's source, or the override key).
        approximate: True when the figure is derived rather than read from an AWS price.
    """

    instance_type: str
    usd_per_hour: float
    source: str
    approximate: bool


@cache
def price_table() -> dict[str, Any]:
    """``instance_prices.json``, parsed once: ``as_of``, ``region``, ``offer`` and ``prices``."""
    data: dict[str, Any] = json.loads(PRICE_TABLE.read_text())
    return data


def hourly_price(instance_type: str, overrides: Mapping[str, float] | None = None) -> InstancePrice:
    """The on-demand price of one ``instance_type`` instance-hour.

    ``overrides`` (``scaling.hourly_price_usd``) wins over the table.

    Raises:
        ValueError: one line naming the type and the table, when neither has a price (an
            unpriced type is an error, never a blank in a plan).
    """
    if overrides and instance_type in overrides:
        source = f"scaling.hourly_price_usd.{instance_type}"
        return InstancePrice(instance_type, overrides[instance_type], source, False)
    table = price_table()
    row = table["prices"].get(instance_type)
    if row is None:
        raise ValueError(
            f"no price for {instance_type} in {PRICE_TABLE.name} (as of {table['as_of']}); add it with make prices "
            f"or -c 'scaling.hourly_price_usd={{\"{instance_type}\": USD}}'"
        )
    return InstancePrice(instance_type, float(row["usd_per_hour"]), str(row["source"]), bool(row["approximate"]))
