"""``spark.readStream.format("windowed")``: the windowed operator inside a Python stream reader.

Data flow per micro-batch::

    latestOffset(start)  driver: upstream position, batch time, global watermark  -> end offset
    partitions(s, e)     driver: one partition per key shard (all shards, every batch; twice as many
                         slots with object-store state: ``affinity.slots``)
    read(partition)      executor: claim a shard (preferably one this worker holds: ``affinity``),
                         state @s -> read & filter events -> operator.step -> state @e
                         (atomic), late rows -> lateDataPath (exactly once), report -> panes
    commit(e)            driver: drop snapshots older than e

An offset is ``{"windowed": 1, "seq", "state", "up", "bt", "wm", "max_event", "max_col",
"last_input"}``: the upstream position, the batch time chosen on the driver, and the watermark
for the batch (computed from the shards' reports of the previous batch: global, independent of the
shard count). Spark logs offsets before a batch runs, so a replay sees the same events, batch
time and state, and yields the same panes. ``read()`` never looks at the wall clock.

The source keeps time moving: when no new event arrived but the next watermark passes a pending
event-time timer (a window end), or a processing-time timer is due, ``latestOffset`` still
returns a new offset so the micro-batch that fires it runs.

>>> panes = (spark.readStream.format("windowed").option("source", "generator")  # doctest: +SKIP
...          .option("window", "tumbling(1 minute)").option("aggregate", "count(*) AS n")
...          .option("timestampColumn", "event_time").option("keyColumns", "user_id")
...          .option("stateLocation", "/tmp/state").load())
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxFiles, ReadMaxRows,
                                              SupportsTriggerAvailableNow)
from pyspark.sql.types import StructField, StructType

from spark_windowing.datasource.storage import layout
from spark_windowing.datasource.source import pipeline, rescale, runs, shard_reports, sharding
from spark_windowing.datasource.source.shard_reports import largest
from spark_windowing.datasource.source.maxima import Maxima, batch_maxima
from spark_windowing.datasource import loopback, storage, trace
from spark_windowing.datasource.contract import OFFSET_RUN, source_offset, state_record
from spark_windowing.datasource.source.checks import (check_malformed, check_state_spec, checked_pane_schema,
                                                      recorded_options)
from spark_windowing.datasource.source.affinity import shard_to_run, slots
from spark_windowing.datasource.tables.late import open_late_table
from spark_windowing.datasource.tables.maintenance import maintain, upkeep_due
from spark_windowing.datasource._types import arrow_to_spark_schema
from spark_windowing.datasource.options.config import PROC_TIME_COLUMN, SourceConfig
from spark_windowing.datasource.source.parse import parse_options
from spark_windowing.datasource.upstreams import Upstream, upstream_for
from spark_windowing.operator import join
from spark_windowing._time import GLOBAL_END, MAX_TIME, MIN_TIME
from spark_windowing.errors import OptionError
from spark_windowing.operator.windowed import WindowedOperator
from spark_windowing.panes import CORRUPT_RECORD, TIMESTAMP
from spark_windowing.aggregates.process import load_process



@dataclass
class UpstreamShard:
    """A shard's micro-batch on ``format("windowed")``'s routes: the pipeline's run, and the
    shard's events from the upstream until its step."""
    run: pipeline.ShardRun
    end: dict
    events: pa.Table | None
    key_hash: np.ndarray | None
    maxima: Maxima


def input_schema(cfg: SourceConfig) -> pa.Schema:
    if cfg.stream2 is not None:  # join: the union of both streams (spark_windowing.operator.join)
        return join.union_schema(upstream_for(cfg).schema(), upstream_for(cfg.stream2).schema(), cfg.spec)
    schema = upstream_for(cfg).schema()
    if cfg.processing_time_windows:
        schema = schema.append(pa.field(PROC_TIME_COLUMN, TIMESTAMP))
    return schema


def stream_schema(options: dict[str, str]) -> StructType:
    """The pane schema for these options (validates every option: errors surface at load())."""
    cfg = parse_options(options)
    for stream in (cfg, cfg.stream2):  # e.g. a Kafka broker that is down fails here, in bounded time
        if stream is not None:
            upstream_for(stream).check()
    schema = input_schema(cfg)
    op = WindowedOperator(cfg.spec, schema)
    if cfg.watermark.column and cfg.watermark.column.split(".")[0] not in schema.names:
        raise OptionError("watermark", f"column({cfg.watermark.column})", f"column(<a column of {schema.names}>)",
                          why="no such upstream column")
    return checked_pane_schema(cfg, schema, arrow_to_spark_schema(op.pane_schema()))


class ShardPartition(InputPartition):
    """One slot of one micro-batch: it runs key shard ``shard``, or another one it claims in
    ``read()`` (``spark_windowing.datasource.source.affinity``)."""

    def __init__(self, shard: int, start: dict, end: dict, planned: Any) -> None:
        super().__init__(shard)
        self.shard, self.start, self.end, self.planned = shard, start, end, planned


class WindowedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader; picklable (options and the upstreams over them), clients created
    inside ``read()``. It talks to its upstreams only through ``Upstream``."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.cfg = parse_options(options)
        self.up: Upstream = upstream_for(self.cfg)
        self.up2: Upstream | None = None if self.cfg.stream2 is None else upstream_for(self.cfg.stream2)
        self.schema = schema
        self._available_now = False
        self._target: Any = None  # availableNow: upstream position not to go beyond
        self._target2: Any = None  # the same for the second stream of a join
        self._checked = False      # the state location's spec.json agrees with the options
        self._run_checked = False  # the state location holds the state of the offsets' run (``runs``)
        self._recorded_shards = self.cfg.shards  # spec.json's count: that of offsets without "shards"
        self.last_events: int | None = None  # events the shards read in the last batch (execution=auto)
        self._shared_read: dict | None = None  # within one_read_per_batch: the batch's read, by plan

    # ------------------------------------------------------------------ offsets (driver)
    def initialOffset(self) -> dict:
        """A new checkpoint's start: batch 0 of a new run. The state location is checked at the
        first ``latestOffset`` (``runs.claim``, then its spec): Spark calls this again when it
        restarts a checkpoint whose first batch was logged, so the run drawn here may not be the
        one the checkpoint goes on with."""
        offset = source_offset(seq=0, state=self.cfg.state_location, shards=self.cfg.shards,
                               up=self.up.initial_position(), bt=0, wm=MIN_TIME, run=runs.new_run())
        offset.update(self.up.initial_offset_fields())  # e.g. Kafka's per-partition watermark state
        if self.up2 is not None:  # join: stream 2's position, per-stream watermarks
            offset.update({"up2": self.up2.initial_position(), "wm1": MIN_TIME, "wm2": MIN_TIME,
                           "max_event2": None, "last_input2": None, "started": None})
        return offset

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxFilesPerTrigger`` (files/Delta) or ``maxEventsPerBatch`` (any source; for files and
        Delta whole files are taken, at least one per batch). With both, files are limited here
        and events in ``latestOffset``."""
        if self.cfg.max_files_per_trigger and self.up.limits_files:
            return ReadMaxFiles(self.cfg.max_files_per_trigger)
        if self.cfg.max_events_per_batch:
            return ReadMaxRows(self.cfg.max_events_per_batch)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """availableNow: read what exists now (the generator: up to ``totalEvents``), fire every
        event-time timer that becomes due, ignore processing-time timers, then stop."""
        self._available_now = True
        self._target = self.up.available_now_target()
        if self.up2 is not None:
            self._target2 = self.up2.available_now_target()

    @trace.traced("source.latestOffset")
    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        cfg = self.cfg
        self._check_run(start)
        self._check_state_location()   # a restart from a checkpoint does not call initialOffset
        now = time.time_ns() // 1000
        reports = self._reports(start["seq"], self._shards(start)) if start["seq"] > 0 else []
        if reports:
            self.last_events = sum(int(r.get("events_in") or 0) for r in reports)
        max_event = largest([start.get("max_event")] + [r.get("max_event_us") for r in reports])
        max_col = largest([start.get("max_col")] + [r.get("max_col_us") for r in reports])
        max_files = limit.max_files if isinstance(limit, ReadMaxFiles) else None
        check_malformed(cfg, start, reports, max_event)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if isinstance(limit, ReadMaxFiles) and cfg.max_events_per_batch:
            max_rows = cfg.max_events_per_batch
        up = self.up.latest_position(start["up"], max_files, max_rows)
        if self._target is not None:
            up = self.up.cap(up, self._target, start["up"])
        has_data = up != start["up"]
        last_input = now if has_data else start.get("last_input")
        if cfg.stream2 is None:  # the upstream's watermark (Kafka: per partition, its state in the offset)
            wm, extra = self.up.watermark(start, up, reports, batch_time=now, max_event=max_event, max_col=max_col,
                                          last_input=last_input)
        else:  # join: stream 2's position and the earlier of the two watermarks
            extra = self._stream2_offset(start, reports, now, limit)
            has_data = has_data or extra["up2"] != start["up2"]
            started = start.get("started") or now  # the first batch's time: idle streams are timed from it
            merged = join.JoinWatermark(start["wm"], start["wm1"], start["wm2"]).advance(
                cfg.watermark, max_event1=max_event, max_event2=extra["max_event2"], batch_time=now,
                last_input1=last_input, last_input2=extra["last_input2"], started=started)
            wm = merged.wm
            extra.update({"wm1": merged.wm1, "wm2": merged.wm2, "started": started})
        next_ev = min([MAX_TIME] + [r.get("next_event_timer", MAX_TIME) for r in reports])
        next_pt = min([MAX_TIME] + [r.get("next_proc_timer", MAX_TIME) for r in reports])
        due = next_ev <= min(wm, GLOBAL_END) or (not self._available_now and next_pt <= now)
        if not has_data and not due:
            if not self._input_ends(wm):
                return start
            wm = GLOBAL_END   # endOfInput=fire: the input is read to its end; every window fires and closes
            if cfg.stream2 is not None:
                extra.update({"wm1": GLOBAL_END, "wm2": GLOBAL_END})
        return source_offset(seq=start["seq"] + 1, state=cfg.state_location, shards=cfg.shards, up=up, bt=now, wm=wm,
                             max_event=max_event, max_col=max_col, last_input=last_input,
                             run=start.get(OFFSET_RUN), **extra)

    def _check_run(self, start: dict) -> None:
        """Once per reader: the state location holds the state of ``start``'s run; at batch 0 the
        run takes it (``runs.claim``: refused over another run's state unless ``newCheckpoint=reset``).
        Offsets of a checkpoint without runs (0.1.0) are not checked."""
        run = start.get(OFFSET_RUN)
        if self._run_checked or run is None:
            return
        if int(start["seq"]) == 0:
            runs.claim(self.cfg, run)
        else:
            runs.check_resumed(self.cfg, run)
        self._run_checked = True

    def _input_ends(self, wm: int) -> bool:
        """``endOfInput=fire`` under availableNow, once everything up to the run's target is read
        and no timer is due: one more batch, input-less, moves the watermark to the end of time
        (Beam's and Flink's end of a bounded input). Once: that batch's watermark is the end."""
        return self._available_now and self.cfg.end_of_input == "fire" and wm < GLOBAL_END

    def _stream2_offset(self, start: dict, reports: list[dict], now: int, limit: ReadLimit) -> dict:
        """The second stream's part of the next offset: position (its own maxFilesPerTrigger2),
        max event time so far, last input time."""
        up = self.up2
        assert up is not None
        max_files = up.cfg.max_files_per_trigger
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        up2 = up.latest_position(start["up2"], max_files, max_rows)
        if self._target2 is not None:
            up2 = up.cap(up2, self._target2, start["up2"])
        max_event2 = largest([start.get("max_event2")] + [r.get("max_event2_us") for r in reports])
        return {"up2": up2, "max_event2": max_event2,
                "last_input2": now if up2 != start["up2"] else start.get("last_input2")}

    def _shards(self, offset: dict) -> int:
        """The shard count of the micro-batch ending at ``offset`` (``rescale.shards_of``)."""
        self._check_state_location()
        return rescale.shards_of(offset, self._recorded_shards)

    def _reports(self, seq: int, shards: int) -> list[dict]:
        """Every shard's report of batch ``seq``, from one listing (``shard_reports.read_driver_reports``)."""
        return shard_reports.read_driver_reports(self.cfg.state_location, seq, shards)

    @trace.traced("source.partitions")
    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return self.shard_partitions(start, end, spare_slots=True)

    def shard_partitions(self, start: dict, end: dict, *, spare_slots: bool) -> list[ShardPartition]:
        """The batch's partitions: what it reads (planned once, for every shard), one per shard,
        and with ``spare_slots`` as many more as ``affinity.slots`` asks for (object-store state)."""
        planned = self.up.plan(start["up"], end["up"])
        if self.up2 is not None:
            planned = [planned, self.up2.plan(start["up2"], end["up2"])]
        old, new = self._shards(start), self._shards(end)
        n = slots(self.cfg.state_location, new, self.cfg.claim_wait) if spare_slots and old == new else new
        return [ShardPartition(i, {**start, "shards": old}, {**end, "shards": new}, planned) for i in range(n)]

    @trace.traced("source.commit")
    def commit(self, end: dict) -> None:
        """Spark has finished everything up to ``end``: the late-data table's upkeep when it is due
        (``compactEvery``, ``vacuumEvery``, ``checkpointEvery`` count micro-batches), and every
        ``GC_EVERY`` batches, drop older snapshots, reports and shard claims (listing the state
        location, the only place it is listed)."""
        seq = int(end["seq"])
        late = self.cfg.late_data_path
        if late and upkeep_due(seq, self.cfg.late_maintenance) and _is_delta_table(late):
            maintain(late, seq, self.cfg.late_maintenance)
        if seq % pipeline.GC_EVERY:
            return
        shards = self._shards(end)
        for shard in range(shards):
            pipeline.collect_shard_garbage(self.cfg.state_location, shard, seq)
        for info in storage.list_dir(f"{self.cfg.state_location}/{layout.SHARDS_DIR}"):  # left by a rescale down
            if info.base_name.isdigit() and int(info.base_name) >= shards:
                storage.delete(_uri_like(self.cfg.state_location, info.path), recursive=True)
        for directory in (layout.reports_dir(self.cfg.state_location), layout.claims_dir(self.cfg.state_location)):
            shard_reports.drop_batches_before(directory, seq - 20)

    def _check_state_location(self) -> None:
        """The state location records the shard count and windowing spec it was written with;
        a query (a first start or a restart from its checkpoint) with other ones is refused,
        naming the option: its state would be read under the wrong key routing or spec."""
        if self._checked:
            return
        cfg = self.cfg
        marker = layout.spec_marker(cfg.state_location)
        existing = storage.read_bytes(marker, missing_ok=True)
        if existing is None:
            self._recorded_shards = cfg.shards
            spec = state_record(fingerprint=cfg.spec.fingerprint(), shards=cfg.shards, buckets=cfg.state_buckets,
                                spec=cfg.spec.describe(), options=recorded_options(cfg))
            storage.write_atomic(marker, spec)
        else:
            recorded = json.loads(existing)
            check_state_spec(cfg, recorded, self.up.disjoint_shards)
            self._recorded_shards = int(recorded["shards"])
        ensure_late_table(cfg)
        self._checked = True

    # ------------------------------------------------------------------ read (executors)
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ShardPartition)
        loopback.prompt()              # the panes go out to the JVM at once
        run = self.start_shard(partition, claim=True)
        if run is None:  # a spare slot: every shard is claimed (affinity)
            return
        yield from self.step_shard(run)
        self.finish_shard(run)

    def start_shard(self, partition: ShardPartition, *, claim: bool) -> UpstreamShard | None:
        """A shard's micro-batch up to its step: the shard (``claim``: the one this worker can get
        most cheaply, ``affinity``; None when every shard is taken), its state at the start
        offset (``pipeline.open_shard``), its events and their maxima."""
        cfg, start, end = self.cfg, partition.start, partition.end
        old, shards = int(start["shards"]), int(end["shards"])
        shard = partition.shard
        if claim:
            shard = shard_to_run(cfg.state_location, shards, partition=partition.shard, start_seq=int(start["seq"]),
                                 seq=int(end["seq"]), prefer_held=old == shards, claim_wait=cfg.claim_wait)
            if shard is None:
                return None
        partition = ShardPartition(shard, start, end, partition.planned)
        run = pipeline.open_shard(cfg, shard, int(start["seq"]), int(end["seq"]), input_schema(cfg),
                                  old_shards=old, shards=shards)
        events, key_hash = self._events(partition)
        maxima = batch_maxima(cfg, run.store.op, events, int(end["bt"]))
        run.report.update(maxima.report_fields())
        run.report.update(self.up.report_fields(events, maxima.watermark_times, partition.planned, shard))  # before the step
        run.t_read = time.perf_counter()
        return UpstreamShard(run=run, end=end, events=events, key_hash=key_hash, maxima=maxima)

    def step_shard(self, shard: UpstreamShard) -> Iterator[pa.RecordBatch]:
        """The shard's step over its events (``pipeline.step_shard``): yields the panes. Nothing is
        written: the state after the step is in memory until ``finish_shard``."""
        end, events = shard.end, shard.events
        shard.events = None
        yield from pipeline.step_shard(shard.run, events, watermark=int(end["wm"]), processing_time=int(end["bt"]),
                                       batch_seq=int(end["seq"]), key_hash=shard.key_hash,
                                       event_times=shard.maxima.event_times)
        shard.key_hash = shard.maxima.event_times = None

    def finish_shard(self, shard: UpstreamShard) -> None:
        """What the shard's step decided, written (``pipeline.finish_shard``)."""
        pipeline.finish_shard(shard.run, self.cfg, late_writer=late_writer(self.cfg, shard.end.get(OFFSET_RUN)))

    def __getstate__(self) -> dict:
        """Pickled for the tasks without a batch read ``one_read_per_batch`` holds in this process."""
        return {**self.__dict__, "_shared_read": None}

    @contextmanager
    def one_read_per_batch(self) -> Iterator[None]:
        """Within the block (the driver stepping every shard of one batch in this process), shards
        given the same plan (an upstream that gives each shard the whole batch) share one read of
        it and its key hashes; nothing is kept after the block."""
        self._shared_read = {}
        try:
            yield
        finally:
            self._shared_read = None

    def _read(self, planned: Any, columns: list[str] | None) -> tuple[pa.Table, np.ndarray | None]:
        """The events of ``planned`` and their key hashes (None without key columns or rows); once
        per plan within ``one_read_per_batch``."""
        shared = self._shared_read
        if shared is not None and shared.get("planned") is planned:
            return shared["rows"]
        table = self.up.read(planned, columns)
        rows = table, self._key_hash(table)
        if shared is not None:
            shared.update(planned=planned, rows=rows)
        return rows

    def _key_hash(self, table: pa.Table) -> np.ndarray | None:
        """The key hashes of ``table``'s rows (None without key columns or rows)."""
        keys = self.cfg.spec.key_columns
        return sharding.key_hash(table, keys) if keys and table.num_rows else None

    def _events(self, partition: ShardPartition) -> tuple[pa.Table, np.ndarray | None]:
        """This shard's events of the batch, and their key hashes (shared with the state store)."""
        cfg, up = self.cfg, self.up
        if self.up2 is not None:  # join: both streams' batches as one table with a side column
            t1 = up.read(partition.planned[0], None)
            t2 = self.up2.read(partition.planned[1], None)
            schema = join.union_schema(up.cached_schema(None), self.up2.cached_schema(None), cfg.spec)
            table = join.union(t1, t2, cfg.spec, schema)
            key_hash = self._key_hash(table)
        else:
            columns = None if cfg.late_data_path else needed_columns(cfg)
            table, key_hash = self._read(up.shard_plan(partition.planned, partition.shard), columns)
        disjoint = up.disjoint_shards  # the shard read only its own keys' events
        shards = int(partition.end["shards"])
        if key_hash is not None:
            if shards > 1 and not disjoint:  # every shard read the batch: keep this shard's keys
                mine = np.flatnonzero(key_hash % np.uint64(shards) == partition.shard)
                table, key_hash = table.take(pa.array(mine)), key_hash[mine]
        elif partition.shard != 0 and (shards == 1 or not cfg.spec.key_columns) and not disjoint:
            table = table.slice(0, 0)
        if cfg.processing_time_windows:
            bt = pa.array(np.full(table.num_rows, int(partition.end["bt"]), dtype=np.int64)).cast(TIMESTAMP)
            table = table.append_column(PROC_TIME_COLUMN, bt)
        return table, key_hash


def needed_columns(cfg: SourceConfig) -> list[str] | None:
    """Top-level upstream columns the operator needs (projection pushed into the readers)."""
    spec = cfg.spec
    names = list(spec.key_columns)
    if spec.timestamp_column and spec.timestamp_column != PROC_TIME_COLUMN:
        names.append(spec.timestamp_column)
    gap = getattr(spec.window, "gap_column", None)
    if gap:
        names.append(gap)
    if cfg.watermark.column:
        names.append(cfg.watermark.column)
    if upstream_for(cfg).keeps_corrupt_rows:   # rows the upstream could not read
        names.append(CORRUPT_RECORD)
    if spec.window.inherit:
        names += [spec.window.start_column, spec.window.end_column]
        if "kind" in upstream_for(cfg).cached_schema(None).names:
            names.append("kind")
    for a in spec.aggregates:
        if a.func == "custom":  # it may read any column
            return None
        if a.func == "process":  # a function's declared input_columns (none declared: every column)
            cols = getattr(load_process(a.target)[0], "input_columns", None)
            if cols is None:
                return None
            names += list(cols)
            if getattr(spec.evictor, "column", None):  # delta(threshold, column)
                names.append(spec.evictor.column)
            continue
        if a.column:
            names.append(a.column)
        names += a.carry   # ranked rows' carried columns
    tops = []
    for n in names:
        top = n.split(".")[0]
        if top not in tops:
            tops.append(top)
    return tops


def ensure_late_table(cfg: SourceConfig) -> None:
    """Create the late-data table, empty, when the query starts (driver): a query that dropped
    nothing still has a table to read (``table=late``) and count from. Late rows are the upstream
    event's columns plus ``spark_windowing.panes.LATE_FIELDS``; later appends merge into it. A late
    table deleted alone while the state holds committed batches is refused (``tables.late``)."""
    if cfg.late_data_path:
        open_late_table(cfg.late_data_path, WindowedOperator(cfg.spec, input_schema(cfg)).late_schema(),
                        state=cfg.state_location, has_batches=runs.batch_state(cfg.state_location) is not None)


def late_writer(cfg: SourceConfig, run: str | None = None) -> str:
    """The late table's application-transaction writer of this query's shards (``pipeline``): per
    run (``runs``), as its versions are the run's batch numbers: a new checkpoint's batch 1 is not
    the old one's. A checkpoint without runs (0.1.0) keeps the writer it wrote with."""
    return f"spark-windowing-late:{cfg.state_location}" + (f":{run}" if run else "")


def _is_delta_table(uri: str) -> bool:
    from deltalake import DeltaTable
    return DeltaTable.is_deltatable(uri)


def _uri_like(base: str, path: str) -> str:
    if "://" in base and not base.startswith("file://"):
        return f"{base.split('://', 1)[0]}://{path}"
    return path
