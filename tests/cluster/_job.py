"""The driver of the cluster tests, a process of its own (so a test can kill it):

    python tests/cluster/_job.py CONFIG.json

CONFIG: ``master`` (a ``spark://`` URL or ``sc://`` for Spark Connect), ``source`` (the windowed
reader's options), ``panes`` (the sink path), ``checkpoint``, ``env`` (what executors need:
``AWS_*``). Runs the windowed query with ``availableNow`` into the pane sink and exits 0 when it
has finished, printing one ``PROGRESS <json>`` line per micro-batch.
"""

from __future__ import annotations

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def session(cfg: dict):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("spark-windowing-cluster-test")
    if cfg["master"].startswith("sc://"):
        return builder.remote(cfg["master"]).getOrCreate()
    builder = (builder.master(cfg["master"])
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.memory", "768m").config("spark.executor.memory", "512m")
               .config("spark.executor.cores", "1").config("spark.cores.max", "2")
               .config("spark.task.maxFailures", "8").config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
               .config("spark.python.worker.reuse", "true")
               .config("spark.executorEnv.PYTHONPATH", ROOT)
               .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
               .config("spark.pyspark.python", sys.executable))
    for k, v in cfg.get("env", {}).items():
        builder = builder.config(f"spark.executorEnv.{k}", v)
    return builder.getOrCreate()


def main(path: str) -> int:
    with open(path) as f:
        cfg = json.load(f)
    spark = session(cfg)
    if not cfg["master"].startswith("sc://"):   # a Connect session has no SparkContext
        spark.sparkContext.setLogLevel("WARN")
    import spark_windowing
    spark_windowing.register(spark)
    reader = spark.readStream.format("windowed")
    for k, v in cfg["source"].items():
        reader = reader.option(k, v)
    query = (reader.load().writeStream.format("windowed").option("path", cfg["panes"])
             .option("checkpointLocation", cfg["checkpoint"]).trigger(availableNow=True).start())
    query.awaitTermination()
    for p in query.recentProgress:  # attributes: through Connect p["numInputRows"] is None (not a
        # top-level field of the progress JSON there), the property sums the sources'
        print("PROGRESS", json.dumps({"batchId": p.batchId, "numInputRows": p.numInputRows,
                                      "ms": (p.durationMs or {}).get("triggerExecution")}), flush=True)
    if query.exception() is not None:
        print("QUERY FAILED:", query.exception(), file=sys.stderr, flush=True)
        return 1
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
