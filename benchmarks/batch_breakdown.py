"""Where a micro-batch of ours spends its time: Spark's phases next to our own spans.

    python benchmarks/batch_breakdown.py                    # the demo's configuration, 12 batches
    python benchmarks/batch_breakdown.py --batches 20 --events 2000
    python benchmarks/batch_breakdown.py --query nexmark-q7-max --events 10000 --batches 40   # into tables, driver

Runs ``benchmarks/batch_floor.py``'s ``ours`` query (the demo: generator, 2 shards, session
windows with early panes, into the pane sink) once, with ``SPARK_WINDOWING_TRACE`` set
(``spark_windowing.datasource.trace``): every Python process of the query appends its spans
(the source's ``latestOffset`` / ``partitions`` / ``commit`` on the driver's reader worker, each
task's ``source.read``, the sink writer's construction ``sink.init``, each task's ``sink.write``,
the driver's ``sink.commit``) to one file. Each span is assigned to the micro-batch whose
trigger (Spark's progress: ``timestamp`` + ``triggerExecution``) contains its start.

Printed: batch 0 and the median of the later batches, per Spark phase (``durationMs``) and per
span (summed over the batch's calls, with the number of calls), plus "addBatch outside our
spans": the part of Spark's ``addBatch`` (tasks and the sink's commit) that no span of ours
covers, i.e. Spark's scheduling, its Python worker sessions and its Arrow exchange. Not part of
the test suite.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(ROOT, "benchmarks")]


#: The bids files ``nexmark.py`` writes (its default ``--dir``).
NEXMARK_BIDS = os.path.join(tempfile.gettempdir(), "spark-windowing-nexmark", "bids")

#: The queries it can run: the demo's, and NEXMark's q7 maximum (``execution=driver``, one shard:
#: the configuration of ``nexmark.py --sink table --execution driver --shards 1``).
QUERIES = {
    "demo": {"source": "generator", "keys": "20", "window": "session(30 seconds)", "aggregate": "count(*) AS n",
             "trigger": "AfterWatermark(early=AfterCount(5))", "watermark": "bounded(5 seconds)",
             "timestampColumn": "event_time", "keyColumns": "user_id"},
    "nexmark-q7-max": {"source": "nexmark", "nexmarkEvents": "bid", "timestampColumn": "date_time",
                       "window": "tumbling(10 seconds)", "aggregate": "max(price) AS max_price",
                       "execution": "driver", "shards": "1"},
    "nexmark-q7": {"source": "nexmark", "nexmarkEvents": "bid", "timestampColumn": "date_time",
                   "window": "tumbling(10 seconds)", "aggregate": "max_rows(price, auction, bidder, date_time)"},
    # nexmark.py's q7 at the defaults, over the bids files it wrote (run it first; --events is ignored)
    "nexmark-q7-files": {"source": "parquet", "path": NEXMARK_BIDS, "maxFilesPerTrigger": "1",
                         "timestampColumn": "date_time", "window": "tumbling(10 seconds)",
                         "aggregate": "max_rows(price, auction, bidder, date_time)"},
    # nexmark.py's q11 at the defaults, over the same files
    "nexmark-q11-files": {"source": "parquet", "path": NEXMARK_BIDS, "maxFilesPerTrigger": "1",
                          "timestampColumn": "date_time", "window": "session(10 seconds)",
                          "keyColumns": "bidder", "aggregate": "count(*) AS bids"},
    # spark_vs_native.py's tumbling query at 400 k events over the files it wrote (run it first)
    "bench-tumbling": {"source": "parquet", "path": os.path.join("out", "bench", "events-400000-10000-40"),
                       "maxFilesPerTrigger": "4", "timestampColumn": "ts", "keyColumns": "k",
                       "window": "tumbling(1 minute)", "aggregate": "sum(v) AS total, count(*) AS n",
                       "watermark": "bounded(5 seconds)"},
}


def _run(work: str, batches: int, events: int, query: str = "demo", confs: tuple[str, ...] = (),
         noop: bool = False) -> list[dict]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    import spark_windowing
    builder = SparkSession.builder
    for conf in confs:
        builder = builder.config(*conf.split("=", 1))
    spark = (builder.master("local[2]").appName("batch-breakdown")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.streaming.numRecentProgressUpdates", str(max(100, batches))).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_windowing.register(spark)
    reader = spark.readStream.format("windowed").option("stateLocation", os.path.join(work, "state"))
    for k, v in QUERIES[query].items():
        reader = reader.option(k, v)
    if QUERIES[query]["source"] in ("generator", "nexmark"):
        reader = reader.option("eventsPerBatch", str(events))
    df = reader.load()
    sink = df.writeStream.format("noop") if noop else \
        df.writeStream.format("windowed").option("path", os.path.join(work, "panes"))
    q = (sink
         .option("checkpointLocation", os.path.join(work, "chk")).trigger(processingTime="0 seconds").start())
    while (q.lastProgress or {}).get("batchId", -1) < batches - 1:   # one small call, not every progress
        if q.exception() is not None:
            raise RuntimeError(str(q.exception()))
        time.sleep(0.25)
    q.stop()
    return [json.loads(p.json) for p in q.recentProgress[:batches]]


def _epoch(ts: str) -> float:
    return dt.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _per_batch(progress: list[dict], spans: list[dict]) -> list[dict]:
    """For each batch: Spark's phases, and our spans started within its trigger (summed, counted)."""
    rows = []
    for p in progress:
        start = _epoch(p["timestamp"])
        end = start + p["durationMs"]["triggerExecution"] / 1000
        mine: dict[str, list[float]] = defaultdict(list)
        for s in spans:
            if start <= s["start"] < end:
                mine[s["span"]].append((s["end"] - s["start"]) * 1000)
        rows.append({"phases": p["durationMs"], "spans": {k: (sum(v), len(v)) for k, v in mine.items()}})
    return rows


def _print(label: str, rows: list[dict]) -> None:
    phases = sorted({k for r in rows for k in r["phases"]})
    names = sorted({k for r in rows for k in r["spans"]})
    print(f"\n{label} ({len(rows)} batch{'es' if len(rows) > 1 else ''}; ms, median)")
    for k in phases:
        print(f"  spark {k:24} {statistics.median(r['phases'].get(k, 0) for r in rows):8.1f}")
    for k in names:
        ms = statistics.median(r["spans"].get(k, (0, 0))[0] for r in rows)
        calls = statistics.median(r["spans"].get(k, (0, 0))[1] for r in rows)
        print(f"  ours  {k:24} {ms:8.1f}   ({calls:g} calls)")
    # the tasks (a shard's read and write in one task) run side by side: one task's share counts
    def per_call(r: dict, name: str) -> float:
        total, calls = r["spans"].get(name, (0.0, 0))
        return total / calls if calls else 0.0

    outside = [r["phases"].get("addBatch", 0) - r["spans"].get("sink.init", (0, 0))[0]
               - r["spans"].get("sink.commit", (0, 0))[0] - per_call(r, "source.read") - per_call(r, "sink.write")
               for r in rows]
    print(f"  addBatch outside our spans (one task's read + write counted) {statistics.median(outside):8.1f}")


def _timeline(progress: dict, spans: list[dict]) -> None:
    """One batch's spans in time order, in ms from its trigger's start."""
    start = _epoch(progress["timestamp"])
    end = start + progress["durationMs"]["triggerExecution"] / 1000
    print(f"\nbatch {progress['batchId']}: {progress['durationMs']}")
    for s in sorted((s for s in spans if start <= s["start"] < end), key=lambda s: s["start"]):
        print(f"  {(s['start'] - start) * 1000:7.1f} .. {(s['end'] - start) * 1000:7.1f}  pid {s['pid']:>7}  {s['span']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--keep", help="copy the trace file (JSON lines) here")
    ap.add_argument("--timeline", type=int, help="also print this batch's spans in time order")
    ap.add_argument("--events", type=int, default=200, help="events per batch (default 200, as the demo)")
    ap.add_argument("--query", choices=sorted(QUERIES), default="demo",
                    help="nexmark-q7-max: NEXMark q7's maximum price, execution=driver (with --events 10000: "
                         "nexmark.py --sink table's 1 M events in 100 batches)")
    ap.add_argument("--noop", action="store_true", help="into the noop sink (as spark_vs_native.py)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark conf of the session")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        trace_file = os.path.join(work, "trace.jsonl")
        os.environ["SPARK_WINDOWING_TRACE"] = trace_file
        progress = _run(work, args.batches, args.events, args.query, tuple(args.conf), args.noop)
        with open(trace_file) as f:
            spans = [json.loads(line) for line in f]
        if args.keep:
            shutil.copy(trace_file, args.keep)
    rows = _per_batch(progress, spans)
    if args.timeline is not None:
        _timeline(progress[args.timeline], spans)
    _print("batch 0", rows[:1])
    _print("later batches", rows[1:])
    if args.batches >= 40:
        _print("the last 20 batches", rows[-20:])


if __name__ == "__main__":
    main()
