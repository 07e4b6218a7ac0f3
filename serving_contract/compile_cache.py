"""The torch.compile cache a job makes on the serving instance type and each model reads.

One contract for three parties (issue 25): the stack (which S3 prefix a model reads and which
job fills it), the cache-making job's custom resource (which writes the manifest when the job
could not), and the container (which decides hit, stale or absent at start and says so).

Layout of one cache in the model-artifacts bucket, and of ``/opt/ml/model`` once SageMaker has
downloaded it (ModelDataSource, uncompressed S3 prefix)::

    compile-cache/<cache key>/manifest.json    what was made, by whom, for which key
    compile-cache/<cache key>/vllm-cache/...   VLLM_CACHE_ROOT of the engine that made it
    compile-cache/<cache key>/lora-configs/    vLLM's tuned LoRA kernel configs for that GPU
                                               (<GPU>_SHRINK.json, <GPU>_EXPAND_TRUE.json,
                                               lora-tune.json: the tuner's timings); only when
                                               the job's tuning step succeeded (issue 35)

Integrity (issue 49, finding 2): vLLM loads compiled graphs, Python code included, from the cache, so a
file changed under ``compile-cache/<key>/`` would run in every serving container. The job records the
sha256 of every file of ``vllm-cache/`` and ``lora-configs/`` in the manifest (``digests``); the custom
resource returns the manifest's own sha256 (``ManifestSha256``), which the stack sets on the model as
:data:`COMPILE_CACHE_MANIFEST_SHA256`; the container loads the cache only when the manifest hashes to
that pin and every file, and no other, matches its digest (:func:`file_digests`). Anything else is a
logged cold start. So changing the cache takes changing the model (a deploy), as for the weights,
which the image pins by sha256.

Why a key of our own on top of vLLM's: vLLM's key (``vllm/envs.py`` ``compile_factors`` and the
engine config; docs/performance.md, "Can a compile cache be baked...") is only known inside a
running engine, but the model must name its prefix before any engine runs. The key here
hashes what the stack controls and vLLM's key depends on: the image URI, the instance type (its
GPU is in torch Inductor's key) and every variable of the container's environment, plus the
job's LoRA tuning budget when tuning is on (it changes what the job makes). The custom
resource computes it at deploy time, when the image URI is resolved. Anything vLLM keys on
beyond that shows up as a vLLM-level miss, which the container reports and survives (it copies
the cache to a writable folder first).

Imported by the construct and its handler (``cdk_constructs/compile_cache/``; the handler's Lambda
asset carries a copy of this file at ``serving_contract/compile_cache.py``, made at synth by
``cdk_constructs/common/handler_code.py``) and by the container (``container/serving_app``; the
image copies ``serving_contract/``): standard library only. The capability's layout:
``cdk_constructs/compile_cache/__init__.py``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Final

COMPILE_CACHE_DIR: Final = "COMPILE_CACHE_DIR"
"""Where the container finds a made cache (manifest + ``vllm-cache/``); unset: no cache."""

COMPILE_CACHE_KEY: Final = "COMPILE_CACHE_KEY"
"""The key the stack computed for this model (:func:`cache_key`); a manifest must carry it."""

COMPILE_CACHE_MANIFEST_SHA256: Final = "COMPILE_CACHE_MANIFEST_SHA256"
"""The sha256 (hex) of the ``manifest.json`` the deploy found for this model's key (the custom
resource's ``ManifestSha256``, :func:`manifest_sha256`); the container loads no cache whose manifest
hashes otherwise. Unset (a local run): the manifest's digests are still checked."""

OWN_VARIABLES: Final = (COMPILE_CACHE_KEY, COMPILE_CACHE_DIR, COMPILE_CACHE_MANIFEST_SHA256)
"""The variables the cache itself sets on a model: not part of its key."""

MODEL_DATA_DIR: Final = "/opt/ml/model"
"""Where SageMaker places a model's ModelDataSource before the container starts."""

MANIFEST_NAME: Final = "manifest.json"
CACHE_SUBDIR: Final = "vllm-cache"
S3_ROOT: Final = "compile-cache"

LORA_CONFIGS_SUBDIR: Final = "lora-configs"
"""vLLM's tuned LoRA kernel configs made by the job's tuning step; the model passes the folder to
vLLM as ``VLLM_TUNED_CONFIG_FOLDER`` when its cache is loaded."""
LORA_TUNING_REPORT: Final = "lora-tune.json"
"""The tuner's per-shape timings (default vs tuned microseconds), inside :data:`LORA_CONFIGS_SUBDIR`."""

STATUS_READY: Final = "ready"
"""The job made the cache; the other statuses (:data:`STATUS_PENDING`, :data:`STATUS_FAILED`)
are written by the custom resource so the prefix SageMaker downloads is never empty."""
STATUS_PENDING: Final = "pending"
STATUS_FAILED: Final = "failed"
STATUSES: Final = (STATUS_READY, STATUS_PENDING, STATUS_FAILED)

KEY_HEX_CHARS: Final = 16
"""64 bits of SHA-256: unique across the handful of configurations a stage ever deploys."""


def cache_key(
    *, image_uri: str, instance_type: str, environment: Mapping[str, str], lora_tuning_budget_s: int = 0
) -> str:
    """The cache key of one model: 16 hex characters.

    Args:
        image_uri: the serving image as the model names it (by tag or digest).
        instance_type: the SageMaker instance type the model serves on, e.g. ``ml.g5.xlarge``.
        environment: the model's container environment as the stack sets it, without
            :data:`OWN_VARIABLES` (they are ignored if present).
        lora_tuning_budget_s: the job's LoRA tuning budget in seconds, 0 when tuning is off. Hashed
            only when on, so turning tuning on makes a new cache (one with ``lora-configs/``) and a
            cache made without tuning keeps the key it had before tuning existed.
    """
    relevant = {k: v for k, v in environment.items() if k not in OWN_VARIABLES}
    keyed: dict[str, object] = {"image": image_uri, "instance": instance_type, "env": relevant}
    if lora_tuning_budget_s:
        keyed["lora_tuning_budget_s"] = lora_tuning_budget_s
    text = json.dumps(keyed, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_HEX_CHARS]


def s3_prefix(key: str) -> str:
    """The bucket-relative folder of one cache, ending in ``/`` (ModelDataSource wants that)."""
    return f"{S3_ROOT}/{key}/"


JOB_NAME_PREFIX_MAX: Final = 32
"""Characters of the job-name prefix the stack gives each model: the handler names a job
``<prefix>-<key:16>-<epoch s:10>``, within ProcessingJobName's 63 (SageMaker API reference)."""

JOB_INPUT_ROOT: Final = "compile-cache-jobs"
"""Bucket folder of each job's input (``<key>/environment.json``), outside what models download."""

JOB_ENVIRONMENT_DIR: Final = "/opt/ml/processing/input/environment"
JOB_ENVIRONMENT_FILE: Final = "environment.json"
JOB_OUTPUT_DIR: Final = "/opt/ml/processing/output/cache"


LORA_TUNING_BUDGET_ARG: Final = "--lora-tuning-budget-s"
"""The job's argument for its LoRA tuning step's time budget in seconds; absent or 0: no tuning."""


def job_arguments(*, lora_tuning_budget_s: int = 0) -> list[str]:
    """The entrypoint's arguments in the cache-making job (``serving_app make-compile-cache``).

    ``lora_tuning_budget_s`` > 0 adds the LoRA tuning step after the engine stops, bounded by
    that many seconds (``serving.compile_cache.lora_tuning_budget_s``).
    """
    arguments = [
        "make-compile-cache",
        "--environment-file",
        f"{JOB_ENVIRONMENT_DIR}/{JOB_ENVIRONMENT_FILE}",
        "--output-dir",
        JOB_OUTPUT_DIR,
    ]
    if lora_tuning_budget_s:
        arguments += [LORA_TUNING_BUDGET_ARG, str(lora_tuning_budget_s)]
    return arguments


VERIFIED_SUBDIRS: Final = (CACHE_SUBDIR, LORA_CONFIGS_SUBDIR)
"""The folders of a made cache whose every file the manifest's ``digests`` cover."""

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def manifest_sha256(text: bytes) -> str:
    """sha256 (hex) of a manifest's bytes, as stored: what :data:`COMPILE_CACHE_MANIFEST_SHA256` pins."""
    return hashlib.sha256(text).hexdigest()


def file_digests(made: Path) -> dict[str, str]:
    """``{"vllm-cache/<path>": sha256 hex, "lora-configs/<file>": ...}``: every file under
    :data:`VERIFIED_SUBDIRS` of the made cache ``made``, by POSIX path relative to it.

    Raises:
        ValueError: a symbolic link (a cache the job made holds none; one in a downloaded cache
            could point anywhere).
        OSError: a file cannot be read.
    """
    digests: dict[str, str] = {}
    for subdir in VERIFIED_SUBDIRS:
        folder = made / subdir
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(made).as_posix()
            if path.is_symlink():
                raise ValueError(f"{relative} is a symbolic link")
            if path.is_file():
                with path.open("rb") as handle:
                    digests[relative] = hashlib.file_digest(handle, "sha256").hexdigest()
    return digests


class ManifestError(ValueError):
    """A manifest that cannot be read; ``str()`` is one line."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """What ``manifest.json`` says about one cache.

    Attributes:
        key: the :func:`cache_key` it was made for.
        status: one of :data:`STATUSES`.
        detail: why, for pending and failed (the job's FailureReason); empty when ready.
        gpu_name: the GPU it was made on (informational: vLLM's own key holds it).
        files: number of files under ``vllm-cache/``; bytes: their size in bytes.
        made_at: ISO-8601 UTC time it was written.
        lora_configs: number of vLLM config files under ``lora-configs/`` (0: none, vLLM's defaults).
        lora_tuning: one line on the tuning step: tuned, skipped or failed, and why.
        digests: :func:`file_digests` of the made cache, written by the job; empty for pending and
            failed manifests (nothing to load).
    """

    key: str
    status: str
    detail: str = ""
    gpu_name: str = ""
    files: int = 0
    bytes: int = 0
    made_at: str = ""
    lora_configs: int = 0
    lora_tuning: str = ""
    digests: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        """Parse ``text``; raises :class:`ManifestError` naming what is wrong."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ManifestError(f"{MANIFEST_NAME} is not JSON: {exc.msg} at line {exc.lineno}") from None
        if not isinstance(data, dict):
            raise ManifestError(f"{MANIFEST_NAME} must be a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ManifestError(f"{MANIFEST_NAME} has unknown field(s) {', '.join(unknown)}")
        if not isinstance(data.get("key"), str) or not isinstance(data.get("status"), str):
            raise ManifestError(f"{MANIFEST_NAME} needs string fields 'key' and 'status'")
        if data["status"] not in STATUSES:
            raise ManifestError(f"{MANIFEST_NAME} status={data['status']!r}; allowed: {', '.join(STATUSES)}")
        _check_digests(data.get("digests", {}))
        try:
            return cls(**data)
        except TypeError as exc:  # pragma: no cover - guarded by the checks above
            raise ManifestError(f"{MANIFEST_NAME}: {exc}") from None


def _check_digests(digests: object) -> None:
    """``digests`` must map relative paths under :data:`VERIFIED_SUBDIRS` to sha256 hex strings."""
    if not isinstance(digests, dict):
        raise ManifestError(f"{MANIFEST_NAME} digests must be an object of path to sha256")
    for path, digest in digests.items():
        parts = str(path).split("/")
        if parts[0] not in VERIFIED_SUBDIRS or len(parts) < 2 or ".." in parts or "" in parts:
            raise ManifestError(f"{MANIFEST_NAME} digests: {str(path)[:100]!r} is not a file under {VERIFIED_SUBDIRS}")
        if not isinstance(digest, str) or not _SHA256.match(digest):
            raise ManifestError(f"{MANIFEST_NAME} digests: {str(path)[:100]!r} has no sha256 (64 hex characters)")
