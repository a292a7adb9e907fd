"""``window(df)``'s batch time (``window_df._batch_time``): every pane carries Spark's batch
timestamp (the offset log's, so a replay stamps the same), and the map stage Spark compiles for
the first micro-batch serves every later one (the batch's time is not written into the generated
code). Where the session refuses reflection, the plain ``current_timestamp()`` gives the same panes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import spark_windowing
from tests.spark._helpers import micros

pytestmark = pytest.mark.spark

SEC = 1_000_000
T0 = 1_700_000_000 * SEC
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
OPTIONS = {"timestampColumn": "ts", "keyColumns": "k", "window": "tumbling(5 seconds)", "aggregate": "count(*) AS n"}


def put(directory: str, i: int) -> None:
    """File i: two keys, 10 s after file i − 1 (it closes the window of the file before)."""
    os.makedirs(directory, exist_ok=True)
    ts = [T0 + i * 10 * SEC, T0 + i * 10 * SEC + 1]
    pq.write_table(pa.table({"k": ["a", "b"], "ts": pa.array(ts, SCHEMA.field("ts").type), "v": [1, 2]}, SCHEMA),
                   os.path.join(directory, f"f{i:03d}.parquet"))


def offset_log_times(checkpoint: str) -> dict[int, int]:
    """Spark's batch timestamp (µs) of each micro-batch, from the query's offset log."""
    out = {}
    for name in os.listdir(os.path.join(checkpoint, "offsets")):
        if name.isdigit():
            with open(os.path.join(checkpoint, "offsets", name)) as f:
                out[int(name)] = json.loads(f.read().splitlines()[1])["batchTimestampMs"] * 1000
    return out


def _code_bodies(spark, query) -> list[str]:
    """The generated Java of the query's last micro-batch, without the plan lines around it."""
    debug = getattr(getattr(spark._jvm.org.apache.spark.sql.execution.debug, "package$"), "MODULE$")
    text = debug.codegenString(query._jsq.streamingQuery().lastExecution().executedPlan())
    return [line for line in text.splitlines() if line.startswith("/*")]


def test_every_micro_batch_runs_the_code_the_first_compiled(spark, tmp_path):
    """Two micro-batches with input generate the same Java: Spark's code cache serves the second
    (the batch time in the code would make each batch's map stage compile anew)."""
    src = str(tmp_path / "in")
    put(src, 0)
    df = spark.readStream.schema("k string, ts timestamp, v long").parquet(src)
    panes = spark_windowing.window(df, **OPTIONS, noDataBatches="false")   # every batch here has input
    q = (panes.writeStream.format("memory").queryName("bt_code")
         .option("checkpointLocation", str(tmp_path / "c")).start())
    try:
        bodies = []
        for i in (1, 2):
            q.processAllAvailable()
            bodies.append(_code_bodies(spark, q))
            put(src, i)
        q.processAllAvailable()
    finally:
        q.stop()
    assert bodies[0], "no generated code found"
    assert bodies[0] == bodies[1]
    assert spark.table("bt_code").count() >= 2   # the windows the later files closed fired


def _batch_times_match(table: pa.Table, checkpoint: str, input_batches: int) -> None:
    """Each pane's batch_time is Spark's timestamp of its micro-batch (batch_seq − 1) when that batch
    had input; a batch without (the ticks' batch) stamps the shard's step time, after Spark's."""
    times = offset_log_times(checkpoint)
    got = {(r["batch_seq"], micros(r["batch_time"])) for r in table.to_pylist()}
    # window 0 fires in batch 2 (the watermark of batch 1), window 1 in the ticks' batch
    assert {seq for seq, _ in got} == {3, 4}
    assert {(seq, t) for seq, t in got if seq <= input_batches} == \
        {(seq, times[seq - 1]) for seq, _ in got if seq <= input_batches}
    assert all(t >= times[seq - 1] for seq, t in got if seq > input_batches)


def test_panes_carry_sparks_batch_timestamp(spark, tmp_path):
    src, chk = str(tmp_path / "in"), str(tmp_path / "chk")
    for i in range(3):
        put(src, i)
    df = spark.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1).parquet(src)
    q = (spark_windowing.window(df, **OPTIONS).writeStream.format("memory").queryName("bt_times")
         .option("checkpointLocation", chk).trigger(availableNow=True).start())
    q.awaitTermination(240)
    assert q.exception() is None, q.exception()
    table = spark.table("bt_times").toArrow()
    assert table.num_rows == 4   # the windows of files 0 and 1, of 2 keys each (file 2 leaves its open)
    _batch_times_match(table, chk, input_batches=3)


REFUSED = textwrap.dedent("""
    import json, os, sys
    from pyspark.sql import SparkSession
    import spark_windowing
    out = sys.argv[1]
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "1")
             .config("spark.sql.reflect.allowList", "java\\\\.util\\\\.UUID\\\\.randomUUID").getOrCreate())
    try:
        spark.range(1).selectExpr("java_method('java.lang.Math', 'abs', 1L)").collect()
        refused = False
    except Exception:
        refused = True
    df = spark.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1).parquet(out + "/in")
    panes = spark_windowing.window(df, **json.loads(sys.argv[2]))
    q = (panes.writeStream.format("parquet").option("path", out + "/panes")
         .option("checkpointLocation", out + "/chk").trigger(availableNow=True).start())
    q.awaitTermination()
    plan = q._jsq.streamingQuery().lastExecution().executedPlan().toString()
    print(json.dumps({"refused": refused, "reflects": "java_method" in plan}))
""")


def test_a_session_that_refuses_reflection_gets_the_same_panes(tmp_path):
    """``spark.sql.reflect.allowList`` without ``java.lang.Math.abs``: window(df) takes the batch
    time from plain ``current_timestamp()``, and its panes carry it as before."""
    for i in range(3):
        put(str(tmp_path / "in"), i)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", REFUSED, str(tmp_path), json.dumps(OPTIONS)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"refused": True, "reflects": False}
    table = pq.read_table(str(tmp_path / "panes"))
    assert table.num_rows == 4
    _batch_times_match(table, str(tmp_path / "chk"), input_batches=3)
