"""Executor-local copies of state segments: a shard whose state another Python worker of the same
executor wrote is read back from local disk, not from the object store.

Spark hands a micro-batch's tasks to whichever of an executor's Python workers is idle. With a
Python sink in the query (``writeStream.format("windowed")``) each task uses two workers, one
reading and one writing, and Spark's idle-worker queue makes them swap roles every batch: the
worker that runs a shard holds a copy two batches old, and reads the shard's state back
(docs/progress.md). On a local ``stateLocation`` that reads local files; on ``s3://`` it would
GET the shard's state from the store every batch. So every segment a shard's store writes to an
object store is also written to the executor's local directory (the first of ``SPARK_LOCAL_DIRS``,
which Spark gives its Python workers and deletes with the executor), and a segment is read from
there first. Flink's task-local recovery keeps the same kind of secondary copy.

Why the copies are always right: a segment is never overwritten (``spark_windowing.state.store``: a new
name per attempt), so a copy is the object itself; every range read from it is still checked
against the checksum the manifest gives, and manifests are always read from ``stateLocation``.
A segment with no local copy (another executor wrote it; this executor is new) is read whole from
``stateLocation`` once and kept. After each snapshot, copies the shard's snapshot no longer names
are deleted (``after_snapshot``), so the copies hold about one snapshot's segments per shard.

Each shard's directory also records the offset of the latest snapshot written on this executor,
so a task can claim a shard whose state is here (``local_shards``, used by ``affinity``).

Without ``SPARK_LOCAL_DIRS`` (the driver, or plain Python) or with a local ``stateLocation`` the
store reads and writes ``stateLocation`` directly (``io_for`` returns the ``storage`` module).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from typing import Any

from spark_windowing.datasource import storage

__all__ = ["LocalCopies", "io_for", "after_snapshot", "local_shards", "copies_dir"]

_LATEST = "latest"


def copies_dir(state: str) -> str | None:
    """This executor's directory of copies for state location ``state`` (an object store URI), or
    None where there is none (no ``SPARK_LOCAL_DIRS``, or a local ``stateLocation``)."""
    local_dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
    if not local_dirs or "://" not in state or state.startswith("file://"):
        return None
    name = hashlib.sha256(state.rstrip("/").encode()).hexdigest()[:16]
    return os.path.join(local_dirs.split(",")[0], "spark-windowing-copies", name)


def io_for(state: str, shard: int, root: str) -> Any:
    """The ``io`` for shard ``shard``'s store at ``root`` (under ``state``): ``LocalCopies`` on an
    executor with an object-store ``stateLocation``, else the ``storage`` module."""
    base = copies_dir(state)
    return storage if base is None else LocalCopies(root, os.path.join(base, f"shard-{shard}"))


class LocalCopies:
    """``spark_windowing.state.store``'s ``io`` for one shard's store root on an object store: the
    ``storage`` module, with segments written to and read from a local copy as well. Counts the
    segment reads it served locally and from ``stateLocation`` (``remote_reads``)."""

    def __init__(self, root: str, directory: str) -> None:
        self.root, self.directory = root.rstrip("/"), directory
        self.local_reads = self.remote_reads = 0
        self._served: set[str] = set()   # segments whose last read came from a copy

    def __getattr__(self, name: str) -> Any:   # read_bytes, exists, list_dir, delete: as storage
        return getattr(storage, name)

    def _copy_path(self, uri: str) -> str | None:
        name = uri.rsplit("/", 1)[-1]
        if uri == f"{self.root}/{name}" and name.startswith("seg-"):
            return os.path.join(self.directory, name)
        return None

    def read_range(self, uri: str, offset: int, length: int) -> bytes:
        path = self._copy_path(uri)
        if path is None:           # another root's segment (a rescale reads every old shard's)
            self.remote_reads += 1
            return storage.read_range(uri, offset, length)
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(length)
            self.local_reads += 1
            self._served.add(uri)
            return data
        except FileNotFoundError:
            pass
        whole = storage.read_bytes(uri)     # raises FileNotFoundError when the segment is missing
        self.remote_reads += 1
        self._served.discard(uri)
        _write_local(path, whole)
        return whole[offset:offset + length]

    def drop_copy(self, uri: str) -> bool:
        """Delete the copy a read of ``uri`` was just served from (it failed its checksum), so the
        next read goes to ``stateLocation``; False if that read did not come from a copy."""
        path = self._copy_path(uri)
        if path is None or uri not in self._served:
            return False
        self._served.discard(uri)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return True

    def write_atomic(self, uri: str, data: bytes, *, durable: bool = True) -> None:
        storage.write_atomic(uri, data, durable=durable)
        path = self._copy_path(uri)
        if path is not None:
            _write_local(path, data)

    def reset_counts(self) -> None:
        self.local_reads = self.remote_reads = 0


def _write_local(path: str, data: bytes) -> None:
    """Write a copy (rename into place: never seen half-written; no fsync: a copy lost in a crash
    is read from ``stateLocation`` again). A copy that cannot be written is skipped."""
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def after_snapshot(io: Any, seq: int, keep: set[str]) -> None:
    """After a shard's snapshot at offset ``seq`` (its store's ``io``): record ``seq`` as the
    offset whose state this executor holds, and delete the copies of segments not in ``keep``
    (the snapshot's ``snapshot_files``)."""
    if not isinstance(io, LocalCopies):
        return
    try:
        os.makedirs(io.directory, exist_ok=True)
        for name in os.listdir(io.directory):
            if name.startswith("seg-") and name not in keep:
                os.unlink(os.path.join(io.directory, name))
    except OSError:
        return                              # copies are an optimisation: never fail the batch
    _write_local(os.path.join(io.directory, _LATEST), str(seq).encode())


def local_shards(state: str, seq: int) -> list[int]:
    """The shards of ``state`` whose snapshot at offset ``seq`` was written on this executor."""
    base = copies_dir(state)
    if base is None or not os.path.isdir(base):
        return []
    shards = []
    for name in os.listdir(base):
        try:
            with open(os.path.join(base, name, _LATEST), "rb") as f:
                if int(f.read()) == seq:
                    shards.append(int(name.removeprefix("shard-")))
        except (OSError, ValueError):
            continue
    return sorted(shards)
