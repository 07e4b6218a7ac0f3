"""ops.pin_artifacts reads CURRENT pointers into a config block (Stubber-validated S3 calls)."""

import io

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from app_config.image_build import ArtifactSetConfig
from ops.pin_artifacts import current_pins

SHA = "a" * 64


def _body(text: str) -> StreamingBody:
    return StreamingBody(io.BytesIO(text.encode()), len(text.encode()))


def test_pointers_become_a_valid_artifact_set() -> None:
    s3 = boto3.client("s3", region_name="ap-northeast-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(s3) as stub:
        stub.add_response(
            "get_object", {"Body": _body(f"v2/{SHA}\n")}, {"Bucket": "b", "Key": "base-models/llama/CURRENT"}
        )
        stub.add_response(
            "get_object", {"Body": _body(f"v4/{SHA}")}, {"Bucket": "b", "Key": "adapters/manga_domain_v3/CURRENT"}
        )
        pins = current_pins(s3, bucket="b", base_model="llama", adapters=["manga_domain_v3"])
    assert pins == {"base_model": f"v2/{SHA}", "adapters": {"manga_domain_v3": f"v4/{SHA}"}}
    assert ArtifactSetConfig.model_validate(pins).adapters["manga_domain_v3"] == f"v4/{SHA}"


def test_a_malformed_pointer_names_the_object() -> None:
    s3 = boto3.client("s3", region_name="ap-northeast-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(s3) as stub:
        stub.add_response("get_object", {"Body": _body("v2")}, {"Bucket": "b", "Key": "base-models/llama/CURRENT"})
        with pytest.raises(SystemExit) as info:
            current_pins(s3, bucket="b", base_model="llama", adapters=[])
    assert (
        str(info.value)
        == "s3://b/base-models/llama/CURRENT: pointer 'v2': must be '<version>/<64 lowercase hex sha256>'"
    )
