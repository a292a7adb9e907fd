"""``window(df)`` fires the windows the watermark closed without new input, as native Spark does
(its no-data micro-batch): ``source.ticks`` makes Spark run that batch.

* Against Spark native (``groupBy(window)``, ``groupBy(session_window)`` in append mode) and
  ``format("windowed")`` over the same files with ``availableNow``: the same windows, the last
  batch's closed ones included, with no closing event appended to the input.
* A live stream (the default trigger): the input stops after batch N; the windows batch N's
  watermark closed are in the sink in batch N + 1, a batch without input rows — counted in Spark's
  progress, not by sleeping.
* ``noDataBatches=false``: the ticks are left out; the windows the last input's watermark closed
  wait for the next input.
"""

from __future__ import annotations

import os
import random
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

import spark_windowing
from spark_windowing.errors import OptionError
from tests.spark._helpers import micros, run_panes

pytestmark = pytest.mark.spark
SEC = 1_000_000
T0 = 1_700_000_000 * SEC
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
DDL = "k string, ts timestamp, v long"
DELAY = 5
KINDS = {  # ours, Spark's grouping column
    "tumbling": ("tumbling(10 seconds)", lambda: F.window("ts", "10 seconds")),
    "sliding": ("sliding(10 seconds, 5 seconds)", lambda: F.window("ts", "10 seconds", "5 seconds")),
    "session": ("session(4 seconds)", lambda: F.session_window("ts", "4 seconds")),
}


def _write(directory, n_files: int = 4, per_file: int = 30, seed: int = 3, start: int = 0) -> list[int]:
    """Events moving ~12 s a file over 4 keys, never further behind the largest time so far than
    the watermark delay (so Spark drops none), times in whole ms (Spark's watermark unit)."""
    rnd = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    largest = []
    for f in range(start, start + n_files):
        times = [T0 + f * 12 * SEC + rnd.randrange(0, 12_000) * 1000 for _ in range(per_file)]
        rows = [{"k": rnd.choice("abcd"), "ts": t, "v": rnd.randrange(10)} for t in sorted(times)]
        path = os.path.join(directory, f"part-{f:04d}.parquet")
        pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)
        os.utime(path, ns=(1_600_000_000_000_000_000 + f * 10**9,) * 2)   # the file source reads by mtime
        largest.append(max(times))
    return largest   # each file's largest event time (µs)


def _stream(spark, path: str):
    return spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(path)


def _options(window: str) -> dict:
    return {"window": window, "aggregate": "count(*) AS n, sum(v) AS s", "timestampColumn": "ts",
            "keyColumns": "k", "watermark": f"bounded({DELAY} seconds)"}


def _windows(rows) -> list[tuple]:
    return sorted((r["k"], micros(r["window_start"]), micros(r["window_end"]), r["n"], r["s"]) for r in rows)


def _memory(df, checkpoint: str, *, available_now: bool = True):
    name = "m_" + uuid.uuid4().hex[:8]
    writer = df.writeStream.format("memory").queryName(name).option("checkpointLocation", checkpoint)
    return name, (writer.trigger(availableNow=True) if available_now else writer).start()


def _native(spark, path: str, kind: str, checkpoint: str) -> list[tuple]:
    grouping = KINDS[kind][1]().alias("w")
    agg = (_stream(spark, path).withWatermark("ts", f"{DELAY} seconds").groupBy(grouping, "k")
           .agg(F.count("*").alias("n"), F.sum("v").alias("s"))
           .select("k", F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"), "n", "s"))
    name, q = _memory(agg, checkpoint)
    q.awaitTermination(240)
    assert not q.isActive and q.exception() is None, q.exception()
    return _windows(spark.table(name).collect())


@pytest.mark.parametrize("kind", [pytest.param(k, marks=pytest.mark.slow) if k == "sliding" else k for k in KINDS])
def test_window_df_native_and_format_windowed_emit_the_same_windows(spark, tmp_path, kind):
    events = str(tmp_path / "events")
    _write(events)
    native = _native(spark, events, kind, str(tmp_path / "chk_native"))
    name, q = _memory(spark_windowing.window(_stream(spark, events), **_options(KINDS[kind][0])),
                      str(tmp_path / "chk_df"))
    q.awaitTermination(240)
    assert not q.isActive and q.exception() is None, q.exception()
    got = _windows(spark.table(name).collect())
    source = run_panes(spark, {**_options(KINDS[kind][0]), "source": "parquet", "path": events,
                               "maxFilesPerTrigger": "1", "stateLocation": str(tmp_path / "state")},
                       str(tmp_path / "chk_src"))
    assert got == native == _windows(source.to_pylist())
    last_end = max(e for _, _, e, _, _ in native)
    largest = T0 + 3 * 12 * SEC                     # the last file's windows are among them
    assert last_end > largest and len(native) >= 8


def test_a_live_stream_fires_the_closed_windows_in_the_next_batch_without_input(spark, tmp_path):
    events = str(tmp_path / "events")
    first, last = _write(events, n_files=2)
    panes = spark_windowing.window(_stream(spark, events), **_options("tumbling(10 seconds)"))
    name, q = _memory(panes, str(tmp_path / "chk"), available_now=False)
    try:
        q.processAllAvailable()       # returns once no source has new data: the ticks included
        progress = [p for p in q.recentProgress if p["batchId"] is not None]
        last_input = max(p["batchId"] for p in progress if p["numInputRows"] > 0)
        assert last_input == 1        # one file a batch
        after = [p for p in progress if p["batchId"] == last_input + 1]
        assert after and after[0]["numInputRows"] == 0               # Spark ran a batch without input
        assert max(p["batchId"] for p in progress) == last_input + 1  # and no further one
        got = spark.table(name).collect()
        # batch 1's watermark (file 0's largest time - delay) closed nothing of file 1; the batch
        # after it, at file 1's watermark, fires every window ending by then
        in_no_data_batch = {micros(r["window_end"]) for r in got if r["batch_seq"] == last_input + 2}
        all_ends = {micros(r["window_end"]) for r in got}
        want = {e for e in all_ends if first - DELAY * SEC < e <= last - DELAY * SEC}
        assert in_no_data_batch == want and want
        assert max(all_ends) <= last - DELAY * SEC
    finally:
        q.stop()


def test_no_data_batches_false_leaves_the_closed_windows_for_the_next_input(spark, tmp_path):
    events = str(tmp_path / "events")
    largest = _write(events, n_files=3)
    ends = {}
    for setting in ("true", "false"):
        options = {**_options("tumbling(10 seconds)"), "noDataBatches": setting}
        name, q = _memory(spark_windowing.window(_stream(spark, events), **options), str(tmp_path / f"chk_{setting}"))
        q.awaitTermination(240)
        assert q.exception() is None, q.exception()
        if setting == "false":
            assert all(p["numInputRows"] > 0 for p in q.recentProgress)      # no batch without input
        ends[setting] = sorted(micros(r["window_end"]) for r in spark.table(name).collect())
    closed_by_last = [e for e in ends["true"] if e > largest[1] - DELAY * SEC]
    assert closed_by_last and ends["false"] == [e for e in ends["true"] if e <= largest[1] - DELAY * SEC]


def test_a_bad_no_data_batches_value_names_the_option(spark, tmp_path):
    _write(str(tmp_path / "events"), n_files=1)
    with pytest.raises(OptionError, match="noDataBatches") as err:
        spark_windowing.window(_stream(spark, str(tmp_path / "events")), **{**_options("tumbling(1 second)"),
                                                                             "noDataBatches": "sometimes"})
    assert "true, false" in str(err.value)
