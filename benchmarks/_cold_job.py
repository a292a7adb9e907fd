"""The job ``cold_start.py`` submits: ``_cold_job.py ENGINE KIND EVENTS_DIR WORK [OPTIONS_JSON]``
(``OPTIONS_JSON``: more options of ours, e.g. ``{"execution": "executors"}``); prints one JSON
line (epoch times: the job's start, its first committed panes; seconds: the session's start and
the query). Runs under ``spark-submit``, which gives the master and the conf."""

from __future__ import annotations

import json
import os
import sys
import time

STARTED = time.time()

WINDOWS = {   # ours, native; 10 seconds of disorder allowed (spark_vs_native's generator)
    "tumbling": ("tumbling(1 minute)", "window(ts, '1 minute')"),
    "sliding": ("sliding(5 minutes, 1 minute)", "window(ts, '5 minutes', '1 minute')"),
    "session": ("session(30 seconds)", "session_window(ts, '30 seconds')"),
}


def query(spark, engine: str, kind: str, events: str, work: str, extra: dict):
    ours, native = WINDOWS[kind]
    if engine == "ours":
        reader = (spark.readStream.format("windowed").option("source", "parquet").option("path", events)
                  .option("timestampColumn", "ts").option("keyColumns", "k").option("window", ours)
                  .option("aggregate", "sum(v) AS total, count(*) AS n").option("watermark", "bounded(10 seconds)")
                  .option("maxFilesPerTrigger", "4").option("stateLocation", os.path.join(work, "state")))
        for k, v in extra.items():
            reader = reader.option(k, v)
        panes = reader.load()
        return (panes.writeStream.format("windowed").option("path", os.path.join(work, "panes"))
                .option("checkpointLocation", os.path.join(work, "chk")).trigger(availableNow=True).start())
    from pyspark.sql import functions as F
    df = (spark.readStream.schema("k long, ts timestamp, v double").option("maxFilesPerTrigger", 4).parquet(events)
          .withWatermark("ts", "10 seconds").groupBy(F.expr(native).alias("w"), "k")
          .agg(F.sum("v").alias("total"), F.count("*").alias("n"))
          .select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"), "k", "total", "n"))
    return (df.writeStream.format("parquet").outputMode("append").option("path", os.path.join(work, "out"))
            .option("checkpointLocation", os.path.join(work, "chk")).trigger(availableNow=True).start())


def _file_sink_commits(out: str) -> tuple[float | None, int]:
    """The file sink's first commit that added rows (the modification time of its entry in
    ``_spark_metadata``, written when the batch commits) and the rows of all its files."""
    import pyarrow.parquet as pq
    log = os.path.join(out, "_spark_metadata")
    first, rows = None, 0
    for name in sorted((n for n in os.listdir(log) if n.isdigit()), key=int):
        entry = os.path.join(log, name)
        with open(entry) as f:
            files = [json.loads(line)["path"] for line in f.read().splitlines()[1:] if line.startswith("{")]
        added = sum(pq.ParquetFile(p.removeprefix("file:")).metadata.num_rows for p in files)
        if added and first is None:
            first = os.path.getmtime(entry)
        rows += added
    return first, rows


def main(engine: str, kind: str, events: str, work: str, extra: str = "{}") -> None:
    from pyspark.sql import SparkSession
    t0 = time.time()
    spark = SparkSession.builder.appName(f"cold-start-{engine}").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    session_s = time.time() - t0
    t1 = time.time()
    q = query(spark, engine, kind, events, work, json.loads(extra))
    first, seen = None, 0
    while q.isActive or seen < len(q.recentProgress):
        progress = q.recentProgress
        for p in progress[seen:]:
            if first is None and (p.sink.numOutputRows or 0) > 0:
                first = time.time()   # polled: within 20 ms of Spark posting it
        seen = len(progress)
        if not q.isActive:
            break
        time.sleep(0.02)
    q.awaitTermination()
    if q.exception() is not None:
        raise SystemExit(str(q.exception()))
    rows = sum(max(p.sink.numOutputRows or 0, 0) for p in q.recentProgress)
    if engine == "native":   # Spark's file sink reports no output rows: its commit log says
        first, rows = _file_sink_commits(os.path.join(work, "out"))
    batches = [{"batch": p.batchId, "ms": p.durationMs} for p in q.recentProgress][:3]
    print(json.dumps({"started_epoch": STARTED, "first_pane_epoch": first or time.time(),
                      "session_s": session_s, "query_s": time.time() - t1, "rows": rows,
                      "query_start_epoch": t1, "first_batches": batches}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
