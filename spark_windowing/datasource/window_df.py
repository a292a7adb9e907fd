"""``spark_windowing.window(df, **options)``: the windowed operator as a transformation of any
streaming DataFrame (Spark's Kafka source + ``from_json``, a join, a filter, the rate source).

>>> panes = spark_windowing.window(events, window="tumbling(1 minute)", aggregate="count(*) AS n",  # doctest: +SKIP
...                                timestampColumn="event_time", keyColumns="user_id")

The options are ``format("windowed")``'s operator options, case-insensitive, parsed by the same
code (``options.time_options`` / ``options.operator_spec``), plus ``stateLocation``; the panes have
the same schema.

How it runs (one Spark query; Spark sees a *stateless* one)::

    df ─ __sw_bt = the batch's timestamp (µs; ``window_columns``)
       ─ __sw_wm = event time − delay (µs; null when beyond maxEventTimeAhead)
       ─ __sw_part = a label of the key's shard
       ─ repartition(shards, __sw_part) ─ mapInArrow(_ShardStep)      one task per shard

* **One shuffle, no sort, no pandas.** Rows go to their key shard's partition (``shards``, by
  default the cores Spark has; ``shard_labels``: partition i holds exactly shard i, whatever
  ``spark.sql.shuffle.partitions`` is, so every core works); the task reads its Arrow batches
  and runs one ``StateStore.step`` over them: the vectorized step the ``format("windowed")``
  reader runs per shard. With ``shards=1`` there is no shuffle: ``coalesce(1)`` runs the step in
  the task that makes the rows (an ``execution=driver`` upstream's one partition: NEXMark q5's
  keyless second stage), merging an upstream of several partitions into that one task (a
  ``df.repartition(1)`` before ``window(df)`` keeps the upstream's tasks parallel instead).
* **State under ``stateLocation``, versioned by Spark's batch id.** Each shard keeps the reader's
  ``StateStore`` (key buckets, manifests, segments) under ``<stateLocation>/shards/<i>``: the state
  after batch b is snapshot ``b + 1``. Batch b opens snapshot b, so a batch Spark replays (a task
  retried, a restart after ``kill -9``) starts from the state its first attempt started from and
  gives the same panes. Without the option, ``stateLocation`` is
  ``<spark.sql.streaming.checkpointLocation or the warehouse dir>/window-df-state/<query id>``: the
  query id is kept in the checkpoint, so a restart from the checkpoint finds its state.
* **The watermark: the reader's rule, from the shards' reports.** Every task writes a report per
  batch with the largest ``__sw_wm`` seen so far; batch b's watermark is the largest over the
  shards' reports of batch b − 1 (the delay is already subtracted). That is Spark's rule too: a
  batch's watermark comes from the batches before it. ``watermark=bounded(d)`` (default d = 0) is
  the event time − d, ``column(c)`` is c; a DataFrame's own ``withWatermark(c, d)`` is c − d (with
  several, the least per row). Exact to the microsecond.
* **No row dropped by Spark.** A stateless query drops nothing: every row reaches the operator,
  which decides lateness itself (late panes, or the late table).
* **Windows the watermark closed fire without input** (``noDataBatches``, default true), as
  native Spark runs a no-data micro-batch for a stateful query whose watermark moved. A window
  fires in the first batch whose watermark passes its end, as with ``format("windowed")``; Spark
  runs a stateless query's batch only for input, so ``window`` unions a source of no rows into the
  DataFrame, ``source.ticks``, whose offset moves when the shards' reports say a firing is due
  (the earliest event-time timer at or before the next batch's watermark). That batch runs every
  shard's task and fires them; with ``trigger(availableNow=True)`` the query stops once nothing is
  due. ``noDataBatches=false`` leaves the ticks out: the windows the last input closed fire with
  the next input (as before the ticks: a checkpoint written then has one source fewer, and Spark
  refuses to restart it with the ticks added: restart it with ``noDataBatches=false``).
* **The end of the input, in the batch that says so.** ``endOfInput=fire`` with
  ``trigger(availableNow=True)`` and the query's ``checkpointLocation``: once Spark's offset log
  there shows a batch planned when every source had read all its input, the ticks ask for one
  more, whose tick tells each shard the input ended (``source.ticks``). So does a row whose
  watermark time is the end of time (``format("windowed")`` with ``endOfInput=fire`` fires its
  last panes with that watermark). Either ends the input: the shard that reads it steps its rows,
  then moves its watermark to the end and fires every window, in the same batch (Beam's and Flink's
  end of a bounded input passed down a chain). Its next batch would never come. A shard that gets no
  such row in that batch fires at the next input, as above: a keyless second stage (one shard: the
  argmax per window of NEXMark's q5) gets them whenever the upstream fires anything at its end (the
  default trigger fires every window still open); an upstream that fires nothing there passes on no
  end.
* **Processing time, as ``format("windowed")`` has it**: processing-time windows (no
  ``timestampColumn``: an event's time is its batch's, ``current_timestamp()``, and the watermark
  ``processing(0)``), ``watermark=processing(lag)`` (the batch time − lag), ``watermarkIdleTimeout``
  (a batch without input moves the watermark on by the time beyond the timeout since the last
  batch with input) and processing-time triggers. The ticks then run on the clock
  (``source.ticks``): they move when a firing is due at the time they are asked, and the batch
  they ask for gives every shard one row, the tick, carrying Spark's batch timestamp (the same on
  a replay), so each shard's watermark and processing time are the batch's. A shard without any
  row in a batch Spark ran for input alone moves no processing-time clock: its timers wait for the
  ticks' batch. Rows of batch b are judged against the watermark of b, computed from the shards'
  reports of b − 1 (the maximum event time, the last batch time with input) and b's time.
* **Late and malformed rows, exactly once.** With ``lateDataPath`` the shard appends its step's
  late rows to that Delta table with a Delta application transaction (writer id from
  ``queryName`` or the spec, and the shard; version: the batch id + 1): a replayed batch appends
  nothing twice.

Differences from ``format("windowed")`` (each refused with an ``OptionError`` naming the option,
the value and the accepted forms):

* upstream options (``source``, ``path``, ``kafka.*``, ``maxFilesPerTrigger``, ...): the
  DataFrame is the upstream (``schema`` declares the DataFrame's columns instead, so that
  ``window`` need not analyze it: ``declared_schema``);
* ``noDataBatches=false`` with processing time (below);
* joins of two streams (``source2``/``join``): join the DataFrames in Spark and window the result;
* ``malformedEvents=fail-if-all``: it needs every shard's counts on the driver; ``window(df)``
  defaults to ``late`` (malformed rows go to the late table) and accepts ``fail``.

``batch_seq`` in pane and late rows is Spark's batch id + 1 and ``batch_time`` Spark's batch
timestamp (a shard without input in a batch stamps the panes it fires with its step's time).
A DataFrame that already has a ``withWatermark`` keeps it and that watermark is the operator's; a
``watermark`` option is refused then, as Spark refuses a second one.

The pane schema carries the producing spec in ``window_start``'s metadata, as ``format("windowed")``'s
does, so the windowed sink records it, refuses panes of another spec into the same tables, and
marks windows closed in ``current``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from spark_windowing._time import GLOBAL_END
from spark_windowing.datasource import loopback, storage, trace
from spark_windowing.datasource._types import arrow_to_spark_schema, spark_to_arrow_schema
from spark_windowing.datasource.options.config import PROC_TIME_COLUMN, SourceConfig
from spark_windowing.datasource import spark_hash
from spark_windowing.datasource.source import pipeline, rescale, runs, shard_reports, sharding
from spark_windowing.datasource.spark_hash import spark_shard_of
from spark_windowing.datasource.source.shard_reports import largest
from spark_windowing.datasource.source.sharding import shard_labels
from spark_windowing.datasource.source.ticks import TICK_COLUMN, TICKS_OPTION, point_to, ticks_settings
from spark_windowing.datasource.storage import layout
from spark_windowing.datasource.tables import pane_spec
from spark_windowing.datasource.window_columns import (BT_COLUMN, DELAY_KEY, PART_COLUMN, WM_COLUMN, batch_time_column,
                                                       watermark_time)
from spark_windowing.datasource.window_options import (WINDOW_OPTIONS, declared_schema, parse_window_options,
                                                       refuse_changes)
from spark_windowing.datasource.tables.late import check_late_table, create_late_table, record_late_table
from spark_windowing.errors import OptionError, SnapshotError, WindowingError
from spark_windowing.operator.windowed import WindowedOperator
from spark_windowing.operator.spec import OperatorSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["window", "WINDOW_OPTIONS"]

INTERNAL = (WM_COLUMN, BT_COLUMN, PART_COLUMN, TICK_COLUMN)
#: The task-local properties Spark's micro-batch execution sets (``MicroBatchExecution.BATCH_ID_KEY``,
#: ``StreamExecution.QUERY_ID_KEY``).
_BATCH_ID, _QUERY_ID = "streaming.sql.batchId", "sql.streaming.queryId"
#: The job group Spark's stream execution sets for a run's batches: the run id (``StreamExecution.runStream``).
_RUN_ID = "spark.jobGroup.id"
#: (state location, query id, run id, spec fingerprint, shards) this worker has checked against
#: the location's record -> the record's shard history: per run of a query (Spark's run id, the
#: job group of its batches), so a restart is checked again (a late table deleted meanwhile, a
#: location created anew) though Spark reuses this worker.
_CHECKED: dict[tuple[str, str, str | None, str, int], list] = {}
#: (pointer, state location) this worker has written for the ticks (the pointer's name is new for
#: every ``window`` call).
_POINTED: set[tuple[str, str]] = set()


def window(df: "DataFrame", **options: Any) -> "DataFrame":
    """Window the streaming DataFrame ``df``: a streaming DataFrame of pane rows (the schema of
    ``format("windowed")`` with the same options). Raises ``OptionError`` for a bad option."""
    from pyspark.sql import functions as F
    spark = df.sparkSession
    cfg = parse_window_options(options, _default_shards(spark))
    spec: OperatorSpec = cfg["spec"]
    declared = declared_schema(options)
    struct = declared if declared is not None else df.schema   # declared: df is not analyzed (module doc)
    for name in INTERNAL:
        if name in struct.fieldNames():
            raise OptionError("df", name, f"a DataFrame without the internal columns {', '.join(INTERNAL)}",
                              why=f"column {name!r} is used by window(df)")
    batch_time = batch_time_column(spark)
    if cfg["processing_time_windows"]:   # an event's time is its batch's (format("windowed")'s rule)
        from pyspark.sql.types import StructField, StructType, TimestampType
        df = df.withColumn(PROC_TIME_COLUMN, F.timestamp_micros(batch_time))
        struct = StructType(list(struct.fields) + [StructField(PROC_TIME_COLUMN, TimestampType())])
    in_schema = spark_to_arrow_schema(struct)
    op = WindowedOperator(spec, in_schema)  # binds: key, time, aggregate columns checked here
    # the producing spec in window_start's metadata, as format("windowed") puts it: the windowed sink
    # records it, refuses panes of another spec, and closes windows in `current` by its lateness
    panes = pane_spec.annotate(arrow_to_spark_schema(op.pane_schema()), pane_spec.produced_by(spec))
    own = _own_watermark(df, options, given=cfg["watermark_given"]) if declared is None else []
    if cfg["late_path"]:   # a late table deleted alone is refused here (a stateLocation given) or at the first batch
        if cfg["state_location"]:
            check_late_table(cfg["state_location"], cfg["late_path"],
                             has_batches=runs.batch_state(cfg["state_location"]) is not None)
        create_late_table(cfg["late_path"], op.late_schema())
    staged = df.withColumn(BT_COLUMN, batch_time)
    staged = staged.withColumn(WM_COLUMN, watermark_time(own, cfg["watermark"], spec, in_schema))
    shards = cfg["shards"]
    keys = [F.col(k) for k in spec.key_columns]
    shard = F.pmod(F.xxhash64(*keys), F.lit(shards)).cast("int") if keys else F.lit(0)
    labels = F.array(*[F.lit(v) for v in shard_labels(shards)])
    staged = staged.withColumn(PART_COLUMN, F.element_at(labels, shard + 1))
    writer = f"spark-windowing-late:window-df:{cfg['query_name'] or spec.fingerprint()}"
    state_base = _default_state_base(spark)
    staged = _with_ticks(staged, cfg, state_base, batch_time)
    step = _ShardStep(spec, in_schema, cfg, writer, state_base)
    # one shard takes every row: no shuffle, its step runs in the task that makes them
    staged = staged.coalesce(1) if shards == 1 else staged.repartition(shards, PART_COLUMN)
    if declared is not None:
        _declare_columns(staged, struct, ticks=cfg["no_data_batches"])
    return staged.mapInArrow(step, panes)


def _own_watermark(df: "DataFrame", options: dict[str, Any], *, given: bool) -> list:
    """The DataFrame's ``withWatermark`` columns (the operator's watermark then); a ``watermark``
    option beside them, or a ``withWatermark`` whose column is gone, is refused."""
    own = _marked(df)
    if own and given:
        raise OptionError("watermark", next(v for k, v in options.items() if k.lower() == "watermark"),
                          "no watermark option: the DataFrame's own withWatermark (on column "
                          f"{', '.join(repr(f.name) for f in own)}) is the query's",
                          why="Spark allows one watermark per stream (a second withWatermark fails the query: "
                              "'Redefining watermark is disallowed'); drop the option, or the DataFrame's withWatermark")
    if not own:
        _refuse_lost_watermark(df)
    return own


def _with_ticks(staged: "DataFrame", cfg: dict, state_base: str, batch_time: Any) -> "DataFrame":
    """``staged`` with ``source.ticks`` unioned in (``noDataBatches``), their rows with the batch's
    time: Spark runs a batch without input when the windows the watermark closed are due. Sets
    ``cfg["pointer"]``: where the shards name their state location for the ticks, when it is per
    query id."""
    cfg["pointer"] = None
    if not cfg["no_data_batches"]:
        return staged
    cfg["pointer"] = None if cfg["state_location"] else f"{state_base}/ticks/{uuid.uuid4().hex}"
    clock = None
    if cfg["clock"]:
        wm = cfg["watermark"]
        clock = {"kind": wm.kind, "delay": int(wm.delay), "idle": wm.idle_timeout, "proc": cfg["proc_timers"],
                 "labels": list(shard_labels(cfg["shards"]))}
    end = {"checkpoint": cfg["checkpoint"], "labels": list(shard_labels(cfg["shards"]))} \
        if cfg["end_of_input"] == "fire" else None
    reader = staged.sparkSession.readStream.format("windowed").option(
        TICKS_OPTION, ticks_settings(cfg["state_location"], cfg["pointer"], partition=cfg["shards"] == 1,
                                     clock=clock, end=end))
    try:
        ticks = reader.load()
    except Exception as e:  # AnalysisException; the JVM's, through py4j, when Spark's Python lacks the package
        if "DATA_SOURCE_NOT_FOUND" in str(e):
            raise _format_not_found(staged.sparkSession) from e
        raise
    return staged.unionByName(ticks.withColumn(BT_COLUMN, batch_time), allowMissingColumns=True)


def _format_not_found(spark: Any) -> WindowingError:
    """The error for a ``windowed`` format Spark cannot find, with the likely cause: the Python Spark
    starts lacks the package, or (the same Python) Spark's lookup cannot see it."""
    try:
        spark_python = spark.sparkContext.pythonExec or "python3"
    except Exception:  # Spark Connect: no SparkContext (its server's Python is the one Spark uses)
        spark_python = os.environ.get("PYSPARK_PYTHON", "python3")
    found = shutil.which(spark_python)
    # the same environment: the same bin directory (a virtualenv's pythons all link to its base's)
    same = found is not None and os.path.dirname(os.path.abspath(found)) == os.path.dirname(sys.executable)
    cause = ("Spark's lookup does not see the package in it: an editable install needs "
             "--config-settings editable_mode=compat" if same else
             f"it does not have spark_windowing, which this Python ({sys.executable!r}) has: set "
             f"PYSPARK_PYTHON={sys.executable} before the session starts")
    return WindowingError(
        "window(df) cannot start: Spark does not find the 'windowed' format ([DATA_SOURCE_NOT_FOUND]), which "
        "window(df) reads its ticks through (noDataBatches). Spark looks it up, and runs window(df)'s tasks, with "
        f"the Python it starts ({spark_python!r}); {cause} "
        "(docs/troubleshooting.md: 'Spark does not find the windowed format').")


def _declare_columns(staged: "DataFrame", struct: Any, *, ticks: bool) -> None:
    """Spark Connect's ``mapInArrow`` asks the server for its input's columns (an analysis, which a
    declarative pipeline's query function refuses); with a declared schema they are known: the
    declared columns and the internal ones. Only the DataFrame built here is given them."""
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType
    if hasattr(staged, "_cached_schema"):       # a Spark Connect DataFrame (classic ones analyze eagerly)
        staged._cached_schema = StructType(list(struct.fields) + [
            StructField(BT_COLUMN, LongType()), StructField(WM_COLUMN, LongType()),
            StructField(PART_COLUMN, IntegerType())]
            + ([StructField(TICK_COLUMN, IntegerType())] if ticks else []))


def _refuse_lost_watermark(df: "DataFrame") -> None:
    """A ``withWatermark`` whose column the DataFrame no longer has cannot be followed: refused."""
    jdf = getattr(df, "_jdf", None)
    if jdf is not None and "EventTimeWatermark" in jdf.queryExecution().logical().toString():
        raise OptionError("df", "a withWatermark on a column it no longer has",
                          "a DataFrame that keeps its withWatermark column, or none and the watermark option",
                          why="window(df) follows the watermark from that column's values")


def _marked(df: "DataFrame") -> list:
    """The fields of ``df`` that carry Spark's watermark marker (a ``withWatermark`` on them)."""
    return [f for f in df.schema.fields if DELAY_KEY in (f.metadata or {})]


def _default_shards(spark: Any) -> int:
    """``shards`` by default: the cores Spark has (``defaultParallelism``; Spark Connect, which
    does not say: ``spark.sql.shuffle.partitions``)."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # Spark Connect: no SparkContext
        return max(1, int(spark.conf.get("spark.sql.shuffle.partitions", "2")))


def _default_state_base(spark: Any) -> str:
    """Where the state of a query without ``stateLocation`` goes: under the session's default
    checkpoint location, else its warehouse directory (one directory per query id)."""
    base = spark.conf.get("spark.sql.streaming.checkpointLocation", None) or \
        spark.conf.get("spark.sql.warehouse.dir", "spark-warehouse")
    return f"{base.rstrip('/')}/window-df-state"


class _ShardStep:
    """What ``mapInArrow`` runs: the task of partition i is shard i's step of the micro-batch."""

    def __init__(self, spec: OperatorSpec, in_schema: pa.Schema, cfg: dict, writer: str, state_base: str) -> None:
        self.spec, self.in_schema, self.writer, self.state_base = spec, in_schema, writer, state_base
        self.shards, self.buckets, self.memory_rows = cfg["shards"], cfg["buckets"], cfg["memory_rows"]
        self.late_path, self.malformed, self.state = cfg["late_path"], cfg["malformed"], cfg["state_location"]
        self.pointer = cfg.get("pointer")
        self.clock, self.watermark = cfg.get("clock", False), cfg["watermark"]
        self._record = {"fingerprint": spec.fingerprint(), "shards": self.shards,
                        "spec": json.loads(json.dumps(spec.describe(), default=str))}

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Shard i's micro-batch, by the steps every route runs (``source.pipeline``): the state
        after batch b is snapshot b + 1; the watermark is the largest over the shards' reports of
        batch b − 1."""
        from pyspark import TaskContext
        ctx = TaskContext.get()
        return self.run(loopback.acked(batches), shard=ctx.partitionId(),
                        batch_id=int(ctx.getLocalProperty(_BATCH_ID)), query_id=ctx.getLocalProperty(_QUERY_ID),
                        run_id=ctx.getLocalProperty(_RUN_ID))

    def run(self, batches: Iterator[pa.RecordBatch], *, shard: int, batch_id: int,
            query_id: str, run_id: str | None = None) -> Iterator[pa.RecordBatch]:
        """Shard ``shard``'s step of Spark's micro-batch ``batch_id`` over ``batches`` (the rows
        Spark's shuffle gave its partition, with the internal columns)."""
        begun = time.time()
        root = self.state or f"{self.state_base}/{query_id}"
        history = self._check_recorded(root, query_id, run_id, batch_id)
        old = count_at(history, batch_id - 1) if batch_id > 0 else self.shards   # != shards: a rescale
        if self.pointer and (self.pointer, root) not in _POINTED:   # the ticks learn where the reports are
            point_to(self.pointer, root)
            _POINTED.add((self.pointer, root))
        with trace.span("window_df.input", shard=shard, batch=batch_id):
            table, bt, ended = _rows_and_time(batches)
        batch_max = GLOBAL_END if ended else pc.max(table.column(WM_COLUMN)).as_py() if table is not None else None
        events = self._events(table) if table is not None else None
        reports = shard_reports.read_driver_reports(root, batch_id, old) if batch_id > 0 else \
            _no_later_state(root)
        seen = largest([r.get("max_event_us") for r in reports])
        last_input = largest([r.get("last_input_us") for r in reports])
        watermark = self.watermark.at_batch(seen=seen, batch_time=bt, last_input=last_input,
                                            has_input=table is not None) if self.clock else seen
        if bt is None and not self.clock:   # no row, no batch time: the step's own (module docstring)
            bt = time.time_ns() // 1000
        cfg = self._config(root)
        with trace.span("window_df.open", shard=shard, batch=batch_id):
            run = pipeline.open_shard(cfg, shard, batch_id, batch_id + 1, self.in_schema, old_shards=old,
                                      shards=self.shards, router=spark_shard_of)
        run.report["max_event_us"] = largest([seen, batch_max])   # the next batch's watermark
        run.report["last_input_us"] = bt if table is not None else last_input   # the idle timeout's
        key_hash = sharding.key_hash(events, self.spec.key_columns) if events is not None \
            and self.spec.key_columns else None
        yield from pipeline.step_shard(run, events, watermark=watermark, processing_time=bt, batch_seq=batch_id + 1,
                                       key_hash=key_hash)
        if batch_max is not None and batch_max >= GLOBAL_END and (seen is None or seen < GLOBAL_END):
            # the input ended (the upstream's, or the ticks' end: module docstring): every window fires
            yield from pipeline.step_shard(run, None, watermark=GLOBAL_END, processing_time=bt,
                                           batch_seq=batch_id + 1)
        malformed = int(run.metrics.get("malformed", 0))
        if malformed and self.malformed == "fail":
            raise WindowingError(f"malformedEvents=fail: {malformed} row(s) of key shard {shard} have no "
                                 f"readable event time in column {self.spec.timestamp_column!r}")
        with trace.span("window_df.finish", shard=shard, batch=batch_id):
            pipeline.finish_shard(run, cfg, late_writer=self.writer)
        if batch_id % pipeline.GC_EVERY == 0 and batch_id > 0:
            pipeline.collect_shard_garbage(root, shard, batch_id)
            if shard == 0:
                _drop_shards_beyond(root, history, self.shards, batch_id)
            if shard == 0:
                shard_reports.drop_batches_before(layout.reports_dir(root), batch_id - 20)
        trace.record("window_df.task", begun, time.time(), shard=shard, batch=batch_id)

    def _events(self, table: pa.Table) -> pa.Table:
        """The batch's rows as the operator's input: internal columns dropped, Spark's Arrow types
        (large strings, the session time zone) cast to the DataFrame's schema."""
        missing = [f.name for f in self.in_schema if f.name not in table.column_names]
        if missing:
            raise OptionError("schema", self.in_schema.names, f"the DataFrame's columns {_visible(table)}",
                              why=f"the DataFrame has no column(s) {', '.join(missing)}")
        try:
            columns = [table.column(f.name).cast(f.type) if table.schema.field(f.name).type != f.type
                       else table.column(f.name) for f in self.in_schema]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise OptionError("schema", str(self.in_schema), f"the DataFrame's column types: {_visible(table)}",
                              why=f"a column's values cannot be read as the declared type: {e}") from e
        return pa.Table.from_arrays(columns, schema=self.in_schema)

    def _config(self, root: str) -> SourceConfig:
        """The settings the shard pipeline reads: the spec, the state location and its layout, the
        late table."""
        return SourceConfig(source="dataframe", path=None, spec=self.spec, watermark=None, state_location=root,
                            shards=self.shards, state_buckets=self.buckets, state_memory_rows=self.memory_rows,
                            late_data_path=self.late_path)

    def _check_recorded(self, root: str, query_id: str, run_id: str | None, batch_id: int) -> list:
        """The state location records the spec its state was written with and the shard count of
        each run (``history``: ``[batch, shards]`` from that batch on); a query with another spec
        is refused, naming the option (state would be read under other rules), and so is another
        shard count when the state cannot be redistributed (``rescale``); else the new count is
        recorded from ``batch_id`` on. So is a late table deleted alone (``tables.late``: the state
        of batches before ``batch_id`` wrote late rows to it). Returns the history."""
        checked = (root, query_id, run_id, self._record["fingerprint"], self.shards)
        if checked in _CHECKED:
            return _CHECKED[checked]
        if self.late_path:
            check_late_table(root, self.late_path, has_batches=batch_id > 0)
            record_late_table(root, self.late_path)
        marker = layout.spec_marker(root)
        raw = storage.read_bytes(marker, missing_ok=True)
        recorded = json.loads(raw) if raw is not None else None
        if recorded is not None and ("fingerprint" not in recorded or "shards" not in recorded):
            raise SnapshotError(f"{marker} is not window(df)'s: is stateLocation {root} another query's?")
        if recorded is not None:
            refuse_changes(recorded, self._record, root, why_not_rescalable=self._why_not_rescalable())
        history = (recorded or {}).get("history") or ([[0, recorded["shards"]]] if recorded else [])
        if not history or history[-1][1] != self.shards:     # a first batch, or a rescale from this batch on
            history = history + [[batch_id, self.shards]]
            storage.write_atomic(marker, json.dumps({**self._record, "history": history}, sort_keys=True).encode())
        _CHECKED[checked] = history
        return history

    def _why_not_rescalable(self) -> str | None:
        """Why this query's state cannot be redistributed to another shard count, or None."""
        why = rescale.not_rescalable(self.spec, disjoint_upstream=False)
        if why is None:
            odd = [k for k in self.spec.key_columns if not spark_hash.supported(self.in_schema.field(k).type)]
            if odd:
                why = (f"key column(s) {', '.join(odd)} of a type whose Spark hash (how window(df) routes keys) "
                       "is not computed here")
        return why


def _rows_and_time(batches: Iterator[pa.RecordBatch]) -> tuple[pa.Table | None, int | None, bool]:
    """A shard's input rows of the batch (None: none) without the ticks, the batch's time (µs;
    None when no row, not even a tick, came) and whether a tick says the input ended (``2``:
    ``source.ticks``)."""
    got = [b for b in batches if b.num_rows]
    if not got:
        return None, None, False
    table = pa.Table.from_batches(got)
    bt = int(table.column(BT_COLUMN)[0].as_py())
    ended = False
    if TICK_COLUMN in table.column_names and table.column(TICK_COLUMN).null_count < table.num_rows:
        ended = pc.max(table.column(TICK_COLUMN)).as_py() == 2
        table = table.filter(pc.is_null(table.column(TICK_COLUMN)))
    return (table if table.num_rows else None), bt, ended


def count_at(history: list, batch_id: int) -> int:
    """The shard count micro-batch ``batch_id`` ran with, by the record's history."""
    counts = [n for since, n in history if since <= batch_id]
    return counts[-1] if counts else history[0][1]


def _drop_shards_beyond(root: str, history: list, shards: int, batch_id: int) -> None:
    """After a rescale to fewer shards has committed, the old shards beyond the count are garbage."""
    if batch_id > history[-1][0]:
        for i in range(shards, max(n for _, n in history)):
            storage.delete(layout.store_root(root, i), recursive=True)


def _visible(table: pa.Table) -> str:
    """The batch's own columns and types (the internal ones left out), for an error message."""
    return ", ".join(f"{f.name} {f.type}" for f in table.schema if f.name not in INTERNAL)


def _no_later_state(root: str) -> list:
    """At batch 0: ``root`` must hold no state of later batches (another run's, with another
    checkpoint): starting over it would mix two queries' state. Returns no reports."""
    later = [int(i.base_name) for i in storage.list_dir(layout.reports_dir(root)) if i.base_name.isdigit()]
    if any(seq > 1 for seq in later):
        raise SnapshotError(f"stateLocation {root} holds state up to batch {max(later) - 1}, but this query starts "
                            "at batch 0 (a new checkpoint): give a new stateLocation, or the checkpoint it was "
                            "written with")
    return []
