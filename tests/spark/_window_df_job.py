"""A ``spark_windowing.window(df)`` query run as its own process, so a test can kill -9 it and
restart it from its checkpoint.

usage: python _window_df_job.py EVENTS CHECKPOINT OUTPUT LATE
Reads the parquet files in EVENTS one per micro-batch (Spark's file source, availableNow),
session windows with early and late firings and retractions, late rows to the Delta table LATE,
and writes panes with Spark's exactly-once parquet file sink.
"""

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession  # noqa: E402

import spark_windowing  # noqa: E402


def main(events: str, checkpoint: str, output: str, late: str) -> None:
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.warehouse.dir", checkpoint + "_warehouse")   # window(df)'s state by default
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    run(spark, events, checkpoint, output, late)
    spark.stop()


def run(spark, events: str, checkpoint: str, output: str, late: str) -> None:
    """The query, to the end of its upstream (a test's uninterrupted run calls it in its session)."""
    df = spark.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1).parquet(events)
    panes = spark_windowing.window(
        df, timestampColumn="ts", keyColumns="k", window="session(3 seconds)",
        trigger="AfterWatermark(early=AfterCount(2), late=AfterCount(1))",
        accumulationMode="accumulating_and_retracting", aggregate="sum(v) AS total, count(*) AS n",
        watermark="bounded(2 seconds)", allowedLateness="4 seconds", lateDataPath=late)
    q = (panes.writeStream.format("parquet").option("path", output).option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
    q.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:5])
