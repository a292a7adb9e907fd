"""Spark's own Kafka source (``spark-sql-kafka-0-10``, the version of the installed pyspark, from
Maven Central) plus native windows over a topic of JSON ``{k, ts (µs), v, id}`` records, run in a
process of its own (its SparkSession needs the package's jars):

    python tests/delta/_kafka_native_job.py BOOTSTRAP TOPIC OUT.json WINDOW DELAY [MAX_OFFSETS [ENGINE]]

``WINDOW``: ``tumbling:<seconds>`` (``groupBy(window(...))``) or ``session:<seconds>``
(``session_window``); ``withWatermark(DELAY seconds)``, append mode, ``availableNow`` (with
``maxOffsetsPerTrigger`` = MAX_OFFSETS when given: several micro-batches). Writes the
emitted windows as JSON rows ``[k, start_us, end_us, n, total]``.

``ENGINE`` ``window_df`` windows the same parsed DataFrame with ``spark_windowing.window(df)``
instead (``bounded(DELAY seconds)``, the default trigger) and writes every pane as a JSON row
``[k, start_us, end_us, n, total, pane_timing]``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile


def kafka_package() -> str:
    import pyspark
    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"


def main(bootstrap: str, topic: str, out: str, window: str, delay: str, max_offsets: str = "",
         engine: str = "native", checkpoint: str = "") -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from spark_windowing.tools.packages import jar_confs

    spark = (SparkSession.builder.master("local[2]").appName("kafka-native")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").config(map=jar_confs(kafka_package()))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets)
    raw = reader.load()
    parsed = raw.select(F.from_json(F.col("value").cast("string"), "k string, ts long, v long, id long").alias("j"))
    kind, secs = window.split(":")
    if engine == "window_df":
        return _window_df(spark, parsed.select("j.*"), out, f"{kind}({secs} seconds)", delay, checkpoint)
    ev = parsed.select("j.*").withColumn("et", F.timestamp_micros("ts")).withWatermark("et", f"{delay} seconds")
    w = F.window("et", f"{secs} seconds") if kind == "tumbling" else F.session_window("et", f"{secs} seconds")
    agg = ev.groupBy("k", w.alias("w")).agg(F.count("*").alias("n"), F.sum("v").alias("total"))
    name = "native_" + os.urandom(4).hex()
    with tempfile.TemporaryDirectory() as chk:
        q = (agg.writeStream.outputMode("append").format("memory").queryName(name)
             .option("checkpointLocation", chk).trigger(availableNow=True).start())
        q.awaitTermination()
        rows = spark.sql(f"SELECT k, unix_micros(w.start) AS s, unix_micros(w.end) AS e, n, total FROM {name}").collect()
    with open(out, "w") as f:
        json.dump([[r["k"], r["s"], r["e"], r["n"], r["total"]] for r in rows], f)
    spark.stop()
    return 0


def _window_df(spark, events, out: str, window: str, delay: str, chk: str) -> int:
    """``spark_windowing.window(df)`` over Spark's Kafka source + ``from_json`` into Spark's parquet
    file sink beside checkpoint ``chk`` (state beside it too: a second run goes on where the first
    ended): every pane written so far."""
    import spark_windowing

    panes = spark_windowing.window(events, window=window, aggregate="count(*) AS n, sum(v) AS total",
                                   timestampColumn="ts", timestampUnit="us", keyColumns="k",
                                   watermark=f"bounded({delay} seconds)", stateLocation=chk + "-state")
    q = (panes.writeStream.format("parquet").option("path", chk + "-panes").option("checkpointLocation", chk)
         .trigger(availableNow=True).start())
    q.awaitTermination()
    spark.read.parquet(chk + "-panes").createOrReplaceTempView("window_df_panes")
    rows = spark.sql("SELECT k, unix_micros(window_start) AS s, unix_micros(window_end) AS e, n, total, "
                     "pane_timing FROM window_df_panes").collect()
    with open(out, "w") as f:
        json.dump([[r["k"], r["s"], r["e"], r["n"], r["total"], r["pane_timing"]] for r in rows], f)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
