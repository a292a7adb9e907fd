"""``spark_windowing.window(df, **options)`` against ``format("windowed")``: the same events (one
parquet file per micro-batch, read by Spark's file source and by the windowed source), the same
options, through real Spark; the panes and late rows must be equal (but for ``batch_seq`` and
``batch_time``, which number and time each query's own micro-batches)."""

from __future__ import annotations

import os
import random
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

import spark_windowing
from spark_windowing.errors import OptionError
from tests.spark._helpers import rows, run_panes

pytestmark = pytest.mark.spark
SEC = 1_000_000
T0 = 1_700_000_000 * SEC
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
DDL = "k string, ts timestamp, v long"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
#: What differs by construction between two queries: their micro-batches' numbers and times.
RUN_COLUMNS = ("batch_seq", "batch_time")


@pytest.fixture
def rocksdb(spark):
    """transformWithState needs RocksDB's state store provider (a session conf; restored after)."""
    key = "spark.sql.streaming.stateStore.providerClass"
    before = spark.conf.get(key, None)
    spark.conf.set(key, ROCKSDB)
    yield spark
    if before is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, before)


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
            if rnd.random() < 0.15:  # behind the watermark: LATE panes, too_late rows
                ts -= rnd.randrange(6000, 20000) * 1000
            bundle.append({"k": rnd.choice("abc"), "ts": ts, "v": rnd.randrange(100)})
        out.append(bundle)
    out[3].append({"k": "a", "ts": None, "v": 7})  # malformed: no event time
    return out


def run_window_df(spark, path: str, options: dict, checkpoint: str) -> pa.Table:
    df = spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(path)
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


@pytest.mark.parametrize("case", list(CASES))
def test_window_df_equals_format_windowed(rocksdb, tmp_path, case):
    spark = rocksdb
    events = str(tmp_path / "events")
    write_bundles(events, make_bundles(len(case)))
    common = {"timestampColumn": "ts", "keyColumns": "k", "aggregate": "sum(v) AS total, count(*) AS n",
              "watermark": "bounded(2 seconds)", **CASES[case]}
    want = run_panes(spark, {**common, "source": "parquet", "path": events, "maxFilesPerTrigger": "1",
                             "lateDataPath": str(tmp_path / "late_src"), "stateLocation": str(tmp_path / "state")},
                     str(tmp_path / "chk_src"))
    got = run_window_df(spark, events, {**common, "lateDataPath": str(tmp_path / "late_df")},
                        str(tmp_path / "chk_df"))
    assert got.schema.names == want.schema.names
    assert want.num_rows > 0
    assert rows(got, drop=RUN_COLUMNS) == rows(want, drop=RUN_COLUMNS)
    late_want = DeltaTable(str(tmp_path / "late_src")).to_pyarrow_table()
    late_got = DeltaTable(str(tmp_path / "late_df")).to_pyarrow_table()
    assert rows(late_got, drop=RUN_COLUMNS) == rows(late_want, drop=RUN_COLUMNS)
    assert "malformed" in late_got.column("reason").to_pylist()
    if case == "tumbling":  # the data exercise every pane timing and rows too late for any window
        assert set(got.column("pane_timing").to_pylist()) == {"EARLY", "ON_TIME", "LATE"}
        assert "too_late" in late_got.column("reason").to_pylist()
    if case == "session":
        assert "RETRACTION" in got.column("kind").to_pylist()
