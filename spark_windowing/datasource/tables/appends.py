"""Blind appends to a pane table, one Delta log entry each, without refreshing a table handle.

The pane log (``triggers``, ``retractions``) gets one append per micro-batch: the batch's data
files plus the app transaction ``(appId, batchId)`` that makes the batch exactly once. Through
delta-rs that is ``create_write_transaction`` on a handle, which does not advance the handle, so
the next batch first replays the log since the last checkpoint to bring it up to date: 15-40 ms
a batch in a Spark worker, growing until the next checkpoint (issue #44's breakdown,
``benchmarks/batch_breakdown.py``).

Here the process remembers, per table, the version it last saw and the app-transaction versions
in it (:class:`_Known`), and writes the next log entry itself:

1. the first append of a process (or after a miss) reads both from the table (``delta.latest``);
   before each later append, one stat checks that the last entry it knows is still the one it saw
   (``delta.log_stamp``): a table deleted and created anew at the path is read afresh, never
   appended to at the old table's next version;
2. a batch whose app transaction the table already holds is skipped (False: a replay);
3. otherwise ``_delta_log/<version + 1>.json`` is published with put-if-absent
   (``storage.publish_exclusive``): ``commitInfo`` (operation ``WRITE``, mode ``Append``,
   ``isBlindAppend``, the caller's commit metadata), one ``add`` per file and the ``txn``;
4. if that version exists, someone committed since (the upkeep's compaction or vacuum, another
   writer despite the lease): the process forgets what it knew and goes back to 1. The entry is
   never overwritten, so a concurrent commit is never lost, and the app transaction is checked
   against the table's state as of the version the entry follows, as Delta's own optimistic
   concurrency does.

The entry is what delta-rs writes for such an append (the same actions and fields), so delta-rs,
delta-spark and DuckDB read it alike. A table whose protocol asks writers for more than version 2
without features (whose appends may need more than these actions: row tracking's row ids,
in-commit timestamps, ...), and a store without a put-if-absent here, take delta-rs's
``create_write_transaction`` instead. A checkpoint is left to the upkeep (``checkpointEvery``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

from deltalake import CommitProperties, DeltaTable, Transaction

from spark_windowing.datasource import storage
from spark_windowing.datasource.tables import delta
from spark_windowing.datasource.tables.delta import DataFile

__all__ = ["append", "forget", "known_version"]

#: What this process's appends write as engine (Delta's ``commitInfo.engineInfo``).
ENGINE = "spark-windowing"
#: Publishing attempts before falling back to delta-rs (each miss re-reads the table).
_ATTEMPTS = 3


@dataclass
class _Known:
    """A table's latest version as this process last saw or wrote it, its app transactions, and
    the stamp of that version's log entry (``delta.log_stamp``): what this process knows holds
    while the entry is the one it saw."""

    version: int
    txn: dict[str, int | None]
    stamp: tuple[int, int] | None


_KNOWN: dict[str, _Known] = {}


def known_version(uri: str) -> int | None:
    """The table's version as this process's last append left it (None: not known)."""
    known = _KNOWN.get(uri)
    return None if known is None else known.version


def forget(uri: str) -> None:
    """Drop what this process knows of the table at ``uri`` (its next append reads it again)."""
    _KNOWN.pop(uri, None)


def append(uri: str, files: Sequence[DataFile], *, app_id: str, batch_id: int,
           metadata: Mapping[str, object]) -> bool:
    """Commit ``files`` (with their partition values) to the table at ``uri`` as batch ``batch_id`` of
    ``app_id``, with ``metadata`` in the commit info; False, and nothing written, when the table
    already holds that batch. See the module docstring."""
    if not storage.exclusive_create_available(f"{uri.rstrip('/')}/_delta_log/x"):
        return _append_with_delta_rs(uri, files, app_id, batch_id, metadata)
    for _ in range(_ATTEMPTS):
        known = _KNOWN.get(uri)
        if known is not None and delta.log_stamp(uri, known.version) != known.stamp:
            forget(uri)   # another table at the path (deleted and created anew): read it
            known = None
        if known is None or app_id not in known.txn:
            table = delta.latest(uri)
            if not _plain_protocol(table):
                return _append_with_delta_rs(uri, files, app_id, batch_id, metadata)
            known = _KNOWN[uri] = _Known(table.version(), {app_id: table.transaction_version(app_id)},
                                         delta.log_stamp(uri, table.version()))
        done = known.txn[app_id]
        if done is not None and done >= batch_id:
            return False
        entry = _log_entry(files, app_id, batch_id, metadata)
        if storage.publish_exclusive(f"{uri.rstrip('/')}/_delta_log/{known.version + 1:020d}.json", entry):
            known.version += 1
            known.txn[app_id] = batch_id
            known.stamp = delta.log_stamp(uri, known.version)
            return True
        forget(uri)   # someone committed since: read the table again and decide anew
    return _append_with_delta_rs(uri, files, app_id, batch_id, metadata)


def _plain_protocol(table: DeltaTable) -> bool:
    """Whether an append needs no more than writing its actions: writer version 2 or less, no
    writer features, no invariants in the schema (the pane tables as the sink creates them)."""
    protocol = table.protocol()
    if protocol.min_writer_version > 2 or protocol.writer_features:
        return False
    return not any("delta.invariants" in (f.metadata or {}) for f in table.schema().fields)


def _log_entry(files: Sequence[DataFile], app_id: str, batch_id: int, metadata: Mapping[str, object]) -> bytes:
    now = int(time.time() * 1000)
    partition_by = sorted({k for f in files for k, _ in f.partition_values})
    info = {"timestamp": now, "operation": "WRITE",
            "operationParameters": {"mode": "Append", "partitionBy": json.dumps(partition_by)},
            "isBlindAppend": True, "engineInfo": ENGINE, "clientVersion": ENGINE, **metadata}
    actions = [{"commitInfo": info}]
    actions += [{"add": {"path": f.path, "partitionValues": dict(f.partition_values), "size": f.size,
                         "modificationTime": now,
                         "dataChange": True, "stats": f.stats}} for f in files]
    actions.append({"txn": {"appId": app_id, "version": batch_id, "lastUpdated": now}})
    return "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions).encode()


def _append_with_delta_rs(uri: str, files: Sequence[DataFile], app_id: str, batch_id: int,
                          metadata: Mapping[str, object]) -> bool:
    table = delta.latest(uri)
    done = table.transaction_version(app_id)
    if done is not None and done >= batch_id:
        return False
    table.create_write_transaction([delta.add_action(f) for f in files], mode="append", schema=table.schema(),
                                   commit_properties=CommitProperties(
                                       app_transactions=[Transaction(app_id, batch_id)],
                                       custom_metadata=dict(metadata)))
    return True
