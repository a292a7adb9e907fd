"""The ``windowed`` stream source on real Spark (local mode) over real Delta tables.

Timeline used by the parity tests (one Delta version = one micro-batch, maxFilesPerTrigger=1)::

    version:   0        1         2          3         4
    events:  k1@1s   k1@4s     k2@12s     k1@3s     k2@31s  ...
             k2@2s   k1@11s    k1@14s     (late)    k1@33s
"""

from __future__ import annotations

import os
import random
import shutil
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake
from pyspark.sql import functions as F

from spark_windowing.testing import TestStream
from tests.spark._helpers import micros, offsets, rows, run_noop, run_panes

pytestmark = pytest.mark.spark
SEC = 1_000_000
T0 = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z


def _ts(us: int) -> datetime:
    return datetime.fromtimestamp(us / SEC, tz=timezone.utc)


def _bundles(seed: int, n_bundles: int = 6, per: int = 8, keys=("k1", "k2", "k3")) -> list[list[dict]]:
    """Random out-of-order bundles; event times drift forward ~5 s per bundle, disorder up to 8 s."""
    rnd = random.Random(seed)
    out = []
    for b in range(n_bundles):
        bundle = []
        for _ in range(per):
            t = T0 + b * 5 * SEC + rnd.randrange(-8 * SEC, 4 * SEC)
            bundle.append({"k": rnd.choice(keys), "ts": t, "v": rnd.randrange(1, 100)})
        out.append(bundle)
    return out


def _write_versions(path: str, bundles: list[list[dict]]) -> None:
    schema = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
    for bundle in bundles:
        table = pa.table({"k": [r["k"] for r in bundle], "ts": [_ts(r["ts"]) for r in bundle],
                          "v": [r["v"] for r in bundle]}, schema=schema)
        write_deltalake(path, table, mode="append")


def _base_options(tmp_path, **extra) -> dict[str, str]:
    opts = {"source": "delta", "path": str(tmp_path / "events"), "timestampColumn": "ts",
            "window": "tumbling(10 seconds)", "aggregate": "sum(v) AS total, count(*) AS n",
            "watermark": "bounded(5 seconds)", "allowedLateness": "5 seconds",
            "stateLocation": str(tmp_path / "state"), "maxFilesPerTrigger": "1", "shards": "2"}
    opts.update(extra)
    return opts


@pytest.mark.parametrize("trigger,mode,keyed", [
    ("Default()", "discarding", True),
    ("AfterWatermark(early=AfterCount(2), late=AfterCount(1))", "accumulating_and_retracting", True),
    ("Repeatedly(AfterCount(3))", "accumulating", False),
])
def test_same_panes_as_teststream(spark, tmp_path, trigger, mode, keyed):
    bundles = _bundles(seed=len(trigger) + len(mode))
    _write_versions(str(tmp_path / "events"), bundles)
    opts = _base_options(tmp_path, trigger=trigger, accumulationMode=mode)
    if keyed:
        opts["keyColumns"] = "k"
    chk = str(tmp_path / "chk")
    spark_panes = run_panes(spark, opts, chk)
    assert spark_panes.num_rows > 0

    # Replay the very same micro-batches (events, watermark, batch time from the offset log).
    s = TestStream(window="tumbling(10 seconds)", trigger=trigger, accumulation_mode=mode,
                   allowed_lateness="5 seconds", aggregate="sum(v) AS total, count(*) AS n",
                   key_columns="k" if keyed else None, timestamp_unit="us")
    for start, end in offsets(chk):
        first = 0 if start is None else start["up"] + 1
        events = [r for v in range(first, end["up"] + 1) for r in bundles[v]]
        s.add_elements([{"k": r["k"], "ts": r["ts"], "v": r["v"]} for r in events] or
                       pa.table({"k": pa.array([], pa.string()), "ts": pa.array([], pa.int64()),
                                 "v": pa.array([], pa.int64())}),
                       watermark=max(end["wm"], -(2 ** 62)), processing_time=end["bt"])
    expected = s.take_panes()
    for p in expected:
        p.pop("batch_seq")
    assert rows(spark_panes, drop=("batch_seq",)) == rows(pa.Table.from_pylist(expected))


@pytest.mark.parametrize("window,native", [
    ("tumbling(10 seconds)", "window(ts, '10 seconds')"),
    ("sliding(10 seconds, 5 seconds)", "window(ts, '10 seconds', '5 seconds')"),
    ("session(3 seconds)", "session_window(ts, '3 seconds')"),
])
def test_on_time_panes_equal_spark_batch_aggregation(spark, tmp_path, window, native):
    from chispa import assert_df_equality
    rnd = random.Random(7)
    events = []
    for i in range(300):  # disorder <= 4 s, watermark delay 5 s: nothing is late
        t = T0 + i * 150_000 + rnd.randrange(0, 4 * SEC) + rnd.randrange(0, 997)
        events.append({"k": f"u{rnd.randrange(6)}", "ts": _ts(t), "v": rnd.randrange(1, 50)})
    events.append({"k": "zz", "ts": _ts(T0 + 3600 * SEC), "v": 0})  # closes every window
    table = pa.Table.from_pylist(events, schema=pa.schema([("k", pa.string()),
                                                           ("ts", pa.timestamp("us", tz="UTC")),
                                                           ("v", pa.int64())]))
    src = tmp_path / "events"
    src.mkdir()
    for j, chunk in enumerate(range(0, table.num_rows, 60)):
        pq.write_table(table.slice(chunk, 60), str(src / f"part-{j:03d}.parquet"))
    opts = _base_options(tmp_path, source="parquet", window=window, keyColumns="k")
    panes = run_panes(spark, opts, str(tmp_path / "chk"))
    ours = (spark.createDataFrame(panes.to_pandas())
            .where("pane_timing = 'ON_TIME' AND k <> 'zz'")
            .selectExpr("k", "window_start", "window_end", "total", "n"))
    theirs = spark.read.parquet(str(src)).where("k <> 'zz'").groupBy("k", F.expr(native).alias("w")) \
        .agg(F.sum("v").alias("total"), F.count("*").alias("n")) \
        .selectExpr("k", "w.start AS window_start", "w.end AS window_end", "total", "n")
    assert ours.count() > 10
    assert_df_equality(ours, theirs, ignore_row_order=True, ignore_nullable=True)


def test_shard_count_and_spilling_do_not_change_panes(spark, tmp_path):
    """1 shard, 4 shards, and 2 shards whose state mostly lives on disk (stateMemoryRows=3: batches
    run a few buckets at a time) give the same panes and the same late rows."""
    from deltalake import DeltaTable
    base = {"source": "generator", "totalEvents": "1500", "eventsPerBatch": "500", "keys": "12",
            "eventInterval": "200 milliseconds", "disorder": "2 seconds", "timestampColumn": "event_time",
            "keyColumns": "user_id", "window": "session(2 seconds)", "lateFraction": "0.05",
            "trigger": "AfterWatermark(early=AfterCount(3))", "accumulationMode": "accumulating_and_retracting",
            "aggregate": "sum(amount) AS total, count(*) AS n", "watermark": "bounded(3 seconds)"}
    one = run_panes(spark, {**base, "shards": "1", "stateLocation": str(tmp_path / "s1"),
                            "lateDataPath": str(tmp_path / "late1")}, str(tmp_path / "c1"))
    four = run_panes(spark, {**base, "shards": "4", "stateLocation": str(tmp_path / "s4")}, str(tmp_path / "c4"))
    spilled = run_panes(spark, {**base, "shards": "2", "stateLocation": str(tmp_path / "sp"), "stateBuckets": "8",
                                "stateMemoryRows": "3", "lateDataPath": str(tmp_path / "late2")},
                        str(tmp_path / "cp"))
    assert one.num_rows > 0
    assert {"RETRACTION", "TRIGGER"} <= set(one.column("kind").to_pylist())
    assert rows(one, drop=("batch_time",)) == rows(four, drop=("batch_time",))
    assert rows(one, drop=("batch_time",)) == rows(spilled, drop=("batch_time",))
    late1 = DeltaTable(str(tmp_path / "late1")).to_pyarrow_table()
    late2 = DeltaTable(str(tmp_path / "late2")).to_pyarrow_table()
    assert late1.num_rows > 0
    assert rows(late1, drop=("batch_time",)) == rows(late2, drop=("batch_time",))


def test_conf_defaults_and_explicit_options(spark, tmp_path):
    import spark_windowing
    spark.conf.set("spark.windowed.window", "tumbling(1 minute)")
    spark.conf.set("spark.windowed.aggregate", "count(*) AS n")
    try:
        spark_windowing.register(spark)
        base = {"source": "generator", "totalEvents": "600", "eventsPerBatch": "600", "keys": "3",
                "eventInterval": "1 second", "timestampColumn": "event_time", "keyColumns": "user_id",
                "stateLocation": str(tmp_path / "s")}
        default_panes = run_panes(spark, base, str(tmp_path / "c"))
        ends = {micros(r["window_end"]) - micros(r["window_start"]) for r in default_panes.to_pylist()}
        assert ends == {60 * SEC}
        explicit = run_panes(spark, {**base, "window": "tumbling(2 minutes)", "stateLocation": str(tmp_path / "s2")},
                             str(tmp_path / "c2"))
        assert {micros(r["window_end"]) - micros(r["window_start"]) for r in explicit.to_pylist()} == {120 * SEC}
        assert explicit.column_names[:4] == ["user_id", "window_start", "window_end", "n"]
    finally:
        spark.conf.unset("spark.windowed.window")
        spark.conf.unset("spark.windowed.aggregate")
        spark_windowing.register(spark)


@pytest.mark.parametrize("option,value,fragment", [
    ("window", "sliding(5 minutes, 0 seconds)", "sliding"),
    ("trigger", "AfterCount(-1)", "AfterCount"),
    ("trigger", "AfterTheBell()", "unknown trigger"),
    ("aggregate", "summ(v)", "unknown aggregate function"),
    ("allowedLateness", "-5 seconds", "allowedLateness"),
    ("keyColumns", "nope", "nope"),
    ("source", "kinesis", "delta, parquet, json, csv, generator, nexmark, panes, kafka"),
    ("compactEvery", "-1", "an integer >= 0"),
    ("vacuumRetention", "soon", "a Spark interval"),
])
def test_bad_options_fail_at_load(spark, tmp_path, option, value, fragment):
    _write_versions(str(tmp_path / "events"), _bundles(1, n_bundles=1))
    opts = _base_options(tmp_path, keyColumns="k")
    opts[option] = value
    reader = spark.readStream.format("windowed")
    for k, v in opts.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception) as info:
        reader.load()
    text = str(info.value)
    assert f"invalid option '{option}'" in text
    assert value in text and fragment in text and "Accepted:" in text


def test_late_and_malformed_events_go_to_the_late_table_once(spark, tmp_path):
    from deltalake import DeltaTable
    path = str(tmp_path / "events")
    schema = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
    write_deltalake(path, pa.table({"k": ["a", "a", "b"], "ts": [_ts(T0), _ts(T0 + 30 * SEC), _ts(T0 + 31 * SEC)],
                                    "v": [1, 2, 3]}, schema=schema), mode="append")
    write_deltalake(path, pa.table({"k": ["a", "b", None], "ts": [_ts(T0 + 1 * SEC), None, _ts(T0 + 32 * SEC)],
                                    "v": [10, 20, 30]}, schema=schema), mode="append")
    late = str(tmp_path / "late")
    opts = _base_options(tmp_path, keyColumns="k", lateDataPath=late, allowedLateness="0 seconds",
                         watermark="bounded(0 seconds)")
    chk = str(tmp_path / "chk")
    run_noop(spark, opts, chk)
    got = sorted(((r["k"], r["v"], r["reason"]) for r in DeltaTable(late).to_pyarrow_table().to_pylist()),
                 key=lambda t: t[1])
    assert got == [("a", 10, "too_late"), ("b", 20, "malformed"), (None, 30, "malformed")]
    run_noop(spark, opts, chk)  # restart on the same checkpoint: nothing new, nothing written twice
    assert DeltaTable(late).to_pyarrow_table().num_rows == 3


def test_missing_snapshot_is_an_error_naming_the_path(spark, tmp_path):
    _write_versions(str(tmp_path / "events"), _bundles(3, n_bundles=2))
    opts = _base_options(tmp_path, keyColumns="k")
    chk = str(tmp_path / "chk")
    run_panes(spark, opts, chk)
    shutil.rmtree(tmp_path / "state" / "shards")
    _write_versions(str(tmp_path / "events"), _bundles(4, n_bundles=1))
    reader = spark.readStream.format("windowed")
    for k, v in opts.items():
        reader = reader.option(k, v)
    q = reader.load().writeStream.format("noop").option("checkpointLocation", chk).trigger(availableNow=True).start()
    with pytest.raises(Exception) as info:
        q.awaitTermination(120)
    assert "missing state snapshot" in str(info.value)
    assert os.path.join(str(tmp_path / "state"), "shards") in str(info.value)


def test_bad_option_error_carries_one_python_frame(spark, tmp_path):
    """Spark puts the Python traceback before the message (PYTHON_DATA_SOURCE_ERROR); of our code
    only the DataSource.schema frame is shown, not the option parser's internals."""
    reader = spark.readStream.format("windowed")
    for k, v in {**_base_options(tmp_path), "window": "tumbling(ten seconds)"}.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception) as info:
        reader.load()
    text = str(info.value)
    assert "PYTHON_DATA_SOURCE_ERROR" in text and "invalid option 'window'" in text
    frames = [line for line in text.splitlines() if line.strip().startswith('File "')]
    assert len(frames) == 1 and frames[0].rstrip().endswith("in schema"), text
