"""The windowed sink's executor side: a task writes its pane rows as uncommitted Parquet data
files of ``triggers`` and ``retractions`` (at most ``maxRowsPerFile`` rows each), stages the
key + window columns of windows it only retracts (for the MERGE into ``current``), and reports
them in a ``PaneFilesMessage``; nothing is visible until the driver commits (``commit``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from spark_windowing._arrow import empty_table
from spark_windowing.datasource import loopback, trace
from spark_windowing.datasource.tables import delta
from spark_windowing.datasource.sink.settings import PaneFilesMessage, SinkOptions
from spark_windowing.datasource.tables.delta import RETRACTIONS, STAGING, TRIGGERS, DataFile
from spark_windowing.datasource._memory import release_arrow_memory
from spark_windowing.panes import KIND_RETRACTION, KIND_TRIGGER, WINDOW_FIELDS, split_pane_schema

_QUERY_ID_PROPERTY = "sql.streaming.queryId"   # task-local properties Spark sets for a stream batch
_BATCH_ID_PROPERTY = "streaming.sql.batchId"


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
class TaskWriter:
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
        key_columns = key_window_columns(self.schema)
        waited = time.time()   # until the first rows come: the task's read, and Spark's exchange
        try:
            for batch in loopback.acked(iterator):
                if waited:
                    trace.record("sink.write.input_wait", waited, time.time())
                    waited = 0.0
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
            discard(self.options.root, [PaneFilesMessage(None, None, tuple(self.files), tuple(self.deletes))])
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
            with trace.span("sink.write.file"):
                self.files.append(delta.write_data_file(self.options.root, table, rows.slice(start, limit),
                                                         name_hint=self.hint, sort_by=delta.sort_columns(self.schema)))
        self.buffers[table] = rows.slice(end).to_batches()

    def _stage_retraction_only(self, key_columns: list[str]) -> None:
        triggers = distinct(self.keys[TRIGGERS], key_columns, self.schema, check_unique=True)
        retractions = distinct(self.keys[RETRACTIONS], key_columns, self.schema, check_unique=False)
        if retractions.num_rows == 0:
            return
        only = retractions if triggers.num_rows == 0 else retractions.join(
            triggers, keys=key_columns, join_type="left anti")
        if only.num_rows:
            data_file = delta.write_data_file(self.options.root, STAGING, only, name_hint=self.hint,
                                               sort_by=delta.sort_columns(self.schema))
            self.deletes.append(data_file.path)


def key_window_columns(schema: pa.Schema) -> list[str]:
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


def distinct(batches: list[pa.RecordBatch], columns: list[str], schema: pa.Schema, *,
              check_unique: bool) -> pa.Table:
    if not batches:
        return empty_table(pa.schema([schema.field(c) for c in columns]))
    # staged files of different tasks may differ in nullability (a join drops NOT NULL): unify
    common = pa.schema([f.with_nullable(True) for f in batches[0].schema])
    table = pa.Table.from_batches([b.cast(common) for b in batches], schema=common)
    counted = table.group_by(columns, use_threads=False).aggregate([([], "count_all")])
    if check_unique and counted.num_rows and pc.max(counted["count_all"]).as_py() > 1:
        dup = counted.filter(pc.greater(counted["count_all"], 1)).slice(0, 1).to_pylist()[0]
        raise ValueError(f"windowed sink: {dup.pop('count_all')} TRIGGER rows for one key and window in "
                         f"one micro-batch ({dup}); a batch holds at most one pane per key and window (panes "
                         "read back from files or a table, e.g. a pipeline's streaming table: read one file per "
                         "micro-batch, option('maxFilesPerTrigger', 1))")
    return counted.select(columns)


def discard(root: str, messages: Sequence[PaneFilesMessage]) -> None:
    for table in (TRIGGERS, RETRACTIONS):
        delta.delete_files(f"{root}/{table}", [f.path for m in messages for f in m.files if f.table == table])
    delta.delete_files(f"{root}/{STAGING}", [p for m in messages for p in m.deletes])
