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
   blind append each, a log entry with the files' add actions (``tables.appends``: written from
   what the process knows of the table, put-if-absent, so no handle is refreshed per batch);
   ``current`` one MERGE whose source
   reads the batch's trigger files and the retraction-only key+windows (in memory up to 16 MB of
   trigger files, about a million panes, so delta-rs prunes ``current``'s files by their keys;
   streamed above that, never the whole batch in driver memory). Each commit carries ``Transaction(appId, version=batchId)``; a table whose
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

The protocol lives in four modules: this one (the writer Spark creates: schema and spec checks,
the lease, the commit's order), ``task`` (what a task writes), ``commit`` (the driver's commit of a
batch into the three tables) and ``config`` (the options and the task's message).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Iterable, Iterator, Mapping, Sequence

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from spark_windowing.datasource.tables import delta, pane_spec
from spark_windowing.datasource.sink import lease
from spark_windowing.datasource.sink.commit import BatchCommit, timed
from spark_windowing.datasource.sink.settings import APP_ID_PREFIX, PaneFilesMessage, SinkOptions, iso_us
from spark_windowing.datasource.sink.task import TaskWriter, discard
from spark_windowing.datasource import contract, loopback, storage, trace
from spark_windowing.datasource.tables.delta import CURRENT, TABLES
from spark_windowing.datasource._memory import release_arrow_memory
from spark_windowing.datasource._types import spark_to_arrow_schema
from spark_windowing.datasource.storage.layout import sink_spec_uri
from spark_windowing.datasource.tables.maintenance import maintain
from spark_windowing.datasource.sink.metrics import write_batch_metrics
from spark_windowing.errors import OptionError

__all__ = ["PaneStreamWriter"]

_log = logging.getLogger(__name__)


class PaneStreamWriter(DataSourceStreamArrowWriter):
    """The ``windowed`` stream writer (see the module docstring)."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        loopback.prompt()
        with trace.span("sink.init"):
            self._init(options, schema, overwrite)

    def _init(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        self.options = SinkOptions.parse(options)
        if overwrite:
            raise ValueError("the windowed sink appends panes; use outputMode('append') "
                             "(the 'current' table already holds the latest pane per key and window)")
        try:
            self.schema = delta.table_pane_schema(spark_to_arrow_schema(schema))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"writeStream.format('windowed') writes pane rows only: {exc}. "
                             f"DataFrame columns: {schema.simpleString()}") from None
        # the windowing spec of the panes (None: unknown): in the schema's metadata, else the query's
        # logged source offset names it (``contract``: for panes whose schema lost the metadata)
        self.produced = pane_spec.from_schema(schema) or _produced_from_checkpoint(self.options.checkpoint)
        _check_spec(self.options, self.produced)         # before anything is created or written
        _warn_unknown_spec(self.options, self.produced)
        _warn_discarding_current(self.options, self.produced)
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
        with trace.span("sink.write"):
            return TaskWriter(self.options, self.schema).run(iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        loopback.prompt()
        with trace.span("sink.commit", batch=batchId):
            self._commit(messages, batchId)

    def _commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
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
            batch = BatchCommit(self.options, self.schema, written, batchId, self._app_id(written),
                                 closing=_closing_lateness(self.produced, self.schema),
                                 one_pane_per_window=_one_pane_per_window(self.options, self.produced))
            batch.run()
            metrics, phases = batch.metrics, batch.phases
        with timed(phases, "upkeep"):
            for table in TABLES:
                upkeep = maintain(delta.table_uri(self.options.root, table), batchId, self.options.maintenance)
                if upkeep:
                    metrics.setdefault(table, {})["maintenance"] = upkeep
        write_batch_metrics(self.options.root, batchId, metrics, commit_ms=phases)
        release_arrow_memory()

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        discard(self.options.root, _written(messages))

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


#: Sink paths this process has warned about (``_warn_unknown_spec``): once each.
_WARNED_UNKNOWN: set[str] = set()


def _warn_unknown_spec(options: SinkOptions, produced: dict | None) -> None:
    """Panes without their windowing spec (a transformation dropped the column metadata; the sink
    then finds it only through a ``checkpointLocation`` option): ``current`` cannot tell when a
    window is final, nor refuse another spec. Said once per process and path."""
    if produced is not None or options.checkpoint or options.root in _WARNED_UNKNOWN:
        return
    _WARNED_UNKNOWN.add(options.root)
    _log.warning("windowed sink: %s: the panes do not say which windowing spec produced them, so 'current' "
                 "marks no window final by the watermark and a change of spec is not refused. Write the windowed "
                 "source's panes as they come (a select or withColumn may drop the column metadata that carries "
                 "the spec), or give the query its checkpoint as .option('checkpointLocation', ...) on "
                 "writeStream (the sink reads the spec through it).",
                 options.root)


#: Sink paths this process has warned about (``_warn_discarding_current``): once each.
_WARNED_DISCARDING: set[str] = set()
#: Triggers that fire a window once (at the watermark) when no lateness is allowed.
_ONE_SHOT_TRIGGERS = ("Default()", "AfterWatermark()")


def _warn_discarding_current(options: SinkOptions, produced: dict | None) -> None:
    """``current`` keeps each window's latest pane. Under ``discarding`` a pane holds only what
    arrived since the window's previous pane, so where a window can fire more than once (early or
    late panes, ``allowedLateness``) ``current`` holds the last increment, not the window's result
    (and, with no retractions, merged sessions' earlier windows stay). Said once per process and
    path; the pane log holds every increment."""
    if produced is None or produced.get("accumulationMode") != "discarding" or options.root in _WARNED_DISCARDING:
        return
    if produced.get("trigger") in _ONE_SHOT_TRIGGERS and not produced.get(pane_spec.LATENESS_US):
        return
    _WARNED_DISCARDING.add(options.root)
    _log.warning(
        "windowed sink: %s: the panes are accumulationMode=discarding with trigger %s and allowedLateness %s, so a "
        "window can fire more than once and each pane holds only what arrived since the previous one: 'current' "
        "keeps the latest pane, the last increment, not the window's result. For a result table use "
        ".option('accumulationMode', 'accumulating') (or 'accumulating_and_retracting' for session windows); the "
        "'triggers' table holds every increment.", options.root, produced.get("trigger"),
        produced.get("allowedLateness", "0 seconds"))


def _record_spec(options: SinkOptions, produced: dict) -> None:
    """Record ``produced`` in ``P/_spec.json`` when it is not recorded yet (a new path, or one the
    previous release wrote) or differs (``allowSpecChange``: the latest spec is the one compared)."""
    uri = sink_spec_uri(options.root)
    raw = storage.read_bytes(uri, missing_ok=True)
    if raw is not None and json.loads(raw).get("producedBy") == produced:
        return
    doc = {"formatVersion": 1, "producedBy": produced, "recordedAt": iso_us(int(time.time() * 1_000_000))}
    storage.write_atomic(uri, json.dumps(doc, indent=1, sort_keys=True).encode())


def _closing_lateness(produced: dict | None, schema: pa.Schema) -> int | None:
    """The allowed lateness after which ``current`` marks a window final (``BatchCommit``), or None
    when it cannot be told: panes of unknown spec, processing-time or count windows."""
    if produced is None or pane_spec.LATENESS_US not in produced or "window_seq" in schema.names:
        return None
    if str(produced.get("timestampColumn", "")).startswith("(none"):
        return None
    return int(produced[pane_spec.LATENESS_US])


def _one_pane_per_window(options: SinkOptions, produced: dict | None) -> bool:
    """Whether the panes' spec fires each window once: a one-shot trigger and no allowed
    lateness (no early or late pane, so no retraction either). ``current`` then takes a batch's
    panes as an append (``BatchCommit._append_current``). Not with ``allowSpecChange``: the
    tables may hold panes of another spec."""
    return (produced is not None and not options.allow_spec_change
            and produced.get("trigger") in _ONE_SHOT_TRIGGERS and produced.get(pane_spec.LATENESS_US) == 0)


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



#: (checkpoint, query id) -> the producing options its windowed source recorded
#: (``contract.produced_from_checkpoint``): the query id tells a re-created checkpoint at the same path.
_PRODUCED_BY_CHECKPOINT: dict[tuple[str, str | None], dict] = {}


def _produced_from_checkpoint(checkpoint: str | None) -> dict | None:
    """The windowing spec of panes whose schema does not carry it (the source ↔ sink contract,
    ``spark_windowing.datasource.contract``). Each commit's writer asks
    again until a batch is logged."""
    if not checkpoint:
        return None
    key = (checkpoint, _checkpoint_query_id(checkpoint))
    if key not in _PRODUCED_BY_CHECKPOINT:
        produced = contract.produced_from_checkpoint(checkpoint)
        if not produced:
            return None
        _PRODUCED_BY_CHECKPOINT[key] = produced
    return _PRODUCED_BY_CHECKPOINT[key]


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
    _refuse_lost_tables(options)
    for table in TABLES:
        delta.ensure_pane_table(options.root, table, schema, bucket_seconds=(
            options.current_bucket_seconds or delta.DEFAULT_BUCKET_SECONDS))
    _check_current_layout(options)
    _TABLES_CHECKED.add(key)


def _refuse_lost_tables(options: SinkOptions) -> None:
    """A pane table missing while the query's checkpoint has committed batches (the sink path, or
    one table, deleted before a restart): creating it empty would lose every pane those batches
    wrote, silently. Refused, naming what is missing and the two ways out."""
    missing = [t for t in TABLES if not storage.exists(f"{delta.table_uri(options.root, t)}/_delta_log")]
    committed = _committed_batches(options.checkpoint) if missing else 0
    if missing and committed:
        raise OptionError("path", options.root, "the path whose pane tables this query's checkpoint wrote",
                          why=f"the pane table(s) {', '.join(missing)} are missing there, but the query's checkpoint "
                              f"{options.checkpoint} has committed {committed} micro-batch(es) into them: creating "
                              "them empty would lose those panes. Restore the tables, or start over with a new "
                              "checkpointLocation (and a new stateLocation for its windowed source)")


def _committed_batches(checkpoint: str | None) -> int:
    """How many micro-batches the query checkpointed at ``checkpoint`` has committed (Spark's
    ``commits/<batch>`` files); 0 when unknown."""
    if not checkpoint:
        return 0
    try:
        return sum(1 for i in storage.list_dir(checkpoint.rstrip("/") + "/commits") if i.base_name.isdigit())
    except Exception:   # a checkpoint URI this process cannot open (e.g. s3a://): unknown
        return 0


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
