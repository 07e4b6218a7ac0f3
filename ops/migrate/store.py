"""Read (and write) the comparison store: a local folder or ``s3://<bucket>[/<prefix>]``, laid out as
``serving_contract/migration.py`` declares (``pairs/``, ``scores/``, ``human/``, ``reports/``).

A folder needs nothing but the files: the report runs offline on it, with no AWS credentials or region. An
``s3://`` source needs a region and credentials allowed ``s3:ListBucket``/``s3:GetObject`` on the bucket and
``kms:Decrypt`` on its key (the Migration stack's ``MigrationReporterPolicyArn``).

Every record is checked as it is read; one that is not what the client writes stops the command with one line
naming the file, the line, the field and what is allowed (exit 2).
"""

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ops.exit_codes import ExitCode, OpsError
from serving_contract import migration


class Source(Protocol):
    """Where the store's files are."""

    @property
    def name(self) -> str:
        """The folder, or ``s3://<bucket>/<prefix>``."""
        ...

    def keys(self, prefix: str) -> list[str]:
        """Every key under ``prefix`` (e.g. ``pairs/``), sorted."""
        ...

    def read(self, key: str) -> bytes: ...

    def write(self, key: str, body: bytes) -> None: ...


@dataclass(frozen=True)
class Folder:
    """A local copy of the store (``aws s3 sync s3://<bucket>/ DIR``, or a DirectoryPairStore's folder)."""

    root: Path

    @property
    def name(self) -> str:
        return str(self.root)

    def keys(self, prefix: str) -> list[str]:
        base = self.root / prefix
        if not base.is_dir():
            return []
        return sorted(str(p.relative_to(self.root)) for p in base.rglob("*") if p.is_file())

    def read(self, key: str) -> bytes:
        return (self.root / key).read_bytes()

    def write(self, key: str, body: bytes) -> None:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)


@dataclass(frozen=True)
class Bucket:
    """The store itself, ``s3://<bucket>/<prefix>``; reads and writes through a boto3 ``s3`` client."""

    s3: Any
    bucket: str
    prefix: str

    @property
    def name(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def keys(self, prefix: str) -> list[str]:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix + prefix)
        return sorted(item["Key"][len(self.prefix) :] for page in pages for item in page.get("Contents", []))

    def read(self, key: str) -> bytes:
        return bytes(self.s3.get_object(Bucket=self.bucket, Key=self.prefix + key)["Body"].read())

    def write(self, key: str, body: bytes) -> None:
        # The bucket's default encryption is the stack's key: a put without one is encrypted with it.
        self.s3.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=body, ContentType="application/json")


def parse_location(text: str) -> tuple[str, str] | Path:
    """``(bucket, prefix)`` of ``s3://bucket[/prefix]`` (prefix ending in ``/`` or empty), or the folder's Path.

    Raises:
        OpsError: (USAGE) an ``s3://`` URI without a bucket, or a folder that does not exist.
    """
    if text.startswith("s3://"):
        bucket, _, prefix = text.removeprefix("s3://").partition("/")
        if not bucket:
            raise OpsError(f"--from {text!r}: name a bucket, s3://<bucket>[/<prefix>]", ExitCode.USAGE)
        return bucket, (prefix.rstrip("/") + "/") if prefix.strip("/") else ""
    path = Path(text)
    if not path.is_dir():
        raise OpsError(
            f"--from {text!r}: no such folder; give the store's folder (it holds pairs/) or s3://<bucket>",
            ExitCode.USAGE,
        )
    return path


def json_lines(source: Source, key: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, object)`` of each non-blank line of ``key`` (``where`` is ``<source>/<key>:<line>``).

    Raises:
        OpsError: (USAGE) a line that is not a JSON object.
    """
    for number, line in enumerate(source.read(key).decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source.name.rstrip('/')}/{key}:{number}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise OpsError(f"{where}: not JSON ({error.msg})", ExitCode.USAGE) from None
        if not isinstance(value, dict):
            raise OpsError(f"{where}: not a JSON object", ExitCode.USAGE)
        yield where, value


@dataclass(frozen=True)
class SideRow:
    """One side of a pair, as the report uses it (times in ms; None: not measured)."""

    backend: str
    text: str
    error: str | None
    latency_ms: float | None
    ttft_ms: float | None
    completion_tokens: int | None
    version: str | None

    @property
    def answered(self) -> bool:
        return self.error is None and bool(self.text.strip())


@dataclass(frozen=True)
class PairRow:
    """A pair with its sides sorted into the endpoint's and Bedrock's (the other backend's)."""

    request_id: str
    at: dt.datetime
    adapter: str
    language: str
    stream: bool
    endpoint: SideRow
    bedrock: SideRow
    answered_by: str  # "endpoint" or "bedrock"
    key: str  # the pairs file it came from
    messages: tuple[dict[str, str], ...] | None = None


def _number(where: str, side: str, record: dict[str, Any], name: str) -> float | None:
    value = record.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise OpsError(f"{where}: {side}.{name} = {value!r}: must be a number >= 0 or null", ExitCode.USAGE)
    return float(value)


def _side(where: str, name: str, record: object) -> SideRow:
    if not isinstance(record, dict):
        raise OpsError(f"{where}: {name}: must be an object with {', '.join(migration.SIDE_FIELDS)}", ExitCode.USAGE)
    missing = [field for field in migration.SIDE_FIELDS if field not in record]
    if missing:
        raise OpsError(f"{where}: {name} lacks {', '.join(missing)} (serving_contract/migration.py)", ExitCode.USAGE)
    if not isinstance(record["backend"], str) or not isinstance(record["text"], str):
        raise OpsError(f"{where}: {name}.backend and {name}.text must be strings", ExitCode.USAGE)
    tokens = _number(where, name, record, "completion_tokens")
    return SideRow(
        backend=record["backend"],
        text=record["text"],
        error=None if record["error"] is None else str(record["error"]),
        latency_ms=_number(where, name, record, "latency_ms"),
        ttft_ms=_number(where, name, record, "ttft_ms"),
        completion_tokens=None if tokens is None else int(tokens),
        version=None if record["version"] is None else str(record["version"]),
    )


def pair_row(where: str, key: str, record: dict[str, Any]) -> PairRow | None:
    """The :class:`PairRow` of one stored pair; None when neither or both sides are the endpoint (skipped).

    Raises:
        OpsError: (USAGE) a record that is not a pair of schema ``serving_contract.migration.PAIR_SCHEMA``.
    """
    if record.get("schema") != migration.PAIR_SCHEMA:
        raise OpsError(
            f"{where}: schema = {record.get('schema')!r}: this report reads schema {migration.PAIR_SCHEMA} "
            "(serving_contract/migration.py)",
            ExitCode.USAGE,
        )
    missing = [field for field in migration.PAIR_FIELDS if field not in record]
    if missing:
        raise OpsError(f"{where}: not a pair: no {', '.join(missing)}", ExitCode.USAGE)
    try:
        at = dt.datetime.fromisoformat(str(record["at"]).replace("Z", "+00:00"))
    except ValueError:
        raise OpsError(f"{where}: at = {record['at']!r}: must be an ISO 8601 time", ExitCode.USAGE) from None
    answer, copy = _side(where, "answer", record["answer"]), _side(where, "copy", record["copy"])
    is_endpoint = [side.backend.startswith(migration.ENDPOINT_BACKEND_PREFIX) for side in (answer, copy)]
    if is_endpoint.count(True) != 1:
        return None
    endpoint, bedrock = (answer, copy) if is_endpoint[0] else (copy, answer)
    messages = record.get("messages")
    return PairRow(
        request_id=str(record["request_id"]),
        at=at if at.tzinfo else at.replace(tzinfo=dt.UTC),
        adapter=str(record["adapter"]),
        language=str(record["language"]),
        stream=bool(record["stream"]),
        endpoint=endpoint,
        bedrock=bedrock,
        answered_by="endpoint" if is_endpoint[0] else "bedrock",
        key=key,
        messages=tuple(messages) if isinstance(messages, list) else None,
    )


@dataclass
class Pairs:
    """Every pair of a source, and how many were skipped (no endpoint side, or two)."""

    rows: list[PairRow]
    skipped: int
    files: int


def load_pairs(source: Source) -> Pairs:
    """Every pair under ``pairs/`` (module docstring for the errors)."""
    rows, skipped = [], 0
    keys = [k for k in source.keys(migration.PAIRS_PREFIX) if k.endswith(migration.PAIR_FILE_SUFFIX)]
    for key in keys:
        for where, record in json_lines(source, key):
            row = pair_row(where, key, record)
            if row is None:
                skipped += 1
            else:
                rows.append(row)
    return Pairs(rows, skipped, len(keys))


def scores_key(pairs_key: str) -> str:
    """``scores/<path>`` of the pairs file ``pairs/<path>``."""
    return migration.SCORES_PREFIX + pairs_key.removeprefix(migration.PAIRS_PREFIX)
