"""Latency of ON_TIME panes in a live query, next to Spark's native append mode on the same input.

    python benchmarks/latency.py                        # 90 s per engine, 20 k events/s, 1 s trigger
    python benchmarks/latency.py --seconds 30 --engines ours

A feeder thread writes one parquet file of ``--rate`` events every second into a directory
(written under a hidden name, then renamed: readers never see a partial file); event time runs
``--event-speed`` times faster than the wall clock, so windows keep closing. Each engine reads that
directory with ``trigger(processingTime="1 second")`` (``--trigger``):

* ``ours``: ``readStream.format("windowed")`` (``source=parquet``, ``tumbling(10 seconds)``,
  ``bounded(2 seconds)``, sum and count, 2 shards) into the pane sink
  (``writeStream.format("windowed")``: Delta tables ``triggers``, ``retractions``, ``current``);
* ``native``: ``withWatermark("ts", "2 seconds").groupBy(window(ts, "10 seconds"), k)
  .agg(sum, count)``, append mode, ``foreachBatch`` writing each batch's windows as parquet.

Latency of a window: from the start of the micro-batch whose watermark passed the window's end
(ours: the batch time in the pane row, chosen on the driver as the batch is planned; native: the
batch's ``timestamp`` in Spark's progress) to its pane being committed (ours: the commit of that
batch to ``current``, from the Delta log; native: ``foreachBatch`` returning after the write).
Prints p50 / p90 / p99 / max over the windows closed after the first ``--skip`` seconds, in
seconds and in trigger intervals, and the mean cost of a micro-batch: Spark's own phases
(``durationMs``: offsets, planning, the batch, the commit log) and, for ours, the slowest shard's
read / step / snapshot (from the shard reports). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SEC = 1_000_000
PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets", "triggerExecution")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=90.0, help="how long the feeder runs, per engine")
    ap.add_argument("--rate", type=int, default=20_000, help="events per second")
    ap.add_argument("--keys", type=int, default=1_000)
    ap.add_argument("--event-speed", type=float, default=10.0, help="event seconds per wall-clock second")
    ap.add_argument("--trigger", default="1 second")
    ap.add_argument("--skip", type=float, default=15.0, help="wall seconds of warm-up not counted")
    ap.add_argument("--engines", default="ours,native")
    ap.add_argument("--dir", default=None)
    return ap.parse_args(argv)


class Feeder(threading.Thread):
    """One parquet file of ``rate`` events per wall-clock second; event time advances
    ``event_speed`` seconds per file, in order but up to 1 s out of order."""

    def __init__(self, directory: str, rate: int, keys: int, event_speed: float, seconds: float) -> None:
        super().__init__(daemon=True)
        self.directory, self.rate, self.keys = directory, rate, keys
        self.event_speed, self.seconds = event_speed, seconds
        self.rng = np.random.default_rng(7)

    def run(self) -> None:
        t0, i = time.time(), 0
        step = int(self.event_speed * SEC)
        while time.time() - t0 < self.seconds:
            ts = i * step + np.sort(self.rng.integers(0, step, self.rate)) - self.rng.integers(0, SEC, self.rate)
            table = pa.table({"k": self.rng.integers(0, self.keys, self.rate),
                              "ts": pa.array(ts + 1_767_225_600 * SEC, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                              "v": self.rng.random(self.rate)})
            hidden = os.path.join(self.directory, f".part-{i:06d}.parquet")
            pq.write_table(table, hidden)
            os.replace(hidden, os.path.join(self.directory, f"part-{i:06d}.parquet"))
            i += 1
            time.sleep(max(0.0, t0 + i - time.time()))


def run_ours(spark, args: argparse.Namespace, work: str) -> tuple[list[float], list[dict], list[dict]]:
    """Latencies (s) of the ON_TIME panes, Spark's progress, and our shard reports."""
    source = os.path.join(work, "in")
    os.makedirs(source)
    feeder = Feeder(source, args.rate, args.keys, args.event_speed, args.seconds)
    feeder.start()
    time.sleep(1.5)  # the first file exists before the query starts (the file source needs a schema)
    panes = os.path.join(work, "panes")
    df = (spark.readStream.format("windowed").option("source", "parquet").option("path", source)
          .option("timestampColumn", "ts").option("keyColumns", "k").option("window", "tumbling(10 seconds)")
          .option("aggregate", "sum(v) AS total, count(*) AS n").option("watermark", "bounded(2 seconds)")
          .option("shards", "2").option("stateLocation", os.path.join(work, "state")).load())
    q = (df.writeStream.format("windowed").option("path", panes).option("checkpointLocation", os.path.join(work, "chk"))
         .trigger(processingTime=args.trigger).start())
    started = time.time()
    feeder.join()
    time.sleep(3)
    q.stop()
    progress = [json.loads(p.json) for p in q.recentProgress]
    commits = {m["batchId"]: ts for m, ts, _ in _log_commits(os.path.join(panes, "current"))}
    latencies = []
    for meta, _, added in _log_commits(os.path.join(panes, "triggers")):
        committed = commits.get(meta["batchId"])
        if committed is None or not added:
            continue
        rows = pa.concat_tables([pq.read_table(os.path.join(panes, "triggers", a), columns=["pane_timing", "batch_time"])
                                 for a in added])
        on_time = rows.filter(pc.equal(rows.column("pane_timing"), "ON_TIME"))
        planned = on_time.column("batch_time").cast(pa.int64()).to_numpy() / SEC
        latencies += [committed - p for p in planned if p - started > args.skip]
    reports = []
    for path in glob.glob(os.path.join(work, "state", "reports", "*", "shard-*.json")):
        with open(path) as f:
            reports.append(json.load(f))
    return latencies, progress, reports


def run_native(spark, args: argparse.Namespace, work: str) -> tuple[list[float], list[dict], list[dict]]:
    from pyspark.sql import functions as F
    source, out = os.path.join(work, "in"), os.path.join(work, "out")
    os.makedirs(source)
    feeder = Feeder(source, args.rate, args.keys, args.event_speed, args.seconds)
    feeder.start()
    time.sleep(1.5)
    committed: dict[int, tuple[float, int]] = {}

    def write(df, batch_id: int) -> None:
        df.persist()
        df.write.mode("append").parquet(os.path.join(out, f"batch={batch_id}"))
        done = time.time()
        committed[batch_id] = (done, df.count())
        df.unpersist()

    df = (spark.readStream.schema("k long, ts timestamp, v double").parquet(source)
          .withWatermark("ts", "2 seconds").groupBy(F.window("ts", "10 seconds").alias("w"), "k")
          .agg(F.sum("v").alias("total"), F.count("*").alias("n")))
    q = (df.writeStream.foreachBatch(write).outputMode("append")
         .option("checkpointLocation", os.path.join(work, "chk")).trigger(processingTime=args.trigger).start())
    started = time.time()
    feeder.join()
    time.sleep(3)
    q.stop()
    progress = [json.loads(p.json) for p in q.recentProgress]
    begun = {p["batchId"]: _epoch(p["timestamp"]) for p in progress}
    latencies = []
    for batch_id, (done, windows) in committed.items():
        if batch_id in begun and begun[batch_id] - started > args.skip:
            latencies += [done - begun[batch_id]] * windows
    return latencies, progress, []


def _log_commits(table: str):
    """(userMetadata, commit time in s, added files) of every commit in a Delta table's JSON log."""
    for path in sorted(glob.glob(os.path.join(table, "_delta_log", "*.json"))):
        meta, ts, added = None, None, []
        with open(path) as f:
            for line in f:
                action = json.loads(line)
                if "commitInfo" in action:
                    info = action["commitInfo"]
                    ts = info.get("timestamp", 0) / 1000
                    meta = json.loads(info["userMetadata"]) if info.get("userMetadata") else None
                elif "add" in action:
                    added.append(action["add"]["path"])
        if meta is not None and "batchId" in meta:
            yield meta, ts, added


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def report(engine: str, latencies: list[float], progress: list[dict], reports: list[dict], trigger_s: float) -> None:
    if not latencies:
        print(f"{engine}: no window closed after the warm-up")
        return
    q = np.percentile(np.array(latencies), [50, 90, 99, 100])
    print(f"{engine:6s} windows {len(latencies):>7,}  p50 {q[0]:.2f} s  p90 {q[1]:.2f} s  p99 {q[2]:.2f} s  "
          f"max {q[3]:.2f} s  (p50 {q[0] / trigger_s:.2f}, p99 {q[2] / trigger_s:.2f} trigger intervals)")
    data = [p for p in progress if p.get("numInputRows", 0) > 0]
    spark_part = ", ".join(f"{k} {statistics.mean(p['durationMs'].get(k, 0) for p in data):.0f}"
                           for k in PHASES if data)
    print(f"       mean ms per micro-batch with input ({len(data)} batches), Spark: {spark_part}")
    if reports:
        ours = ", ".join(f"{k[:-3]} {statistics.mean(r.get(k, 0) for r in reports):.0f}"
                         for k in ("read_ms", "step_ms", "snapshot_ms"))
        print(f"       mean ms per shard and batch (last {len(reports)} shard reports), ours: {ours}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import datasource
    spark = (SparkSession.builder.master("local[2]").appName("spark-windowing-latency")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.streaming.numRecentProgressUpdates", "10000").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    datasource.register(spark)
    trigger_s = float(args.trigger.split()[0]) * (60 if "minute" in args.trigger else 1)
    print(f"{args.rate:,} events/s, {args.keys:,} keys, event time {args.event_speed:g}x wall time, tumbling 10 s "
          f"windows, bounded(2 s), trigger {args.trigger}, {args.seconds:g} s per engine (first {args.skip:g} s "
          f"not counted), local[2], {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}", flush=True)
    base = args.dir or tempfile.mkdtemp(prefix="latency-")
    for engine in args.engines.split(","):
        work = os.path.join(base, engine)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        run = {"ours": run_ours, "native": run_native}[engine]
        report(engine, *run(spark, args, work), trigger_s)
    spark.stop()


if __name__ == "__main__":
    main()
