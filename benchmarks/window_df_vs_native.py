"""``spark_windowing.window(df)`` vs ``format("windowed")`` vs Spark's native windowed aggregation:
same files, same machine, same run.

    python benchmarks/window_df_vs_native.py --events 20000000 --keys 100000      # the issue's size, 3 runs
    python benchmarks/window_df_vs_native.py --events 200000 --keys 1000 --runs 1  # a quick check

Generates parquet event files once (``benchmarks/spark_vs_native.generate``), then in one local[2]
Spark session times, per window kind (tumbling, sliding, session), ``--runs`` times each, all
``availableNow`` with the same ``maxFilesPerTrigger`` into the ``noop`` sink, after one untimed
warm-up query per engine:

* ``native``: ``withWatermark(...).groupBy(window(...) | session_window(...), k).agg(sum, count)``,
  append mode, with the default (HDFS-backed) state store;
* ``rocksdb``: the same with ``RocksDBStateStoreProvider``;
* ``ours``: ``readStream.format("windowed")`` (Default trigger, ``--shards`` shards);
* ``window_df``: Spark's parquet file source → ``spark_windowing.window(df, ...)`` with the same
  options (``--shards`` key shards: ``repartition`` by shard, ``mapInArrow``);
* ``map_floor``: that route doing nothing: the same source and shard column, ``repartition``,
  ``mapInArrow`` with a function that only reads its Arrow batches (the route's own cost).

Prints each run with the windows it emitted (its sink's rows in Spark's progress: one pane per
window with the default trigger), then per engine min / median / max seconds and µs per event, and
the ratios window_df / ours and native / window_df per run (min / median / max). Exits non-zero
when the engines' window counts differ: then their times do not compare. (At 20 M events native's
session count is one lower: Spark's watermark is in milliseconds, ours to the microsecond, and
one session of these files ends between the two final watermarks: docs/performance.md.) Not part
of the test suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from spark_vs_native import (CASES, ROCKSDB, add_run_args, collect_garbage, generate, run_native,  # noqa: E402
                             run_ours, timed)

ENGINES = ("native", "rocksdb", "ours", "window_df", "map_floor")


def run_window_df(spark, directory: str, window: str, max_files: int, delay: str, chk: str, shards: int) -> float:
    """Spark's file source over the same files, windowed by ``spark_windowing.window`` (state under
    ``chk``'s ``state``: the run's temporary directory, removed after it)."""
    import spark_windowing
    df = spark.readStream.schema("k long, ts timestamp, v double").option("maxFilesPerTrigger", max_files) \
        .parquet(directory)
    panes = spark_windowing.window(df, timestampColumn="ts", keyColumns="k", window=window,
                                   aggregate="sum(v) AS total, count(*) AS n", watermark=f"bounded({delay})",
                                   shards=shards, stateLocation=chk + "-state")
    q = panes.writeStream.format("noop").option("checkpointLocation", chk).trigger(availableNow=True).start()
    return timed(q)


def _drain(batches):
    """The route's floor: read every Arrow batch of the shard, keep and emit nothing (with the
    prompt ACKs ``window(df)``'s tasks use, ``spark_windowing.datasource.loopback``)."""
    from spark_windowing.datasource import loopback
    for _ in loopback.acked(batches):
        pass
    return iter(())


def run_map_floor(spark, directory: str, max_files: int, chk: str, shards: int) -> float:
    """``window(df)``'s route doing nothing: the same source, the same shard column and
    ``repartition``, ``mapInArrow`` with a function that only reads its batches."""
    from pyspark.sql import functions as F

    from spark_windowing.datasource.source.sharding import shard_labels
    df = spark.readStream.schema("k long, ts timestamp, v double").option("maxFilesPerTrigger", max_files) \
        .parquet(directory)
    labels = F.array(*[F.lit(v) for v in shard_labels(shards)])
    staged = df.withColumn("__part", F.element_at(labels, F.pmod(F.xxhash64("k"), F.lit(shards)).cast("int") + 1))
    out = staged.repartition(shards, "__part").mapInArrow(_drain, "k long")
    q = out.writeStream.format("noop").option("checkpointLocation", chk).trigger(availableNow=True).start()
    return timed(q)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    events_dir = os.path.join(args.dir, f"events-{args.events}-{args.keys}-{args.files}")
    generate(events_dir, args.events, args.keys, args.files, args.disorder)
    from pyspark.sql import SparkSession

    import spark_windowing
    spark = (SparkSession.builder.master("local[2]").appName("spark-windowing-bench-window-df")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", str(args.shards))
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", args.driver_memory)
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_windowing.register(spark)
    max_files = max(1, args.files // args.batches)
    delay = f"{args.disorder} seconds"
    engines = [e for e in args.engines.split(",") if e]
    runners = {
        "native": lambda exp, work: run_native(spark, events_dir, exp[1], max_files, delay, os.path.join(work, "n")),
        "rocksdb": lambda exp, work: run_native(spark, events_dir, exp[1], max_files, delay, os.path.join(work, "r"),
                                                ROCKSDB),
        "ours": lambda exp, work: run_ours(spark, events_dir, exp[0], max_files, delay, os.path.join(work, "o"),
                                           os.path.join(work, "state"), args.shards),
        "window_df": lambda exp, work: run_window_df(spark, events_dir, exp[0], max_files, delay,
                                                     os.path.join(work, "w"), args.shards),
        "map_floor": lambda exp, work: run_map_floor(spark, events_dir, max_files, os.path.join(work, "f"),
                                                     args.shards),
    }
    warm_dir = os.path.join(args.dir, "warmup")
    generate(warm_dir, 20_000, 100, 2, args.disorder)
    for engine in engines:  # untimed: JVM and Python worker start-up outside the measurements
        work = tempfile.mkdtemp(prefix="bench-warmup-")
        runners_warm = {
            "native": lambda: run_native(spark, warm_dir, CASES["tumbling"][1], 1, delay, os.path.join(work, "n")),
            "rocksdb": lambda: run_native(spark, warm_dir, CASES["tumbling"][1], 1, delay, os.path.join(work, "r"),
                                          ROCKSDB),
            "ours": lambda: run_ours(spark, warm_dir, CASES["tumbling"][0], 1, delay, os.path.join(work, "o"),
                                     os.path.join(work, "s"), args.shards),
            "window_df": lambda: run_window_df(spark, warm_dir, CASES["tumbling"][0], 1, delay,
                                               os.path.join(work, "w"), args.shards),
            "map_floor": lambda: run_map_floor(spark, warm_dir, 1, os.path.join(work, "f"), args.shards),
        }
        runners_warm[engine]()
        shutil.rmtree(work, ignore_errors=True)
    print(f"events={args.events:,} keys={args.keys:,} files={args.files} maxFilesPerTrigger={max_files} "
          f"(~{args.batches} micro-batches) shards={args.shards} runs={args.runs} local[2], {os.cpu_count()} cores, "
          f"driver {args.driver_memory}", flush=True)
    unequal = False
    for name, exp in CASES.items():
        if args.only and args.only != name:
            continue
        times: dict[str, list[float]] = {e: [] for e in engines}
        windows: dict[str, set] = {}
        for run in range(args.runs):
            for engine in engines:
                work = tempfile.mkdtemp(prefix=f"bench-{name}-{engine}-")
                collect_garbage(spark)
                times[engine].append(runners[engine](exp, work))
                shutil.rmtree(work, ignore_errors=True)
                rows = getattr(times[engine][-1], "rows", None)
                if engine != "map_floor":
                    windows.setdefault(engine, set()).add(rows)
                print(f"{name:9s} run {run + 1} {engine:9s} {times[engine][-1]:8.2f} s  windows {rows}", flush=True)
        print_summary(name, times, args.events)
        unequal = unequal or not print_windows(name, windows)
    spark.stop()
    if unequal:
        raise SystemExit("the engines emitted different window counts: their times do not compare (see above)")


def print_windows(name: str, windows: dict[str, set]) -> bool:
    """Print each engine's window count (panes with the default trigger: one per window); False
    when they differ, between engines or runs, or one is unknown."""
    counts = {engine: sorted(c for c in found if c is not None) for engine, found in windows.items()}
    print(f"{name}: windows emitted " + ", ".join(f"{e} {'/'.join(map(str, c)) or '?'}" for e, c in counts.items()))
    distinct = {c for found in windows.values() for c in found}
    if len(distinct) != 1 or None in distinct:
        print(f"{name}: WINDOW COUNTS DIFFER (or are unknown): the comparison of times does not hold")
        return False
    return True


def print_summary(name: str, times: dict[str, list[float]], events: int) -> None:
    def mmm(values: list[float], fmt: str) -> str:
        return " / ".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))

    print(f"{name}: seconds min / median / max, µs per event (median)")
    for engine, values in times.items():
        print(f"  {engine:9s} {mmm(values, '8.2f')}   {statistics.median(values) / events * 1e6:6.3f} µs/event")
    if "map_floor" in times and "window_df" in times:
        print(f"  map_floor / window_df (per run, min / median / max): "
              f"{mmm([f / w for f, w in zip(times['map_floor'], times['window_df'])], '.2f')}x (the route's own share)")
    if "window_df" in times:
        if "ours" in times:
            print(f"  window_df / ours (per run, min / median / max): "
                  f"{mmm([w / o for w, o in zip(times['window_df'], times['ours'])], '.2f')}x (target <= 1.2)")
        for engine in ("native", "rocksdb"):
            if engine in times:
                ratios = mmm([n / w for n, w in zip(times[engine], times['window_df'])], '.2f')
                print(f"  {engine} / window_df (per run, min / median / max): {ratios}x "
                      "(> 1: window_df ahead; target >= 1.5)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_args(ap, events=20_000_000, keys=100_000)
    ap.add_argument("--engines", default=",".join(ENGINES), help="any of " + ",".join(ENGINES))
    ap.add_argument("--driver-memory", default="6g")
    return ap.parse_args(argv)


if __name__ == "__main__":
    main()
