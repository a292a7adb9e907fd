"""A windowed query run as its own process, so a test can kill -9 it and restart it.

usage: python _replay_job.py EVENTS STATE CHECKPOINT OUTPUT [EXECUTION]
Reads the Delta table EVENTS one version per micro-batch (availableNow), session windows with
early firings and retractions, and writes panes with Spark's exactly-once parquet file sink.
"""

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession  # noqa: E402

import spark_windowing  # noqa: E402


def main(events: str, state: str, checkpoint: str, output: str, execution: str = "executors") -> None:
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    run(spark, events, state, checkpoint, output, execution)
    spark.stop()


def run(spark, events: str, state: str, checkpoint: str, output: str, execution: str = "executors") -> None:
    """The query, to the end of its upstream (a test's uninterrupted run calls it in its session);
    ``execution``: where the operator steps (the reader option)."""
    spark_windowing.register(spark)
    panes = (spark.readStream.format("windowed").option("source", "delta").option("path", events)
             .option("timestampColumn", "ts").option("keyColumns", "k").option("window", "session(3 seconds)")
             .option("trigger", "AfterWatermark(early=AfterCount(2), late=AfterCount(1))")
             .option("accumulationMode", "accumulating_and_retracting").option("aggregate", "sum(v) AS total, count(*) AS n")
             .option("watermark", "bounded(4 seconds)").option("allowedLateness", "10 seconds")
             .option("maxFilesPerTrigger", "1").option("shards", "2").option("execution", execution).option("stateLocation", state).load())
    q = (panes.writeStream.format("parquet").option("path", output).option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
    q.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:6])
