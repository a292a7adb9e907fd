"""Delta Lake plumbing of the pane tables, through the ``deltalake`` (delta-rs) package only.

A pane table set lives under one root ``P``: ``P/triggers``, ``P/retractions``, ``P/current``
(:data:`TABLES`), and ``P/_staging`` for the sink's per-batch scratch files. Every table has the
same columns (the pane schema, `spark_windowing.panes`) and records it in its Delta configuration:

* ``spark_windowing.formatVersion`` = ``1``
* ``spark_windowing.table`` = ``triggers`` | ``retractions`` | ``current``
* ``spark_windowing.keyColumns`` / ``spark_windowing.aggregateColumns``: JSON lists of names
* ``spark_windowing.paneSchema``: JSON list of ``[name, arrow type, nullable]``, the fingerprint a
  later writer must match (:func:`ensure_pane_table`).

``current`` is partitioned by :data:`BUCKET_COLUMN` (``window_end_bucket``), the window end
floored to a fixed bucket (``spark_windowing.currentBucketSeconds``, chosen when the table is
created): a micro-batch's MERGE names the buckets of its panes, so delta-rs reads and rewrites
only those partitions (:func:`current_bucket_seconds`; tables written before the column existed
are unpartitioned and keep working with a MERGE over the whole table).

Data files are plain Parquet (zstd), written straight into the table directory
and committed later by the driver with ``DeltaTable.create_write_transaction``: the same protocol
Spark's own Delta writer follows (files first, then one atomic log commit). A file that was written
but never committed (a killed task or driver) is invisible to every reader; the sink deletes those
it knows of (aborts, replays), and ``DeltaTable.vacuum(full=True)`` (default retention, never 0
while a query runs: it would take in-flight files) removes the rest.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterator, Sequence
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from deltalake.transaction import AddAction

from spark_windowing.datasource import storage
from spark_windowing.datasource.storage.layout import CURRENT, RETRACTIONS, STAGING, TABLES, TRIGGERS, table_uri
from spark_windowing.datasource.storage import filesystem
from spark_windowing.panes import WINDOW_FIELDS, pane_schema, split_pane_schema

__all__ = ["TABLES", "TRIGGERS", "RETRACTIONS", "CURRENT", "STAGING", "FORMAT_VERSION", "DataFile",
           "normalize_root", "table_uri", "open_table", "ensure_pane_table", "table_pane_schema",
           "recorded_pane_schema", "user_metadata", "sort_columns", "write_data_file", "file_stats", "add_action",
           "read_files", "filesystem", "delete_files", "delete_stale_staging", "BUCKET_COLUMN",
           "DEFAULT_BUCKET_SECONDS", "current_bucket_seconds", "window_end_buckets", "commit_sizes"]

FORMAT_VERSION = "1"

_CONF = "spark_windowing."
CONF_FORMAT = _CONF + "formatVersion"
CONF_TABLE = _CONF + "table"
CONF_KEYS = _CONF + "keyColumns"
CONF_AGGREGATES = _CONF + "aggregateColumns"
CONF_SCHEMA = _CONF + "paneSchema"
CONF_BUCKET = _CONF + "currentBucketSeconds"

BUCKET_COLUMN = "window_end_bucket"
DEFAULT_BUCKET_SECONDS = 600
_BUCKET_FORMAT = "%Y%m%dT%H%M%SZ"   # ISO 8601 basic format: no ':' in partition directory names

_DESCRIPTIONS = {
    TRIGGERS: "spark-windowing panes: every TRIGGER row, appended once per micro-batch",
    RETRACTIONS: "spark-windowing panes: every RETRACTION row, appended once per micro-batch",
    CURRENT: "spark-windowing panes: the latest TRIGGER per key and window, retractions applied",
}


@dataclass(frozen=True)
class DataFile:
    """One Parquet file an executor wrote into a table directory, not yet committed.

    ``path`` is relative to the table root; ``stats`` is the Delta ``add.stats`` JSON;
    ``partition_values`` its partition's (a partitioned table: the file holds no such column).
    """

    table: str
    path: str
    size: int
    num_rows: int
    stats: str
    partition_values: tuple[tuple[str, str], ...] = ()


# --------------------------------------------------------------------------- locations

def normalize_root(path: str) -> str:
    """``path`` as a URI-or-absolute-path without trailing slash (local paths made absolute)."""
    if not path or not path.strip():
        raise ValueError("empty path")
    path = path.strip()
    if urlparse(path).scheme in ("", "file"):
        local = path[len("file://"):] if path.startswith("file://") else path
        return os.path.abspath(os.path.expanduser(local))
    return path.rstrip("/")


def delete_files(root: str, relative_paths: Sequence[str]) -> None:
    """Delete files under ``root`` (relative paths); files already gone are fine."""
    if not relative_paths:
        return
    fs, base = filesystem(root)
    for rel in relative_paths:
        try:
            fs.delete_file(f"{base}/{rel}")
        except FileNotFoundError:
            pass


def delete_stale_staging(root: str, batch_id: int) -> None:
    """Delete the ``root/_staging`` files of micro-batches up to ``batch_id`` (attempts that died
    before their commit). Staged files are named ``part-b<batchId>-...`` by the task that wrote
    them; files without a batch id (written outside a stream) are left alone.
    """
    fs, base = filesystem(root)
    selector = pafs.FileSelector(f"{base}/{STAGING}", allow_not_found=True)
    stale = []
    for info in fs.get_file_info(selector):
        match = _STAGED_BATCH.match(info.base_name)
        if match and int(match.group(1)) <= batch_id:
            stale.append(info.base_name)
    delete_files(f"{root}/{STAGING}", stale)


_STAGED_BATCH = re.compile(r"part-b(\d+)-")


# --------------------------------------------------------------------------- schema in the table

def table_pane_schema(schema: pa.Schema) -> pa.Schema:
    """The schema a pane table stores for DataFrames of ``schema``.

    Key and aggregate columns are kept as given (type and nullability); the window and metadata
    columns take their canonical definitions from ``spark_windowing.panes`` (timestamps ``us``,
    UTC; only ``watermark`` nullable). Raises ``ValueError`` if ``schema`` is not a pane schema.
    """
    keys, aggregates = split_pane_schema(schema)
    return pane_schema(keys, aggregates)


def schema_fingerprint(schema: pa.Schema) -> str:
    """The pane schema as recorded in a pane table's configuration: names, types, nullability."""
    return json.dumps([[f.name, str(f.type), f.nullable] for f in schema])


def _configuration(role: str, schema: pa.Schema) -> dict[str, str]:
    keys, aggregates = split_pane_schema(schema)
    return {CONF_FORMAT: FORMAT_VERSION, CONF_TABLE: role,
            CONF_KEYS: json.dumps([f.name for f in keys]),
            CONF_AGGREGATES: json.dumps([f.name for f in aggregates]),
            CONF_SCHEMA: schema_fingerprint(schema)}


def user_metadata(app_id: str, batch: int) -> dict[str, str]:
    """Commit-info entries naming the writer's app id and batch: ``userMetadata`` is the commit-info
    field Delta readers show (Spark's ``DESCRIBE HISTORY`` column ``userMetadata``; Spark drops
    commit-info keys it does not know), a JSON object ``{"appId": ..., "batchId": ...}``."""
    return {"userMetadata": json.dumps({"appId": app_id, "batchId": batch}, separators=(",", ":"))}


def recorded_pane_schema(table: DeltaTable) -> str | None:
    """The pane-schema fingerprint recorded in ``table`` (None: not a spark-windowing table)."""
    return table.metadata().configuration.get(CONF_SCHEMA)


def log_stamp(uri: str, version: int) -> tuple[int, int] | None:
    """The stamp (``storage.stamp``: size, modification time) of the log entry ``version`` of the
    table at ``uri``; None when there is none. A cache that knows a table at version ``v`` checks
    this before it trusts what it knows: a table deleted and created anew at the same path (a
    notebook's re-run, a test reusing a path) has another entry there, or none."""
    return storage.stamp(f"{uri.rstrip('/')}/_delta_log/{version:020d}.json")


def table_id(table: DeltaTable) -> str:
    """The table's identity (Delta's ``metaData.id``, a UUID chosen when the table was created):
    what the caches keyed by a table remember it by, besides its URI."""
    return table.metadata().id


@dataclass
class _Handle:
    """A table this process keeps open, and the stamp of its version's log entry."""
    table: DeltaTable
    stamp: tuple[int, int] | None


#: uri -> the DeltaTable this process last opened there (``latest``).
_HANDLES: dict[str, _Handle] = {}


def latest(uri: str) -> DeltaTable:
    """The table at ``uri`` at its latest version, kept open across calls in this process.

    Opening a Delta table replays its log from the last checkpoint (6-25 ms for a pane table a
    few dozen commits old); a kept handle checks that its version's log entry is still the one it
    read (``log_stamp``: one stat), looks for the next version's entry (one more) and reads only
    the commits added since (2-10 ms). The sink's commit runs in a Python worker that Spark keeps
    for the query, so each micro-batch pays the catch-up, not the open. A table deleted and
    created anew under the same ``uri`` is opened afresh: its identity (``table_id``) is new, so
    what other caches remember of the old one no longer applies."""
    kept = _HANDLES.get(uri)
    if kept is not None:
        try:
            table = kept.table
            if log_stamp(uri, table.version()) == kept.stamp:
                if storage.exists(f"{uri.rstrip('/')}/_delta_log/{table.version() + 1:020d}.json"):
                    table.update_incremental()    # versions are contiguous: no next one, nothing newer
                    kept.stamp = log_stamp(uri, table.version())
                return table
        except Exception:   # e.g. the log was moved away under us: open it afresh (or fail there)
            pass
        _HANDLES.pop(uri, None)
    table = DeltaTable(uri)
    _HANDLES[uri] = _Handle(table, log_stamp(uri, table.version()))
    return table


def forget(uri: str) -> None:
    """Drop the handle :func:`latest` keeps for ``uri``."""
    _HANDLES.pop(uri, None)


#: (uri, app id) -> (the table's identity and version, the app's transaction version as of it).
_TXNS: dict[tuple[str, str], tuple[str, int, int | None]] = {}


def transaction_version(uri: str, table: DeltaTable, app_id: str) -> int | None:
    """``table.transaction_version(app_id)``, remembered for the table's identity and version:
    delta-rs finds it by scanning the table's log state (~10 ms a call on ``current`` in a Spark
    worker), and the sink asks before every commit. :func:`note_commit` carries it across the
    sink's own commits."""
    key, version = (table_id(table), table.version()), table.version()
    known = _TXNS.get((uri, app_id))
    if known is not None and known[:2] == key:
        return known[2]
    done = table.transaction_version(app_id)
    _TXNS[(uri, app_id)] = (*key, done)
    return done


def note_commit(uri: str, table: DeltaTable, app_id: str, before: int, batch_id: int | None = None) -> None:
    """``table`` advanced from version ``before`` by one commit of this process, which recorded
    ``app_id``'s transaction ``batch_id`` (None: no transaction, e.g. an UPDATE), or by none (an
    UPDATE that changed nothing): what :func:`transaction_version` knows moves along. Anything
    else (a commit of another writer in between, another table at the path) forgets it."""
    known = _TXNS.pop((uri, app_id), None)
    if known is None or known[:2] != (table_id(table), before):
        return
    if table.version() == before:
        _TXNS[(uri, app_id)] = known
    elif table.version() == before + 1:
        _TXNS[(uri, app_id)] = (known[0], before + 1, known[2] if batch_id is None else batch_id)


def open_table(uri: str) -> DeltaTable | None:
    """The Delta table at ``uri``, or None when there is none."""
    try:
        return DeltaTable(uri)
    except TableNotFoundError:
        return None


def ensure_pane_table(root: str, role: str, schema: pa.Schema, *,
                      bucket_seconds: int = DEFAULT_BUCKET_SECONDS) -> DeltaTable:
    """Open ``root/role``, creating it for ``schema`` if missing; the recorded schema must match.

    ``schema`` is a table pane schema (:func:`table_pane_schema`). Raises ``ValueError`` naming the
    table, the recorded and the new columns when the table holds another pane schema. A new
    ``current`` table is partitioned by :data:`BUCKET_COLUMN` with buckets of ``bucket_seconds``.
    """
    uri = table_uri(root, role)
    table = open_table(uri)
    if table is None:
        configuration, partition_by, stored = _configuration(role, schema), None, schema
        if role == CURRENT:
            configuration[CONF_BUCKET] = str(int(bucket_seconds))
            partition_by, stored = [BUCKET_COLUMN], schema.append(pa.field(BUCKET_COLUMN, pa.string(), False))
        forget(uri)
        DeltaTable.create(uri, stored, mode="ignore", name=f"panes_{role}", partition_by=partition_by,
                          description=_DESCRIPTIONS[role], configuration=configuration,
                          raise_if_key_not_exists=False)
        table = DeltaTable(uri)
    recorded = recorded_pane_schema(table)
    if recorded is None:
        raise ValueError(f"{uri} is a Delta table but not a spark-windowing pane table "
                         f"(no {CONF_SCHEMA} in its configuration); choose another sink path")
    if recorded != schema_fingerprint(schema):
        raise ValueError(
            f"pane table {uri} holds another pane schema; a sink path keeps one schema for life.\n"
            f"  table columns:     {_describe(json.loads(recorded))}\n"
            f"  DataFrame columns: {_describe(json.loads(schema_fingerprint(schema)))}\n"
            "Write to a new path (or delete the old tables) after changing keys or aggregates.")
    return table


def current_bucket_seconds(table: DeltaTable) -> int | None:
    """The bucket width of a ``current`` table partitioned by :data:`BUCKET_COLUMN`, or None for a
    table of the first layout (unpartitioned: every MERGE reads and rewrites the whole table)."""
    metadata = table.metadata()
    if BUCKET_COLUMN not in metadata.partition_columns:
        return None
    return int(metadata.configuration[CONF_BUCKET])


def window_end_buckets(window_end: pa.Array | pa.ChunkedArray, seconds: int) -> pa.Array | pa.ChunkedArray:
    """The :data:`BUCKET_COLUMN` values of rows with these window ends: the end floored to
    ``seconds`` (from the epoch, UTC), as ``YYYYMMDDTHHMMSSZ``."""
    floored = pc.floor_temporal(window_end.cast(pa.timestamp("us", tz="UTC")), multiple=seconds, unit="second")
    return pc.strftime(floored, format=_BUCKET_FORMAT)


def commit_sizes(uri: str, version: int) -> dict[str, int]:
    """What commit ``version`` of the table at ``uri`` did to its data files, from its log entry:
    files and bytes added and removed (``bytes_removed`` counts removes that record a size)."""
    fs, base = filesystem(uri)
    with fs.open_input_stream(f"{base}/_delta_log/{version:020d}.json") as f:
        actions = [json.loads(line) for line in f.read().decode().splitlines() if line.strip()]
    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    return {"files_added": len(adds), "bytes_added": sum(int(a.get("size") or 0) for a in adds),
            "files_removed": len(removes), "bytes_removed": sum(int(r.get("size") or 0) for r in removes)}


def _describe(fields: list[list]) -> str:
    return ", ".join(f"{n} {t}{'' if nullable else ' not null'}" for n, t, nullable in fields)


# --------------------------------------------------------------------------- data files

def sort_columns(schema: pa.Schema) -> list[str]:
    """The order rows are sorted in within a data file: window_start, window_end, then the keys.

    Only key columns of orderable (non-nested) types take part.
    """
    keys, _ = split_pane_schema(schema)
    orderable = [f.name for f in keys if not pa.types.is_nested(f.type)]
    return [f.name for f in WINDOW_FIELDS] + orderable


def write_data_file(root: str, table: str, rows: pa.Table, *, sort_by: Sequence[str],
                    name_hint: str) -> DataFile:
    """Sort ``rows`` by ``sort_by`` and write them as one Parquet file into ``root/table``."""
    if sort_by:
        rows = rows.sort_by([(c, "ascending") for c in sort_by])
    rel = f"part-{name_hint}-{uuid.uuid4().hex}.zstd.parquet"
    fs, base = filesystem(root)
    if storage.is_local(fs):   # object stores have no directories
        fs.create_dir(f"{base}/{table}", recursive=True)
    path = f"{base}/{table}/{rel}"
    with fs.open_output_stream(path) as sink:
        pq.write_table(rows, sink, compression="zstd", row_group_size=128 * 1024)
        size = sink.tell()
    return DataFile(table=table, path=rel, size=size, num_rows=rows.num_rows, stats=file_stats(rows))


def add_action(data_file: DataFile) -> AddAction:
    return AddAction(path=data_file.path, size=data_file.size, partition_values=dict(data_file.partition_values),
                     modification_time=int(time.time() * 1000), data_change=True,
                     stats=data_file.stats)


def file_stats(rows: pa.Table) -> str:
    """Delta ``add.stats`` JSON: numRecords, nullCount, and exact min/max for ints, strings, dates
    and UTC timestamps (timestamps at millisecond precision as Delta writes them: min rounded down,
    max rounded up, so the bounds always hold).
    """
    mins: dict[str, object] = {}
    maxs: dict[str, object] = {}
    nulls: dict[str, int] = {}
    for field, column in zip(rows.schema, rows.columns):
        if pa.types.is_nested(field.type):
            continue
        nulls[field.name] = column.null_count
        bounds = _bounds(field.type, column)
        if bounds is not None:
            mins[field.name], maxs[field.name] = bounds
    return json.dumps({"numRecords": rows.num_rows, "minValues": mins, "maxValues": maxs,
                       "nullCount": nulls}, separators=(",", ":"))


def _bounds(arrow_type: pa.DataType, column: pa.ChunkedArray) -> tuple[object, object] | None:
    if column.null_count == len(column):
        return None
    t = pa.types
    if not (t.is_integer(arrow_type) or t.is_string(arrow_type) or t.is_large_string(arrow_type)
            or t.is_date(arrow_type) or (t.is_timestamp(arrow_type) and arrow_type.tz is not None)):
        return None
    mm = pc.min_max(column)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if t.is_timestamp(arrow_type):
        lo_us = pc.cast(mm["min"], pa.int64()).as_py()
        hi_us = pc.cast(mm["max"], pa.int64()).as_py()
        return _delta_millis(math.floor(lo_us / 1000)), _delta_millis(math.ceil(hi_us / 1000))
    if t.is_date(arrow_type):
        return lo.isoformat(), hi.isoformat()
    return lo, hi


_MAX_MILLIS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, the last instant a stat can name


def _delta_millis(millis: int) -> str:
    millis = min(millis, _MAX_MILLIS)  # global windows end at 9999-12-31T23:59:59.999999
    dt = datetime.fromtimestamp(millis / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"


def read_files(root: str, table: str, relative_paths: Sequence[str], *,
               columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    """Stream the record batches of uncommitted data files of ``root/table``."""
    fs, base = filesystem(root)
    for rel in relative_paths:
        parquet = pq.ParquetFile(f"{base}/{table}/{rel}", filesystem=fs)
        yield from parquet.iter_batches(columns=columns, batch_size=64 * 1024)
