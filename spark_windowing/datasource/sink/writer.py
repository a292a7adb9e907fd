"""The pane sink: ``panes.writeStream.format("windowed").option("path", P)`` -> three Delta tables.

>>> (panes.writeStream.format("windowed")                      # doctest: +SKIP
...       .option("path", "/lake/panes/clicks")
...       .option("checkpointLocation", "/lake/_chk/clicks")
...       .start())

Tables (written with the ``deltalake`` package; no JVM Delta jars needed):

* ``P/triggers``    every ``TRIGGER`` row, appended.
* ``P/retractions`` every ``RETRACTION`` row, appended.
* ``P/current``     one row per key and window: the latest ``TRIGGER``, retractions applied
  (what a dashboard reads). Per micro-batch: a key+window with a ``TRIGGER`` in the batch is
  upserted with it; a key+window with only ``RETRACTION`` rows in the batch (a session window
  merged away) is deleted. A batch holds at most one ``TRIGGER`` per key and window (the
  operator fires at most once per key, window and micro-batch); the sink checks this within each
  Spark task. Across tasks it is the producer's contract (the windowed source keeps each key in
  one task); a ``RETRACTION`` and the ``TRIGGER`` replacing it may arrive in different tasks.

Options (case-insensitive):

* ``path`` (required): the root ``P`` (local path or a URI that ``deltalake`` and ``pyarrow.fs``
  both resolve, credentials from the environment).
* ``appId``: the Delta app-transaction id. Default ``spark-windowing-sink-<query id>``, the
  streaming query id Spark keeps in the checkpoint, so a restart from the checkpoint finds its
  own commits while a query started afresh (new checkpoint) never skips anything. Set it only to
  keep the id across a checkpoint change, knowing that batch ids restart at 0 then.
* ``maxRowsPerFile`` (default 500000): rows per Parquet data file (and the rows a task buffers
  per table before it sorts and writes them).
* ``writerLease`` (default ``5 minutes``): one query writes a pane table set. The query holds
  the lease ``P/_writer.json`` (``spark_windowing.datasource.sink.lease``): taken when the query starts
  (before batch 0 runs, when ``checkpointLocation`` is given as an option; else at the first
  commit), renewed at every commit, released when the query terminates. Another query (another
  checkpoint: another query id) finding a lease renewed less than ``writerLease`` ago fails at
  once, naming the holder; a restart from the same checkpoint is the same query and is never
  refused. A driver that died releases nothing: its lease goes stale after ``writerLease``
  (``0 seconds``: take the path over at once). Every commit also records its ``appId``.
* ``allowSpecChange`` (default ``false``): the tables record the windowing spec that produced
  their panes (``P/_spec.json``: window, keyColumns, aggregate, trigger, accumulationMode,
  timestampCombiner, timestampColumn, ...; ``spark_windowing.datasource.tables.pane_spec``), carried
  from the windowed source in the pane schema's metadata. A query whose panes come from another
  spec is refused when it starts, naming each changed option ``old → new``; ``true`` adds its
  panes anyway (and records its spec). Panes whose schema carries no spec (not from the windowed
  source, or a transformation that dropped column metadata) are not checked.

Layout: ``triggers`` and ``retractions`` are not partitioned (panes are small and queried by
window time and by key, and partition columns would multiply small files per micro-batch); each of
their data files is sorted by ``window_start, window_end, <keys>`` and carries min/max statistics
(timestamps widened to whole milliseconds, as Delta stores them), so Delta readers (Spark with the
Delta jars, delta-rs, DuckDB) skip files by window time. ``current`` is partitioned by
``window_end_bucket`` (option ``currentBucket``, default 10 minutes, fixed at creation) and each
micro-batch's MERGE names the buckets of its panes, so it reads and rewrites only the partitions
of windows the batch touches (``spark_windowing.datasource.tables.delta``). After the commits, the tables are compacted,
vacuumed and checkpointed on the schedule of ``compactEvery``, ``vacuumEvery``,
``vacuumRetention`` and ``checkpointEvery`` (``spark_windowing.datasource.tables.maintenance``), and what the batch wrote
goes to ``P/_metrics/<batchId>.json`` (``spark_windowing.datasource.sink.metrics``).

Exactly once per micro-batch (``batchId``):

1. ``write()`` (executors): each task sorts and writes its rows as Parquet files straight into
   ``P/triggers`` and ``P/retractions`` (not yet part of any table version), plus, when some
   key+window of the task has only retractions, a small file of those key+windows under
   ``P/_staging``; it returns the file list as its commit message.
2. ``commit(messages, batchId)`` (driver), table by table: ``triggers`` and ``retractions`` get one
   ``create_write_transaction`` each with the files' add actions; ``current`` one MERGE whose source
   streams the batch's trigger files and the retraction-only key+windows (never the whole batch in
   driver memory). Each commit carries ``Transaction(appId, version=batchId)``; a table whose
   ``transaction_version(appId) >= batchId`` already holds this batch and is skipped. The commit
   info also names both, as ``userMetadata`` = ``{"appId": ..., "batchId": ...}`` (the column
   Spark's ``DESCRIBE HISTORY`` shows) and ``spark_windowing.batchId``.
3. Files of skipped tables (a replay) are deleted afterwards, and so are the staging files of
   this batch and of earlier attempts that died before their commit.

One streaming query writes one path; a second one is refused when it starts (``writerLease``). On S3 the
commits are Delta log entries written with a conditional PUT (``If-None-Match: *``, delta-rs's
default), so two commits can never both take one table version.

Closed windows: ``current`` marks ``is_final`` = true for every window whose end plus
``allowedLateness`` is at or before the batch's watermark (the one its pane rows carry): no pane
can follow for it. The pane log (``triggers``, ``retractions``) is not touched (a window that
expires with nothing new fires no pane, as in Beam), so there ``is_final`` stays what the pane
said. Done by batches that write panes, for panes whose spec is known and event-time windows
(not count windows or processing time); one UPDATE commit on ``current`` when something closed.

A crash anywhere leaves each table either with or without the batch, never half of it (a Delta
commit is atomic). Spark replays an unfinished batch with the same offsets and ``batchId``; the
tables that hold it skip, the others commit. Files of an interrupted attempt are never committed
(``vacuum(full=True)`` removes them).

The schema is checked when the writer is created on the driver, before any task of the first
micro-batch runs: a DataFrame that is not a pane schema, or a pane schema other than the one
recorded in existing tables, fails the query with a message saying why.

Long module: the commit protocol (staging, the appends, the MERGE into ``current``, replay
skipping, the writer lease) stays in one file so its exactly-once argument reads top to bottom.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timezone
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from spark_windowing.datasource.tables import delta, pane_spec
from spark_windowing.datasource.sink import lease
from spark_windowing.datasource import storage
from spark_windowing.datasource.tables.delta import CURRENT, RETRACTIONS, STAGING, TABLES, TRIGGERS, DataFile
from spark_windowing.datasource._memory import release_arrow_memory
from spark_windowing.datasource._types import spark_to_arrow_schema
from spark_windowing.datasource.storage.layout import BATCH_ID_KEY, sink_spec_uri
from spark_windowing.datasource.tables.maintenance import MaintenanceOptions, maintain
from spark_windowing.datasource.sink.metrics import write_batch_metrics
from spark_windowing._time import parse_duration
from spark_windowing.errors import OptionError
from spark_windowing._parse import parse_bool
from spark_windowing.panes import KIND_RETRACTION, KIND_TRIGGER, WINDOW_FIELDS, split_pane_schema

__all__ = ["PaneStreamWriter", "PaneFilesMessage", "SinkOptions", "DEFAULT_MAX_ROWS_PER_FILE"]

DEFAULT_MAX_ROWS_PER_FILE = 500_000
DEFAULT_WRITER_LEASE_US = 300_000_000
APP_ID_KEY = "spark_windowing.appId"   # commitInfo field: the query that made a commit
APP_ID_PREFIX = "spark-windowing-sink-"
_QUERY_ID_PROPERTY = "sql.streaming.queryId"   # task-local properties Spark sets for a stream batch
_BATCH_ID_PROPERTY = "streaming.sql.batchId"
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SinkOptions:
    """The sink's options, parsed once on the driver."""

    root: str
    app_id: str | None = None
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE
    writer_lease_us: int = DEFAULT_WRITER_LEASE_US
    current_bucket_seconds: int | None = None      # None: the table's (a new table: the default)
    maintenance: MaintenanceOptions = MaintenanceOptions()
    allow_spec_change: bool = False                 # add panes of another spec to the tables on purpose
    checkpoint: str | None = None                   # the query's checkpointLocation option, when given

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "SinkOptions":
        opts = {k.lower(): v for k, v in options.items()}
        path = opts.get("path")
        if not path or not path.strip():
            raise OptionError("path", path, "the root directory or URI of the pane tables, "
                              "e.g. .option('path', '/lake/panes/clicks')", why="required by the windowed sink")
        app_id = opts.get("appid")
        if app_id is not None and not app_id.strip():
            raise OptionError("appId", app_id, "a non-empty string", why="empty")
        raw_rows = opts.get("maxrowsperfile", str(DEFAULT_MAX_ROWS_PER_FILE))
        try:
            max_rows = int(raw_rows)
        except ValueError:
            max_rows = 0
        if max_rows <= 0:
            raise OptionError("maxRowsPerFile", raw_rows, "a positive integer", why="not a positive integer")
        lease = parse_duration(opts.get("writerlease", "5 minutes"), option="writerLease")
        return cls(root=delta.normalize_root(path), app_id=app_id.strip() if app_id else None,
                   max_rows_per_file=max_rows, writer_lease_us=lease,
                   current_bucket_seconds=_bucket_seconds(opts.get("currentbucket")),
                   maintenance=MaintenanceOptions.parse(opts),
                   allow_spec_change=parse_bool("allowSpecChange", opts.get("allowspecchange", "false")),
                   checkpoint=opts.get("checkpointlocation") or None)


def _bucket_seconds(raw: str | None) -> int | None:
    if raw is None:
        return None
    us = parse_duration(raw, option="currentBucket", allow_zero=False)
    if us % 1_000_000:
        raise OptionError("currentBucket", raw, "a duration in whole seconds, e.g. '10 minutes', '1 hour'",
                          why="buckets are whole seconds")
    return us // 1_000_000


@dataclass
class PaneFilesMessage(WriterCommitMessage):
    """What one task wrote: uncommitted data files and staged retraction-only key+windows."""

    query_id: str | None
    batch_id: int | None
    files: tuple[DataFile, ...] = ()
    deletes: tuple[str, ...] = ()      # Parquet files under P/_staging: key + window columns


class PaneStreamWriter(DataSourceStreamArrowWriter):
    """The ``windowed`` stream writer (see the module docstring)."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        self.options = SinkOptions.parse(options)
        if overwrite:
            raise ValueError("the windowed sink appends panes; use outputMode('append') "
                             "(the 'current' table already holds the latest pane per key and window)")
        try:
            self.schema = delta.table_pane_schema(spark_to_arrow_schema(schema))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"writeStream.format('windowed') writes pane rows only: {exc}. "
                             f"DataFrame columns: {schema.simpleString()}") from None
        self.produced = pane_spec.from_schema(schema)   # the windowing spec of the panes (None: unknown)
        _check_spec(self.options, self.produced)         # before anything is created or written
        _ensure_tables(self.options, self.schema)
        # Spark creates this writer when the query starts (before batch 0) and again for each
        # commit: a query with its checkpointLocation as an option knows its id here and takes the
        # writer lease now, so a second query on the path fails before its first batch runs.
        query_id = _checkpoint_query_id(self.options.checkpoint)
        app_id = self.options.app_id or (APP_ID_PREFIX + query_id if query_id else None)
        if app_id is not None:
            lease.take(self.options.root, app_id, lease_us=self.options.writer_lease_us,
                       checkpoint=self.options.checkpoint, batch_id=None, query_id=query_id)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PaneFilesMessage:
        return _TaskWriter(self.options, self.schema).run(iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        written = _written(messages)
        other = {m.batch_id for m in written} - {None, batchId}
        if other:
            raise RuntimeError(f"windowed sink: commit of batch {batchId} got files of batch(es) {sorted(other)}")
        every = [m for m in messages if isinstance(m, PaneFilesMessage)]
        query_ids = {m.query_id for m in every} - {None}
        owner = self.options.app_id or (self._app_id(every) if query_ids else None)
        if owner is not None:              # renew the lease every batch, empty ones too
            lease.take(self.options.root, owner, lease_us=self.options.writer_lease_us,
                       checkpoint=self.options.checkpoint, batch_id=batchId,
                       query_id=next(iter(query_ids)) if len(query_ids) == 1 else None)
        if self.produced is not None:      # the tables record what produced them (first batch, or
            _record_spec(self.options, self.produced)   # a path of the previous release)
        metrics: dict[str, dict] = {}
        phases: dict[str, float] = {}
        if written:
            batch = _BatchCommit(self.options, self.schema, written, batchId, self._app_id(written),
                                 closing=_closing_lateness(self.produced, self.schema))
            batch.run()
            metrics, phases = batch.metrics, batch.phases
        with _timed(phases, "upkeep"):
            for table in TABLES:
                upkeep = maintain(delta.table_uri(self.options.root, table), batchId, self.options.maintenance)
                if upkeep:
                    metrics.setdefault(table, {})["maintenance"] = upkeep
        write_batch_metrics(self.options.root, batchId, metrics, commit_ms=phases)
        release_arrow_memory()

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        _discard(self.options.root, _written(messages))

    def _app_id(self, messages: Sequence[PaneFilesMessage]) -> str:
        if self.options.app_id:
            return self.options.app_id
        query_ids = {m.query_id for m in messages}
        if len(query_ids) != 1 or None in query_ids:
            raise RuntimeError(f"windowed sink: cannot tell the streaming query id (got {query_ids}); "
                               "set .option('appId', ...) when writing outside a streaming query")
        return APP_ID_PREFIX + query_ids.pop()


ALLOW_SPEC_CHANGE_HINT = ".option('allowSpecChange', 'true')"


def _check_spec(options: SinkOptions, produced: dict | None) -> None:
    """Refuse panes of another windowing spec than the one recorded under the path (their rows and
    the recorded ones would be mixed: in ``current``, 10- and 5-minute windows of the same events)."""
    if produced is None:
        return
    raw = storage.read_bytes(sink_spec_uri(options.root), missing_ok=True)
    if raw is None:
        return
    recorded = json.loads(raw).get("producedBy", {})
    found = pane_spec.changes(recorded, produced, pane_spec.COMPARED)
    if not found:
        return
    if options.allow_spec_change:
        _log.warning("windowed sink: %s: allowSpecChange: adding panes of another spec (%s)",
                     options.root, pane_spec.describe_changes(found))
        return
    raise ValueError(
        f"windowed sink: the pane tables at {options.root} hold panes of another windowing spec "
        f"(recorded in {sink_spec_uri(options.root)}): {pane_spec.describe_changes(found)}. Their rows and "
        "this query's would be mixed in one table set (in 'current', windows of both specs would count the "
        "same events twice). Write to a new sink path (.option('path', ...)), or, to add this query's panes "
        f"to these tables on purpose, set {ALLOW_SPEC_CHANGE_HINT}.")


def _record_spec(options: SinkOptions, produced: dict) -> None:
    """Record ``produced`` in ``P/_spec.json`` when it is not recorded yet (a new path, or one the
    previous release wrote) or differs (``allowSpecChange``: the latest spec is the one compared)."""
    uri = sink_spec_uri(options.root)
    raw = storage.read_bytes(uri, missing_ok=True)
    if raw is not None and json.loads(raw).get("producedBy") == produced:
        return
    doc = {"formatVersion": 1, "producedBy": produced, "recordedAt": _iso_us(int(time.time() * 1_000_000))}
    storage.write_atomic(uri, json.dumps(doc, indent=1, sort_keys=True).encode())


def _closing_lateness(produced: dict | None, schema: pa.Schema) -> int | None:
    """The allowed lateness after which ``current`` marks a window final (``_BatchCommit``), or None
    when it cannot be told: panes of unknown spec, processing-time or count windows."""
    if produced is None or pane_spec.LATENESS_US not in produced or "window_seq" in schema.names:
        return None
    if str(produced.get("timestampColumn", "")).startswith("(none"):
        return None
    return int(produced[pane_spec.LATENESS_US])


def _checkpoint_query_id(checkpoint: str | None) -> str | None:
    """The id of the query whose checkpoint is ``checkpoint``: Spark writes it to
    ``<checkpoint>/metadata`` before it creates the sink's writer (None: unknown here)."""
    if not checkpoint:
        return None
    try:
        raw = storage.read_bytes(checkpoint.rstrip("/") + "/metadata", missing_ok=True)
        return json.loads(raw.decode().splitlines()[0])["id"] if raw else None
    except Exception:   # a checkpoint URI pyarrow cannot open (e.g. s3a://): the first commit checks
        return None


def _iso_us(us: int) -> str:
    return datetime.fromtimestamp(us / 1e6, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: (root, pane schema fingerprint, currentBucket option) whose tables this process has created or
#: checked: Spark creates the writer again for every commit, in a Python worker that lives for the
#: query, and opening the three tables each time cost ~40-100 ms a batch.
_TABLES_CHECKED: set[tuple[str, str, int | None]] = set()


def _ensure_tables(options: SinkOptions, schema: pa.Schema) -> None:
    """Create the three pane tables where missing and check the existing ones (pane schema,
    ``currentBucket``), once per process and sink path: later writers of the same path and schema
    only check that each table's ``_delta_log`` is still there (a table moved aside, as
    docs/long-running.md suggests for an old layout, is created and checked again)."""
    key = (options.root, delta.schema_fingerprint(schema), options.current_bucket_seconds)
    if key in _TABLES_CHECKED and all(storage.exists(f"{delta.table_uri(options.root, t)}/_delta_log")
                                      for t in TABLES):
        return
    for table in TABLES:
        delta.ensure_pane_table(options.root, table, schema, bucket_seconds=(
            options.current_bucket_seconds or delta.DEFAULT_BUCKET_SECONDS))
    _check_current_layout(options)
    _TABLES_CHECKED.add(key)


def _check_current_layout(options: SinkOptions) -> None:
    """A ``currentBucket`` option must match the bucket ``current`` was created with (a window's
    row must stay in one partition for life); a ``current`` of the first, unpartitioned layout
    keeps working (every MERGE rewrites the whole table) and is reported in the log."""
    current = DeltaTable(delta.table_uri(options.root, CURRENT))
    recorded = delta.current_bucket_seconds(current)
    if recorded is None:
        _log.warning("windowed sink: %s/current predates the window_end_bucket layout; each micro-batch "
                     "rewrites the whole table. Move it aside and let the sink recreate it (see "
                     "docs/long-running.md) to make MERGE cost follow the batch.", options.root)
    wanted = options.current_bucket_seconds
    if wanted is not None and wanted != recorded:
        have = "unpartitioned (first layout)" if recorded is None else f"{recorded} seconds"
        raise OptionError("currentBucket", f"{wanted} seconds", f"the table's own bucket ({have}) or no option",
                          why=f"{options.root}/current was created with another bucket; it is fixed for "
                              "the table's life")


def _written(messages: Iterable[WriterCommitMessage | None]) -> list[PaneFilesMessage]:
    return [m for m in messages if isinstance(m, PaneFilesMessage) and (m.files or m.deletes)]


def _discard(root: str, messages: Sequence[PaneFilesMessage]) -> None:
    for table in (TRIGGERS, RETRACTIONS):
        delta.delete_files(f"{root}/{table}", [f.path for m in messages for f in m.files if f.table == table])
    delta.delete_files(f"{root}/{STAGING}", [p for m in messages for p in m.deletes])


# --------------------------------------------------------------------------- executor side

def _task_context() -> tuple[str | None, int | None, str]:
    """(query id, batch id, file-name hint) of the running Spark task, if any."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return None, None, "local"
    batch = ctx.getLocalProperty(_BATCH_ID_PROPERTY)
    batch_id = int(batch) if batch is not None else None
    hint = f"b{batch_id if batch_id is not None else 'x'}-p{ctx.partitionId()}-a{ctx.attemptNumber()}"
    return ctx.getLocalProperty(_QUERY_ID_PROPERTY), batch_id, hint


@dataclass
class _TaskWriter:
    """Writes one task's pane rows; keeps at most ``max_rows_per_file`` rows per table in memory,
    plus the key+window columns of the task (for the retraction-only check)."""

    options: SinkOptions
    schema: pa.Schema
    buffers: dict[str, list[pa.RecordBatch]] = field(default_factory=lambda: {TRIGGERS: [], RETRACTIONS: []})
    keys: dict[str, list[pa.RecordBatch]] = field(default_factory=lambda: {TRIGGERS: [], RETRACTIONS: []})
    files: list[DataFile] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)

    def run(self, iterator: Iterator[pa.RecordBatch]) -> PaneFilesMessage:
        query_id, batch_id, self.hint = _task_context()
        key_columns = _key_window_columns(self.schema)
        try:
            for batch in iterator:
                batch = _conform(batch, self.schema)
                for table, rows in _split_by_kind(batch).items():
                    if rows.num_rows:
                        self.buffers[table].append(rows)
                        self.keys[table].append(rows.select(key_columns))
                        self._flush(table, full_only=True)
            for table in (TRIGGERS, RETRACTIONS):
                self._flush(table, full_only=False)
            self._stage_retraction_only(key_columns)
        except BaseException:
            _discard(self.options.root, [PaneFilesMessage(None, None, tuple(self.files), tuple(self.deletes))])
            raise
        finally:
            self.buffers, self.keys = {}, {}
            release_arrow_memory()
        return PaneFilesMessage(query_id, batch_id, tuple(self.files), tuple(self.deletes))

    def _flush(self, table: str, *, full_only: bool) -> None:
        """Write the buffered rows of ``table`` as files of ``max_rows_per_file`` rows; with
        ``full_only`` only full files, keeping the rest buffered."""
        limit = self.options.max_rows_per_file
        buffered = sum(b.num_rows for b in self.buffers[table])
        if buffered == 0 or (full_only and buffered < limit):
            return
        rows = pa.Table.from_batches(self.buffers[table], schema=self.schema)
        end = buffered // limit * limit if full_only else buffered
        for start in range(0, end, limit):
            self.files.append(delta.write_data_file(self.options.root, table, rows.slice(start, limit),
                                                     name_hint=self.hint, sort_by=delta.sort_columns(self.schema)))
        self.buffers[table] = rows.slice(end).to_batches()

    def _stage_retraction_only(self, key_columns: list[str]) -> None:
        triggers = _distinct(self.keys[TRIGGERS], key_columns, self.schema, check_unique=True)
        retractions = _distinct(self.keys[RETRACTIONS], key_columns, self.schema, check_unique=False)
        if retractions.num_rows == 0:
            return
        only = retractions if triggers.num_rows == 0 else retractions.join(
            triggers, keys=key_columns, join_type="left anti")
        if only.num_rows:
            data_file = delta.write_data_file(self.options.root, STAGING, only, name_hint=self.hint,
                                               sort_by=delta.sort_columns(self.schema))
            self.deletes.append(data_file.path)


def _key_window_columns(schema: pa.Schema) -> list[str]:
    """What identifies a window's panes: keys and bounds, plus ``window_seq`` for count windows
    (their bounds are the first/last element times, which two windows can share)."""
    keys, _ = split_pane_schema(schema)
    seq = ["window_seq"] if "window_seq" in schema.names else []
    return [f.name for f in keys] + [f.name for f in WINDOW_FIELDS] + seq


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` in the table's types (timestamps to UTC); nulls in non-nullable columns and in
    key columns are errors."""
    keys, _ = split_pane_schema(schema)
    key_names = {f.name for f in keys}
    for f in schema:
        if (not f.nullable or f.name in key_names) and batch.column(f.name).null_count:
            raise ValueError(f"windowed sink: column {f.name!r} holds null in a pane row; "
                             "pane rows have non-null keys, windows and pane metadata")
    return batch.cast(schema)


def _split_by_kind(batch: pa.RecordBatch) -> dict[str, pa.RecordBatch]:
    kind = batch.column("kind")
    is_trigger = pc.equal(kind, KIND_TRIGGER)
    is_retraction = pc.equal(kind, KIND_RETRACTION)
    unknown = pc.invert(pc.or_(is_trigger, is_retraction))
    if pc.any(unknown).as_py():
        bad = pc.filter(kind, unknown)[0].as_py()
        raise ValueError(f"windowed sink: column 'kind' = {bad!r}; accepted: {KIND_TRIGGER!r}, {KIND_RETRACTION!r}")
    return {TRIGGERS: batch.filter(is_trigger), RETRACTIONS: batch.filter(is_retraction)}


def _distinct(batches: list[pa.RecordBatch], columns: list[str], schema: pa.Schema, *,
              check_unique: bool) -> pa.Table:
    if not batches:
        return pa.schema([schema.field(c) for c in columns]).empty_table()
    # staged files of different tasks may differ in nullability (a join drops NOT NULL): unify
    common = pa.schema([f.with_nullable(True) for f in batches[0].schema])
    table = pa.Table.from_batches([b.cast(common) for b in batches], schema=common)
    counted = table.group_by(columns, use_threads=False).aggregate([([], "count_all")])
    if check_unique and counted.num_rows and pc.max(counted["count_all"]).as_py() > 1:
        dup = counted.filter(pc.greater(counted["count_all"], 1)).slice(0, 1).to_pylist()[0]
        raise ValueError(f"windowed sink: {dup.pop('count_all')} TRIGGER rows for one key and window in "
                         f"one micro-batch ({dup}); a batch holds at most one pane per key and window")
    return counted.select(columns)


# --------------------------------------------------------------------------- driver side

@dataclass
class _BatchCommit:
    """The driver's commit of one micro-batch into the three tables (see the module docstring)."""

    options: SinkOptions
    schema: pa.Schema
    messages: Sequence[PaneFilesMessage]
    batch_id: int
    app_id: str
    closing: int | None = None      # allowed lateness (µs): windows past it are final in ``current``
    metrics: dict[str, dict] = field(default_factory=dict)   # per table: what this batch wrote
    phases: dict[str, float] = field(default_factory=dict)   # commit phase -> milliseconds
    _bound: int | None = None       # windows ending at or before this (µs) are closed

    def run(self) -> None:
        root = self.options.root
        files = [f for m in self.messages for f in m.files]
        staged = [p for m in self.messages for p in m.deletes]
        replayed: dict[str, list[str]] = {}
        with _timed(self.phases, "append"):
            for table in (TRIGGERS, RETRACTIONS):
                mine = [f for f in files if f.table == table]
                if not self._append(table, mine):
                    replayed[table] = [f.path for f in mine]
        with _timed(self.phases, "merge"):
            self._bound = self._closed_bound(files)
            self._merge_current([f.path for f in files if f.table == TRIGGERS], staged)
        with _timed(self.phases, "close"):
            self._close_windows()
        with _timed(self.phases, "clean"):
            for table, paths in replayed.items():
                delta.delete_files(f"{root}/{table}", paths)
            delta.delete_files(f"{root}/{STAGING}", staged)
            delta.delete_stale_staging(root, self.batch_id)

    def _open(self, table: str) -> tuple[DeltaTable, bool]:
        """The table and whether it already holds this batch."""
        dt = DeltaTable(delta.table_uri(self.options.root, table))
        done = dt.transaction_version(self.app_id)
        return dt, done is not None and done >= self.batch_id

    def _commit_properties(self) -> CommitProperties:
        return CommitProperties(app_transactions=[Transaction(self.app_id, self.batch_id)],
                                custom_metadata={BATCH_ID_KEY: self.batch_id, APP_ID_KEY: self.app_id,
                                                 **delta.user_metadata(self.app_id, self.batch_id)})

    def _append(self, table: str, files: Sequence[DataFile]) -> bool:
        """Commit ``files`` to ``table``; False when the table already holds the batch. No files:
        nothing to commit, nothing to read (a batch without retractions costs ``retractions``
        nothing)."""
        if not files:
            return True
        dt, done = self._open(table)
        if done:
            return False
        if files:
            dt.create_write_transaction([delta.add_action(f) for f in files], mode="append",
                                        schema=dt.schema(), commit_properties=self._commit_properties())
            self.metrics[table] = {"files_added": len(files), "bytes_added": sum(f.size for f in files),
                                   "files_removed": 0, "bytes_removed": 0}
        return True

    def _merge_current(self, trigger_paths: list[str], staged: list[str]) -> None:
        dt, done = self._open(CURRENT)
        if done:
            return
        deletes = self._retraction_only(trigger_paths, staged)
        if not trigger_paths and deletes.num_rows == 0:
            return
        bucket = delta.current_bucket_seconds(dt)
        source_schema = pa.schema([f.with_nullable(True) for f in self.schema])
        if bucket is not None:
            source_schema = source_schema.append(pa.field(delta.BUCKET_COLUMN, pa.string()))
        source = pa.RecordBatchReader.from_batches(
            source_schema, self._source_batches(source_schema, trigger_paths, deletes, bucket))
        on = " AND ".join(f"t.{_quote(c)} = s.{_quote(c)}" for c in _key_window_columns(self.schema))
        if bucket is not None:  # the partitions that can hold the batch's windows: delta-rs prunes the rest
            buckets = self._buckets(trigger_paths, deletes, bucket)
            on += f" AND t.{delta.BUCKET_COLUMN} IN ({', '.join(repr(b) for b in buckets)})"
        trigger, retraction = f"s.kind = '{KIND_TRIGGER}'", f"s.kind = '{KIND_RETRACTION}'"
        merged = (dt.merge(source, on, source_alias="s", target_alias="t", streamed_exec=True,
                           commit_properties=self._commit_properties())
                  .when_matched_update_all(predicate=trigger)
                  .when_matched_delete(predicate=retraction)
                  .when_not_matched_insert_all(predicate=trigger)
                  .execute())
        self.metrics[CURRENT] = {**delta.commit_sizes(delta.table_uri(self.options.root, CURRENT), dt.version()),
                                 "rows_copied": merged.get("num_target_rows_copied", 0),
                                 "files_scanned": merged.get("num_target_files_scanned", 0)}

    def _closed_bound(self, files: Sequence[DataFile]) -> int | None:
        """Windows ending at or before the batch's watermark minus the allowed lateness are closed:
        no pane can follow (the operator drops their state and sends later events to the late
        output). The watermark is the one the batch's pane rows carry."""
        if self.closing is None:
            return None
        marks = [pc.max(b.column(0)) for f in files
                 for b in delta.read_files(self.options.root, f.table, [f.path], columns=["watermark"])]
        values = [pc.cast(m, pa.int64()).as_py() for m in marks if m.is_valid]
        return max(values) - self.closing if values else None

    def _close_windows(self) -> None:
        """Mark ``is_final`` in ``current`` for windows the watermark closed (the pane log is not
        touched: a window that expires with nothing new fires no pane). Idempotent; no commit
        when nothing changes."""
        root = self.options.root
        before = _CLOSED_THROUGH.get(root)
        if self._bound is None or (before is not None and self._bound <= before):
            return
        dt = DeltaTable(delta.table_uri(root, CURRENT))
        predicate = f"is_final = false AND window_end <= '{_iso_us(self._bound)}'"
        if before is not None:
            predicate += f" AND window_end > '{_iso_us(before)}'"
        bucket = delta.current_bucket_seconds(dt)
        if bucket is not None:  # partition pruning: only the buckets the bound moved through
            predicate += f" AND {delta.BUCKET_COLUMN} <= '{_bucket_of(self._bound, bucket)}'"
            if before is not None:
                predicate += f" AND {delta.BUCKET_COLUMN} >= '{_bucket_of(before, bucket)}'"
        updated = dt.update(updates={"is_final": "true"}, predicate=predicate, commit_properties=CommitProperties(
            custom_metadata={BATCH_ID_KEY: self.batch_id, APP_ID_KEY: self.app_id,
                             **delta.user_metadata(self.app_id, self.batch_id)}))
        _CLOSED_THROUGH[root] = self._bound
        if updated.get("num_updated_rows"):
            self.metrics.setdefault(CURRENT, {})["windows_closed"] = updated["num_updated_rows"]

    def _buckets(self, trigger_paths: list[str], deletes: pa.Table, seconds: int) -> list[str]:
        """The distinct ``window_end_bucket`` values of the batch's panes (read: window_end only)."""
        ends = [b.column(0) for b in delta.read_files(self.options.root, TRIGGERS, trigger_paths,
                                                      columns=["window_end"])]
        ends += deletes.column("window_end").chunks
        values: set[str] = set()
        for end in ends:
            values.update(pc.unique(delta.window_end_buckets(end, seconds)).to_pylist())
        return sorted(values)

    def _source_batches(self, schema: pa.Schema, trigger_paths: list[str],
                        deletes: pa.Table, bucket: int | None) -> Iterator[pa.RecordBatch]:
        for batch in delta.read_files(self.options.root, TRIGGERS, trigger_paths):
            yield _with_bucket(_closed(batch, self._bound), bucket).cast(schema)
        for batch in deletes.to_batches():
            n = batch.num_rows
            columns = [batch.column(f.name) if f.name in deletes.column_names
                       else pa.array([KIND_RETRACTION] * n, f.type) if f.name == "kind"
                       else delta.window_end_buckets(batch.column("window_end"), bucket)
                       if f.name == delta.BUCKET_COLUMN
                       else pa.nulls(n, f.type) for f in schema]
            yield pa.RecordBatch.from_arrays(columns, schema=schema)

    def _retraction_only(self, trigger_paths: list[str], staged: list[str]) -> pa.Table:
        """The staged retraction-only key+windows that have no TRIGGER in any task of the batch.

        Each task already dropped those with a trigger in the same task; here the batch's trigger
        files are streamed (key columns only) to drop those with a trigger in another task.
        Memory: the staged key+windows, one record batch of trigger keys at a time.
        """
        columns = _key_window_columns(self.schema)
        key_schema = pa.schema([self.schema.field(c) for c in columns])
        staged_batches = list(delta.read_files(self.options.root, STAGING, staged))
        if not staged_batches:
            return key_schema.empty_table()
        candidates = _distinct(staged_batches, columns, self.schema, check_unique=False)
        for batch in delta.read_files(self.options.root, TRIGGERS, trigger_paths, columns=columns):
            candidates = candidates.join(pa.Table.from_batches([batch]), keys=columns, join_type="left anti")
            if candidates.num_rows == 0:
                break
        return candidates


#: Per sink path, the bound (µs) through which this process has marked ``current``'s windows
#: final. Every window ending at or before it is final in the table: the UPDATE marked those there
#: then, and every later MERGE marks its own rows against a bound at least as high (the watermark
#: never goes back). So the next UPDATE looks only at windows ending after it, in the buckets the
#: bound moved through, and a batch whose bound did not move makes none. A new process (a restart,
#: a replay) starts without it and makes one full UPDATE.
_CLOSED_THROUGH: dict[str, int] = {}


def _bucket_of(us: int, seconds: int) -> str:
    end = pa.array([us], pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    return delta.window_end_buckets(end, seconds)[0].as_py()


@contextmanager
def _timed(phases: dict[str, float], name: str) -> Iterator[None]:
    """Add the wall time of the block to ``phases[name]`` (milliseconds)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        phases[name] = round(phases.get(name, 0.0) + (time.perf_counter() - started) * 1000, 1)


def _closed(batch: pa.RecordBatch, bound: int | None) -> pa.RecordBatch:
    """``batch`` with ``is_final`` set where the window is closed (ends at or before ``bound``)."""
    if bound is None:
        return batch
    ends = pc.cast(batch.column("window_end").cast(pa.timestamp("us", tz="UTC")), pa.int64())
    final = pc.or_(batch.column("is_final"), pc.less_equal(ends, bound))
    return batch.set_column(batch.schema.get_field_index("is_final"), batch.schema.field("is_final"), final)


def _with_bucket(batch: pa.RecordBatch, seconds: int | None) -> pa.RecordBatch:
    if seconds is None:
        return batch
    return batch.append_column(delta.BUCKET_COLUMN, delta.window_end_buckets(batch.column("window_end"), seconds))


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
