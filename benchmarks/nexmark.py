"""NEXMark's windowed queries: spark-windowing vs Spark's native Structured Streaming, same files,
same micro-batches, same run.

    python benchmarks/nexmark.py                                   # 1 M events, 100 batches, 1 run
    python benchmarks/nexmark.py --events 10000000 --batches 100 --warmups 0
    python benchmarks/nexmark.py --only q11 --events 300000
    python benchmarks/nexmark.py --execution driver --shards 1    # our operator on the driver
    python benchmarks/nexmark.py --only q5-count --only q7-max        # q5's and q7's first stage alone
    python benchmarks/nexmark.py --only q5-two-stage                  # q5 as two windowings
    .venv-delta/bin/python benchmarks/nexmark.py --sink table     # results into tables (native: Delta)

Writes NEXMark's bids once (``spark_windowing.datasource.upstreams.nexmark_events``, Beam's generator rules; ``--events``
stream positions, 46 of 50 of them bids) as ``--batches`` parquet files under ``--dir``, then in
one local[2] session times, per query, ``--runs`` times, after ``--warmups`` untimed runs (default 1) per engine:

* ``ours``: ``readStream.format("windowed")`` over the files (``source=parquet``,
  ``maxFilesPerTrigger=1``) into the ``noop`` sink;
* ``native``: Spark's file source over the same files, ``withWatermark`` and
  ``groupBy(window | session_window)`` in append mode into ``noop``, ``maxFilesPerTrigger=1``.

The queries (windows as Flink's NEXMark SQL defines them), ``q5``, ``q7`` and ``q11`` by default:

* ``q5``: per sliding window of 10 s every 2 s, the auctions with the most bids. Ours: one
  windowing, ``aggregate="most_frequent(1, auction)"`` (keyless; ties kept, each with its count).
  Native: the counts per auction, then a second streaming aggregation per window (Spark chains
  stateful operators in append mode), ``max_by(auction, num)``: one auction per window, ties
  dropped (keeping them would need a join of the counts with their maximum, which a streaming
  query cannot do after an aggregation in append mode);
* ``q5-two-stage``: q5 as Beam and Flink write it, the counts per auction then the argmax. Ours:
  one query, ``window(df, window="inherit", aggregate="max_rows(num, auction)", shards="1")`` over
  the counts' ``format("windowed")`` (ties kept; one shard: a keyless stage, which with
  ``--execution driver`` runs in the first's task, but in a Python worker of its own); native as
  for q5;
* ``q7``: per tumbling 10 s window, the bids at the highest price. Ours:
  ``max_rows(price, auction, bidder, date_time)`` (ties kept). Native: ``max(struct(price,
  auction, bidder, date_time))``, one bid per window, ties dropped (the bids at the maximum
  need the same join);
* ``q11``: bids per bidder in session windows with a 10 s gap;
* ``q5-count``, ``q7-max``: q5's counts and q7's maximum price alone (the first stage).

The session runs with Spark's default ``spark.serializer``, Java, as a README reader's does
(``--serializer kryo`` for Kryo), both engines: on the driver route Spark keeps each batch's panes
in its block manager serialized with it, and Java serialization costs ~2 µs a row (NEXMark q5's
counts: 135 against 73 ms a batch). Ours runs with the reader's defaults (``execution=auto``)
unless ``--execution`` / ``--shards`` say otherwise.

While each query runs, a sampler reads the resident memory of the JVM and every Python process
under it every 0.2 s; the peak of their sum is printed per engine ("peak RSS").

With ``--sink table`` each engine writes its result where a user would keep it, and the time
includes it: ours into the pane sink (``writeStream.format("windowed")``: the Delta tables
``triggers``, ``retractions`` and ``current``, exactly once per batch); native into a Delta table
through delta-spark when the ``delta-spark`` package is installed (the second virtualenv,
``.venv-delta``, has it; its JVM package comes through ``spark.jars.packages``), else a Parquet
file sink (append mode); the run says which.

q8 (a join of windows) and q12 (processing-time windows) run ours alone (``--only q8 --only
q12``; the reader generates the events, ``source=nexmark``): Spark's native streaming cannot join
two windowed aggregations in append mode in one query, nor window by processing time with a
watermark. Prints per query and engine min / median / max seconds, events
per second and per core (2 cores), and native / ours. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

import pyarrow.parquet as pq

from _procs import jvm_and_python_workers, rss
from _session import SERIALIZERS, add_serializer_arg

Q5_COUNTS = {"window": "sliding(10 seconds, 2 seconds)", "keyColumns": "auction", "aggregate": "count(*) AS num"}
Q5_NATIVE_STAGE2 = (("window",), ("max_by(auction, num) AS hot", "max(num) AS num"))
QUERIES = {  # name: (our options, our second stage (window(df) options) or None,
    #                 native grouping, native aggregate, native second stage (grouping, aggregate) or None)
    "q5": ({"window": "sliding(10 seconds, 2 seconds)", "aggregate": "most_frequent(1, auction) AS hot"}, None,
           ("window(date_time, '10 seconds', '2 seconds')", "auction"), "count(*) AS num", Q5_NATIVE_STAGE2),
    "q5-two-stage": (Q5_COUNTS, {"window": "inherit", "aggregate": "max_rows(num, auction) AS hot", "shards": "1"},
                     ("window(date_time, '10 seconds', '2 seconds')", "auction"), "count(*) AS num", Q5_NATIVE_STAGE2),
    "q7": ({"window": "tumbling(10 seconds)", "aggregate": "max_rows(price, auction, bidder, date_time) AS top"}, None,
           ("window(date_time, '10 seconds')",), "max(struct(price, auction, bidder, date_time)) AS top", None),
    "q11": ({"window": "session(10 seconds)", "keyColumns": "bidder", "aggregate": "count(*) AS bids"}, None,
            ("session_window(date_time, '10 seconds')", "bidder"), "count(*) AS bids", None),
    "q5-count": (Q5_COUNTS, None, ("window(date_time, '10 seconds', '2 seconds')", "auction"), "count(*) AS num", None),
    "q7-max": ({"window": "tumbling(10 seconds)", "aggregate": "max(price) AS max_price"}, None,
               ("window(date_time, '10 seconds')",), "max(price) AS max_price", None),
}
DEFAULT = ("q5", "q7", "q11")
#: Queries Spark's native streaming cannot write as one query (the docstring): ours alone, over
#: ``source=nexmark`` generating the same events in the reader (the kinds they read).
OURS_ONLY = {
    "q8": {"nexmarkEvents": "person", "keyColumns": "id", "timestampColumn": "date_time", "source2": "nexmark",
           "nexmarkEvents2": "auction", "keyColumns2": "seller", "timestampColumn2": "date_time", "join": "inner",
           "window": "tumbling(10 seconds)", "aggregate": "first(name) AS name", "aggregate2": "count(*) AS auctions"},
    "q12": {"nexmarkEvents": "bid", "keyColumns": "bidder", "window": "tumbling(10 seconds)",
            "aggregate": "count(*) AS bids"},
}
SCHEMA = "auction long, bidder long, price long, date_time timestamp, extra string"


def write_bids(directory: str, events: int, batches: int) -> int:
    """NEXMark bids of ``events`` stream positions in ``batches`` parquet files; returns the bids."""
    from spark_windowing.datasource.upstreams.nexmark_events import NexmarkConfig, generate
    marker = os.path.join(directory, f"_SUCCESS_{events}_{batches}")
    if os.path.exists(marker):
        return sum(pq.ParquetFile(os.path.join(directory, f)).metadata.num_rows
                   for f in os.listdir(directory) if f.endswith(".parquet"))
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    g, per, total = NexmarkConfig(total_events=events), -(-events // batches), 0
    for b in range(batches):
        table = generate(g, b * per, min(events, (b + 1) * per), "bid")
        path = os.path.join(directory, f"part-{b:05d}.parquet")
        pq.write_table(table, path)
        os.utime(path, ns=(1_600_000_000_000_000_000 + b * 10**9,) * 2)   # file order = stream order
        total += table.num_rows
    open(marker, "w").close()
    return total


def native_table_format() -> str:
    """``delta`` when delta-spark is installed (its session settings: ``session``), else ``parquet``."""
    import importlib.util
    return "delta" if importlib.util.find_spec("delta") is not None else "parquet"


def run_ours(spark, directory: str, options: dict, stage2: dict | None, work: str, sink: str = "noop") -> float:
    reader = (spark.readStream.format("windowed").option("source", "parquet").option("path", directory)
              .option("schema", SCHEMA).option("timestampColumn", "date_time").option("maxFilesPerTrigger", "1")
              .option("endOfInput", "fire").option("stateLocation", os.path.join(work, "state")))
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load()
    if stage2 is not None:
        import spark_windowing
        df = spark_windowing.window(df, **stage2, stateLocation=os.path.join(work, "state2"))
    writer = df.writeStream
    writer = writer.format("noop") if sink == "noop" else writer.format("windowed").option("path", os.path.join(work, "panes"))
    q = writer.option("checkpointLocation", os.path.join(work, "chk")).trigger(availableNow=True).start()
    return _timed(q)


def run_native(spark, directory: str, grouping: tuple, aggregate: str, stage2: tuple | None, work: str,
               sink: str = "noop") -> float:
    from pyspark.sql import functions as F
    df = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(directory)
          .withWatermark("date_time", "0 seconds")
          .groupBy(*[F.expr(g) for g in grouping]).agg(F.expr(aggregate)))
    if stage2 is not None:
        df = df.groupBy(*stage2[0]).agg(*[F.expr(a) for a in stage2[1]])
    if sink == "noop":
        writer = df.writeStream.format("noop")
    else:   # a table: Delta (delta-spark) or Parquet; window structs flattened for Parquet readers
        cols = [F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end")] \
            if "window" in df.columns else [F.col("session_window.start").alias("window_start"),
                                            F.col("session_window.end").alias("window_end")]
        rest = [c for c in df.columns if c not in ("window", "session_window")]
        writer = df.select(*cols, *rest).writeStream.format(native_table_format()) \
            .option("path", os.path.join(work, "table"))
    q = writer.outputMode("append").option("checkpointLocation", os.path.join(work, "chk")) \
        .trigger(availableNow=True).start()
    return _timed(q)


def _timed(query) -> float:
    t0 = time.perf_counter()
    query.awaitTermination()
    if query.exception():
        raise query.exception()
    return time.perf_counter() - t0


class PeakMemory:
    """The largest sum of resident memory of the JVM and the Python processes under it, sampled
    every ``every`` seconds while the ``with`` block runs (``peak`` bytes)."""

    def __init__(self, every: float = 0.2) -> None:
        self.every, self.peak, self._stop = every, 0, threading.Event()

    def _run(self) -> None:
        while not self._stop.is_set():
            jvms, workers = jvm_and_python_workers()
            self.peak = max(self.peak, sum(rss(p) for p in jvms + workers))
            self._stop.wait(self.every)

    def __enter__(self) -> "PeakMemory":
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="NEXMark stream positions (46/50 are bids)")
    ap.add_argument("--batches", type=int, default=100, help="files = micro-batches")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--warmups", type=int, default=1, help="untimed runs per query and engine first (10 M: 0)")
    ap.add_argument("--only", choices=sorted([*QUERIES, *OURS_ONLY]), action="append",
                    help=f"default: {', '.join(DEFAULT)}; q8 and q12: ours alone")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "spark-windowing-nexmark"))
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--execution", choices=("auto", "executors", "driver"), default="auto",
                    help="our reader's execution option: driver steps in the driver's planning process")
    ap.add_argument("--shards", type=int, help="our reader's shards option (default: the reader's, 2)")
    add_serializer_arg(ap)
    ap.add_argument("--sink", choices=("noop", "table"), default="noop",
                    help="noop: the windowing alone; table: each engine writes its result to tables (docstring)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark conf for the session both engines share (a tuning: report it as such)")
    args = ap.parse_args()

    from pyspark.sql import SparkSession
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # Spark's Python workers: this venv
    bids = write_bids(os.path.join(args.dir, "bids"), args.events, args.batches)
    builder = (SparkSession.builder.master("local[2]").config("spark.driver.memory", args.driver_memory)
               .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC").config("spark.ui.showConsoleProgress", "false")
               .config("spark.serializer", SERIALIZERS[args.serializer]))
    for conf in args.conf:
        builder = builder.config(*conf.split("=", 1))
    if args.sink == "table" and native_table_format() == "delta":
        builder = _with_delta(builder)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    import pyspark
    into = ("the noop sink" if args.sink == "noop" else
            f"tables: ours the pane sink's Delta tables, native {native_table_format()} (pyspark {pyspark.__version__})")
    print(f"{bids:,} bids of {args.events:,} events in {args.batches} files; local[2]; results into {into}; "
          f"ours: {_placement(args)}; spark.serializer: {args.serializer}"
          + "".join(f"; --conf {c}" for c in args.conf))
    for name in args.only or DEFAULT:
        if name in OURS_ONLY:
            run_ours_only(spark, name, args)
            continue
        ours_opts, ours2, grouping, aggregate, native2 = QUERIES[name]
        ours_opts = {**ours_opts, **_placement(args)}
        times: dict[str, list[float]] = {"ours": [], "native": []}
        peaks: dict[str, list[int]] = {"ours": [], "native": []}
        for run in range(1 - args.warmups, args.runs + 1):   # runs < 1: untimed warm-ups
            for engine in ("ours", "native"):
                work = tempfile.mkdtemp(prefix=f"nexmark-{name}-{engine}-", dir=args.dir)
                gc.collect()
                spark.sparkContext._jvm.java.lang.System.gc()
                with PeakMemory() as memory:
                    seconds = run_ours(spark, os.path.join(args.dir, "bids"), ours_opts, ours2, work, args.sink) \
                        if engine == "ours" else \
                        run_native(spark, os.path.join(args.dir, "bids"), grouping, aggregate, native2, work, args.sink)
                shutil.rmtree(work, ignore_errors=True)
                if run > 0:
                    times[engine].append(seconds)
                    peaks[engine].append(memory.peak)
                    print(f"  {name} run {run} {engine}: {seconds:.2f} s, peak RSS {memory.peak / 2**20:,.0f} MB")
        for engine, ts in times.items():
            med = statistics.median(ts)
            print(f"{name} {engine:6s} min / median / max {min(ts):.2f} / {med:.2f} / {max(ts):.2f} s | "
                  f"{args.events / med:,.0f} events/s, {args.events / med / 2:,.0f} per core "
                  f"({bids / med:,.0f} bids/s) | peak RSS {max(peaks[engine]) / 2**20:,.0f} MB")
        print(f"{name} native / ours (medians): {statistics.median(times['native']) / statistics.median(times['ours']):.2f}x")


def _placement(args) -> dict[str, str]:
    """Our reader's ``execution`` and ``shards`` options from the command line."""
    return {"execution": args.execution, **({"shards": str(args.shards)} if args.shards else {})}


def run_ours_only(spark, name: str, args) -> None:
    """``name`` of ``OURS_ONLY``, ``--runs`` times after ``--warmups``: the reader generates the
    events (``source=nexmark``, ``--batches`` micro-batches) into the ``noop`` sink."""
    times, peaks = [], []
    for run in range(1 - args.warmups, args.runs + 1):
        work = tempfile.mkdtemp(prefix=f"nexmark-{name}-", dir=args.dir)
        reader = (spark.readStream.format("windowed").option("source", "nexmark")
                  .option("totalEvents", str(args.events)).option("eventsPerBatch", str(-(-args.events // args.batches)))
                  .option("endOfInput", "fire").option("stateLocation", os.path.join(work, "state")))
        for k, v in {**OURS_ONLY[name], **_placement(args)}.items():
            reader = reader.option(k, v)
        with PeakMemory() as memory:
            seconds = _timed(reader.load().writeStream.format("noop").option("checkpointLocation", os.path.join(work, "chk"))
                             .trigger(availableNow=True).start())
        shutil.rmtree(work, ignore_errors=True)
        if run > 0:
            times.append(seconds)
            peaks.append(memory.peak)
            print(f"  {name} run {run} ours: {seconds:.2f} s, peak RSS {memory.peak / 2**20:,.0f} MB")
    med = statistics.median(times)
    print(f"{name} ours   min / median / max {min(times):.2f} / {med:.2f} / {max(times):.2f} s | "
          f"{args.events / med:,.0f} events/s, {args.events / med / 2:,.0f} per core | peak RSS "
          f"{max(peaks) / 2**20:,.0f} MB | native: not one query (see the docstring)")


def _with_delta(builder):
    """Delta's JVM package (from Maven Central, cached) and its SQL extension and catalog."""
    from importlib.metadata import version

    import pyspark

    from spark_windowing.tools.packages import jar_confs
    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    for k, v in jar_confs(f"io.delta:delta-spark_{spark_minor}_2.13:{version('delta-spark')}").items():
        builder = builder.config(k, v)
    return (builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
            .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"))


if __name__ == "__main__":
    main()
