"""The query of ``test_restart_settings.py`` run as its own process, under a ``spark.serializer``
of its own (a static conf: a session cannot change it, a new JVM can).

usage: python _settings_job.py ROUTE OUT SERIALIZER
Runs the query of ROUTE (``source``, ``driver`` or ``window_df``) over OUT/events to the end of
its files (availableNow), into the pane tables OUT/panes, checkpoint OUT/chk, state OUT/state;
prints the serializer its SparkContext ran with.
"""

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession  # noqa: E402

import spark_windowing  # noqa: E402

OPERATOR = {"timestampColumn": "ts", "keyColumns": "k", "window": "session(15 seconds)",
            "trigger": "AfterWatermark(early=AfterCount(4))", "accumulationMode": "accumulating_and_retracting",
            "watermark": "bounded(5 seconds)", "aggregate": "count(*) AS n, sum(v) AS s", "shards": "2"}


def main(route: str, out: str, serializer: str) -> None:
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
             .config("spark.sql.session.timeZone", "UTC").config("spark.serializer", serializer)
             .config("spark.sql.warehouse.dir", os.path.join(out, "warehouse"))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_windowing.register(spark)
    run(spark, out, route)
    print(spark.sparkContext.getConf().get("spark.serializer"))
    spark.stop()


def run(spark, out, route: str) -> None:
    """The query of ``route`` over ``out`` (a path), to the end of its files."""
    out = str(out)
    if route in ("source", "driver"):
        panes = (spark.readStream.format("windowed").options(**OPERATOR)
                 .options(source="parquet", path=os.path.join(out, "events"), maxFilesPerTrigger="1",
                          stateLocation=os.path.join(out, "state"),
                          execution="driver" if route == "driver" else "executors").load())
    else:
        events = spark.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1) \
            .parquet(os.path.join(out, "events"))
        panes = spark_windowing.window(events, **OPERATOR, stateLocation=os.path.join(out, "state"))
    q = (panes.writeStream.format("windowed").option("path", os.path.join(out, "panes"))
         .option("checkpointLocation", os.path.join(out, "chk")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert not q.isActive, "query did not finish in time"
    assert q.exception() is None, q.exception()


if __name__ == "__main__":
    main(*sys.argv[1:4])
