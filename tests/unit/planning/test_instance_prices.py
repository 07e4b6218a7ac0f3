"""The dated price table, its one lookup and the Price List refresher (botocore Stubber)."""

import datetime
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from devtools import refresh_prices
from planning import instance_prices
from planning.gpu_instances import INSTANCE_GPUS


def _product(instance: str, usage: str, usd: str, component: str = "Hosting") -> str:
    """One ``GetProducts`` PriceList entry, in the shape the API returns (a JSON string)."""
    sku, term, rate = "JRTCKX9A2QZ8E7N3", "JRTCKXETXF", "6YS6EN2CT7"
    return json.dumps(
        {
            "product": {
                "productFamily": "ML Instance",
                "attributes": {
                    "regionCode": "us-east-1",
                    "vCpu": "4",
                    "instanceName": instance,
                    "usagetype": usage,
                    "locationType": "AWS Region",
                    "gpu": "1",
                    "computeType": "GPU",
                    "location": "US East (N. Virginia)",
                    "servicename": "Amazon SageMaker",
                    "component": component,
                    "operation": "RunInstance",
                    "servicecode": "AmazonSageMaker",
                    "instanceType": f"{instance}-{component}",
                },
                "sku": sku,
            },
            "serviceCode": "AmazonSageMaker",
            "terms": {
                "OnDemand": {
                    f"{sku}.{term}": {
                        "priceDimensions": {
                            f"{sku}.{term}.{rate}": {
                                "unit": "Hrs",
                                "endRange": "Inf",
                                "description": f"${usd} per On Demand ML {component} {instance} in US East",
                                "appliesTo": [],
                                "rateCode": f"{sku}.{term}.{rate}",
                                "beginRange": "0",
                                "pricePerUnit": {"USD": usd},
                            }
                        },
                        "sku": sku,
                        "effectiveDate": "2026-11-01T00:00:00Z",
                        "offerTermCode": term,
                        "termAttributes": {},
                    }
                }
            },
            "version": "20261105212151",
            "publicationDate": "2026-11-05T21:21:51Z",
        }
    )


def test_every_accepted_instance_type_has_a_price_and_a_source() -> None:
    table = instance_prices.price_table()
    datetime.date.fromisoformat(table["as_of"])
    assert set(table["prices"]) == set(INSTANCE_GPUS)
    for name in INSTANCE_GPUS:
        price = instance_prices.hourly_price(name)
        assert price.usd_per_hour > 0, name
        assert price.source, name
        # A derived price says so in its source.
        assert price.approximate == price.source.startswith("APPROXIMATE"), name


def test_override_wins_over_the_table() -> None:
    price = instance_prices.hourly_price("ml.g5.xlarge", {"ml.g5.xlarge": 2.0})
    assert (price.usd_per_hour, price.source) == (2.0, "scaling.hourly_price_usd.ml.g5.xlarge")
    assert instance_prices.hourly_price("ml.g5.xlarge").usd_per_hour == 1.4084


def test_an_unpriced_type_is_a_one_line_error() -> None:
    with pytest.raises(ValueError) as error:
        instance_prices.hourly_price("ml.g7e.2xlarge")
    assert str(error.value) == (
        "no price for ml.g7e.2xlarge in instance_prices.json (as of 2026-11-26); add it with make prices or "
        "-c 'scaling.hourly_price_usd={\"ml.g7e.2xlarge\": USD}'"
    )


def _stubbed_client(pages: list[dict[str, Any]]) -> tuple[Any, Stubber]:
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
    stubber = Stubber(client)
    filters = refresh_prices.hosting_filters("us-east-1")
    for index, page in enumerate(pages):
        expected: dict[str, Any] = {"ServiceCode": "AmazonSageMaker", "Filters": filters, "FormatVersion": "aws_v1"}
        if index:
            expected["NextToken"] = f"token-{index}"
        stubber.add_response("get_products", page, expected)
    return client, stubber


def test_refresh_reads_hosting_prices_across_pages_and_keeps_unlisted_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pages = [
        {
            "FormatVersion": "aws_v1",
            "PriceList": [
                _product("ml.g5.xlarge", "USE1-Host:ml.g5.xlarge", "1.4500000000"),
                # Asynchronous inference of the same instance name: not a hosting row.
                _product("ml.g5.xlarge", "USE1-AsyncInf:ml.g5.xlarge", "9.9900000000", component="AsyncInference"),
                _product("ml.m5.xlarge", "USE1-Host:ml.m5.xlarge", "0.2300000000"),  # not accepted by the config
            ],
            "NextToken": "token-1",
        },
        {
            "FormatVersion": "aws_v1",
            "PriceList": [_product("ml.g6e.xlarge", "USE1-Host:ml.g6e.xlarge", "2.6100000000")],
        },
    ]
    client, stubber = _stubbed_client(pages)
    out = tmp_path / "instance_prices.json"
    monkeypatch.setattr(refresh_prices, "PRICE_TABLE", out)
    with stubber:
        assert refresh_prices.main([], client=client) == 0
    stubber.assert_no_pending_responses()
    table = json.loads(out.read_text())
    assert table["prices"]["ml.g5.xlarge"] == {
        "usd_per_hour": 1.45,
        "source": "AWS Price List API GetProducts AmazonSageMaker, usagetype USE1-Host:ml.g5.xlarge, "
        "effective 2026-11-01T00:00:00Z",
        "approximate": False,
    }
    assert table["prices"]["ml.g6e.xlarge"]["approximate"] is False
    assert "ml.m5.xlarge" not in table["prices"]
    # Unlisted types keep the previous row: the table never loses a price.
    assert table["prices"]["ml.p5.48xlarge"] == instance_prices.price_table()["prices"]["ml.p5.48xlarge"]
    assert set(table["prices"]) == set(INSTANCE_GPUS)
    captured = capsys.readouterr()
    assert "ml.g5.xlarge: 1.4084 -> 1.45" in captured.out
    assert "ml.p5.48xlarge: not in the Price List answer; kept 113.068" in captured.err


def test_dry_run_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client, stubber = _stubbed_client([{"FormatVersion": "aws_v1", "PriceList": []}])
    out = tmp_path / "instance_prices.json"
    monkeypatch.setattr(refresh_prices, "PRICE_TABLE", out)
    with stubber:
        assert refresh_prices.main(["--dry-run"], client=client) == 0
    assert not out.exists()
