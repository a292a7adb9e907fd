"""``spark_windowing.window(df, **options)``: the windowed operator as a transformation of any
streaming DataFrame (Spark's Kafka source + ``from_json``, a join, a filter, the rate source),
with state and exactly-once through Spark's own checkpoint.

>>> panes = spark_windowing.window(events, window="tumbling(1 minute)", aggregate="count(*) AS n",  # doctest: +SKIP
...                                timestampColumn="event_time", keyColumns="user_id")

The options are ``format("windowed")``'s operator options, case-insensitive, parsed by the same
code (``options.time_options`` / ``options.operator_spec``); the panes have the same schema.

How it runs (one Spark query, its checkpoint the only thing to keep)::

    df ─ withColumn(__sw_wm = event time as a timestamp) ─ withWatermark(__sw_wm, <delay>)
       ─ __sw_wm cast to long (drops the watermark marker) ─ __sw_shard = pmod(xxhash64(keys), shards)
       ─ groupBy(__sw_shard).transformWithStateInPandas(_WindowProcessor, timeMode="EventTime")

* **One Python call per shard and micro-batch.** Rows are grouped by a key *shard*, not by key:
  ``handleInputRows`` gets all of a shard's rows of the batch (pandas frames made from Arrow),
  turns them into one Arrow table and runs one ``StateStore.step`` over it — the same vectorized
  step the ``format("windowed")`` reader runs per shard.
* **Watermark: Spark's, which equals ours.** ``watermark=bounded(d)`` (the default, d = 0) is
  ``withWatermark(<event time>, d)`` and ``column(c)`` is ``withWatermark(c, 0)``: Spark's one
  global watermark per query is the max event time (of ``c``) over the batches before, minus d
  — the progression the reader computes from its shards' reports. The processor reads it
  (``TimerValues.getCurrentWatermarkInMs``) and steps the operator with it. Spark keeps event
  times in milliseconds: with sub-millisecond event times the watermark is the max truncated to
  the millisecond, minus d (the reader's is exact to the microsecond).
* **No rows dropped by Spark.** Spark's stateful operators drop input rows older than the
  watermark when the input column carries the watermark marker; the operator decides lateness
  itself (``window end + allowedLateness <= watermark``, a later rule), so the marker is removed
  (the cast) before ``transformWithStateInPandas`` and every row reaches the operator. So is the
  marker of a ``withWatermark`` the DataFrame already has (``_unmarked``).
* **Timers fire windows when no data arrives.** After each step the shard registers one
  event-time timer, at the operator's next event-time timer (ms, rounded up); Spark runs a no-data
  batch when the watermark advances and calls ``handleExpiredTimer``, which steps the operator
  with no events. Spark calls a shard's input rows before its timers within a batch; a timer call
  in a batch whose input call already stepped (same batch timestamp) does nothing.
* **State in Spark's state store, written incrementally.** The ``StateStore`` (key buckets,
  manifest, segments holding only the buckets a step changed) is kept in a ``MapState``
  (name -> bytes) of the shard, through ``_MapStateIO``: a step reads the manifest and the
  buckets it needs, and writes the changed buckets' segment and a new manifest. Spark versions
  the state store with the checkpoint, so a replayed batch starts from the state its first
  attempt started from. A Python worker keeps a shard's store open between batches and reuses
  it only when it is exactly the state Spark hands over (same step count, same manifest digest),
  so a shard that stays on its worker does not reload its buckets each batch.
* **Late and malformed rows, exactly once.** With ``lateDataPath`` the shard appends its step's
  late rows to that Delta table with a Delta application transaction (writer id from
  ``queryName`` or the spec, and the shard; version: the shard's step count, kept in the state):
  a replayed batch has the same step count and appends nothing twice.

Differences from ``format("windowed")`` (each refused with an ``OptionError`` naming the option,
the value and the accepted forms):

* upstream options (``source``, ``path``, ``schema``, ``kafka.*``, ``maxFilesPerTrigger``, ...,
  ``stateLocation``): the DataFrame is the upstream, the checkpoint the state;
* ``watermark=processing(...)`` and ``watermarkIdleTimeout``: Spark's watermark moves only with
  event times; processing-time windows (no ``timestampColumn``) and processing-time triggers
  (``AfterProcessingTime``, ``ContinuousProcessingTime``): the processor runs in Spark's
  event-time mode, which has no processing-time timers;
* joins of two streams (``source2``/``join``): join the DataFrames in Spark and window the result;
* ``malformedEvents=fail-if-all``: it needs every shard's counts on the driver; ``window(df)``
  defaults to ``late`` (malformed rows go to the late table) and accepts ``fail``.

``batch_seq`` in pane and late rows is the shard's step count (Spark does not tell a stateful
processor its batch id) and ``batch_time`` Spark's batch timestamp; both are per micro-batch as in
``format("windowed")``, but their values differ from a ``format("windowed")`` run's.
A DataFrame that already has a ``withWatermark`` keeps it, and that watermark is the operator's:
Spark allows one watermark per stream (a second ``withWatermark`` fails the query, "Redefining
watermark is disallowed"), so ``window`` adds none and refuses a ``watermark`` option then. Its
rows behind that watermark still reach the operator (late panes or the late table, never dropped).

The pane schema carries the producing spec in ``window_start``'s metadata, as ``format("windowed")``'s
does, so the windowed sink records it, refuses panes of another spec into the same tables, and
marks windows closed in ``current``.

The query needs ``spark.sql.streaming.stateStore.providerClass`` set to RocksDB's provider
(``RocksDBStateStoreProvider``), as every ``transformWithState`` query does; ``window`` refuses to
build one otherwise.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, Iterator

import pyarrow as pa
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from spark_windowing._arrow import field_type
from spark_windowing._time import MAX_TIME, UNIT_FACTORS
from spark_windowing.datasource.tables import pane_spec
from spark_windowing.datasource.source import sharding
from spark_windowing.datasource._types import arrow_to_spark_schema, spark_to_arrow_schema
from spark_windowing.datasource.options.reference import options_of
from spark_windowing.datasource.options.values import int_option
from spark_windowing.datasource.options.parse import KNOWN_OPTIONS, operator_spec, time_options, unknown_option
from spark_windowing.datasource.tables.late import append_late_rows, create_late_table
from spark_windowing.errors import OptionError, WindowingError
from spark_windowing.operator import WindowedOperator
from spark_windowing.spec import OperatorSpec
from spark_windowing.store import StateStore
from spark_windowing.segments import collect_garbage, manifest_digest, manifest_uri
from spark_windowing.watermark import parse_watermark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["window", "WINDOW_OPTIONS"]

#: The options ``window(df)`` takes (lower case; names are case-insensitive).
WINDOW_OPTIONS = ("window", "trigger", "accumulationmode", "aggregate", "process", "evictor", "keycolumns",
                  "timestampcolumn", "timestampunit", "timestampcombiner", "allowedlateness",
                  "fireonlyupdatedpanes", "watermark", "latedatapath", "malformedevents", "shards",
                  "statebuckets", "statememoryrows", "queryname", "maxeventtimeahead")
#: The documented spelling of each option (docs/options.md's registry), for error messages.
_SPELLED = {o.name.lower(): o.name for o in options_of("reader")}
_ACCEPTED = ", ".join(_SPELLED.get(o, o) for o in WINDOW_OPTIONS)
_WHY_UPSTREAM = ("an upstream option of format(\"windowed\"): window(df) windows the DataFrame it is given, "
                 "and keeps its state in the query's checkpoint")
#: Internal columns: the event time for Spark's watermark, the key shard.
WM_COLUMN, SHARD_COLUMN = "__sw_wm", "__sw_shard"
#: The column metadata key of Spark's watermark marker (``EventTimeWatermark.delayKey``).
_DELAY_KEY = "spark.watermarkDelayMs"
_ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
_ROOT = "state"  # the StateStore's root inside the shard's MapState names
#: Stores kept open in this Python worker between micro-batches, by (writer, shard): used only
#: when they are exactly the state Spark hands over (``_WindowProcessor._open``).
_OPEN: dict[tuple[str, int], StateStore] = {}


def _check_names(raw: dict[str, Any]) -> dict[str, str]:
    """Lower-cased string options; upstream and unknown options refused."""
    out: dict[str, str] = {}
    for name, value in raw.items():
        low = name.lower()
        if low not in WINDOW_OPTIONS:
            if low in KNOWN_OPTIONS or low == "watermarkidletimeout" or "." in low:
                why = _WHY_UPSTREAM if low != "watermarkidletimeout" else \
                    "Spark's watermark moves only with event times: there is no idle timeout"
                raise OptionError(name, value, f"the options of window(df): {_ACCEPTED}", why=why)
            raise unknown_option(name, value)
        out[low] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def parse_window_options(raw: dict[str, Any], default_shards: int = 2) -> dict[str, Any]:
    """Validate ``window(df)``'s options; returns the parsed spec, watermark and settings."""
    options = _check_names(raw)
    window_text, ts_col = time_options(options)
    if not ts_col:
        raise OptionError("timestampColumn", None, "the event-time column of the DataFrame",
                          why="required: window(df) runs in Spark's event time (no processing-time windows)")
    spec = operator_spec(options, window_text, ts_col)
    wm = parse_watermark(options.get("watermark"))
    if wm.kind == "processing":
        raise OptionError("watermark", options["watermark"], "bounded(<delay>) or column(<column>) with window(df)",
                          why="Spark's watermark moves only with event times")
    trigger = spec.trigger.spec()
    if "processingtime" in trigger.replace(" ", "").lower():
        raise OptionError("trigger", options.get("trigger"), "triggers without processing-time parts with window(df) "
                          "(AfterWatermark, AfterCount, AfterEach, Repeatedly, ... )",
                          why="Spark's event-time mode has no processing-time timers")
    malformed = options.get("malformedevents", "late").strip().lower()
    if malformed not in ("late", "fail"):
        raise OptionError("malformedEvents", options.get("malformedevents"), "late, fail with window(df)",
                          why="fail-if-all needs every shard's counts of a batch in one place")
    return {"spec": spec, "watermark": wm, "watermark_given": "watermark" in options, "malformed": malformed,
            "shards": int_option(options, "shards", minimum=1, default=default_shards),
            "buckets": int_option(options, "stateBuckets", minimum=1, default=64),
            "memory_rows": int_option(options, "stateMemoryRows", minimum=1, default=2_000_000),
            "late_path": options.get("latedatapath") or None, "query_name": options.get("queryname")}


def _time_expr(column: str, arrow_type: pa.DataType, unit: str | None):
    """A Spark expression: ``column`` as a timestamp, read as the operator reads it."""
    from pyspark.sql import functions as F
    c = F.col(column)
    if pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type):
        return F.timestamp_micros(F.round(c * F.lit(UNIT_FACTORS[unit or "ms"])).cast("long"))
    return c.cast("timestamp")  # timestamp, date, ISO-8601 string


def window(df: "DataFrame", **options: Any) -> "DataFrame":
    """Window the streaming DataFrame ``df``: a streaming DataFrame of pane rows (the schema of
    ``format("windowed")`` with the same options). Raises ``OptionError`` for a bad option."""
    spark = df.sparkSession
    provider = spark.conf.get("spark.sql.streaming.stateStore.providerClass", None)
    if provider != _ROCKSDB:
        raise OptionError("spark.sql.streaming.stateStore.providerClass", provider, _ROCKSDB,
                          why="window(df) keeps its state with transformWithStateInPandas, which needs RocksDB")
    cfg = parse_window_options(options, int(spark.conf.get("spark.sql.shuffle.partitions", "2")))
    spec: OperatorSpec = cfg["spec"]
    for name in (WM_COLUMN, SHARD_COLUMN):
        if name in df.columns:
            raise OptionError("df", name, "a DataFrame without the internal columns __sw_wm, __sw_shard",
                              why=f"column {name!r} is used by window(df)")
    in_schema = spark_to_arrow_schema(df.schema)
    op = WindowedOperator(spec, in_schema)  # binds: key, time, aggregate columns checked here
    # the producing spec in window_start's metadata, as format("windowed") puts it: the windowed sink
    # records it, refuses panes of another spec, and closes windows in `current` by its lateness
    panes = pane_spec.annotate(arrow_to_spark_schema(op.pane_schema()), pane_spec.produced_by(spec))
    own = _own_watermark(df)
    if own is not None and cfg["watermark_given"]:
        raise OptionError("watermark", next(v for k, v in options.items() if k.lower() == "watermark"),
                          f"no watermark option: the DataFrame's own withWatermark ({own}) is the query's",
                          why="Spark allows one watermark per stream (a second withWatermark fails the query: "
                              "'Redefining watermark is disallowed'); drop the option, or the DataFrame's withWatermark")
    staged = _unmarked(df) if own is not None else _with_watermark(df, cfg["watermark"], spec, in_schema)
    if cfg["late_path"]:
        create_late_table(cfg["late_path"], op.late_schema())
    from pyspark.sql import functions as F
    keys = [F.col(k) for k in spec.key_columns]
    shard = F.pmod(F.xxhash64(*keys), F.lit(cfg["shards"])) if keys else F.lit(0).cast("long")
    staged = staged.withColumn(SHARD_COLUMN, shard)
    writer = f"spark-windowing-late:window-df:{cfg['query_name'] or spec.fingerprint()}"
    processor = _WindowProcessor(spec, in_schema, cfg, writer, spark.conf.get("spark.sql.session.timeZone"))
    return staged.groupBy(SHARD_COLUMN).transformWithStateInPandas(
        processor, outputStructType=panes, outputMode="Append", timeMode="EventTime")


def _with_watermark(df: "DataFrame", wm: Any, spec: OperatorSpec, in_schema: pa.Schema) -> "DataFrame":
    """``df`` with Spark's watermark for the ``watermark`` option (``bounded(d)``: on the event time,
    d behind; ``column(c)``: on c) on the internal column ``__sw_wm``, its marker cast away."""
    from pyspark.sql import functions as F
    wm_col = wm.column if wm.kind == "column" else spec.timestamp_column
    wm_type = field_type(in_schema, wm_col)
    if wm_type is None:
        raise OptionError("watermark", f"column({wm_col})", f"column(<a column of {in_schema.names}>)",
                          why="no such column")
    delay_ms = math.ceil(wm.delay / 1000) if wm.kind == "bounded" else 0
    wm_time = _time_expr(wm_col, wm_type, spec.timestamp_unit)
    if spec.max_time_ahead is not None:  # maxEventTimeAhead: an event that far ahead of the batch moves no
        # watermark (null: Spark's watermark follows the largest non-null time); the step sends it to the
        # late table as ``future``
        limit = F.timestamp_micros(F.unix_micros(F.current_timestamp()) + F.lit(spec.max_time_ahead))
        wm_time = F.when(wm_time <= limit, wm_time)
    return (df.withColumn(WM_COLUMN, wm_time)
            .withWatermark(WM_COLUMN, f"{delay_ms} milliseconds")
            .withColumn(WM_COLUMN, F.col(WM_COLUMN).cast("long")))  # no marker: Spark drops no row


def _own_watermark(df: "DataFrame") -> str | None:
    """Where ``df``'s own ``withWatermark`` is (``on column 'ts'``), or None when it has none. Read
    from the columns' watermark markers; a watermark whose column was dropped is found in the
    logical plan (classic PySpark only: a Connect DataFrame shows no plan)."""
    marked = _marked(df)
    if marked:
        return "on column " + ", ".join(repr(f.name) for f in marked)
    jdf = getattr(df, "_jdf", None)
    if jdf is not None and "EventTimeWatermark" in jdf.queryExecution().logical().toString():
        return "on a column it no longer has"
    return None


def _unmarked(df: "DataFrame") -> "DataFrame":
    """``df`` with the watermark marker taken off any column of its own ``withWatermark``: in
    event-time mode ``transformWithState`` drops input rows whose marked column is behind the
    watermark, before the operator could send them to a late pane or the late table. The marker
    is column metadata; re-aliasing with explicit metadata (the rest of it, or our own key when
    nothing else is left: PySpark ignores empty metadata) replaces it. The query keeps the user's
    watermark: it still tracks the column where it was defined."""
    if not _marked(df):
        return df
    from pyspark.sql import functions as F

    def column(field: Any) -> Any:
        c = F.col(f"`{field.name}`")
        if _DELAY_KEY not in (field.metadata or {}):
            return c
        rest = {k: v for k, v in field.metadata.items() if k != _DELAY_KEY}
        return c.alias(field.name, metadata=rest or {"spark_windowing.unmarked": True})

    return df.select([column(f) for f in df.schema.fields])


def _marked(df: "DataFrame") -> list:
    """The fields of ``df`` that carry Spark's watermark marker (a ``withWatermark`` on them)."""
    return [f for f in df.schema.fields if _DELAY_KEY in (f.metadata or {})]


class _Info:
    """What ``store.collect_garbage`` reads of a listed file."""

    def __init__(self, path: str) -> None:
        self.path, self.base_name = path, path.rsplit("/", 1)[-1]


class _MapStateIO:
    """The ``io`` of ``spark_windowing.store.StateStore`` over a ``MapState`` (name -> bytes):
    a "file" is one entry, written and deleted with the batch's state-store version. Reads are
    cached for one step (a segment holds many buckets, each read as a range)."""

    def __init__(self, state: Any) -> None:
        self.state, self.cache = state, {}

    def read_bytes(self, uri: str, *, missing_ok: bool = False) -> bytes | None:
        if uri not in self.cache:
            row = self.state.getValue((uri,))
            if row is None:
                if missing_ok:
                    return None
                raise FileNotFoundError(uri)
            self.cache[uri] = bytes(row[0])
        return self.cache[uri]

    def read_range(self, uri: str, offset: int, length: int) -> bytes:
        data = self.read_bytes(uri)
        assert data is not None
        return data[offset:offset + length]

    def write_atomic(self, uri: str, data: bytes, *, durable: bool = True) -> None:
        self.state.updateValue((uri,), (bytes(data),))
        self.cache[uri] = bytes(data)

    def exists(self, uri: str) -> bool:
        return uri in self.cache or self.state.containsKey((uri,))

    def list_dir(self, uri: str) -> list[_Info]:
        prefix = uri.rstrip("/") + "/"
        return [_Info(k) for (k,) in self.state.keys() if k.startswith(prefix)]

    def delete(self, uri: str, *, recursive: bool = False) -> None:
        self.state.removeKey((uri,))
        self.cache.pop(uri, None)


#: ``OperatorSpec.describe()`` keys -> the option that sets them (for the changed-spec error).
_SPEC_OPTIONS = {"window": "window", "trigger": "trigger", "accumulation_mode": "accumulationMode",
                 "allowed_lateness_us": "allowedLateness", "timestamp_combiner": "timestampCombiner",
                 "keys": "keyColumns"}


class _WindowProcessor(StatefulProcessor):
    """One key shard's operator: ``handleInputRows`` steps it with the shard's rows of the batch,
    ``handleExpiredTimer`` with none (a watermark passed a window's timer)."""

    def __init__(self, spec: OperatorSpec, in_schema: pa.Schema, cfg: dict, writer: str, tz: str) -> None:
        self.spec, self.in_schema, self.writer, self.tz = spec, in_schema, writer, tz
        self.shards, self.buckets, self.memory_rows = cfg["shards"], cfg["buckets"], cfg["memory_rows"]
        self.late_path, self.malformed = cfg["late_path"], cfg["malformed"]
        # what the checkpoint records of the spec (fingerprint and readable fields), computed once
        self._fingerprint = spec.fingerprint()
        self._spec_record = json.dumps({"fingerprint": self._fingerprint, **spec.describe()}, sort_keys=True,
                                       default=str)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.blobs = handle.getMapState("sw_state", StructType([StructField("name", StringType())]),
                                        StructType([StructField("data", BinaryType())]))
        self.meta = handle.getValueState("sw_meta", StructType([StructField("seq", LongType()),
                                                                StructField("batch_time", LongType()),
                                                                StructField("shards", LongType()),
                                                                StructField("spec", StringType())]))

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        frames = [f for f in rows if len(f)]
        events = self._to_arrow(frames) if frames else None
        yield from self._step(key, events, timerValues, timer=False)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:
        yield from self._step(key, None, timerValues, timer=True)

    def close(self) -> None:
        pass

    def _to_arrow(self, frames: list) -> pa.Table:
        import pandas as pd
        pdf = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        pdf = pdf.drop(columns=[WM_COLUMN, SHARD_COLUMN], errors="ignore")  # the key may not be passed
        for f in self.in_schema:  # Spark hands timestamps over as naive session-time-zone values
            if pa.types.is_timestamp(f.type) and f.type.tz and getattr(pdf[f.name].dt, "tz", 1) is None:
                pdf[f.name] = pdf[f.name].dt.tz_localize(self.tz)
        return pa.Table.from_pandas(pdf, schema=self.in_schema, preserve_index=False)

    def _check_recorded(self, shards: int | None, spec: str | None) -> None:
        """The checkpoint's state was written with one shard count and windowing spec: another
        would route keys to shards holding none of their state, or read it under other rules."""
        if shards is not None and shards != self.shards:
            raise OptionError("shards", self.shards, f"{shards}, the value this checkpoint's state was written with",
                              why="window(df) keeps each key shard's state in the query's checkpoint, so the shard "
                                  "count is fixed for the checkpoint's life; to change it, start with a new "
                                  "checkpointLocation")
        if spec is not None and json.loads(spec)["fingerprint"] != self._fingerprint:
            recorded, now = json.loads(spec), json.loads(self._spec_record)
            changed = [k for k in _SPEC_OPTIONS if recorded.get(k) != now.get(k)] or ["aggregate"]
            option = _SPEC_OPTIONS.get(changed[0], changed[0])
            raise OptionError(option, now.get(changed[0], "(changed)"),
                              f"{recorded.get(changed[0], 'the value')} (what this checkpoint's state was written with)",
                              why=f"the windowing spec changed since the checkpoint was written "
                                  f"({', '.join(_SPEC_OPTIONS.get(k, k) for k in changed)}); keep it, or start with "
                                  "a new checkpointLocation")

    def _open(self, io: _MapStateIO, shard: int, seq: int) -> StateStore:
        """The shard's store as of step ``seq``: this worker's open one when it is exactly the state
        in Spark's state store (same step, same manifest digest: not a replay, not moved to
        another worker in between), else opened from the state store's manifest."""
        cached = _OPEN.pop((self.writer, shard), None)
        if cached is not None and seq > 0 and cached.op.seq == seq:
            blob = io.read_bytes(manifest_uri(_ROOT, seq), missing_ok=True)
            if blob is not None and manifest_digest(blob) == cached.manifest_digest:
                cached.io = io
                return cached
        return StateStore.open(self.spec, io, _ROOT, seq, self.in_schema, buckets=self.buckets,
                               max_rows=self.memory_rows)

    def _step(self, key: Any, events: pa.Table | None, timer_values: Any, *, timer: bool) -> Iterator[Any]:
        seq, last_bt, shards, spec = self.meta.get() or (0, None, None, None)
        self._check_recorded(shards, spec)
        bt = int(timer_values.getCurrentProcessingTimeInMs())
        if timer and last_bt == bt:  # this batch's input call stepped the shard already
            return
        shard = int(key[0])
        wm_ms = int(timer_values.getCurrentWatermarkInMs())
        io = _MapStateIO(self.blobs)
        store = self._open(io, shard, seq)
        key_hash = None
        if events is not None and self.spec.key_columns:
            key_hash = sharding.key_hash(events, self.spec.key_columns)
        panes, late, malformed = [], [], 0
        for part in store.step_parts(events, watermark=wm_ms * 1000 if wm_ms > 0 else None,
                                     processing_time=bt * 1000, batch_seq=seq + 1, key_hash=key_hash):
            malformed += int(part.metrics.get("malformed", 0))
            if part.late.num_rows:
                late.append(part.late)
            if part.panes.num_rows:
                panes.append(part.panes)
        if malformed and self.malformed == "fail":
            raise WindowingError(f"malformedEvents=fail: {malformed} row(s) of key shard {shard} have no readable "
                                 f"event time in column {self.spec.timestamp_column!r}")
        if late and self.late_path:
            append_late_rows(self.late_path, f"{self.writer}:shard-{shard}", seq + 1, pa.concat_tables(late))
        store.persist(seq + 1)
        collect_garbage(io, _ROOT, seq + 1)
        store.evict()
        _OPEN[(self.writer, shard)] = store
        self.meta.update((seq + 1, bt, self.shards, self._spec_record))
        for t in list(self.handle.listTimers()):
            self.handle.deleteTimer(t)
        next_event, _ = store.next_timers()
        if next_event < MAX_TIME:
            self.handle.registerTimer(max(0, -(-int(next_event) // 1000)))
        for p in panes:
            yield p.to_pandas()
