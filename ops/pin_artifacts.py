"""Print the current CURRENT pointers as an ``image.build.<variant>`` config block.

Run by an operator with AWS credentials (never at synth):

    python -m ops.pin_artifacts --bucket mangaassist-model-artifacts \\
        --base-model llama-3-8b-instruct-awq --adapters manga_domain_v3,general_support_v2,jp_style_v1

prints ``{"base_model": "v1/<sha>", "adapters": {"manga_domain_v3": "v4/<sha>", ...}}``, the
value for ``image.build.canary`` (a new candidate) or ``image.build.primary`` (a promotion)
in cdk.json's stage overlay. Key layout: serving_contract/model_artifacts.py.
"""

import argparse
import json
import sys
from typing import Any

import boto3

from serving_contract.model_artifacts import parse_pointer, pointer_key


def read_pointer(s3: Any, bucket: str, key: str) -> str:
    """The validated ``{version}/{sha256}`` text of one pointer object."""
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode().strip()
    try:
        parse_pointer(body)
    except ValueError as error:
        raise SystemExit(f"s3://{bucket}/{key}: {error}") from None
    return str(body)


def current_pins(
    s3: Any,
    *,
    bucket: str,
    base_model: str,
    adapters: list[str],
    base_models_prefix: str = "base-models",
    adapters_prefix: str = "adapters",
) -> dict[str, Any]:
    """``{"base_model": pin, "adapters": {name: pin}}`` from the CURRENT pointers."""
    return {
        "base_model": read_pointer(s3, bucket, pointer_key(base_models_prefix, base_model)),
        "adapters": {name: read_pointer(s3, bucket, pointer_key(adapters_prefix, name)) for name in adapters},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ops.pin_artifacts", description=__doc__.splitlines()[0])
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--base-model", required=True, help="model.name, e.g. llama-3-8b-instruct-awq")
    parser.add_argument("--adapters", required=True, help="comma-separated adapter names (model.adapters)")
    parser.add_argument("--base-models-prefix", default="base-models")
    parser.add_argument("--adapters-prefix", default="adapters")
    args = parser.parse_args(argv)
    pins = current_pins(
        boto3.client("s3"),
        bucket=args.bucket,
        base_model=args.base_model,
        adapters=[a for a in args.adapters.split(",") if a],
        base_models_prefix=args.base_models_prefix,
        adapters_prefix=args.adapters_prefix,
    )
    json.dump(pins, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
