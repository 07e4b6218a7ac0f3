"""Where the migration's pairs go: batches of JSON Lines, to the Migration stack's encrypted bucket or a folder.

A pair is one call's answer and its asynchronous copy (mirror module), as one JSON object; the layout and the
schema are the app's (``serving_contract/migration.py``: this package cannot import it, so it carries the names
below and tests/client/test_contract_agreement.py keeps them equal). Batches are written
``pairs/yyyy/mm/dd/hh/<epoch ms>-<uuid>.jsonl`` (UTC, when the batch was written):

* :class:`S3PairStore`: ``PutObject`` into the comparison bucket (the Migration stack's
  ``MigrationStoreBucketName``), SSE-KMS under its key (``MigrationStoreKeyArn``), which the bucket's policy
  requires of every put: a put without it is refused, never stored under another key. The bucket never leaves
  the account and expires pairs after ``migration.store.retention_days``. Needs ``s3:PutObject`` on
  ``pairs/*`` and ``kms:GenerateDataKey`` on the key (the stack's ``MigrationPairWriter`` managed policy).
* :class:`DirectoryPairStore`: the same files in a local folder (``ops migrate report --from DIR`` reads it).

A batch is written when ``batch_size`` pairs wait or every ``flush_interval_s`` seconds (a background thread),
and on :meth:`~BatchedPairStore.close`. A write that fails keeps its pairs for the next one, at most
``max_buffered`` pairs: beyond that the oldest are dropped and counted (``ClientShadowStoreFailed``).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, Protocol

from mangaassist_client.metrics import ClientMetric, MetricsSink

PAIRS_PREFIX: Final = "pairs/"
PAIR_FILE_SUFFIX: Final = ".jsonl"
CONTENT_TYPE: Final = "application/x-ndjson"


class PairStore(Protocol):
    """Takes pairs (JSON-ready objects) and keeps them somewhere."""

    def put(self, pair: Mapping[str, Any]) -> None: ...

    def flush(self) -> int: ...

    def close(self) -> None: ...


def batch_key(now: dt.datetime, *, prefix: str = PAIRS_PREFIX) -> str:
    """``pairs/yyyy/mm/dd/hh/<epoch ms>-<uuid4>.jsonl`` for a batch written at ``now`` (aware)."""
    moment = now.astimezone(dt.UTC)
    return f"{prefix}{moment:%Y/%m/%d/%H}/{int(moment.timestamp() * 1000)}-{uuid.uuid4().hex}{PAIR_FILE_SUFFIX}"


class BatchedPairStore:
    """Batching, the flush thread and the bounded retry buffer; subclasses write one batch (:meth:`_write`).

    Args:
        sink: where a dropped pair is counted.
        batch_size: pairs per batch (1-10,000).
        flush_interval_s: seconds between background flushes (0: no thread; call :meth:`flush`).
        max_buffered: pairs kept while writes fail; at least ``batch_size``.
        now: the wall clock (the batch's key).
    """

    def __init__(
        self,
        *,
        sink: MetricsSink,
        batch_size: int = 100,
        flush_interval_s: float = 60.0,
        max_buffered: int = 10_000,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        if not 1 <= batch_size <= 10_000:
            raise ValueError(f"batch_size = {batch_size}: must be from 1 to 10000")
        if not 0 <= flush_interval_s <= 3600:
            raise ValueError(f"flush_interval_s = {flush_interval_s}: must be from 0 to 3600")
        if max_buffered < batch_size:
            raise ValueError(f"max_buffered = {max_buffered}: must be at least batch_size = {batch_size}")
        self._sink, self._batch_size, self._max = sink, batch_size, max_buffered
        self._now = now
        self._pending: list[str] = []
        self._lock = threading.Lock()  # the pending list
        self._writing = threading.Lock()  # one write at a time keeps retried pairs in order
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if flush_interval_s > 0:
            self._thread = threading.Thread(
                target=self._run, args=(flush_interval_s,), daemon=True, name="mangaassist-pairs-flush"
            )
            self._thread.start()

    def put(self, pair: Mapping[str, Any]) -> None:
        """Queue one pair; writes a batch when ``batch_size`` wait (on the calling thread: a mirror worker)."""
        line = json.dumps(pair, ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            self._pending.append(line)
            full = len(self._pending) >= self._batch_size
        if full:
            self._flush_logged()

    def flush(self) -> int:
        """Write what waits as one batch; returns the pairs written (0: none waited).

        Raises the writer's error; the pairs stay queued for the next write (up to ``max_buffered``)."""
        with self._writing:
            with self._lock:
                lines, self._pending = self._pending, []
            if not lines:
                return 0
            try:
                self._write(batch_key(self._now()), ("\n".join(lines) + "\n").encode())
            except Exception:
                with self._lock:
                    kept = lines + self._pending
                    dropped = max(0, len(kept) - self._max)
                    self._pending = kept[dropped:]
                if dropped:
                    self._sink.record({ClientMetric.SHADOW_STORE_FAILED: dropped}, {"Store": type(self).__name__})
                raise
            return len(lines)

    def _flush_logged(self) -> None:
        try:
            self.flush()
        except Exception as error:  # kept for the next write; a copy's failure never reaches a caller
            print(f"mangaassist_client: pair store write failed: {error}", file=sys.stderr)

    def _run(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self._flush_logged()

    def close(self) -> None:
        """Stop the thread and write what is left (a failure is printed and the pairs counted as dropped)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._flush_logged()
        with self._lock:
            lost, self._pending = len(self._pending), []
        if lost:
            self._sink.record({ClientMetric.SHADOW_STORE_FAILED: lost}, {"Store": type(self).__name__})

    def _write(self, key: str, body: bytes) -> None:
        raise NotImplementedError


class S3PairStore(BatchedPairStore):
    """Batches into the comparison bucket (module docstring).

    Args:
        s3: a boto3 ``s3`` client in the bucket's region.
        bucket: ``MigrationStoreBucketName``.
        kms_key_arn: ``MigrationStoreKeyArn``: every put names it (SSE-KMS), as the bucket's policy requires.
        **batching: :class:`BatchedPairStore`'s arguments.
    """

    def __init__(self, s3: Any, *, bucket: str, kms_key_arn: str, **batching: Any) -> None:
        self._s3, self.bucket, self.kms_key_arn = s3, bucket, kms_key_arn
        super().__init__(**batching)

    def _write(self, key: str, body: bytes) -> None:
        self._s3.put_object(
            Bucket=self.bucket,
            Key=key,
            Body=body,
            ContentType=CONTENT_TYPE,
            ServerSideEncryption="aws:kms",
            SSEKMSKeyId=self.kms_key_arn,
        )


class DirectoryPairStore(BatchedPairStore):
    """Batches into ``root`` with the bucket's layout (``root/pairs/yyyy/mm/dd/hh/*.jsonl``)."""

    def __init__(self, root: str | Path, **batching: Any) -> None:
        self.root = Path(root)
        super().__init__(**batching)

    def _write(self, key: str, body: bytes) -> None:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_bytes(body)
        partial.replace(path)  # a reader never sees half a batch
