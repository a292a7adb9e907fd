"""``spark_windowing.window(df, **options)`` against ``format("windowed")``: the same events (one
parquet file per micro-batch, read by Spark's file source and by the windowed source), the same
options, through real Spark; the panes and late rows must be equal (but for ``batch_seq`` and
``batch_time``, which number and time each query's own micro-batches).

The inputs end where the data ends: the windows the last input's watermark closed fire in a
micro-batch without input in both (window(df)'s by its ticks: ``source.ticks``), before the
``availableNow`` query stops. The two windowings in one query end with ``closing()``'s events."""

from __future__ import annotations

import json
import os
import random
import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

import spark_windowing
from spark_windowing.datasource.source.sharding import shard_labels
from spark_windowing.datasource.window_options import parse_window_options
from spark_windowing.errors import OptionError
from tests.spark._helpers import micros, rows, run_panes

pytestmark = pytest.mark.spark
SEC = 1_000_000
T0 = 1_700_000_000 * SEC
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
DDL = "k string, ts timestamp, v long"
#: What differs by construction between two queries: their micro-batches' numbers and times.
RUN_COLUMNS = ("batch_seq", "batch_time")


def write_bundles(directory, bundles: list[list[dict]]) -> None:
    """One parquet file per bundle, named and timed in bundle order (both sources list by mtime)."""
    os.makedirs(directory, exist_ok=True)
    for i, b in enumerate(bundles):
        path = os.path.join(directory, f"part-{i:04d}.parquet")
        pq.write_table(pa.Table.from_pylist(b, schema=SCHEMA), path)
        os.utime(path, ns=(1_600_000_000_000_000_000 + i * 10**9,) * 2)


def make_bundles(seed: int, n_bundles: int = 6, per_bundle: int = 12) -> list[list[dict]]:
    """Events moving forward ~4 s a bundle, 3 keys, some far behind (late), one without a time."""
    rnd = random.Random(seed)
    out = []
    for b in range(n_bundles):
        bundle = []
        for _ in range(per_bundle):
            # whole milliseconds: Spark keeps event times for its watermark in ms (window_df's docstring)
            ts = T0 + b * 4 * SEC + rnd.randrange(-3000, 3000) * 1000
            if rnd.random() < 0.2:  # behind the watermark: LATE panes, too_late rows
                ts -= rnd.randrange(4000, 16000) * 1000
            bundle.append({"k": rnd.choice("abc"), "ts": ts, "v": rnd.randrange(100)})
        out.append(bundle)
    out[3].append({"k": "a", "ts": None, "v": 7})  # malformed: no event time
    return out


def closing(bundles: list[list[dict]], n: int = 2) -> list[list[dict]]:
    """``bundles`` and ``n`` more of one event each (key ``~end``), an hour past the last: the first
    moves the watermark past every window of the data, the second is the input of the micro-batch
    in which window(df) fires them (a third: a second windowing's, whose watermark is the first's
    panes'). Both engines read them; their own windows stay open in both."""
    last = max(e["ts"] for b in bundles for e in b if e["ts"] is not None)
    return bundles + [[{"k": "~end", "ts": last + 3600 * SEC, "v": v}] for v in range(n)]


def events_stream(spark, path: str):
    """Spark's file source over the parquet files, one file per micro-batch."""
    return spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(path)


def run_window_df(spark, path: str, options: dict, checkpoint: str, own_watermark: str | None = None) -> pa.Table:
    """window(df) over the parquet files, one per micro-batch, into a memory sink; ``own_watermark``:
    the DataFrame first gets a ``withWatermark("ts", own_watermark)`` of its own."""
    df = events_stream(spark, path)
    if own_watermark is not None:
        df = df.withWatermark("ts", own_watermark)
    panes = df.transform(lambda d: spark_windowing.window(d, **options))
    name = "w_" + uuid.uuid4().hex[:8]
    q = (panes.writeStream.format("memory").queryName(name).option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
    q.awaitTermination(240)
    assert not q.isActive, "query did not finish in time"
    assert q.exception() is None, q.exception()
    return spark.table(name).toArrow()


CASES = {
    "tumbling": {"window": "tumbling(8 seconds)", "trigger": "AfterWatermark(early=AfterCount(3), late=AfterCount(1))",
                 "accumulationMode": "accumulating", "allowedLateness": "6 seconds"},
    "sliding": {"window": "sliding(8 seconds, 4 seconds)", "accumulationMode": "discarding"},
    "session": {"window": "session(3 seconds)", "trigger": "AfterWatermark(early=AfterCount(2))",
                "accumulationMode": "accumulating_and_retracting", "allowedLateness": "4 seconds"},
    "global": {"window": "global", "trigger": "Repeatedly(AfterCount(4))", "accumulationMode": "accumulating"},
    "count": {"window": "count(3)"},
}


#: Cases marked slow to keep CI under 30 minutes (about 25 s each on 2 cores; run with -m slow):
SLOW_CASES = ("count", "global")


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_CASES else c for c in CASES])
def test_window_df_equals_format_windowed(spark, tmp_path, case):
    events = str(tmp_path / "events")
    write_bundles(events, make_bundles(list(CASES).index(case)))   # no closing event: the last windows fire too
    common = {"timestampColumn": "ts", "keyColumns": "k", "aggregate": "sum(v) AS total, count(*) AS n",
              "watermark": "bounded(2 seconds)", **CASES[case]}
    want = run_panes(spark, {**common, "source": "parquet", "path": events, "maxFilesPerTrigger": "1",
                             "lateDataPath": str(tmp_path / "late_src"), "stateLocation": str(tmp_path / "state")},
                     str(tmp_path / "chk_src"))
    # tumbling: the DataFrame has a withWatermark of its own, the same bounded(2 seconds) on the
    # event time, and window(df) no watermark option: that watermark is the operator's, and Spark
    # must drop none of the rows behind it (the LATE panes and too_late rows below are those rows)
    own = "2 seconds" if case == "tumbling" else None
    mine = {k: v for k, v in common.items() if not (own and k == "watermark")}
    got = run_window_df(spark, events, {**mine, "lateDataPath": str(tmp_path / "late_df")},
                        str(tmp_path / "chk_df"), own_watermark=own)
    assert got.schema.names == want.schema.names
    assert want.num_rows > 0
    assert rows(got, drop=RUN_COLUMNS) == rows(want, drop=RUN_COLUMNS)
    late_want = DeltaTable(str(tmp_path / "late_src")).to_pyarrow_table()
    late_got = DeltaTable(str(tmp_path / "late_df")).to_pyarrow_table()
    # the file upstream's columns for rows it could not read (none here); Spark's file source has none
    corrupt = ("_corrupt_record", "_origin")
    assert all(late_want.column(c).null_count == late_want.num_rows for c in corrupt)
    assert rows(late_got, drop=RUN_COLUMNS) == rows(late_want, drop=RUN_COLUMNS + corrupt)
    assert "malformed" in late_got.column("reason").to_pylist()
    if case == "tumbling":  # the data exercise every pane timing and rows too late for any window
        assert set(got.column("pane_timing").to_pylist()) == {"EARLY", "ON_TIME", "LATE"}
        assert "too_late" in late_got.column("reason").to_pylist()
    if case == "session":
        assert "RETRACTION" in got.column("kind").to_pylist()


def test_window_df_over_a_stream_stream_join(spark, tmp_path):
    """A stream-stream join's output is windowed like the events themselves: the events joined
    with themselves (each one matches itself in the batch that reads it) give format("windowed")'s
    panes of the events."""
    events = str(tmp_path / "events")
    bundles = make_bundles(7)
    bundles[3] = [e for e in bundles[3] if e["ts"] is not None]  # a null time never joins
    write_bundles(events, bundles)
    common = {"timestampColumn": "ts", "keyColumns": "k", "aggregate": "sum(v) AS total, count(*) AS n",
              "watermark": "bounded(2 seconds)", **CASES["tumbling"]}
    want = run_panes(spark, {**common, "source": "parquet", "path": events, "maxFilesPerTrigger": "1",
                             "stateLocation": str(tmp_path / "state")}, str(tmp_path / "chk_src"))
    left = events_stream(spark, events)
    right = events_stream(spark, events).toDF("k2", "ts2", "v2")
    joined = left.join(right, (left.k == right.k2) & (left.ts == right.ts2) & (left.v == right.v2)).drop(
        "k2", "ts2", "v2")
    got = _run(spark_windowing.window(joined, **common), str(tmp_path / "chk_df"))
    assert want.num_rows > 0
    assert rows(got, drop=RUN_COLUMNS) == rows(want, drop=RUN_COLUMNS)


def _run(panes, checkpoint: str, until_rows: int | None = None) -> pa.Table:
    """Run to the end of the upstream (availableNow), or, for an endless source, every second
    until the memory sink holds ``until_rows`` panes (at most 240 s: a loaded machine can take many
    seconds for the first micro-batch, so the test waits on results, not on a clock)."""
    spark = panes.sparkSession
    name = "w_" + uuid.uuid4().hex[:8]
    w = panes.writeStream.format("memory").queryName(name).option("checkpointLocation", checkpoint)
    if until_rows is None:
        q = w.trigger(availableNow=True).start()
        q.awaitTermination(240)
        assert not q.isActive, "query did not finish in time"
    else:
        q = w.trigger(processingTime="1 second").start()
        deadline = time.monotonic() + 240
        while q.isActive and time.monotonic() < deadline and spark.table(name).count() < until_rows:
            q.awaitTermination(1)
        q.stop()
    assert q.exception() is None, q.exception()
    return spark.table(name).toArrow()


def test_window_df_over_the_rate_source(spark, tmp_path):
    """Spark's rate source at 10 rows/s (one every 100 ms, values 0, 1, ...): every 1-second window
    the watermark closed, but the first (the stream starts inside it), holds exactly 5 even and 5
    odd values; their sum is the sum of the values with those timestamps."""
    df = (spark.readStream.format("rate").option("rowsPerSecond", 10).load()
          .selectExpr("timestamp AS ts", "value", "CAST(value % 2 AS INT) AS parity"))
    panes = spark_windowing.window(df, window="tumbling(1 second)", timestampColumn="ts", keyColumns="parity",
                                   aggregate="count(*) AS n, min(value) AS lo, max(value) AS hi, sum(value) AS s")
    # the first window and 4 full ones, two parities each
    got = _run(panes, str(tmp_path / "chk"), until_rows=10).to_pylist()
    assert {p["pane_timing"] for p in got} == {"ON_TIME"}
    first = min(p["window_start"] for p in got)
    full = [p for p in got if p["window_start"] != first]
    assert len(full) >= 4, got
    for p in full:
        assert p["n"] == 5
        assert p["lo"] % 2 == p["hi"] % 2 == p["parity"] and p["hi"] - p["lo"] == 8
        assert p["s"] == sum(range(p["lo"], p["hi"] + 1, 2))


@pytest.mark.parametrize("options,option,why", [
    ({"source": "kafka"}, "source", "upstream option"),
    ({"path": "/x"}, "path", "upstream option"),
    ({"kafka.bootstrap.servers": "h:1"}, "kafka.bootstrap.servers", "upstream option"),
    ({"malformedEvents": "fail-if-all"}, "malformedEvents", "shard"),
    ({"endOfInput": "fire"}, "checkpointLocation", "offset log"),
    ({"checkpointLocation": "/chk"}, "checkpointLocation", "only to find the end"),
    ({"endOfInput": "fire", "checkpointLocation": "/chk", "noDataBatches": "false"}, "noDataBatches", "end fires"),
    ({"keyColumns": "nope"}, "keyColumns", "no column"),
])
def test_window_df_refuses_what_it_cannot_do(spark, options, option, why):
    df = spark.readStream.format("rate").load().withColumnRenamed("timestamp", "ts")
    given = {"window": "tumbling(1 minute)", "timestampColumn": "ts", "aggregate": "count(*) AS n", **options}
    with pytest.raises(OptionError) as e:
        spark_windowing.window(df, **{k: v for k, v in given.items() if v is not None})
    assert e.value.option == option and why in str(e.value)


def test_a_watermark_option_over_a_dataframe_with_its_own_watermark_is_refused(spark):
    """Spark allows one watermark per stream: a second withWatermark would fail the query at its
    first batch ("Redefining watermark is disallowed"); refused at once, naming both."""
    df = spark.readStream.format("rate").load().withWatermark("timestamp", "5 seconds")
    with pytest.raises(OptionError) as e:
        spark_windowing.window(df, window="tumbling(1 minute)", timestampColumn="timestamp",
                               aggregate="count(*) AS n", watermark="bounded(1 second)")
    assert e.value.option == "watermark" and "'timestamp'" in str(e.value) and "one watermark" in str(e.value)
    # without the option, the DataFrame's watermark is the operator's
    assert spark_windowing.window(df, window="tumbling(1 minute)", timestampColumn="timestamp",
                                  aggregate="count(*) AS n").isStreaming


@pytest.mark.parametrize("shards", [1, 2, 3, 5, 8])
def test_each_key_shard_has_its_own_partition(spark, shards):
    """The shard labels are where Spark's hash partitioning (``pmod(hash(label), n)``, Spark's own
    Murmur3) sends each shard: partition i holds shard i, so no two shards share a task."""
    from pyspark.sql import functions as F
    labels = shard_labels(shards)
    got = spark.createDataFrame([(v,) for v in labels], "label int") \
        .select(F.pmod(F.hash("label"), F.lit(shards)).alias("p")).collect()
    assert [r.p for r in got] == list(range(shards))


def test_window_df_option_names_are_case_insensitive(spark):
    df = spark.readStream.format("rate").load()
    panes = spark_windowing.window(df, WINDOW="tumbling(1 minute)", TimestampColumn="timestamp",
                                   AGGREGATE="sum(value) AS s", keycolumns="value")
    assert panes.isStreaming
    assert panes.columns[:3] == ["value", "window_start", "window_end"] and "s" in panes.columns


def test_a_restart_with_another_window_or_an_unmovable_shard_count_is_refused_naming_it(spark, tmp_path):
    """Another spec would read the state under other rules; another shard count of a count window
    (per-key counts outside the window rows, which a rescale does not move: ``rescale``) would
    route keys to shards without their state. Refused, named, in the first micro-batch of the
    restart. Both changes are tried on the same checkpoint, one after the other: a refused restart
    commits nothing, so the second is checked against the first run's state."""
    events = str(tmp_path / "events")
    bundles = make_bundles(7, n_bundles=4)
    write_bundles(events, bundles[:2])
    first = {"timestampColumn": "ts", "keyColumns": "k", "aggregate": "count(*) AS n", "shards": "2",
             "window": "count(3)", "watermark": "bounded(2 seconds)"}

    def run(options: dict):   # a file sink: a query that restarts from its checkpoint
        df = events_stream(spark, events)
        q = (spark_windowing.window(df, **options).writeStream.format("parquet")
             .option("path", str(tmp_path / "out")).option("checkpointLocation", str(tmp_path / "chk"))
             .trigger(availableNow=True).start())
        q.awaitTermination(240)   # raises the query's failure
        assert not q.isActive, "query did not finish in time"

    run(first)
    write_bundles(events, bundles)   # more input for the restarts
    for change, option in [({"shards": "3"}, "'shards' = 3"),
                           ({"window": "count(4)"}, "'window' = 'count(4")]:
        with pytest.raises(Exception) as failed:
            run({**first, **change})
        assert option in str(failed.value) and "checkpoint" in str(failed.value), str(failed.value)[-1500:]


def test_window_df_into_the_windowed_sink_closes_windows_and_keeps_its_spec(spark, tmp_path):
    """window(df)'s panes carry their spec as format("windowed")'s do: the windowed sink marks
    windows closed in ``current`` (end + allowedLateness <= watermark) and refuses panes of another
    window into the same tables, naming the option."""
    events = str(tmp_path / "events")
    write_bundles(events, make_bundles(3, n_bundles=5))
    options = {"timestampColumn": "ts", "keyColumns": "k", "aggregate": "count(*) AS n",
               "watermark": "bounded(2 seconds)", **CASES["tumbling"]}

    def start(opts: dict, checkpoint: str):
        df = events_stream(spark, events)
        return (spark_windowing.window(df, **opts).writeStream.format("windowed")
                .option("path", str(tmp_path / "panes")).option("checkpointLocation", checkpoint)
                .trigger(availableNow=True).start())

    q = start(options, str(tmp_path / "chk"))
    q.awaitTermination(240)
    assert not q.isActive and q.exception() is None, q.exception()
    triggers = DeltaTable(str(tmp_path / "panes" / "triggers")).to_pyarrow_table().to_pylist()
    current = DeltaTable(str(tmp_path / "panes" / "current")).to_pyarrow_table().to_pylist()
    watermark = max(micros(r["watermark"]) for r in triggers if r["watermark"] is not None)
    lateness = 6 * SEC   # CASES["tumbling"]: allowedLateness 6 seconds
    closed = [r for r in current if micros(r["window_end"]) + lateness <= watermark]
    still_open = [r for r in current if micros(r["window_end"]) + lateness > watermark]
    assert closed and still_open, (len(closed), len(still_open))
    assert all(r["is_final"] for r in closed) and not any(r["is_final"] for r in still_open)
    with open(tmp_path / "panes" / "_spec.json") as f:
        assert json.load(f)["producedBy"]["window"] == "tumbling(8 seconds)"
    with pytest.raises(Exception, match="window") as refused:
        q = start({**options, "window": "tumbling(4 seconds)"}, str(tmp_path / "chk2"))
        q.awaitTermination(240)
    assert "tumbling(8 seconds)" in str(refused.value) and "tumbling(4 seconds)" in str(refused.value)


def test_an_event_from_2099_moves_no_watermark_of_window_df(spark, tmp_path):
    """``maxEventTimeAhead`` in window(df): the 2099 event is the late table's one ``future`` row,
    the watermark window(df) sets stays with the real events, and every real window fires."""
    bundles = [[{"k": "a", "ts": T0 + b * 4 * SEC + i * SEC, "v": 1} for i in range(3)] for b in range(5)]
    bundles[1].append({"k": "phone", "ts": 4_070_908_800 * SEC, "v": 1})   # 2099-01-01
    write_bundles(str(tmp_path / "in"), bundles)
    panes = run_window_df(spark, str(tmp_path / "in"),
                          {"window": "tumbling(4 seconds)", "keyColumns": "k", "timestampColumn": "ts",
                           "aggregate": "count(*) AS n", "lateDataPath": str(tmp_path / "late")}, str(tmp_path / "chk"))
    late = DeltaTable(str(tmp_path / "late")).to_pyarrow_table().to_pylist()
    assert [(r["k"], r["reason"]) for r in late] == [("phone", "future")]
    # bundles 0-3's windows close on the events after them (bundle 4's stays open: its end is past
    # every event); with the 2099 event counted, the watermark would have closed every window at
    # bundle 2, and the rows of bundles 2-4 been too late
    assert sorted((micros(r["window_start"]), r["n"]) for r in panes.to_pylist()) == \
        [(T0 + b * 4 * SEC, 3) for b in range(4)]


#: Two windowings chained (Apex's window propagation): per-key sums with a retracting pane every
#: batch, then the top 2 keys of each window (window=inherit: RETRACTION rows subtracted).
STAGE1 = {"timestampColumn": "ts", "keyColumns": "k", "window": "tumbling(8 seconds)", "aggregate": "sum(v) AS total",
          "trigger": "AfterWatermark(early=AfterCount(1))", "accumulationMode": "accumulating_and_retracting",
          "watermark": "bounded(2 seconds)"}
STAGE2 = {"window": "inherit", "aggregate": "spark_windowing.aggregates.accumulations:TopN(2, total, k)",
          "trigger": "AfterWatermark(early=AfterCount(1))", "accumulationMode": "accumulating_and_retracting"}


@pytest.mark.parametrize("execution, shards", [("executors", None), ("driver", "1")])
def test_two_windowings_in_one_query_equal_two_chained_queries(spark, tmp_path, execution, shards):
    """``window(format("windowed") panes, window="inherit")``: both stages in one query, exactly
    once by its one checkpoint, give the panes and late rows of the two-query form (stage 1 into
    the windowed sink, stage 2 ``source=panes`` reading one of stage 1's batches per micro-batch,
    as the one query's second stage steps with each of stage 1's). Also with stage 1 on the
    driver and a one-shard stage 2, which runs in stage 1's task: no shuffle in the plan."""
    events = str(tmp_path / "events")
    write_bundles(events, closing(make_bundles(11), n=3))
    source = {**STAGE1, "source": "parquet", "path": events, "maxFilesPerTrigger": "1", "execution": execution}
    stage2 = {**STAGE2, **({"shards": shards} if shards else {})}

    def stage1(state: str):
        reader = spark.readStream.format("windowed")
        for k, v in {**source, "stateLocation": str(tmp_path / state)}.items():
            reader = reader.option(k, v)
        return reader.load()

    q = (stage1("state1").writeStream.format("windowed").option("path", str(tmp_path / "panes1"))
         .option("checkpointLocation", str(tmp_path / "chk1")).trigger(availableNow=True).start())
    q.awaitTermination(240)
    assert not q.isActive and q.exception() is None, q.exception()
    want = run_panes(spark, {**STAGE2, "source": "panes", "path": str(tmp_path / "panes1"), "maxFilesPerTrigger": "1",
                             "stateLocation": str(tmp_path / "state2"), "lateDataPath": str(tmp_path / "late2")},
                     str(tmp_path / "chk2"))
    one = spark_windowing.window(stage1("state_one"), **stage2, lateDataPath=str(tmp_path / "late_one"))
    assert ("RepartitionByExpression" in one._jdf.queryExecution().logical().toString()) == (shards is None)
    got = _run(one, str(tmp_path / "chk_one"))
    assert {"EARLY", "ON_TIME"} <= set(want.column("pane_timing").to_pylist())
    assert "RETRACTION" in want.column("kind").to_pylist()
    assert _canonical(got) == _canonical(want)
    assert _canonical(DeltaTable(str(tmp_path / "late_one")).to_pyarrow_table()) == \
        _canonical(DeltaTable(str(tmp_path / "late2")).to_pyarrow_table())


def _canonical(table: pa.Table) -> list[str]:
    """Rows as sorted JSON, ``RUN_COLUMNS`` dropped (TopN's lists of structs do not sort as ``rows`` does)."""
    keep = [c for c in table.column_names if c not in RUN_COLUMNS]
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in table.select(keep).to_pylist())


def test_a_new_checkpoint_over_another_runs_state_location_is_refused(spark, tmp_path):
    """An explicit ``stateLocation`` holding a finished run's state, under a new checkpoint (batch
    0 again): an error naming the location, never that state mixed with a new run's."""
    events = str(tmp_path / "events")
    write_bundles(events, make_bundles(5, n_bundles=4))
    options = {"timestampColumn": "ts", "keyColumns": "k", "aggregate": "count(*) AS n",
               "window": "tumbling(8 seconds)", "stateLocation": str(tmp_path / "state")}
    assert _run(spark_windowing.window(events_stream(spark, events), **options), str(tmp_path / "chk1")).num_rows
    with pytest.raises(Exception) as refused:   # the query fails: awaitTermination raises its error
        _run(spark_windowing.window(events_stream(spark, events), **options), str(tmp_path / "chk2"))
    assert "holds state up to batch 3" in str(refused.value) and str(tmp_path / "state") in str(refused.value)


def test_a_misspelt_option_suggests_window_dfs_own():
    """The suggestions and the accepted list are window(df)'s options, not every reader option."""
    with pytest.raises(OptionError) as e:
        parse_window_options({"window": "tumbling(1 minute)", "timestampColumn": "ts", "keyColumn": "k"})
    first, accepted = str(e.value).split("\n", 1)
    assert "did you mean 'keyColumns'?" in first and "keyColumns2" not in first
    assert "the options of window(df)" in accepted and "stateLocation" in accepted and "source2" not in accepted
