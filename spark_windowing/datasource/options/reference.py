"""The one registry of the ``windowed`` format's options, and the generator of ``docs/options.md``.

Every option of ``spark.readStream.format("windowed")`` (scope ``reader``),
``df.writeStream.format("windowed")`` (scope ``sink``) and ``spark.read.format("windowed")``
(scope ``table``) is one ``Option`` here, in its documented camelCase. The stream reader's
``KNOWN_OPTIONS`` (``spark_windowing.datasource.source.parse``) is derived from this tuple, and
``docs/options.md`` is generated from it::

    python -m spark_windowing.datasource.options.reference > docs/options.md

``tests/project/test_docs.py`` fails when the file and the registry differ, or when the
registry and the option parsers disagree about the names. Imports nothing (no pyspark).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Option", "OPTIONS", "SCOPES", "reader_option_names", "options_of", "render_markdown"]


@dataclass(frozen=True)
class Option:
    """One option: its documented (camelCase) name, where it applies, and what it takes."""

    name: str
    scope: str          # "reader", "sink" or "table" (see SCOPES)
    group: str          # the heading it is listed under in docs/options.md
    values: str         # accepted values and meaning (Markdown, one table cell)
    default: str = ""   # the default ("required", "" when there is none)


#: scope -> (heading of docs/options.md, one paragraph under it)
SCOPES = {
    "reader": ('Stream reader: `spark.readStream.format("windowed")`',
               "Upstream events in, pane rows out (see [Pane rows](delta-sql.md#pane-rows))."),
    "sink": ('Pane sink: `df.writeStream.format("windowed")`',
             "Writes the pane rows exactly once to three Delta tables under `path` (see "
             "[Delta tables and SQL](delta-sql.md)). Spark's own `checkpointLocation`, `queryName`, "
             "`trigger` and `outputMode` (`append`, the default) apply as for any sink."),
    "table": ('Pane tables: `spark.read.format("windowed")`',
              "A batch DataFrame of one snapshot of a table the sink (or the reader's "
              "`lateDataPath`) wrote, read through `deltalake`; no Delta jars needed."),
}

_LATE_UPKEEP = "Upkeep of the late-data table"
_PANE_UPKEEP = "Upkeep of the pane tables"

OPTIONS: tuple[Option, ...] = (
    # ------------------------------------------------------------------ reader: upstream
    Option("source", "reader", "Upstream",
           "`delta` (a Delta table read commit by commit by the rules of Spark's Delta streaming source: "
           "only files a commit adds with `dataChange`; partition values, column mapping and `timestamp_ntz` "
           "handled; commits that remove rows fail unless `skipChangeCommits` / `ignoreDeletes`; a schema "
           "change inside the versions read fails, naming the version — see "
           "`spark_windowing/datasource/upstreams/delta_log.py`), `parquet`, `json`, `csv`, `generator` (deterministic "
           "synthetic clicks: `user_id`, `page`, `event_time`, `amount`, `event_id`; see [Generator](#generator)), `nexmark` "
           "(NEXMark's auction events by the rules of Beam's generator, one kind a stream: see [NEXMark](nexmark.md)), "
           "`kafka` (see [Kafka](kafka.md)), `panes` (the pane tables "
           "of another windowed query: its `writeStream.format(\"windowed\")` path; a micro-batch reads whole "
           "upstream batches, TRIGGER and RETRACTION rows together; `maxFilesPerTrigger` = upstream batches "
           "per micro-batch; see [Chaining windowed queries](windows.md#chaining-windowed-queries))",
           "required"),
    Option("path", "reader", "Upstream", "upstream location (not for `generator`, `nexmark` and `kafka`)"),
    Option("schema", "reader", "Upstream",
           "`'name type, ...'` (`string`, `long`, `int`, `double`, `float`, `boolean`, `timestamp`, `date`) "
           "for file sources; with `source=kafka` the schema of the record values (see `valueFormat`)",
           "taken from the first file"),
    Option("timestampColumn", "reader", "Upstream",
           "event-time column (timestamp, date, ISO-8601 string, or numeric epoch with `timestampUnit`); dotted "
           "names reach into structs. Checked against the upstream schema at `load()`: a numeric column needs "
           "`timestampUnit`, other types are refused", "absent: processing-time windows (batch time)"),
    Option("malformedEvents", "reader", "Upstream",
           "what happens to events whose event time cannot be read: `fail-if-all` sends them to the late-data "
           "table (`reason = 'malformed'`) and stops the query after a micro-batch in which none could be read "
           "and none before had one (most likely the wrong `timestampColumn`); `late`: never stop; `fail`: stop "
           "at the first one (Spark's `FAILFAST`). Rows the upstream cannot read at all (a JSON or CSV line that "
           "does not parse or fit the `schema`, a Parquet file cut short, a Kafka value that does not decode) go "
           "to the late-data table as `malformed` with `_corrupt_record` (their raw text) and `_origin` "
           "(`file:line`) under `fail-if-all` and `late`, and stop the query only under `fail` "
           "([semantics](semantics.md#rows-that-cannot-be-read))", "`fail-if-all`"),
    Option("timestampUnit", "reader", "Upstream",
           "`s`, `ms`, `us`: the unit of a numeric `timestampColumn` (and of `column(c)` watermarks); applies "
           "to both streams of a join", "timestamps and ISO-8601 strings need none"),
    Option("keyColumns", "reader", "Upstream", "comma-separated", "absent: one logical key"),
    Option("maxEventsPerBatch", "reader", "Upstream",
           "events per micro-batch (a read limit; file sources take whole files; with `join` it applies to "
           "each stream)", "unlimited"),
    Option("maxFilesPerTrigger", "reader", "Upstream",
           "files (Delta: files added by commits; `panes`: upstream batches) per micro-batch; with `join` "
           "stream 2 has `maxFilesPerTrigger2`", "unlimited"),
    Option("startingVersion", "reader", "Upstream", "first Delta version to read (`delta` source)", "`0`"),
    Option("skipChangeCommits", "reader", "Upstream",
           "`delta` source: skip commits that remove rows (DELETE, UPDATE, MERGE, overwrite) instead of "
           "failing, as Spark's Delta source does; their rewritten rows are not read again", "`false`"),
    Option("ignoreDeletes", "reader", "Upstream",
           "`delta` source: let commits that only delete rows (no added files) pass instead of failing",
           "`false`"),
    # ------------------------------------------------------------------ reader: windowing
    Option("window", "reader", "Windows, triggers and aggregates",
           "`tumbling(size[, offset])`, `sliding(size, slide[, offset])`, `session(gap)`, "
           "`session(gapColumn=c)`, `global`, `cumulate(maxSize, step[, offset])`, `count(size[, slide])` "
           "(per key, arrival order, as Flink's `countWindow(size, slide)`: at every slide-th element of a "
           "key, its last size elements, partial windows at the start included; see "
           "[semantics](semantics.md)), `count(n, every[, offset])` and `sliding(size, n elements)` (Storm's "
           "mixed windows, see [Mixed count/time windows](windows.md#mixed-counttime-windows)), "
           "`record_sliding(size)` (Kafka Streams' sliding windows, see "
           "[Record-sliding windows](windows.md#record-sliding-windows)); `inherit` (each row names its "
           "window in `window_start`/`window_end`, rows with `kind = 'RETRACTION'` are subtracted; then "
           "`timestampColumn` defaults to `pane_timestamp` and `watermark` to `column(watermark)`; any "
           "aggregate over a discarding or accumulating upstream; over an `accumulating_and_retracting` one, "
           "aggregates that subtract: `sum`, `count`, `avg`, `collect_list`, or a `module:Class` with "
           "`retract(acc, elements)` (others fail at the first RETRACTION row, naming it)). Offsets may be negative and must satisfy `|offset| < size` "
           "(tumbling; `cumulate`: `maxSize`; `count(n, every)`: `every`) or `|offset| < slide` (sliding), "
           "as Flink", "required"),
    Option("countOrder", "reader", "Windows, triggers and aggregates",
           "how `count(size[, slide])` counts a key's elements: `arrival` (Flink's `countWindow`: in arrival "
           "order, no late data) or `timestamp` (Storm's event-time count windows, `withWindow(Count.of(n)[, "
           "Count.of(m)])` + `withTimestampField` + `withLag`: the elements the watermark has passed, in timestamp "
           "order, ties by arrival; each window fires once, ON_TIME and final, when the watermark passes its last "
           "element; an element behind the watermark goes to the late-data table as `too_late`; no `trigger`, "
           "`allowedLateness` 0). Only with `count(size[, slide])` (`timestamp` also needs a `timestampColumn`); a "
           "`spark.windowed.countOrder` conf default applies only to such queries. See "
           "[Count windows](semantics.md#count-windows) and [From Storm](from-storm.md)", "`arrival`"),
    Option("trigger", "reader", "Windows, triggers and aggregates",
           "`Default()`, `Never()`, `AfterWatermark([early=T][, late=T])`, `AfterCount(n)`, "
           "`AfterProcessingTime(d)`, `Repeatedly(T)`, `AfterAny(T, …)`, `AfterAll(T, …)`, `AfterEach(T, …)`, "
           "`OrFinally(T, U)`, `ContinuousEventTime(d)`, `ContinuousProcessingTime(d)`",
           "`Default()` (for `count`: each window fires once, when it holds its last element); `Never()` "
           "for `global`; none for the mixed windows "
           "(each evaluation fires once) and `record_sliding` (each window fires once, when it closes)"),
    Option("accumulationMode", "reader", "Windows, triggers and aggregates",
           "`discarding`, `accumulating`, `accumulating_and_retracting`", "`discarding`"),
    Option("timestampCombiner", "reader", "Windows, triggers and aggregates",
           "`end_of_window`, `earliest`, `latest` (sets `pane_timestamp`)", "`end_of_window`"),
    Option("allowedLateness", "reader", "Windows, triggers and aggregates",
           "duration (must be 0 with the mixed windows: their windows are final when evaluated; with "
           "`record_sliding` it is Kafka's grace period)", "`0 seconds`"),
    Option("fireOnlyUpdatedPanes", "reader", "Windows, triggers and aggregates",
           "`true` / `false`: skip a firing whose values equal the last fired pane", "`false`"),
    Option("aggregate", "reader", "Windows, triggers and aggregates",
           "`sum(x)`, `count(*)`, `count(x)`, `avg(x)`, `min(x)`, `max(x)`, `first(x)`, `last(x)`, "
           "`collect_list(x)`, `count_distinct(x)`, `top(n, x, col, ...)`, `bottom(n, x, col, ...)`, "
           "`max_rows(x, col, ...)`, `min_rows(x, col, ...)` (the rows ranked in the n best by `x`, ties kept, "
           "as a list of structs of `x` and the `col`s), `most_frequent(n, x)` (the values of `x` whose count ranks in "
           "the n largest, ties kept, as a list of structs `{x, count}`), each with optional `AS name`; or `module:Class[(arg, ...)]` "
           "(custom accumulation: `output_fields`, `initial()`, `add(acc, elements)`, `merge(accs)`, "
           "`output(acc)`, optional `retract(acc, elements)`; see `spark_windowing/aggregates/parsing.py`; ready-made: "
           "`spark_windowing.aggregates.accumulations:TopN(n, value, label)`)", "required unless `process`"),
    Option("process", "reader", "Windows, triggers and aggregates",
           "`module:function` called once per fired pane with the pane's elements in arrival order (what the "
           "accumulation mode puts in the pane, after the evictor) (Arrow table; pandas DataFrame if "
           "`f.input = \"pandas\"`; projection `f.input_columns`, also pushed down into the upstream read) and "
           "a context (`key`, `window_start`, `window_end`, `window_seq`, `pane_timing`, `pane_index`, "
           "`is_final`, `watermark`, `batch_time`, and `new` / `evicted` / `expired` elements); returns "
           "`{column: value}` for the columns it declares in `f.output_fields` (pyarrow fields or a schema). "
           "Buffers every element of a window; with `window=inherit` the input must have no RETRACTION rows "
           "(a RETRACTION row is an error); see `spark_windowing/aggregates/process.py`", "instead of `aggregate`"),
    Option("evictor", "reader", "Windows, triggers and aggregates",
           "with `process`: `count(n)` (keep the last n), `time(d)` (keep `ts > max ts − d`), "
           "`delta(threshold, column)` (evict `\\|column − last element's\\| ≥ threshold`) — Flink's evictors, "
           "applied before the function", "none"),
    # ------------------------------------------------------------------ reader: watermark
    Option("watermark", "reader", "Watermark",
           "`bounded(delay)`, `processing(lag)`, `column(c)` (numeric epochs in `timestampUnit`)",
           "`bounded(0 seconds)`"),
    Option("watermarkIdleTimeout", "reader", "Watermark",
           "duration after which a quiet source's watermark advances with the processing time elapsed beyond "
           "it; with `join`, a stream that has had no event this long after the query's first batch stops "
           "holding the merged watermark back; with `source=kafka`, a partition without records this long "
           "stops holding the source's watermark back", "off"),
    Option("endOfInput", "reader", "Watermark",
           "`continue` or `fire`: what the end of a `trigger(availableNow=True)` run means. `continue`: nothing "
           "(the next run goes on where it stopped, its windows still open); `fire`: the input is bounded and "
           "ends here, as Beam and Flink end a bounded source: one last batch without input moves the watermark "
           "to the end of time, so every window fires its last pane and `current` marks it final. Afterwards "
           "the state is final: a later run of the same query sees every event as `too_late`, so `fire` is for "
           "an input read once (a backfill, a comparison with a batch query). No effect with other triggers",
           "`continue`"),
    Option("maxEventTimeAhead", "reader", "Watermark",
           "duration, or `off`: an event whose time is more than this ahead of the batch's processing time "
           "(a device with a wrong clock, a year typed as 2099) goes to the late-data table with reason `future` "
           "and moves no watermark, so one such event cannot close every open window "
           "([semantics](semantics.md#events-from-the-future))", "`1 day`"),
    # ------------------------------------------------------------------ reader: state, late data
    Option("stateLocation", "reader", "State and late data",
           "URI of the operator state (local path, or `s3://`, `gs://`, `abfss://`, `hdfs://` via "
           "`pyarrow.fs`; on `s3://`, `gs://`, `abfss://` install the `s3`, `gcs` or `azure` extra on the executors "
           "for shard claims); `stateBuckets` and the windowing spec are recorded in `stateLocation/spec.json` "
           "and fixed for its life; `shards` may change on restart", "required"),
    Option("newCheckpoint", "reader", "State and late data",
           "`refuse` or `reset`: what a query started from a new checkpoint (a first start, a deleted checkpoint, "
           "a declarative pipeline's full refresh) does when `stateLocation` holds the state of another "
           "checkpoint's run (every checkpoint's offsets carry a run id, recorded in `stateLocation/run.json` at "
           "its first batch). `refuse`: the query stops at its first batch naming `stateLocation` (use a new "
           "`stateLocation`, or the checkpoint that state was written with); `reset`: that state is removed "
           "(`spec.json` included, so the windowing spec may change) and the run starts over, as a pipeline's "
           "full refresh expects ([In a declarative pipeline](declarative-pipelines.md)). The old checkpoint "
           "then no longer resumes; rows it wrote to `lateDataPath` stay there", "`refuse`"),
    Option("lateDataPath", "reader", "State and late data",
           "Delta table for dropped late and malformed events (one row per event and window, with `reason`, "
           "`window_start`, `window_end`, `watermark`, `batch_time`, `batch_seq`), exactly once", "off"),
    Option("shards", "reader", "State and late data",
           "key shards = Spark tasks per micro-batch; may change on restart: the first micro-batch after the "
           "change redistributes the state by key, exactly once ([Rescaling](cluster.md#rescaling-shards)); "
           "not for count windows, Storm's count/time mixes or Kafka with `keyColumns=key`", "`2`"),
    Option("execution", "reader", "State and late data",
           "`auto`, `executors` or `driver`: where the windowed operator runs. `executors`: each micro-batch runs "
           "`shards` Spark tasks, each stepping one key shard in a Python worker on an executor (high rates, "
           "clusters). `driver`: the driver's long-lived Python process that plans the reader's batches steps "
           "every shard itself, one after another, and Spark takes the panes as one in-memory partition, so the "
           "source's task runs no Python (low latency, modest rates; the panes pass through the driver). "
           "`auto`: per micro-batch, `executors` when Spark is not in local mode, else `driver` until a batch "
           "reads more than `autoExecutorsAbove` events, back once one reads fewer than half; the progress line "
           "says which. State, snapshots, replays and exactly-once are the same on every route, so the route may "
           "change between batches ([Where the operator runs]"
           "(performance.md#where-the-operator-runs-execution))", "`auto`"),
    Option("autoExecutorsAbove", "reader", "State and late data",
           "`execution=auto` in local mode: events per micro-batch above which the next batch steps on the "
           "executors (below half of it: back on the driver)", "`100000`, `200000` with Kryo"),
    Option("stateMemoryRows", "reader", "State and late data",
           "windows per shard kept in memory (more spill to `stateLocation`, by key bucket; a batch whose "
           "buckets need more is run a memory-full of buckets at a time)", "`2000000`"),
    Option("claimWait", "reader", "State and late data",
           "with `stateLocation` on an object store: how long a task leaves a shard to the executor that "
           "ran it in the previous micro-batch (and holds its state) before taking it over and reading the "
           "state from the store; a batch then has twice `shards` tasks, the spare ones running nothing "
           "([Shard affinity](cluster.md#state-reads-after-warm-up)); `0 seconds`: no waiting, `shards` tasks", "`3 seconds`"),
    Option("stateBuckets", "reader", "State and late data",
           "key buckets per shard (the unit of loading, spilling and incremental snapshots); fixes the "
           "state's bucket layout, so it is fixed for the life of a state location (unlike `shards`)", "`64`"),
    Option("queryName", "reader", "State and late data",
           "accepted and ignored (the progress lines take the query's name from "
           "`writeStream.queryName(...)`)", ""),
    # ------------------------------------------------------------------ reader: upkeep of the late table
    Option("compactEvery", "reader", _LATE_UPKEEP,
           "as the sink's `compactEvery` ([Upkeep of the pane tables](#upkeep-of-the-pane-tables)), for the `lateDataPath` table", "`50`"),
    Option("vacuumEvery", "reader", _LATE_UPKEEP, "as the sink's `vacuumEvery`, for the `lateDataPath` table", "`50`"),
    Option("vacuumRetention", "reader", _LATE_UPKEEP,
           "as the sink's `vacuumRetention`, for the `lateDataPath` table", "`7 days`"),
    Option("checkpointEvery", "reader", _LATE_UPKEEP,
           "as the sink's `checkpointEvery`, for the `lateDataPath` table", "`100`"),
    # ------------------------------------------------------------------ reader: a second stream
    Option("join", "reader", "Two streams merged per key and window",
           "`inner` (a pane only when both streams have elements in it), `left` (stream 1 has), `outer` "
           "(either has), `cogroup` (every pane the trigger fires); needs `source2`. The panes' aggregates are "
           "`aggregate` over stream 1 and `aggregate2` over stream 2; the watermark is the earlier of the two "
           "streams' watermarks (each from `watermark`), never decreasing; late/malformed rows of both go to "
           "`lateDataPath` with `join_side` (1, 2) and stream 2's columns as `__s2_<name>`. See "
           "[Two streams](windows.md#two-streams-merged-per-key-and-window) and `spark_windowing/operator/join.py`",
           "off"),
    Option("source2", "reader", "Two streams merged per key and window",
           "the second upstream (any `source` but `panes` and `kafka`); needs `join`, and a "
           "`spark.windowed.join` conf default applies only to queries with `source2`"),
    Option("path2", "reader", "Two streams merged per key and window",
           "the second upstream's location (not for `generator`)"),
    Option("schema2", "reader", "Two streams merged per key and window",
           "as `schema`, for stream 2", "none: taken from stream 2's own files"),
    Option("timestampColumn2", "reader", "Two streams merged per key and window",
           "as `timestampColumn`, for stream 2 (`timestampUnit` applies to both)", "stream 1's value"),
    Option("keyColumns2", "reader", "Two streams merged per key and window",
           "as many columns as `keyColumns`, matched in order, same types", "stream 1's value"),
    Option("maxFilesPerTrigger2", "reader", "Two streams merged per key and window",
           "as `maxFilesPerTrigger`, for stream 2", "stream 1's value"),
    Option("startingVersion2", "reader", "Two streams merged per key and window",
           "as `startingVersion`, for stream 2", "`0`"),
    Option("aggregate2", "reader", "Two streams merged per key and window",
           "aggregates over stream 2's columns; output names must differ from `aggregate`'s; no custom "
           "accumulations or `process` functions with `join`; windows: tumbling, sliding, session, cumulate, "
           "global (an event-time `timestampColumn` is required)",
           "`aggregate` over stream 2, names suffixed `_2`"),
    # ------------------------------------------------------------------ reader: kafka
    Option("kafka.bootstrap.servers", "reader", "Kafka (`source=kafka`)",
           "`host:port[,host:port...]`", "required"),
    Option("subscribe", "reader", "Kafka (`source=kafka`)",
           "a comma list of topics; exactly one of `subscribe`, `subscribePattern`, `assign`", "one of three"),
    Option("subscribePattern", "reader", "Kafka (`source=kafka`)",
           "a regex over topic names (topics created later that match are read from offset 0)", "one of three"),
    Option("assign", "reader", "Kafka (`source=kafka`)",
           "JSON `{\"topicA\": [0, 1]}`: these partitions only", "one of three"),
    Option("startingOffsets", "reader", "Kafka (`source=kafka`)",
           "`earliest`, `latest`, or JSON `{\"topic\": {\"0\": 23, \"1\": -2}}` (`-2` earliest, `-1` latest; "
           "partitions not listed start at the earliest)", "`latest`"),
    Option("maxOffsetsPerTrigger", "reader", "Kafka (`source=kafka`)",
           "offsets per micro-batch, split over the partitions in proportion to how far each is behind "
           "(through Spark's `ReadLimit`; `availableNow` stops at the offsets that existed when the query "
           "started); not together with `maxEventsPerBatch`", "unlimited"),
    Option("failOnDataLoss", "reader", "Kafka (`source=kafka`)",
           "`true`: records deleted (retention) before they were read fail the query, naming topic, partition "
           "and missing offsets; `false`: continue from the earliest offset; the count of skipped offsets goes "
           "to the batch report (`skipped_offsets`), the progress line (`skipped offsets N (data loss)`) and a "
           "warning", "`true`"),
    Option("valueFormat", "reader", "Kafka (`source=kafka`)",
           "`json`, `csv` (`schema` = DDL), `avro` (`schema` = the Avro record schema as JSON; values with the "
           "5-byte Confluent header are accepted), `raw` (no decoding)", "`json`"),
    Option("kafkaConsumer.pollTimeoutMs", "reader", "Kafka (`source=kafka`)",
           "how long a task waits for the records of its offset ranges before failing", "`120000`"),
    Option("kafka.*", "reader", "Kafka (`source=kafka`)",
           "any other librdkafka property (`kafka.security.protocol`, `kafka.sasl.mechanism`, "
           "`kafka.sasl.username`, `kafka.ssl.ca.location`, ...) goes to the client; an unknown one fails at "
           "`load()`; `kafka.group.id` and auto-commit are refused (nothing is committed); only with "
           "`source=kafka`"),
    # ------------------------------------------------------------------ reader: generator
    Option("eventsPerBatch", "reader", "Generator",
           "events per micro-batch of the `generator` source (`nexmark`: stream positions, all kinds)",
           "`1000` (`nexmark`: `10000`)"),
    Option("totalEvents", "reader", "Generator",
           "events in all (set it for an `availableNow` run to end); `generator` and `nexmark`", "unbounded"),
    Option("keys", "reader", "Generator", "distinct `user_id` values", "`100`"),
    Option("eventInterval", "reader", "Generator", "event time between events (a duration > 0)",
           "`10 milliseconds`"),
    Option("disorder", "reader", "Generator", "max out-of-orderness (a duration)", "`0 seconds`"),
    Option("lateFraction", "reader", "Generator", "share of events shifted far back (0 to 1)", "`0`"),
    Option("seed", "reader", "Generator", "random seed (`generator`, `nexmark`)", "`42` (`nexmark`: `0`)"),
    Option("startTime", "reader", "Generator", "event time of the first event (ISO-8601)",
           "`2026-01-01T00:00:00Z` (`nexmark`: Beam's `2015-07-15T00:00:00Z`)"),
    Option("nexmarkEvents", "reader", "Generator",
           "`bid`, `person` or `auction`: the kind of NEXMark event the `nexmark` source yields (a query over "
           "two kinds joins two `nexmark` streams; [NEXMark](nexmark.md))", "`bid`"),
    Option("eventsPerSecond", "reader", "Generator",
           "`nexmark`: event-time rate (Beam's `firstEventRate`): event `n` is at `startTime + n / rate`",
           "`10000`"),
    Option("rate", "reader", "Generator",
           "`nexmark`: wall-clock events per second, a live source (Spark's `rate` source): a batch reads the "
           "positions due since the stream started, at most `eventsPerBatch`", "unpaced: `eventsPerBatch` a batch"),
    Option("outOfOrderGroupSize", "reader", "Generator",
           "`nexmark`: events are permuted within groups of this many (Beam's rule), 1: in order", "`1`"),
    Option("probDelayedEvent", "reader", "Generator",
           "`nexmark`: share of events (0 to 1) emitted up to `occasionalDelay` of event time later than their "
           "place, keeping their time (late data)", "`0`"),
    Option("occasionalDelay", "reader", "Generator", "`nexmark`: the longest such delay (a duration)",
           "`3 seconds`"),
    *(Option(f"{name}2", "reader", "Generator, stream 2 (`source2=generator` or `nexmark`)",
             f"`{name}` for the generated stream 2",
             "`generator`: `seed + 1` (stream 2 is not a copy of stream 1); `nexmark`: `seed` (one auction)"
             if name == "seed" else f"`{name}`'s value")
      for name in ("eventsPerBatch", "totalEvents", "keys", "eventInterval", "disorder", "lateFraction", "seed",
                   "startTime", "nexmarkEvents", "eventsPerSecond", "outOfOrderGroupSize", "probDelayedEvent",
                   "occasionalDelay", "rate")),
    # ------------------------------------------------------------------ sink
    Option("path", "sink", "Pane tables",
           "root `P` of the Delta tables `P/triggers` (every TRIGGER row), `P/retractions` (every RETRACTION "
           "row), `P/current` (the latest pane per key and window, retractions applied)", "required"),
    Option("appId", "sink", "Pane tables",
           "Delta app-transaction id that makes commits idempotent per `batchId`",
           "`spark-windowing-sink-<query id>`"),
    Option("maxRowsPerFile", "sink", "Pane tables", "rows per Parquet data file", "`500000`"),
    Option("writerLease", "sink", "Pane tables",
           "duration: one query writes a pane table set. It holds `P/_writer.json`, taken when the query "
           "starts (before batch 0), renewed every batch and released when it terminates (when the job called "
           "`spark_windowing.register`; otherwise it lapses this long after the last batch). Another query "
           "(another checkpoint) is refused at once; a restart from the same checkpoint never is. A driver that "
           "died holds it this long after its last batch; `0 seconds` takes a path over at once",
           "`5 minutes`"),
    Option("checkpointLocation", "sink", "Pane tables",
           "Spark's own option: the query's checkpoint. The sink reads the query id Spark writes there first, "
           "to take its writer lease before batch 0; with the checkpoint set by "
           "`spark.sql.streaming.checkpointLocation` instead, the lease is taken at the first commit",
           "Spark's (required by Spark)"),
    Option("allowSpecChange", "sink", "Pane tables",
           "`true` adds panes of another windowing spec (window, keys, aggregates, trigger, accumulation "
           "mode, ... as recorded in `P/_spec.json`) to existing tables, which then mix both (`current` may "
           "count events twice); by default such a query is refused at start, naming each changed option "
           "`old → new`", "`false`"),
    Option("currentBucket", "sink", "Pane tables",
           "width of `current`'s partitions by window end (`window_end_bucket`); fixed when `current` is "
           "created, so give it for a new path only (a different value for an existing table is an error)",
           "`10 minutes`"),
    Option("compactEvery", "sink", _PANE_UPKEEP,
           "micro-batches between compactions of each pane table (`optimize.compact` into files of up to "
           "32 MiB; full files are left alone, so each run rewrites at most ~32 MiB per table); `0`: never "
           "(see [Operating a long-running query](long-running.md))",
           "`50`"),
    Option("vacuumEvery", "sink", _PANE_UPKEEP,
           "micro-batches between vacuums of each pane table (deletes files that left the table more than "
           "`vacuumRetention` ago); `0`: never", "`50`"),
    Option("vacuumRetention", "sink", _PANE_UPKEEP,
           "how long a file stays after it left a table, so a reader of an older version still finds it; set "
           "as the table property `delta.deletedFileRetentionDuration`", "`7 days`"),
    Option("checkpointEvery", "sink", _PANE_UPKEEP,
           "micro-batches between Delta log checkpoints of each pane table (one commit per table and batch)",
           "`100`"),
    # ------------------------------------------------------------------ table reads
    Option("path", "table", "Pane and late tables",
           "the sink's `path` `P` (reads `P/<table>`), or a reader's `lateDataPath` with `table=late`",
           "required"),
    Option("table", "table", "Pane and late tables",
           "`current` (latest pane per key and window), `triggers` (every TRIGGER row), `retractions` (every "
           "RETRACTION row), `late` (the late-data table at `path`)", "required"),
    Option("versionAsOf", "table", "Pane and late tables",
           "a Delta table version to read (time travel)", "the latest"),
)

INTRO = """\
# Options reference

<!-- Generated from spark_windowing/datasource/options/reference.py by
     `python -m spark_windowing.datasource.options.reference > docs/options.md`; do not edit by hand
     (tests/project/test_docs.py fails when the two differ). -->

All option names are case-insensitive. `spark.windowed.<option>` in the Spark conf
(`--conf spark.windowed.window=...`, a `--properties-file`, `SparkSession.builder.config`,
`spark.conf.set`) is a default for that option once the job has called
`spark_windowing.register(spark)` (once per process); an explicit `.option()` wins. Spark hands a
Python data source only its options, never the session's conf, so `register` makes every
`format("windowed")` of the process carry the session's `spark.windowed.*` entries as they are at
that call; without it, `format("windowed")` works (Spark finds the installed format) with its
explicit options only, and SQL `USING windowed` always takes its `OPTIONS` only. Durations use
Spark interval syntax (`10 seconds`, `5 minutes`, `1 hour`, `500 milliseconds`).

A bad value fails at `load()` with a message naming the option, the value and the accepted forms,
e.g. `invalid option 'window' = 'tumbling(ten seconds)': ... Accepted: ...`; an option the reader
does not know fails the same way (`unknown option`). Spark reports it as `PYTHON_DATA_SOURCE_ERROR`
with the Python traceback first and the message last (see
[Troubleshooting](troubleshooting.md#python_data_source_error-and-where-the-message-is)).
"""


def options_of(scope: str) -> tuple[Option, ...]:
    """The options of one scope, in registry order."""
    if scope not in SCOPES:
        raise ValueError(f"scope {scope!r}: one of {', '.join(SCOPES)}")
    return tuple(o for o in OPTIONS if o.scope == scope)


def reader_option_names() -> set[str]:
    """The lower-cased names the stream reader accepts; ``kafka.*`` options pass by their prefix."""
    return {o.name.lower() for o in options_of("reader") if not o.name.lower().startswith("kafka.")}


def _cell(text: str) -> str:
    return text.replace("\n", " ").strip()


def render_markdown() -> str:
    """``docs/options.md``: one table per scope and group, in registry order."""
    out = [INTRO]
    for scope, (heading, paragraph) in SCOPES.items():
        out += [f"## {heading}", "", paragraph, ""]
        groups: dict[str, list[Option]] = {}
        for o in options_of(scope):
            groups.setdefault(o.group, []).append(o)
        for group, opts in groups.items():
            out += [f"### {group}", "", "| option | values | default |", "|---|---|---|"]
            out += [f"| `{o.name}` | {_cell(o.values)} | {_cell(o.default)} |" for o in opts]
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":
    import sys
    sys.stdout.write(render_markdown())
