"""Time to the first committed pane, next to Spark native's time to its first committed row.

    python benchmarks/first_pane.py                 # 3 runs of each engine, each in a fresh process
    python benchmarks/first_pane.py --runs 5 --engines ours

What a user meets first, and what every restart after a deploy pays: a one-event upstream (one
parquet file), a query started on a fresh SparkSession, and the wall time from ``start()`` until
its first result is committed to a Delta table.

* ``ours``: ``readStream.format("windowed")`` (``source=parquet``, ``tumbling(10 seconds)``,
  ``AfterWatermark(early=AfterCount(1))``: the one event fires an EARLY pane in batch 0) into the
  pane sink (``writeStream.format("windowed")``); done when the sink's commit of batch 0 (the
  ``current`` table holds the pane) has returned: the query's first progress event, which Spark
  posts after the sink's commit.
* ``native``: ``readStream.parquet`` -> ``groupBy(window(ts, "10 seconds"), k).count()`` in
  ``update`` mode (a window's row in batch 0) -> ``foreachBatch`` writing the batch with delta-rs
  (``write_deltalake``, the same Delta writer as ours); done when ``foreachBatch`` has returned.

Each run is a fresh Python process (a fresh JVM: the cold start a deploy pays); it also reports
the SparkSession's start and, for ours, the micro-batch's phases from Spark's progress
(``durationMs``). Prints min / median / max per engine. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENGINES = ("ours", "native")


def _session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # Spark's Python workers: this venv
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    return (SparkSession.builder.master("local[2]").appName("first-pane")
            .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC").getOrCreate())


def _one_event(directory: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    os.makedirs(directory, exist_ok=True)
    table = pa.table({"k": ["a"], "ts": pa.array([1_767_225_600_000_000], pa.timestamp("us", tz="UTC")),
                      "v": [1]})
    pq.write_table(table, os.path.join(directory, "part-0.parquet"))


def run_one(engine: str, work: str) -> dict:
    """One cold run in this process: session start, then start() -> first committed result."""
    t0 = time.monotonic()
    spark = _session()
    spark.sparkContext.setLogLevel("ERROR")
    session_s = time.monotonic() - t0
    events = os.path.join(work, "events")
    _one_event(events)
    if engine == "ours":
        import spark_windowing
        spark_windowing.register(spark)
        panes = (spark.readStream.format("windowed").option("source", "parquet").option("path", events)
                 .option("timestampColumn", "ts").option("keyColumns", "k").option("aggregate", "count(*) AS n")
                 .option("window", "tumbling(10 seconds)").option("trigger", "AfterWatermark(early=AfterCount(1))")
                 .option("stateLocation", os.path.join(work, "state")).load())
        started = time.monotonic()
        query = (panes.writeStream.format("windowed").option("path", os.path.join(work, "panes"))
                 .option("checkpointLocation", os.path.join(work, "chk")).start())
        first = _wait_first_progress(query)
        done = time.monotonic()
        from deltalake import DeltaTable
        rows = DeltaTable(os.path.join(work, "panes", "current")).to_pyarrow_table().num_rows
        query.stop()
    else:
        from pyspark.sql import functions as F
        from deltalake import write_deltalake
        committed: list[float] = []

        def write(batch, batch_id):
            table = batch.toArrow()
            if table.num_rows:
                write_deltalake(os.path.join(work, "native"), table, mode="append")
                committed.append(time.monotonic())

        source = spark.readStream.schema("k string, ts timestamp, v long").parquet(events)
        counts = (source.withWatermark("ts", "0 seconds").groupBy(F.window("ts", "10 seconds"), "k").count()
                  .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                          "k", "count"))
        started = time.monotonic()
        query = (counts.writeStream.outputMode("update").foreachBatch(write)
                 .option("checkpointLocation", os.path.join(work, "chk")).start())
        first = _wait_first_progress(query)
        done = committed[0] if committed else time.monotonic()
        rows = 1 if committed else 0
        query.stop()
    spark.stop()
    return {"engine": engine, "session_s": round(session_s, 3), "first_commit_s": round(done - started, 3),
            "rows": rows, "durationMs": first.get("durationMs", {})}


def _wait_first_progress(query, timeout: float = 300) -> dict:
    """The first progress of a micro-batch that read input (Spark posts it after the sink's commit)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in query.recentProgress:
            progress = json.loads(p.json) if hasattr(p, "json") else p
            if progress.get("numInputRows", 0) > 0:
                return progress
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        time.sleep(0.02)
    raise TimeoutError("no micro-batch with input within the timeout")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)   # internal: run one engine here
    args = ap.parse_args(argv)
    if args.one:
        with tempfile.TemporaryDirectory() as work:
            print(json.dumps(run_one(args.one, work)))
        return
    results: dict[str, list[dict]] = {}
    for run in range(args.runs):
        for engine in args.engines.split(","):
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", engine],
                                 capture_output=True, text=True, cwd=ROOT, check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            if not result["rows"]:
                raise SystemExit(f"{engine}: no row committed")
            results.setdefault(engine, []).append(result)
            print(f"run {run + 1} {engine:6s} session {result['session_s']:6.2f} s  start() -> first committed "
                  f"result {result['first_commit_s']:6.2f} s  batch phases {result['durationMs']}", flush=True)
    print()
    for engine, rs in results.items():
        xs = sorted(r["first_commit_s"] for r in rs)
        print(f"{engine:6s} start() -> first committed result: min {xs[0]:.2f} / median "
              f"{statistics.median(xs):.2f} / max {xs[-1]:.2f} s over {len(xs)} runs")
    if {"ours", "native"} <= results.keys():
        ratio = statistics.median(r["first_commit_s"] for r in results["ours"]) / \
            statistics.median(r["first_commit_s"] for r in results["native"])
        print(f"ours / native (medians): {ratio:.2f}x")


if __name__ == "__main__":
    main()
