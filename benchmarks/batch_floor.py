"""The floor of a micro-batch with a Python data source and a Python sink, next to ours.

    python benchmarks/batch_floor.py                     # 3 runs of each query, each in a fresh process
    python benchmarks/batch_floor.py --runs 1 --batches 8 --queries floor,ours

What any query whose source and sink are Python data sources pays, whatever they do, on this
machine: Spark starts Python processes to plan the read, to create the writer, to run each task's
reading and writing, and to commit; each batch goes through Spark's offset and commit logs.
Four queries, each in a fresh process (a fresh JVM and fresh Python workers: batch 0 is the
cold start), the same trigger (as fast as possible, ``processingTime`` 0), 2 partitions a batch,
``local[2]``:

* ``native``: Spark's ``rate`` source (200 rows a second) into the ``noop`` sink: no Python
  process at all, the JVM's own floor;
* ``floor``: a Python stream reader whose two partitions yield one row each, into a Python sink
  whose tasks return an empty message and whose commit does nothing;
* ``floor_delta``: the same, the commit appending one row to a Delta table with delta-rs (what
  the smallest exactly-once Delta sink pays);
* ``ours``: ``format("windowed")`` (the generator, 2 shards, 200 events a batch, session windows,
  early panes) into the pane sink (``format("windowed")``), as the demo;
* ``ours_driver``: the same with ``execution=driver`` (the operator steps in the driver's planning
  process; the source's task runs no Python).

Reported per query: batch 0 (``start()`` to the first progress event) and the later batches'
``triggerExecution`` (Spark's progress), min / median / max over runs. Not part of the test suite.
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

QUERIES = ("native", "floor", "floor_delta", "ours", "ours_driver")


def _session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    return (SparkSession.builder.master("local[2]").appName("batch-floor")
            .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC").getOrCreate())


def _floor_source_and_sink(delta_table: str | None):
    """A minimal Python stream source (offsets count batches; two partitions, one row each) and
    a minimal Python sink (nothing written; the commit optionally appends one row with delta-rs)."""
    from pyspark.sql.datasource import (DataSource, DataSourceStreamReader, DataSourceStreamWriter, InputPartition,
                                        WriterCommitMessage)

    class Reader(DataSourceStreamReader):
        def initialOffset(self):
            return {"n": 0}

        def latestOffset(self):
            self.n = getattr(self, "n", 0) + 1
            return {"n": self.n}

        def partitions(self, start, end):
            return [InputPartition(i) for i in range(2)]

        def read(self, partition):
            yield (partition.value, 1)

        def commit(self, end):
            pass

    class Writer(DataSourceStreamWriter):
        def __init__(self, table):
            self.table = table

        def write(self, iterator):
            for _ in iterator:
                pass
            return WriterCommitMessage()

        def commit(self, messages, batchId):
            if self.table:
                import pyarrow as pa
                from deltalake import write_deltalake
                write_deltalake(self.table, pa.table({"batch": [batchId]}), mode="append")

        def abort(self, messages, batchId):
            pass

    class Floor(DataSource):
        @classmethod
        def name(cls):
            return "floor"

        def schema(self):
            return "p INT, v INT"

        def streamReader(self, schema):
            return Reader()

        def streamWriter(self, schema, overwrite):
            return Writer(delta_table)

    return Floor


def run_one(query: str, work: str, batches: int) -> dict:
    spark = _session()
    spark.sparkContext.setLogLevel("ERROR")
    chk = os.path.join(work, "chk")
    if query in ("ours", "ours_driver"):
        import spark_windowing
        spark_windowing.register(spark)
        df = (spark.readStream.format("windowed").option("source", "generator").option("eventsPerBatch", "200")
              .option("keys", "20").option("window", "session(30 seconds)").option("aggregate", "count(*) AS n")
              .option("trigger", "AfterWatermark(early=AfterCount(5))").option("watermark", "bounded(5 seconds)")
              .option("timestampColumn", "event_time").option("keyColumns", "user_id")
              .option("execution", "driver" if query == "ours_driver" else "executors")
              .option("stateLocation", os.path.join(work, "state")).load())
        writer = df.writeStream.format("windowed").option("path", os.path.join(work, "panes"))
    elif query == "native":
        writer = spark.readStream.format("rate").option("rowsPerSecond", "200").load().writeStream.format("noop")
    else:
        spark.dataSource.register(_floor_source_and_sink(os.path.join(work, "delta") if query == "floor_delta" else None))
        writer = spark.readStream.format("floor").load().writeStream.format("floor")
    started = time.monotonic()
    q = writer.option("checkpointLocation", chk).trigger(processingTime="0 seconds").start()
    first = None
    # poll the last progress only, and not too often: ``recentProgress`` converts every kept progress
    # to JSON and back, which every 20 ms took CPU from the JVM and the workers (~0.1 s a batch)
    while (last := q.lastProgress or {}).get("batchId", -1) < batches - 1:
        if first is None and last:
            first = time.monotonic() - started
        if q.exception() is not None:
            raise RuntimeError(str(q.exception()))
        time.sleep(0.02 if first is None else 0.25)
    q.stop()
    progress = q.recentProgress
    later = [p.durationMs["triggerExecution"] / 1000 for p in progress[1:batches]]
    phases = {k: statistics.median(p.durationMs.get(k, 0) for p in progress[1:batches]) for k in progress[1].durationMs}
    return {"batch0_s": first, "later_s": later, "batch0_phases": dict(progress[0].durationMs), "later_phases": phases}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--queries", default=",".join(QUERIES))
    ap.add_argument("--one", help=argparse.SUPPRESS)   # internal: one run of one query, in this process
    args = ap.parse_args()
    if args.one:
        with tempfile.TemporaryDirectory() as work:
            print("RESULT " + json.dumps(run_one(args.one, work, args.batches)), flush=True)
        return
    results: dict[str, list[dict]] = {q: [] for q in args.queries.split(",")}
    for run in range(args.runs):
        for query in results:   # interleaved, each run a fresh process
            out = subprocess.run([sys.executable, __file__, "--one", query, "--batches", str(args.batches)],
                                 capture_output=True, text=True, check=True)
            line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
            results[query].append(json.loads(line[7:]))
            r = results[query][-1]
            print(f"run {run + 1} {query}: batch 0 {r['batch0_s']:.2f} s, later batches median "
                  f"{statistics.median(r['later_s']):.3f} s (min {min(r['later_s']):.3f}, max {max(r['later_s']):.3f})",
                  flush=True)
            print("   batch 0 phases (ms):", json.dumps(r["batch0_phases"], sort_keys=True), flush=True)
            print("   later batches' phases, median (ms):", json.dumps(r["later_phases"], sort_keys=True), flush=True)
    print("\nquery        batch 0 (min / median / max)    later batches, median per run (min / median / max)")
    for query, rs in results.items():
        b0 = sorted(r["batch0_s"] for r in rs)
        med = sorted(statistics.median(r["later_s"]) for r in rs)
        print(f"{query:12} {b0[0]:.2f} / {statistics.median(b0):.2f} / {b0[-1]:.2f} s"
              f"          {med[0]:.3f} / {statistics.median(med):.3f} / {med[-1]:.3f} s")


if __name__ == "__main__":
    main()
