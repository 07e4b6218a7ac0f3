"""Stubbed clients and canned AWS answers for the ``preflight`` tests (botocore Stubber, real API shapes)."""

import base64
import datetime as dt
import hashlib
import io
import tarfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.stub import Stubber

from app_config import AppConfig, load_config
from app_config.pins import pin_kind, pins_in_effect
from app_config.release import model_package_group_name
from ops.preflight import PreflightClients
from serving_contract.model_packages import parse_package_arn, registered_key
from tests.botocore_helpers import streaming_body
from tests.synth_helpers import SEEDS_G5
from tests.unit.ops.model_package_stubs import add_described, package_arn

REGION = "us-east-1"
ACCOUNT = "123456789012"
NOW = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
BUCKET = "mangaassist-model-artifacts"
SERVICES = ("cloudformation", "sagemaker", "service-quotas", "s3", "logs", "ecr")

# Files of one version folder, and the pin that covers them (artifact_sha256 by the documented
# manifest: "<sha256 hex>  <path>\n" per file in byte order of the paths, then sha256 of that).
FILES = {"config.json": b'{"r": 16}', "weights/model.safetensors": b"\x01" * 64}
SHA = {path: hashlib.sha256(data).hexdigest() for path, data in FILES.items()}
DIGEST = hashlib.sha256("".join(f"{SHA[p]}  {p}\n" for p in sorted(FILES)).encode()).hexdigest()
ADAPTERS = ("general_support_v2", "jp_style_v1", "manga_domain_v3")


def config(**overrides: Any) -> AppConfig:
    """The prod config on the seeds' fleet (ml.g5.xlarge, the quota names the stubs answer for), with
    context overrides (dotted keys or section blocks, as cdk.json holds them)."""
    return load_config({"stage": "prod", "stages": {"prod": {}, "dev": {}}, **SEEDS_G5, **overrides})


REGISTERED = {
    "llama-3-8b-instruct-awq/v1": package_arn("mangaassist-prod-base-model", 1),
    "manga_domain_v3/v3": package_arn("mangaassist-prod-adapters", 3),
    "general_support_v2/v2": package_arn("mangaassist-prod-adapters", 2),
    "jp_style_v1/v1": package_arn("mangaassist-prod-adapters", 1),
}
"""``release.registered_packages`` of :func:`pinned`'s versions: the packages the release registered for them."""


def pinned(**overrides: Any) -> AppConfig:
    """Every image.build.primary pin set to DIGEST (base model v1, adapters v3/v2/v1), each version's package
    recorded (:data:`REGISTERED`)."""
    versions = {"manga_domain_v3": "v3", "general_support_v2": "v2", "jp_style_v1": "v1"}
    primary = {"base_model": f"v1/{DIGEST}", "adapters": {a: f"{v}/{DIGEST}" for a, v in versions.items()}}
    uv_image = f"ghcr.io/astral-sh/uv:0.13.8@sha256:{DIGEST}"
    return config(
        **{
            "image.build.primary": primary,
            "image.build.artifacts_bucket_name": BUCKET,
            "image.build.uv_image": uv_image,
            "release.registered_packages": REGISTERED,
            **overrides,
        }
    )


def checksum(data: bytes) -> str:
    """S3's ChecksumSHA256: base64 of the raw digest."""
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def archive(files: Mapping[str, bytes]) -> bytes:
    """An adapter.tar.gz with ``files`` at its root, as docs/inference-components.md builds it (tar -C . .)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(f"./{path}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@dataclass
class PreflightStubs:
    clients: PreflightClients
    stubs: dict[str, Stubber]

    def factory(self, region: str | None, profile: str | None) -> PreflightClients:
        assert profile is None
        return self.clients

    def ecr_in(self, region: str) -> Any:
        """The stubbed ECR client (every region)."""
        assert self.clients.ecr_in is not None
        return self.clients.ecr_in(region)

    # --- cloudformation ------------------------------------------------------------------
    def stack(self, name: str, outputs: Mapping[str, str], status: str = "UPDATE_COMPLETE") -> None:
        stack = {
            "StackName": name,
            "StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{name}/1",
            "CreationTime": NOW,
            "StackStatus": status,
            "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()],
        }
        self.stubs["cloudformation"].add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": name})

    def no_stack(self, name: str) -> None:
        self.stubs["cloudformation"].add_client_error(
            "describe_stacks",
            service_error_code="ValidationError",
            service_message=f"Stack with id {name} does not exist",
            expected_params={"StackName": name},
        )

    def toolkit(self, version: str = "21", status: str = "UPDATE_COMPLETE") -> None:
        self.stack("CDKToolkit", {"BootstrapVersion": version, "BucketName": "cdk-hnb659fds-assets"}, status)

    # --- service quotas ------------------------------------------------------------------
    def quotas(self, values: Mapping[str, float], operation: str = "list_service_quotas") -> None:
        quotas = [
            {"ServiceCode": "sagemaker", "QuotaName": name, "QuotaCode": f"L-{index:08X}", "Value": value}
            for index, (name, value) in enumerate(values.items())
        ]
        self.stubs["service-quotas"].add_response(operation, {"Quotas": quotas}, {"ServiceCode": "sagemaker"})

    # --- s3 ----------------------------------------------------------------------------
    def listing(self, prefix: str, keys: Mapping[str, bytes], bucket: str = BUCKET) -> None:
        contents = [{"Key": k, "Size": len(v), "LastModified": NOW} for k, v in keys.items()]
        response: dict[str, Any] = {"KeyCount": len(contents), "IsTruncated": False}
        if contents:
            response["Contents"] = contents
        self.stubs["s3"].add_response("list_objects_v2", response, {"Bucket": bucket, "Prefix": prefix})

    def head(self, key: str, data: bytes, kind: str | None = "FULL_OBJECT") -> None:
        response: dict[str, Any] = {"ContentLength": len(data)}
        if kind == "FULL_OBJECT":
            response |= {"ChecksumSHA256": checksum(data), "ChecksumType": kind}
        elif kind == "COMPOSITE":
            response |= {"ChecksumSHA256": checksum(data) + "-3", "ChecksumType": kind}
        params = {"Bucket": BUCKET, "Key": key, "ChecksumMode": "ENABLED"}
        self.stubs["s3"].add_response("head_object", response, params)

    def get(self, key: str, data: bytes) -> None:
        body = streaming_body(data)
        self.stubs["s3"].add_response(
            "get_object", {"Body": body, "ContentLength": len(data)}, {"Bucket": BUCKET, "Key": key}
        )

    def approved(self, config: AppConfig) -> None:
        """Every non-placeholder pin in effect: its recorded package, Approved (the approvals check)."""
        for ref in pins_in_effect(config):
            if not ref.placeholder:
                kind, artifact = pin_kind(config.model, ref)
                group = model_package_group_name(config.project_name, config.stage, kind)
                arn = config.release.registered_packages[registered_key(artifact, ref.version)]
                add_described(self.stubs["sagemaker"], group, artifact, ref.pin, version=parse_package_arn(arn).version)

    def version_folder(self, prefix: str, files: Mapping[str, bytes] = FILES, kind: str | None = "FULL_OBJECT") -> None:
        """ListObjectsV2 of the folder, then HeadObject of each file (sorted, as listed)."""
        keys = {prefix + path: data for path, data in sorted(files.items())}
        self.listing(prefix, keys)
        for key, data in keys.items():
            self.head(key, data, kind)


@contextmanager
def preflight_stubbed(*, credentials: bool = True, region: str | None = REGION) -> Iterator[PreflightStubs]:
    """Active stubs for every preflight client; asserts each queued answer was used."""
    made = {
        name: boto3.client(name, region_name=REGION, aws_access_key_id="test", aws_secret_access_key="test")
        for name in SERVICES
    }
    clients = PreflightClients(
        region=region,
        credentials=credentials,
        cloudformation=made["cloudformation"],
        sagemaker=made["sagemaker"],
        service_quotas=made["service-quotas"],
        s3=made["s3"],
        logs=made["logs"],
        ecr_in=lambda where: made["ecr"],
    )
    stubs = {name: Stubber(client) for name, client in made.items()}
    for stub in stubs.values():
        stub.activate()
    try:
        yield PreflightStubs(clients, stubs)
        for stub in stubs.values():
            stub.assert_no_pending_responses()
    finally:
        for stub in stubs.values():
            stub.deactivate()
