"""Refresh planning/instance_prices.json from the AWS Price List API (needs AWS credentials).

Asks ``pricing:GetProducts`` (service code ``AmazonSageMaker``; the API answers in us-east-1)
for the real-time inference products (``component`` = ``Hosting``) of one region, keeps the
on-demand hourly price of every instance type the config accepts, and rewrites the table with
today's date and each row's usage type and effective date as its source. Types the API does
not list keep their previous row (and are named on stderr), so the table never loses a price.
boto3's own paginator walks ``NextToken``; nothing here parses more than one product's JSON.

Usage::

    python -m devtools.refresh_prices                # write planning/instance_prices.json
    python -m devtools.refresh_prices --dry-run      # print the changes only
"""

import argparse
import datetime
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from planning.gpu_instances import INSTANCE_GPUS
from planning.instance_prices import PRICE_TABLE, price_table

SERVICE_CODE = "AmazonSageMaker"
PRICING_API_REGION = "us-east-1"
"""The Price List API's endpoints are us-east-1, eu-central-1 and ap-south-1; any answers for every region."""


def hosting_filters(region: str) -> list[dict[str, str]]:
    """``GetProducts`` filters: SageMaker real-time inference products of ``region``."""
    return [
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
        {"Type": "TERM_MATCH", "Field": "component", "Value": "Hosting"},
    ]


def on_demand_hourly(product: dict[str, Any]) -> float | None:
    """The on-demand USD price per hour of one Price List product, or None when it has none.

    Shape (``GetProducts``' ``PriceList`` entries, one JSON string each):
    ``terms.OnDemand.<sku.offerTermCode>.priceDimensions.<rateCode>.{unit, pricePerUnit.USD}``.
    """
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            if dimension.get("unit") == "Hrs" and "USD" in dimension.get("pricePerUnit", {}):
                return float(dimension["pricePerUnit"]["USD"])
    return None


def hosting_prices(pages: Iterable[dict[str, Any]], instance_types: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Table rows (``usd_per_hour``, ``source``, ``approximate``) of ``instance_types`` found in ``pages``.

    A product counts when its ``instanceName`` is one of ``instance_types`` and its ``usagetype`` is
    the hosting one (``<region prefix>-Host:<type>``), which excludes asynchronous inference and
    notebook rows of the same instance name.
    """
    wanted = set(instance_types)
    rows: dict[str, dict[str, Any]] = {}
    for page in pages:
        for entry in page.get("PriceList", []):
            product = json.loads(entry) if isinstance(entry, str) else entry
            attributes = product.get("product", {}).get("attributes", {})
            name = attributes.get("instanceName", "")
            usage = attributes.get("usagetype", "")
            if name not in wanted or not usage.endswith(f"Host:{name}"):
                continue
            price = on_demand_hourly(product)
            if price is None or price <= 0:
                continue
            effective = next(iter(product["terms"]["OnDemand"].values())).get("effectiveDate", "?")
            rows[name] = {
                "usd_per_hour": price,
                "source": f"AWS Price List API GetProducts {SERVICE_CODE}, usagetype {usage}, effective {effective}",
                "approximate": False,
            }
    return rows


def refreshed_table(
    previous: dict[str, Any], found: dict[str, dict[str, Any]], region: str, today: datetime.date
) -> dict[str, Any]:
    """``previous`` with ``found``'s rows replacing theirs, dated ``today``."""
    prices = dict(previous["prices"])
    prices.update(found)
    return {**previous, "as_of": today.isoformat(), "region": region, "prices": dict(sorted(prices.items()))}


def main(argv: Sequence[str] | None = None, client: Any = None) -> int:
    parser = argparse.ArgumentParser(prog="refresh_prices", description=__doc__.split("\n\n")[0])
    parser.add_argument("--region", default="us-east-1", help="region whose prices to read (default us-east-1)")
    parser.add_argument("--dry-run", action="store_true", help="print the changes, write nothing")
    args = parser.parse_args(argv)
    if client is None:  # pragma: no cover - needs credentials
        import boto3  # noqa: PLC0415 - only this command needs AWS

        client = boto3.client("pricing", region_name=PRICING_API_REGION)
    pages = client.get_paginator("get_products").paginate(
        ServiceCode=SERVICE_CODE, Filters=hosting_filters(args.region), FormatVersion="aws_v1"
    )
    found = hosting_prices(pages, INSTANCE_GPUS)
    previous = price_table()
    table = refreshed_table(previous, found, args.region, datetime.datetime.now(datetime.UTC).date())
    for name in sorted(INSTANCE_GPUS):
        old = previous["prices"].get(name, {}).get("usd_per_hour")
        new = table["prices"].get(name, {}).get("usd_per_hour")
        if name not in found:
            print(f"{name}: not in the Price List answer; kept {old}", file=sys.stderr)
        elif old != new:
            print(f"{name}: {old} -> {new}")
    if not args.dry_run:
        PRICE_TABLE.write_text(json.dumps(table, indent=1) + "\n")
        price_table.cache_clear()
        print(f"wrote {PRICE_TABLE.name}: {len(found)} of {len(INSTANCE_GPUS)} types from the Price List API")
    return 0


if __name__ == "__main__":
    sys.exit(main())
