"""A windowed query with a given shard count, run in-process by a test or as its own process (so a
test can kill -9 it and restart it).

usage: python _rescale_job.py CASE SHARDS EVENTS STATE CHECKPOINT OUTPUT
Reads the Delta table EVENTS one version per micro-batch (availableNow) and writes panes to the
pane sink at OUTPUT (``triggers``, ``retractions``, ``current``), late rows to ``OUTPUT/late``. CASE is ``tumbling`` (early panes, accumulating) or
``session`` (early and late firings, accumulating and retracting).
"""

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

CASES = {
    "tumbling": {"window": "tumbling(4 seconds)", "trigger": "AfterWatermark(early=AfterCount(2))",
                 "accumulationMode": "accumulating", "aggregate": "sum(v) AS total, count(*) AS n"},
    "session": {"window": "session(3 seconds)", "trigger": "AfterWatermark(early=AfterCount(2), late=AfterCount(1))",
                "accumulationMode": "accumulating_and_retracting", "aggregate": "sum(v) AS total, count(*) AS n"},
}


def start(spark, case: str, shards: int, events: str, state: str, checkpoint: str, output: str):
    """Start the query (availableNow) and return it."""
    reader = spark.readStream.format("windowed")
    options = {"source": "delta", "path": events, "timestampColumn": "ts", "keyColumns": "k",
               "watermark": "bounded(4 seconds)", "allowedLateness": "10 seconds", "maxFilesPerTrigger": "1",
               "shards": str(shards), "stateLocation": state, "lateDataPath": f"{output}/late", **CASES[case]}
    for k, v in options.items():
        reader = reader.option(k, v)
    return (reader.load().writeStream.format("windowed").option("path", output)
            .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())


def main(case: str, shards: str, events: str, state: str, checkpoint: str, output: str) -> None:
    from pyspark.sql import SparkSession

    import spark_windowing
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_windowing.register(spark)
    start(spark, case, int(shards), events, state, checkpoint, output).awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:7])
