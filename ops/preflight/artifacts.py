"""Artifact checks: every non-placeholder pin's version folder in S3, and the prebuilt image in ECR.

The digest a pin carries is ``serving_contract.model_artifacts.artifact_sha256`` over the version
folder's files. S3 can give each object's SHA-256 without a download (``HeadObject`` with
``ChecksumMode=ENABLED``: ``ChecksumSHA256``, base64, with ``ChecksumType`` ``FULL_OBJECT``), but only
for objects uploaded with a SHA-256 checksum; a multipart upload's is ``COMPOSITE`` (a checksum of
part checksums). When every file has a full-object one, the digest is rebuilt from them
(``model_artifacts.digest_of``); otherwise the image build (and, for adapter components, the
container) checks it, unless ``--download-digests`` streams every file through hashlib here.

Sources: S3 ``ListObjectsV2``, ``HeadObject``, ``GetObject``; CloudFormation ``DescribeStacks``;
ECR ``DescribeImages``.
"""

import base64
import hashlib
import tarfile
from collections.abc import Callable
from typing import IO, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from app_config.image import ImageRefConfig
from app_config.root import AppConfig
from app_config.variants import deployed_variant_keys
from ops.endpoint import output_values
from ops.exit_codes import ExitCode
from ops.preflight.account import stack_missing
from ops.preflight.pins import PinRef, pins_in_effect
from ops.preflight.report import Finding, error, fail, ok, skip
from serving_contract import outputs
from serving_contract.model_artifacts import ADAPTER_ARCHIVE, digest_of

ARTIFACTS = ExitCode.PREFLIGHT_ARTIFACTS
FOUNDATION: Final = "deploy the foundation first: make deploy-foundation"
_CHUNK = 1 << 20


class StackMissingError(Exception):
    """DescribeStacks says the stack does not exist."""


def stack_outputs(cloudformation: Any, stack: str) -> dict[str, str]:
    """The stack's outputs; raises StackMissingError, or ClientError/BotoCoreError for other failures."""
    try:
        stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as exc:
        if stack_missing(exc):
            raise StackMissingError(stack) from exc
        raise
    return output_values(stacks[0]) if stacks else {}


def artifacts_bucket(config: AppConfig, cloudformation: Any) -> tuple[str | None, Finding | None]:
    """``image.build.artifacts_bucket_name``, else the ModelArtifacts stack's output; or the finding why not."""
    if config.image.build.artifacts_bucket_name:
        return config.image.build.artifacts_bucket_name, None
    stack = config.stack_name("ModelArtifacts")
    try:
        values = stack_outputs(cloudformation, stack)
    except StackMissingError:
        return None, fail(
            "artifacts",
            f"stack {stack} does not exist (image.build.artifacts_bucket_name unset): {FOUNDATION}",
            ARTIFACTS,
        )
    except (ClientError, BotoCoreError) as exc:
        return None, error("artifacts", f"stack {stack}", exc)
    bucket = values.get(outputs.MODEL_ARTIFACTS_BUCKET_NAME)
    if not bucket:
        return None, fail(
            "artifacts", f"stack {stack} has no output {outputs.MODEL_ARTIFACTS_BUCKET_NAME}: {FOUNDATION}", ARTIFACTS
        )
    return bucket, None


def _list(s3: Any, bucket: str, prefix: str) -> list[str]:
    """Object keys under ``prefix``, without folder markers (keys ending in '/', which hold no file)."""
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", []) if not o["Key"].endswith("/")]


def _checksum_sha256(s3: Any, bucket: str, key: str) -> str | None:
    """The object's full-object SHA-256 in hex, or None when it has none (or a composite one)."""
    head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    value = head.get("ChecksumSHA256")
    if not value or head.get("ChecksumType", "FULL_OBJECT") != "FULL_OBJECT" or "-" in value:
        return None
    return base64.b64decode(value).hex()


def _stream_sha256(stream: IO[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in iter(lambda: stream.read(_CHUNK), b""):
        digest.update(chunk)
    return digest.hexdigest()


def _archive_files(s3: Any, bucket: str, key: str) -> dict[str, str]:
    """``{path: sha256}`` of the files inside a streamed ``adapter.tar.gz`` (what the container checks)."""
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    files = {}
    with tarfile.open(fileobj=body, mode="r|*") as archive:
        for member in archive:
            handle = archive.extractfile(member) if member.isfile() else None
            if handle is not None:
                files[member.name.removeprefix("./")] = _stream_sha256(handle)
    return files


def _check_pin(s3: Any, bucket: str, ref: PinRef, download: bool) -> Finding:
    where = f"s3://{bucket}/{ref.prefix}"
    keys = _list(s3, bucket, ref.prefix)
    files = {key.removeprefix(ref.prefix): key for key in keys if key != ref.archive}
    if not keys:
        return fail(
            "artifacts", f"{ref.key} = {ref.pin!r}: {where} has no objects; upload version {ref.version}", ARTIFACTS
        )
    if ref.archive is not None and ref.archive not in keys:
        return fail(
            "artifacts",
            f"{ref.key} = {ref.pin!r}: s3://{bucket}/{ref.archive} is missing; upload the version's "
            f"{ADAPTER_ARCHIVE} (docs/inference-components.md)",
            ARTIFACTS,
        )
    if download:
        digests = (
            _archive_files(s3, bucket, ref.archive)
            if ref.archive
            else {path: _stream_sha256(s3.get_object(Bucket=bucket, Key=key)["Body"]) for path, key in files.items()}
        )
        how = "downloaded" if ref.archive is None else f"{ADAPTER_ARCHIVE} downloaded"
    else:
        checksums = {path: _checksum_sha256(s3, bucket, key) for path, key in files.items()}
        # Only the archive (no loose files beside it) leaves nothing to rebuild the digest from.
        if not files or any(value is None for value in checksums.values()):
            checker = "the image build" if ref.archive is None else "the container"
            return ok(
                "artifacts",
                f"{ref.key}: {where} has {len(keys)} object(s); sha256 not checked here (no full-object SHA-256 "
                f"checksums in S3): {checker} checks it, or pass --download-digests",
            )
        digests = {path: value for path, value in checksums.items() if value is not None}
        how = "from S3 checksums"
    actual = digest_of(digests)
    if actual != ref.sha256:
        return fail(
            "artifacts",
            f"{ref.key} = {ref.pin!r}: the files under {where} have sha256 {actual} ({how}); upload the pinned "
            f"files or pin the uploaded ones (`python -m ops.pin_artifacts`)",
            ARTIFACTS,
        )
    return ok("artifacts", f"{ref.key}: {where} matches the pin ({len(digests)} file(s), {how})")


def check_artifacts(config: AppConfig, cloudformation: Any, s3: Any, *, download: bool) -> list[Finding]:
    """Every non-placeholder pin in effect has its version folder (and archive) and, where checkable, its digest."""
    refs = [ref for ref in pins_in_effect(config) if not ref.placeholder]
    if not refs:
        placeholders = any(ref.placeholder for ref in pins_in_effect(config))
        why = "every pin is a placeholder (see pins)" if placeholders else "no artifact pins in effect"
        return [skip("artifacts", f"{why}; image.source = {config.image.source}, serving.mode = {config.serving.mode}")]
    bucket, problem = artifacts_bucket(config, cloudformation)
    if bucket is None:
        assert problem is not None
        return [problem]
    findings = []
    for ref in refs:
        try:
            findings.append(_check_pin(s3, bucket, ref, download))
        except (ClientError, BotoCoreError, tarfile.TarError) as exc:
            if isinstance(exc, tarfile.TarError):
                findings.append(fail("artifacts", f"{ref.key}: s3://{bucket}/{ref.archive}: {exc}", ARTIFACTS))
            else:
                findings.append(error("artifacts", f"{ref.key}: s3://{bucket}/{ref.prefix}", exc))
    return findings


def _image_target(
    config: AppConfig, ref: ImageRefConfig, cloudformation: Any, region: str
) -> tuple[dict[str, Any], str]:
    """DescribeImages' parameters for a prebuilt reference, and the region its repository is in."""
    image_id = {"imageDigest": ref.digest} if ref.digest else {"imageTag": ref.tag}
    parts = ref.uri_parts
    if parts is not None and ref.uri is not None:
        account, uri_region, repository = parts
        digest = ref.uri.rsplit("@", 1)[1]
        return {"registryId": account, "repositoryName": repository, "imageIds": [{"imageDigest": digest}]}, uri_region
    stack = config.stack_name("ImageRepository")
    uri = stack_outputs(cloudformation, stack).get(outputs.IMAGE_REPOSITORY_URI, "")
    if "/" not in uri:
        raise StackMissingError(stack)
    registry, repository = uri.split("/", 1)
    return {"registryId": registry.split(".", 1)[0], "repositoryName": repository, "imageIds": [image_id]}, region


def check_image(config: AppConfig, cloudformation: Any, ecr_in: Callable[[str], Any], region: str) -> list[Finding]:
    """``image.source = prebuilt``: each variant's image exists in its ECR repository."""
    if config.image.source != "prebuilt":
        return [skip("image", "image.source = build: the deploy builds the image")]
    refs = []
    for variant_key in deployed_variant_keys(config.serving):
        ref = config.image.primary if variant_key == "primary" else config.image.canary
        if ref is not None:
            refs.append((f"image.{variant_key}", ref))
    findings = []
    for key, ref in refs:
        shown = ref.uri or ref.digest or ref.tag
        try:
            params, where = _image_target(config, ref, cloudformation, region)
            found = ecr_in(where).describe_images(**params)["imageDetails"]
        except StackMissingError as exc:
            findings.append(
                fail(
                    "image",
                    f"{key} = {shown!r}: stack {exc} does not exist; {FOUNDATION}, then push the image",
                    ARTIFACTS,
                )
            )
            continue
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("ImageNotFoundException", "RepositoryNotFoundException"):
                findings.append(
                    fail(
                        "image",
                        f"{key} = {shown!r}: {exc.response['Error'].get('Message', code)}; push it first",
                        ARTIFACTS,
                    )
                )
            else:
                findings.append(error("image", f"{key} = {shown!r}", exc))
            continue
        except BotoCoreError as exc:
            findings.append(error("image", f"{key} = {shown!r}", exc))
            continue
        repository = params["repositoryName"]
        if not found:
            findings.append(
                fail("image", f"{key} = {shown!r}: not in ECR repository {repository}; push it first", ARTIFACTS)
            )
        else:
            findings.append(
                ok("image", f"{key} = {shown!r}: in ECR repository {repository} ({found[0]['imageDigest']})")
            )
    return findings
