"""spark-windowing vs Spark's native windowed aggregation: same files, same machine, same run.

    python benchmarks/spark_vs_native.py                          # 4 M events, 10 k keys, 10 batches
    python benchmarks/spark_vs_native.py --events 400000 --only tumbling

Generates parquet event files once (``--events``, ``--keys``, ``--disorder``) under ``--dir``, then
in one local[2] Spark session times, per window kind, Spark's native streaming query
(``withWatermark(...).groupBy(window(...) | session_window(...), k).agg(sum, count)``, append
mode) and ours (``readStream.format("windowed")`` with the Default trigger, which also produces
the same ON_TIME panes plus a late-data count), both ``availableNow`` with the same
``maxFilesPerTrigger`` (≈10 micro-batches) into the ``noop`` sink. Prints seconds, events/second
and the speedup, after one untimed warm-up query per engine. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SEC = 1_000_000
CASES = {
    "tumbling": ("tumbling(1 minute)", "window(ts, '1 minute')"),
    "sliding": ("sliding(5 minutes, 1 minute)", "window(ts, '5 minutes', '1 minute')"),
    "session": ("session(30 seconds)", "session_window(ts, '30 seconds')"),
}


def generate(directory: str, events: int, keys: int, files: int, disorder_s: int, seed: int = 3) -> None:
    """Events over ``events / 1000`` seconds of event time, in arrival order, split into files."""
    if os.path.exists(os.path.join(directory, "_SUCCESS")):
        return
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    rng = np.random.default_rng(seed)
    per = -(-events // files)
    t0 = 1_767_225_600 * SEC
    for f in range(files):
        n = min(per, events - f * per)
        i = np.arange(f * per, f * per + n)
        ts = t0 + i * 1000 - rng.integers(0, disorder_s * SEC + 1, n)  # 1000 events per second
        table = pa.table({"k": pa.array(rng.integers(0, keys, n)),
                          "ts": pa.array(ts, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                          "v": pa.array(rng.random(n))})
        pq.write_table(table, os.path.join(directory, f"part-{f:04d}.parquet"))
    open(os.path.join(directory, "_SUCCESS"), "w").close()


def timed(query) -> float:
    t0 = time.perf_counter()
    query.awaitTermination()
    if query.exception():
        raise query.exception()
    return time.perf_counter() - t0


def run_native(spark, directory: str, expr: str, max_files: int, delay: str, chk: str) -> float:
    from pyspark.sql import functions as F
    schema = "k long, ts timestamp, v double"
    df = (spark.readStream.schema(schema).option("maxFilesPerTrigger", max_files).parquet(directory)
          .withWatermark("ts", delay).groupBy(F.expr(expr).alias("w"), "k")
          .agg(F.sum("v").alias("total"), F.count("*").alias("n")))
    q = df.writeStream.format("noop").outputMode("append").option("checkpointLocation", chk) \
        .trigger(availableNow=True).start()
    return timed(q)


def run_ours(spark, directory: str, window: str, max_files: int, delay: str, chk: str, state: str,
             shards: int) -> float:
    df = (spark.readStream.format("windowed").option("source", "parquet").option("path", directory)
          .option("timestampColumn", "ts").option("keyColumns", "k").option("window", window)
          .option("aggregate", "sum(v) AS total, count(*) AS n").option("watermark", f"bounded({delay})")
          .option("maxFilesPerTrigger", str(max_files)).option("shards", str(shards))
          .option("stateLocation", state).load())
    q = df.writeStream.format("noop").option("checkpointLocation", chk).trigger(availableNow=True).start()
    return timed(q)


def run_nothing(spark, batches: int, shards: int, chk: str) -> float:
    """A Python streaming source that reads nothing: ``batches`` micro-batches of one row per
    partition (``shards`` partitions), availableNow, noop sink — what Spark's micro-batch
    machinery costs any Python DataSource, the lower bound for ours."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadAllAvailable, SupportsTriggerAvailableNow

    class NothingReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def initialOffset(self):
            return {"batch": 0}

        def getDefaultReadLimit(self):
            return ReadAllAvailable()

        def prepareForTriggerAvailableNow(self):
            pass

        def latestOffset(self, start, limit):
            return {"batch": min(start["batch"] + 1, batches)}

        def partitions(self, start, end):
            return [InputPartition(i) for i in range(shards)]

        def read(self, partition):
            yield (partition.value,)

    class Nothing(DataSource):
        @classmethod
        def name(cls):
            return "nothing"

        def schema(self):
            return "shard int"

        def streamReader(self, schema):
            return NothingReader()

    spark.dataSource.register(Nothing)
    q = spark.readStream.format("nothing").load().writeStream.format("noop") \
        .option("checkpointLocation", chk).trigger(availableNow=True).start()
    return timed(q)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=4_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--disorder", type=int, default=5, help="max out-of-orderness, seconds")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--dir", default=os.path.join("out", "bench"))
    ap.add_argument("--only", default=None, help="tumbling | sliding | session")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    events_dir = os.path.join(args.dir, f"events-{args.events}-{args.keys}-{args.files}")
    generate(events_dir, args.events, args.keys, args.files, args.disorder)
    from pyspark.sql import SparkSession

    import datasource
    spark = (SparkSession.builder.master("local[2]").appName("spark-windowing-bench")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "4g")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    datasource.register(spark)
    max_files = max(1, args.files // args.batches)
    delay = f"{args.disorder} seconds"
    # Warm-up (not timed): one small query per engine, so neither pays JVM/Python-worker start-up
    # inside a measurement (steady state, as a long-running stream sees it).
    warm_dir = os.path.join(args.dir, "warmup")
    generate(warm_dir, 20_000, 100, 2, args.disorder)
    warm = tempfile.mkdtemp(prefix="bench-warmup-")
    run_native(spark, warm_dir, "window(ts, '1 minute')", 1, delay, os.path.join(warm, "n"))
    run_ours(spark, warm_dir, "tumbling(1 minute)", 1, delay, os.path.join(warm, "o"), os.path.join(warm, "s"),
             args.shards)
    shutil.rmtree(warm, ignore_errors=True)
    print(f"events={args.events:,} keys={args.keys:,} files={args.files} maxFilesPerTrigger={max_files} "
          f"(~{args.batches} micro-batches) shards={args.shards} local[2], {os.cpu_count()} cores")
    # The floor: the same queries over files of one event each (same files/batches): what Spark's
    # micro-batch machinery costs each engine, whatever the data.
    floor_dir = os.path.join(args.dir, f"floor-{args.files}")
    generate(floor_dir, args.files, 1, args.files, 0)
    work = tempfile.mkdtemp(prefix="bench-floor-")
    floor_native = run_native(spark, floor_dir, "window(ts, '1 minute')", max_files, delay, os.path.join(work, "n"))
    floor_ours = run_ours(spark, floor_dir, "tumbling(1 minute)", max_files, delay, os.path.join(work, "o"),
                          os.path.join(work, "s"), args.shards)
    run_nothing(spark, args.batches, args.shards, os.path.join(work, "w"))  # warm-up
    floor_nothing = run_nothing(spark, args.batches, args.shards, os.path.join(work, "x"))
    shutil.rmtree(work, ignore_errors=True)
    print(f"floor (1 event per file, same batches): spark native {floor_native:.2f} s, "
          f"spark-windowing {floor_ours:.2f} s; a Python source reading nothing, {args.batches} "
          f"batches: {floor_nothing:.2f} s")
    print(f"{'window':10s} {'engine':16s} {'seconds':>8s} {'M events/s':>11s}")
    for name, (ours_window, native_expr) in CASES.items():
        if args.only and args.only != name:
            continue
        work = tempfile.mkdtemp(prefix=f"bench-{name}-")
        native = run_native(spark, events_dir, native_expr, max_files, delay, os.path.join(work, "n"))
        ours = run_ours(spark, events_dir, ours_window, max_files, delay, os.path.join(work, "o"),
                        os.path.join(work, "state"), args.shards)
        print(f"{name:10s} {'spark native':16s} {native:8.2f} {args.events / native / 1e6:11.3f}")
        print(f"{name:10s} {'spark-windowing':16s} {ours:8.2f} {args.events / ours / 1e6:11.3f}   "
              f"speedup {native / ours:.2f}x")
        shutil.rmtree(work, ignore_errors=True)
    spark.stop()


if __name__ == "__main__":
    main()
