"""``window(df)`` restarted with another ``shards``: every window's state moves to the shard Spark
now routes its key to (``pmod(xxhash64(keys), shards)``, computed in Python by
``datasource.spark_hash``), as ``format("windowed")``'s rescale does (``source.rescale``).

A session window query (sessions merge across batches: a key's state must be where its next
events go) runs on 2 shards, then 3, then 1, from one checkpoint; its panes and late rows equal
those of the same three runs with 2 shards each (the same micro-batches: a restart's first batch
and each run's last, without input, are where they are in both). Spark's own ``xxhash64`` is checked against ours on the test's keys."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

import spark_windowing
from spark_windowing.datasource.spark_hash import xxhash64
from tests.spark._helpers import rows
from tests.spark.test_window_df import RUN_COLUMNS, events_stream, make_bundles, write_bundles

pytestmark = pytest.mark.spark
OPTIONS = {"timestampColumn": "ts", "keyColumns": "k", "aggregate": "count(*) AS n, sum(v) AS total",
           "window": "session(1 second)", "watermark": "bounded(2 seconds)", "allowedLateness": "8 seconds",
           "accumulationMode": "accumulating"}


def _run(spark, events: str, out: str, shards: int, late: str) -> None:
    q = (spark_windowing.window(events_stream(spark, events), **OPTIONS, shards=str(shards), lateDataPath=late,
                                stateLocation=f"{out}/state")
         .writeStream.format("parquet").option("path", f"{out}/panes").option("checkpointLocation", f"{out}/chk")
         .trigger(availableNow=True).start())
    q.awaitTermination(240)
    assert not q.isActive and q.exception() is None, q.exception()


def _panes(spark, out: str) -> pa.Table:
    return spark.read.parquet(f"{out}/panes").toArrow()


def test_a_restart_with_more_then_fewer_shards_keeps_every_windows_state(spark, tmp_path):
    bundles = make_bundles(21, n_bundles=9)
    for name, counts in [("kept", (2, 2, 2)), ("moved", (2, 3, 1))]:   # the same restarts, the same batches
        events = str(tmp_path / name / "events")
        for upto, shards in zip((3, 6, 9), counts):
            write_bundles(events, bundles[:upto])
            _run(spark, events, str(tmp_path / name), shards, str(tmp_path / name / "late"))
    want, got = _panes(spark, str(tmp_path / "kept")), _panes(spark, str(tmp_path / "moved"))
    assert want.num_rows > 10 and "LATE" in want.column("pane_timing").to_pylist()
    assert rows(got, drop=RUN_COLUMNS) == rows(want, drop=RUN_COLUMNS)
    late = [DeltaTable(str(tmp_path / name / "late")).to_pyarrow_table() for name in ("kept", "moved")]
    assert late[0].num_rows and rows(late[1], drop=RUN_COLUMNS) == rows(late[0], drop=RUN_COLUMNS)


def test_our_xxhash64_is_sparks_on_window_df_key_types(spark):
    df = spark.createDataFrame([("a", 1, 10), ("ünï", -7, 2**40), (None, None, None), ("x" * 40, 0, -1)],
                               "s string, i int, l long")
    spark_side = [r[0] for r in df.select(F.xxhash64("s", "i", "l")).collect()]
    table = df.toArrow()
    assert [int(h) for h in xxhash64([table["s"], table["i"], table["l"]])] == spark_side
