"""Model artifacts in S3: key layout, the pointer digest, and the build-time fetch.

Shared by the image build (CodeBuild runs ``python3 -m serving_contract.model_artifacts``
from the build's source, standard library only), the pinning tool (ops.pin_artifacts)
and whoever uploads a new version.

Layout (seed 000, "Adapter Versioning Strategy"; base models follow the same scheme)::

    s3://<bucket>/<adapters_prefix>/<adapter>/<version>/...      immutable version folder
    s3://<bucket>/<adapters_prefix>/<adapter>/CURRENT            "<version>/<sha256>"
    s3://<bucket>/<base_models_prefix>/<model>/<version>/...
    s3://<bucket>/<base_models_prefix>/<model>/CURRENT

What the sha256 covers (:func:`artifact_sha256`): every regular file under the version
folder, and nothing else (not CURRENT, not the folder name). Take each file's path relative
to the version folder (POSIX separators, UTF-8), sort the paths by byte value, write one
line ``<sha256 hex of the file's bytes><two spaces><path>\\n`` per file, and hash that text.
It equals the coreutils pipeline, run inside the version folder::

    find . -type f -printf '%P\\0' | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum

so renaming, adding or removing a file changes it, as does any changed byte.
"""

import argparse
import hashlib
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

POINTER_NAME = "CURRENT"
RELEASE_SCRATCH_PREFIX = "release-scratch"
"""The bucket's folder of a release run's intermediate checkpoints (``<prefix>/<pipeline execution id>/<step>/``):
the quantized checkpoint waits there for the gates; the ModelArtifacts stack's lifecycle rule expires it
(``release.scratch_retention_days``)."""
ADAPTER_ARCHIVE = "adapter.tar.gz"
"""inference_components mode: the adapter's files as one archive beside them in the version folder
(<adapters_prefix>/<adapter>/<version>/adapter.tar.gz); its pin is the digest of the files inside."""
BASE_MODEL_DIR = "base"  # <model context>/base/ (container/Dockerfile COPYs it)
ADAPTERS_DIR = "adapters"  # <model context>/adapters/<name>/


def version_prefix(prefix: str, name: str, version: str) -> str:
    """Key prefix of one version folder, with a trailing slash."""
    return f"{prefix}/{name}/{version}/"


def pointer_key(prefix: str, name: str) -> str:
    """Key of an artifact's CURRENT pointer."""
    return f"{prefix}/{name}/{POINTER_NAME}"


def parse_pointer(text: str) -> tuple[str, str]:
    """``(version, sha256)`` from a pointer's text; raises ValueError on any other shape."""
    version, sep, digest = text.strip().partition("/")
    if not sep or not version or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError(f"pointer {text.strip()!r}: must be '<version>/<64 lowercase hex sha256>'")
    return version, digest


def manifest_of(file_sha256: Mapping[str, str]) -> str:
    """The manifest text of files given as ``{relative POSIX path: sha256 hex of its bytes}``.

    For callers that know each file's digest without the file at hand (S3 checksums, a streamed
    archive); :func:`manifest` is this over a local folder.
    """
    ordered = sorted(file_sha256.items(), key=lambda item: item[0].encode())
    return "".join(f"{digest}  {path}\n" for path, digest in ordered)


def digest_of(file_sha256: Mapping[str, str]) -> str:
    """The pointer sha256 of files given as ``{relative POSIX path: sha256 hex}`` (see :func:`manifest_of`)."""
    return hashlib.sha256(manifest_of(file_sha256).encode()).hexdigest()


def manifest(folder: Path) -> str:
    """The manifest text :func:`artifact_sha256` hashes (sha256sum's output format)."""
    digests = {}
    for path in (p for p in folder.rglob("*") if p.is_file()):
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        digests[path.relative_to(folder).as_posix()] = digest.hexdigest()
    return manifest_of(digests)


def artifact_sha256(folder: Path) -> str:
    """The sha256 a CURRENT pointer carries for the version stored in ``folder``."""
    return hashlib.sha256(manifest(folder).encode()).hexdigest()


def fetch(
    *,
    bucket: str,
    base_models_prefix: str,
    adapters_prefix: str,
    base_model: str,
    pins: Mapping[str, str],
    destination: Path,
) -> None:
    """Copy each pinned version into the model context and check it against its pin.

    Args:
        pins: ``{"base": "<version>/<sha>", "<adapter>": "<version>/<sha>", ...}``.
        destination: the model context; gets ``base/`` and ``adapters/<name>/``.

    Raises:
        SystemExit: with one line naming the artifact, the pin and the computed digest.
    """
    for name, pin in pins.items():
        version, expected = parse_pointer(pin)
        if name == BASE_MODEL_DIR:
            source = version_prefix(base_models_prefix, base_model, version)
            target = destination / BASE_MODEL_DIR
        else:
            source = version_prefix(adapters_prefix, name, version)
            target = destination / ADAPTERS_DIR / name
        uri = f"s3://{bucket}/{source}"
        subprocess.run(["aws", "s3", "cp", "--recursive", "--only-show-errors", uri, str(target)], check=True)
        if not target.is_dir() or not any(target.iterdir()):
            raise SystemExit(f"artifact {name}: {uri} is empty or missing")
        actual = artifact_sha256(target)
        if actual != expected:
            raise SystemExit(f"artifact {name}: {uri} has sha256 {actual}, but the pin {pin} expects {expected}")
        print(f"artifact {name}: {uri} verified ({expected})", flush=True)


def main(argv: list[str] | None = None) -> None:
    """``fetch --bucket B --base-models-prefix P --adapters-prefix P --base-model NAME --pins JSON --dest DIR``."""
    parser = argparse.ArgumentParser(prog="python3 -m serving_contract.model_artifacts")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("fetch", help="copy the pinned versions from S3 and verify them")
    run.add_argument("--bucket", required=True)
    run.add_argument("--base-models-prefix", required=True)
    run.add_argument("--adapters-prefix", required=True)
    run.add_argument("--base-model", required=True)
    run.add_argument("--pins", required=True, help='JSON {"base": "v1/<sha>", "<adapter>": "v3/<sha>"}')
    run.add_argument("--dest", required=True, type=Path)
    digest = sub.add_parser("digest", help="print the pointer sha256 of a local version folder")
    digest.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    if args.command == "digest":
        print(artifact_sha256(args.folder))
        return
    fetch(
        bucket=args.bucket,
        base_models_prefix=args.base_models_prefix,
        adapters_prefix=args.adapters_prefix,
        base_model=args.base_model,
        pins=json.loads(args.pins),
        destination=args.dest,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
