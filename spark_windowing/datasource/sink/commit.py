"""The windowed sink's driver side: the commit of one micro-batch into ``triggers``,
``retractions`` and ``current`` (the protocol: ``spark_windowing.datasource.sink.writer``).

Another writer may commit to the tables while a batch commits (a user's OPTIMIZE, VACUUM, a
retention DELETE, a property change: docs/delta-sql.md, "Maintaining the pane tables"). The
pane log's appends retry over such commits (``appends``). The MERGE into ``current`` and the
UPDATE that closes windows fail in delta-rs when a concurrent commit touched the files they read
(``CommitFailedError``), or a concurrent VACUUM deleted one (a file-not-found ``DeltaError``):
each is tried again on the table as it is then, up to ``COMMIT_ATTEMPTS`` times (the MERGE is
skipped once the table holds the batch's app transaction; the UPDATE is idempotent). After the
last attempt the batch fails with a ``WindowingError`` naming the table, the other writer's
operations and what to do; the restarted query replays the batch exactly once."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import CommitFailedError, DeltaError

from spark_windowing._arrow import empty_table
from spark_windowing.datasource import trace
from spark_windowing.datasource.tables import appends, delta
from spark_windowing.datasource.sink.settings import APP_ID_KEY, PaneFilesMessage, SinkOptions, iso_us
from spark_windowing.datasource.sink.task import distinct, key_window_columns
from spark_windowing.datasource.tables.delta import CURRENT, RETRACTIONS, STAGING, TRIGGERS, DataFile
from spark_windowing.datasource.storage.layout import BATCH_ID_KEY
from spark_windowing.panes import KIND_RETRACTION, KIND_TRIGGER
from spark_windowing._time import MIN_TIME
from spark_windowing.errors import WindowingError

#: Attempts of the MERGE into ``current``, and of the UPDATE closing windows, that a concurrent
#: commit of another writer makes fail (module docstring).
COMMIT_ATTEMPTS = 6

@dataclass
class BatchCommit:
    """The driver's commit of one micro-batch into the three tables (see the module docstring)."""

    options: SinkOptions
    schema: pa.Schema
    messages: Sequence[PaneFilesMessage]
    batch_id: int
    app_id: str
    closing: int | None = None      # allowed lateness (µs): windows past it are final in ``current``
    one_pane_per_window: bool = False   # the spec fires each window once: ``current`` may take appends
    metrics: dict[str, dict] = field(default_factory=dict)   # per table: what this batch wrote
    phases: dict[str, float] = field(default_factory=dict)   # commit phase -> milliseconds
    _bound: int | None = None       # windows ending at or before this (µs) are closed
    _current: DeltaTable | None = None   # ``current`` as the MERGE left it (merge advances the handle)
    _triggers: list[pa.RecordBatch] | None = None   # the batch's trigger panes, when read once (eager)
    _open_ends: list[np.ndarray] = field(default_factory=list)   # ends of the MERGE's not-final rows

    def run(self) -> None:
        root = self.options.root
        files = [f for m in self.messages for f in m.files]
        staged = [p for m in self.messages for p in m.deletes]
        # The tables' commits are independent (each holds the batch or not, by its own app
        # transaction), so the pane log's appends run in a thread beside the MERGE; delta-rs
        # releases the GIL while it works. Their phases overlap.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="windowed-sink-append") as pool:
            appended = pool.submit(self._append_log, files)
            with timed(self.phases, "merge"):
                triggers = [f for f in files if f.table == TRIGGERS]
                size = sum(f.size for f in triggers)
                if size <= EAGER_MERGE_BYTES:   # read once, for the bound, the buckets, the keys and the MERGE
                    with trace.span("sink.commit.read_triggers"):
                        self._triggers = list(delta.read_files(root, TRIGGERS, [f.path for f in triggers]))
                self._bound = self._closed_bound(files)
                self._retrying("MERGE", lambda: self._merge_current([f.path for f in triggers], staged, size))
            replayed = appended.result()
        with timed(self.phases, "close"):
            self._retrying("UPDATE closing windows", self._close_windows)
        with timed(self.phases, "clean"):
            for table, paths in replayed.items():
                delta.delete_files(f"{root}/{table}", paths)
            delta.delete_files(f"{root}/{STAGING}", staged)
            delta.delete_stale_staging(root, self.batch_id)

    def _retrying(self, what: str, attempt) -> None:
        """Run ``attempt`` (a commit to ``current``), again on a fresh handle of the table while
        another writer's concurrent commit makes it fail (module docstring)."""
        uri = delta.table_uri(self.options.root, CURRENT)
        since = delta.latest(uri).version()
        for n in range(COMMIT_ATTEMPTS):
            try:
                attempt()
                return
            except DeltaError as e:
                if not isinstance(e, CommitFailedError) and not _file_gone(e):
                    raise
                error = e
            delta.forget(uri)        # the table as it is now, on the next attempt
            self._current = None
            time.sleep(0.05 * (n + 1))
        raise WindowingError(
            f"windowed sink: the {what} of micro-batch {self.batch_id} into {uri} failed {COMMIT_ATTEMPTS} times "
            f"over commits of another writer to that table since version {since} "
            f"({', '.join(_operations_since(uri, since)) or 'none found'}): {error}. Run such maintenance "
            "between micro-batches, or leave it to the sink's own upkeep (compactEvery, vacuumEvery, "
            "checkpointEvery), and restart the query: it replays the batch, exactly once") from error

    def _append_log(self, files: Sequence[DataFile]) -> dict[str, list[str]]:
        """Append the batch's files to ``triggers`` and ``retractions``; returns, per table that
        already held the batch (a replay), the files to delete."""
        replayed: dict[str, list[str]] = {}
        with timed(self.phases, "append"):
            for table in (TRIGGERS, RETRACTIONS):
                mine = [f for f in files if f.table == table]
                if not self._append(table, mine):
                    replayed[table] = [f.path for f in mine]
        return replayed

    def _open(self, table: str) -> tuple[DeltaTable, bool]:
        """The table and whether it already holds this batch."""
        uri = delta.table_uri(self.options.root, table)
        dt = delta.latest(uri)
        done = delta.transaction_version(uri, dt, self.app_id)
        return dt, done is not None and done >= self.batch_id

    def _commit_metadata(self) -> dict[str, object]:
        """What each of the batch's commits records in its commit info: the batch and app id."""
        return {BATCH_ID_KEY: self.batch_id, APP_ID_KEY: self.app_id, **delta.user_metadata(self.app_id, self.batch_id)}

    def _commit_properties(self) -> CommitProperties:
        return CommitProperties(app_transactions=[Transaction(self.app_id, self.batch_id)],
                                custom_metadata=self._commit_metadata())

    def _append(self, table: str, files: Sequence[DataFile]) -> bool:
        """Commit ``files`` to ``table``; False when the table already holds the batch. No files:
        nothing to commit, nothing to read (a batch without retractions costs ``retractions``
        nothing)."""
        if not files:
            return True
        if not appends.append(delta.table_uri(self.options.root, table), files, app_id=self.app_id,
                              batch_id=self.batch_id, metadata=self._commit_metadata()):
            return False
        self.metrics[table] = {"files_added": len(files), "bytes_added": sum(f.size for f in files),
                               "files_removed": 0, "bytes_removed": 0}
        return True

    def _merge_current(self, trigger_paths: list[str], staged: list[str], trigger_bytes: int = 0) -> None:
        if self.one_pane_per_window and not staged and self._triggers is not None and self._append_current():
            return
        dt, done = self._open(CURRENT)
        self._current = dt
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
        on = " AND ".join(f"t.{_quote(c)} = s.{_quote(c)}" for c in key_window_columns(self.schema))
        if bucket is not None:  # the partitions that can hold the batch's windows: delta-rs prunes the rest
            buckets = self._buckets(trigger_paths, deletes, bucket)
            on += f" AND t.{delta.BUCKET_COLUMN} IN ({', '.join(repr(b) for b in buckets)})"
        trigger, retraction = f"s.kind = '{KIND_TRIGGER}'", f"s.kind = '{KIND_RETRACTION}'"
        # eager (the batch's panes in memory) lets delta-rs prune target files by the source's key
        # ranges: 20-60 ms where streaming took 0.45-0.6 s, growing with the table (docs/performance.md)
        streamed = trigger_bytes > EAGER_MERGE_BYTES
        before = dt.version()
        merged = (dt.merge(source, on, source_alias="s", target_alias="t", streamed_exec=streamed,
                           commit_properties=self._commit_properties())
                  .when_matched_update_all(predicate=trigger)
                  .when_matched_delete(predicate=retraction)
                  .when_not_matched_insert_all(predicate=trigger))
        with trace.span("sink.commit.merge_execute"):
            merged = merged.execute()
        delta.note_commit(delta.table_uri(self.options.root, CURRENT), dt, self.app_id, before, self.batch_id)
        _remember_open_ends((self.options.root, delta.table_id(dt)), self._open_ends)
        self.metrics[CURRENT] = {**delta.commit_sizes(delta.table_uri(self.options.root, CURRENT), dt.version()),
                                 "rows_copied": merged.get("num_target_rows_copied", 0),
                                 "files_scanned": merged.get("num_target_files_scanned", 0)}

    def _append_current(self) -> bool:
        """``current`` as a blind append (4-7 ms, ``appends``) instead of a MERGE (30-40 ms): when
        the spec fires each window once (a one-shot trigger, no allowed lateness: no second pane,
        no retraction), the batch's panes are new rows of ``current``, unless an earlier query
        over the same path wrote them. So every pane must end after the latest window end the
        table held when this query last saw another writer's commit (``_high_water``); else
        False, and the batch is MERGEd. The files carry their ``window_end_bucket`` partition
        value; the app transaction makes a replay append nothing (its files are deleted)."""
        root, uri = self.options.root, delta.table_uri(self.options.root, CURRENT)
        if not self._triggers:
            return True
        table = delta.latest(uri)
        rows = pa.Table.from_batches([_closed(b, self._bound) for b in self._triggers])
        if pc.min(_end_micros(rows.column("window_end"))).as_py() <= _high_water(uri, table, self.app_id):
            return False
        rows = rows.cast(pa.schema([f.with_nullable(True) for f in rows.schema]))
        bucket = delta.current_bucket_seconds(table)
        parts = [((), rows)] if bucket is None else [
            (((delta.BUCKET_COLUMN, b),), rows.filter(pc.equal(labels, b)))
            for labels in [delta.window_end_buckets(rows.column("window_end"), bucket)]
            for b in pc.unique(labels).to_pylist()]
        files = [replace(delta.write_data_file(root, CURRENT, part, sort_by=key_window_columns(self.schema),
                                               name_hint=f"current-{self.batch_id}"), partition_values=values)
                 for values, part in parts]
        if not appends.append(uri, files, app_id=self.app_id, batch_id=self.batch_id,
                              metadata=self._commit_metadata()):
            delta.delete_files(uri, [f.path for f in files])   # a replay: the table holds the batch
            return True
        _HIGH_WATER[(uri, self.app_id)].version = appends.known_version(uri)   # its own append moves no mark
        self._open_ends.extend(_open_window_ends(b) for b in rows.to_batches())
        _remember_open_ends((root, delta.table_id(table)), self._open_ends)
        self.metrics[CURRENT] = {"files_added": len(files), "bytes_added": sum(f.size for f in files),
                                 "files_removed": 0, "bytes_removed": 0}
        return True

    def _closed_bound(self, files: Sequence[DataFile]) -> int | None:
        """Windows ending at or before the batch's watermark minus the allowed lateness are closed:
        no pane can follow (the operator drops their state and sends later events to the late
        output). The watermark is the one the batch's pane rows carry."""
        if self.closing is None:
            return None
        retractions = [f.path for f in files if f.table == RETRACTIONS]
        batches = [*self._trigger_batches([f.path for f in files if f.table == TRIGGERS], ["watermark"]),
                   *delta.read_files(self.options.root, RETRACTIONS, retractions, columns=["watermark"])]
        marks = [pc.max(b.column(0)) for b in batches]
        values = [pc.cast(m, pa.int64()).as_py() for m in marks if m.is_valid]
        return max(values) - self.closing if values else None

    def _close_windows(self) -> None:
        """Mark ``is_final`` in ``current`` for windows the watermark closed (the pane log is not
        touched: a window that expires with nothing new fires no pane). Idempotent; no commit
        when nothing changes."""
        root = self.options.root
        if self._bound is None:
            return
        dt = self._current or delta.latest(delta.table_uri(root, CURRENT))
        key = (root, delta.table_id(dt))
        before = _CLOSED_THROUGH.get(key)
        if before is not None and self._bound <= before:
            return
        open_ends = _OPEN_ENDS.get(key)
        if open_ends is None:
            open_ends = _scan_open_ends(dt)
        remaining = open_ends[open_ends > self._bound]
        if len(remaining) == len(open_ends):   # no open window ends by the bound: nothing to mark
            _OPEN_ENDS[key] = remaining
            _CLOSED_THROUGH[key] = self._bound
            return
        predicate = f"is_final = false AND window_end <= '{iso_us(self._bound)}'"
        if before is not None:
            predicate += f" AND window_end > '{iso_us(before)}'"
        bucket = delta.current_bucket_seconds(dt)
        if bucket is not None:  # partition pruning: only the buckets the bound moved through
            predicate += f" AND {delta.BUCKET_COLUMN} <= '{_bucket_of(self._bound, bucket)}'"
            if before is not None:
                predicate += f" AND {delta.BUCKET_COLUMN} >= '{_bucket_of(before, bucket)}'"
        before = dt.version()
        updated = dt.update(updates={"is_final": "true"}, predicate=predicate,
                            commit_properties=CommitProperties(custom_metadata=self._commit_metadata()))
        delta.note_commit(delta.table_uri(root, CURRENT), dt, self.app_id, before)
        _OPEN_ENDS[key] = remaining   # only once committed: a failed UPDATE is tried again in full
        _CLOSED_THROUGH[key] = self._bound
        if updated.get("num_updated_rows"):
            self.metrics.setdefault(CURRENT, {})["windows_closed"] = updated["num_updated_rows"]

    def _buckets(self, trigger_paths: list[str], deletes: pa.Table, seconds: int) -> list[str]:
        """The distinct ``window_end_bucket`` values of the batch's panes (read: window_end only)."""
        ends = [b.column(0) for b in self._trigger_batches(trigger_paths, ["window_end"])]
        ends += deletes.column("window_end").chunks
        values: set[str] = set()
        for end in ends:
            values.update(pc.unique(delta.window_end_buckets(end, seconds)).to_pylist())
        return sorted(values)

    def _source_batches(self, schema: pa.Schema, trigger_paths: list[str],
                        deletes: pa.Table, bucket: int | None) -> Iterator[pa.RecordBatch]:
        for batch in self._trigger_batches(trigger_paths):
            batch = _closed(batch, self._bound)
            self._open_ends.append(_open_window_ends(batch))
            yield _with_bucket(batch, bucket).cast(schema)
        for batch in deletes.to_batches():
            n = batch.num_rows
            columns = [batch.column(f.name) if f.name in deletes.column_names
                       else pa.array([KIND_RETRACTION] * n, f.type) if f.name == "kind"
                       else delta.window_end_buckets(batch.column("window_end"), bucket)
                       if f.name == delta.BUCKET_COLUMN
                       else pa.nulls(n, f.type) for f in schema]
            yield pa.RecordBatch.from_arrays(columns, schema=schema)

    def _trigger_batches(self, paths: list[str], columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
        """The record batches of the batch's trigger files ``paths`` (``columns`` of them): from
        memory when they were read once (at most ``EAGER_MERGE_BYTES``), else streamed from the
        files, one record batch at a time."""
        if self._triggers is None:
            yield from delta.read_files(self.options.root, TRIGGERS, paths, columns=columns)
            return
        for batch in self._triggers:
            yield batch if columns is None else batch.select(columns)

    def _retraction_only(self, trigger_paths: list[str], staged: list[str]) -> pa.Table:
        """The staged retraction-only key+windows that have no TRIGGER in any task of the batch.

        Each task already dropped those with a trigger in the same task; here the batch's trigger
        files are streamed (key columns only) to drop those with a trigger in another task.
        Memory: the staged key+windows, one record batch of trigger keys at a time.
        """
        columns = key_window_columns(self.schema)
        key_schema = pa.schema([self.schema.field(c) for c in columns])
        staged_batches = list(delta.read_files(self.options.root, STAGING, staged))
        if not staged_batches:
            return empty_table(key_schema)
        candidates = distinct(staged_batches, columns, self.schema, check_unique=False)
        for batch in self._trigger_batches(trigger_paths, columns):
            candidates = candidates.join(pa.Table.from_batches([batch]), keys=columns, join_type="left anti")
            if candidates.num_rows == 0:
                break
        return candidates


#: The MERGE into ``current`` reads the batch's panes into memory when their trigger files hold at
#: most this many bytes (Parquet, zstd: about a million panes), and streams them above (memory
#: bounded by a record batch, but no pruning of the target's files by the source's keys).
EAGER_MERGE_BYTES = 16 * 1024 * 1024


#: Per (sink path, ``current``'s identity: ``delta.table_id``), the bound (µs) through which this process has marked ``current``'s windows
#: final. Every window ending at or before it is final in the table: the UPDATE marked those there
#: then, and every later MERGE marks its own rows against a bound at least as high (the watermark
#: never goes back). So the next UPDATE looks only at windows ending after it, in the buckets the
#: bound moved through, and a batch whose bound did not move makes none. A new process (a restart,
#: a replay) starts without it and makes one full UPDATE.
_CLOSED_THROUGH: dict[tuple[str, str], int] = {}

@dataclass
class _Mark:
    """``current``'s latest window end (µs) as a query last read it, the table's identity, and
    the table version after the query's own last blind append (its appends do not move the mark)."""
    end: int
    table: str
    version: int | None


#: Per (``current``'s URI, app id): the mark ``_high_water`` read.
_HIGH_WATER: dict[tuple[str, str], _Mark] = {}


def _high_water(uri: str, table: DeltaTable, app_id: str) -> int:
    """The latest window end in ``current`` (µs, from the files' statistics plus 1 ms: Delta
    keeps timestamps to the millisecond; the whole column when a file has none), read again
    whenever the table moved past this query's last blind append (another writer, the upkeep,
    an UPDATE): a pane ending after it is a window no earlier query wrote."""
    known = _HIGH_WATER.get((uri, app_id))
    if known is not None and known.table == delta.table_id(table) and known.version == table.version():
        return known.end
    actions = pa.table(table.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        end = MIN_TIME
    elif "max.window_end" in actions.column_names and actions.column("max.window_end").null_count == 0:
        end = pc.max(_end_micros(actions.column("max.window_end"))).as_py() + 1000
    else:
        ends = table.to_pyarrow_dataset().to_table(columns=["window_end"]).column("window_end")
        end = pc.max(_end_micros(ends)).as_py() if ends.null_count < len(ends) else MIN_TIME
    _HIGH_WATER[(uri, app_id)] = _Mark(end, delta.table_id(table), table.version())
    return end


#: Per (sink path, ``current``'s identity), the window ends (µs, sorted) of ``current``'s rows that may not be final yet:
#: read from the table at this process's first close (``_scan_open_ends``), then kept up by its
#: own MERGEs (the ends of the not-final rows they wrote) and closes (ends at or before the bound
#: leave). The UPDATE that marks windows final runs only when one of them ends at or before the
#: bound: with an ON_TIME pane that is already final (no allowed lateness), never. Rows a
#: retraction deleted may linger here: they only cost an UPDATE that finds nothing.
_OPEN_ENDS: dict[tuple[str, str], np.ndarray] = {}


def _file_gone(error: Exception) -> bool:
    """Whether a delta-rs error says a data file is gone (a concurrent VACUUM deleted it)."""
    text = str(error).lower()
    return "not found" in text or "no such file" in text


def _operations_since(uri: str, version: int) -> list[str]:
    """The operations of the commits to the table at ``uri`` after ``version`` (its history)."""
    try:
        return [f"{h.get('operation')} (version {h.get('version')})"
                for h in DeltaTable(uri).history(20) if int(h.get("version", -1)) > version]
    except Exception:   # naming them is a courtesy of the error message
        return []


def _open_window_ends(batch: pa.RecordBatch) -> np.ndarray:
    """The window ends (µs) of ``batch``'s rows whose ``is_final`` is false."""
    return pc.filter(_end_micros(batch.column("window_end")), pc.invert(batch.column("is_final"))).to_numpy(
        zero_copy_only=False)


def _remember_open_ends(key: tuple[str, str], ends: list[np.ndarray]) -> None:
    known = _OPEN_ENDS.get(key)
    if known is not None and ends:
        _OPEN_ENDS[key] = np.sort(np.concatenate([known, *ends]))


def _scan_open_ends(table: DeltaTable) -> np.ndarray:
    """The window ends (µs, sorted) of ``table``'s rows whose ``is_final`` is false."""
    import pyarrow.dataset as ds
    rows = table.to_pyarrow_dataset().to_table(columns=["window_end"], filter=ds.field("is_final") == False)  # noqa: E712
    return np.sort(_end_micros(rows.column("window_end")).to_numpy())


def _bucket_of(us: int, seconds: int) -> str:
    end = pa.array([us], pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    return delta.window_end_buckets(end, seconds)[0].as_py()


@contextmanager
def timed(phases: dict[str, float], name: str) -> Iterator[None]:
    """Add the wall time of the block to ``phases[name]`` (milliseconds); a trace span
    ``sink.commit.<name>`` too (``spark_windowing.datasource.trace``)."""
    started, wall = time.perf_counter(), time.time()
    try:
        yield
    finally:
        phases[name] = round(phases.get(name, 0.0) + (time.perf_counter() - started) * 1000, 1)
        trace.record(f"sink.commit.{name}", wall, time.time())


def _end_micros(window_end: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Window ends as µs since the epoch (UTC)."""
    return pc.cast(window_end.cast(pa.timestamp("us", tz="UTC")), pa.int64())


def _closed(batch: pa.RecordBatch, bound: int | None) -> pa.RecordBatch:
    """``batch`` with ``is_final`` set where the window is closed (ends at or before ``bound``)."""
    if bound is None:
        return batch
    final = pc.or_(batch.column("is_final"), pc.less_equal(_end_micros(batch.column("window_end")), bound))
    return batch.set_column(batch.schema.get_field_index("is_final"), batch.schema.field("is_final"), final)


def _with_bucket(batch: pa.RecordBatch, seconds: int | None) -> pa.RecordBatch:
    if seconds is None:
        return batch
    return batch.append_column(delta.BUCKET_COLUMN, delta.window_end_buckets(batch.column("window_end"), seconds))


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
