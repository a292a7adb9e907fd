"""spark-windowing vs Spark's native windowed aggregation: same files, same machine, same run.

    python benchmarks/spark_vs_native.py                          # 4 M events, 10 k keys, 10 batches, 3 runs
    python benchmarks/spark_vs_native.py --events 20000000 --keys 100000
    python benchmarks/spark_vs_native.py --events 400000 --only tumbling --runs 1
    python benchmarks/spark_vs_native.py --only tumbling --runs 1 --engines ours --profile out/profile

Generates parquet event files once (``--events``, ``--keys``, ``--disorder``) under ``--dir``, then
in one local[2] Spark session (``--driver-memory``, 6g: Spark native stalls in full GCs at 20 M
events with Spark's default 1g) times, per window kind, ``--runs`` times each:

* ``native``: Spark's streaming query (``withWatermark(...).groupBy(window(...) |
  session_window(...), k).agg(sum, count)``, append mode) with the default (HDFS-backed) state
  store;
* ``rocksdb``: the same with ``RocksDBStateStoreProvider``, what Spark users pick at scale;
* ``ours``: ``readStream.format("windowed")`` with the Default trigger (the same ON_TIME panes,
  plus a late-data count), ``--shards`` shards;
* ``flink`` (not by default): Flink SQL's window TVFs over the same events, parallelism 2, in
  PyFlink's own process (``flink_sql.py``: all the events in one bounded job, after a warm-up job;
  ``scripts/setup_flink.sh`` makes ``.venv-flink`` and fetches Flink's Parquet format once);

all ``availableNow`` with the same ``maxFilesPerTrigger`` (≈10 micro-batches) into the ``noop``
sink, after one untimed warm-up query per engine; before every timed query the JVM and this
process collect their garbage, so no run pays for the heap the previous engine left. Also, once
per window kind: the operator alone (``WindowedOperator.step`` in this process, one thread, over
the same events as ``--batches`` bundles read into memory first: no Spark, no snapshots). Prints
each run, then per engine the
min / median / max seconds and µs per event, the speedups over the runs (min / median / max of
native / ours per run) and ours / operator alone; and the peak resident memory of each Python
worker during our query. ``--profile DIR`` samples the Python workers with py-spy during our
query and prints where their time goes (``pip install -e ".[bench]"``: py-spy). Not part of the
test suite.
"""

from __future__ import annotations

import argparse
import gc
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from _procs import jvm_and_python_workers, peak_rss, reset_peak, worker_daemons
from _session import SERIALIZERS, add_serializer_arg

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
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


class Timed(float):
    """A run's seconds, with ``rows``: the rows its sink took over all its micro-batches (Spark's
    progress, ``sink.numOutputRows``; None when Spark did not report them)."""
    rows: int | None = None


def timed(query) -> Timed:
    t0 = time.perf_counter()
    query.awaitTermination()
    if query.exception():
        raise query.exception()
    out = Timed(time.perf_counter() - t0)
    counts = [p.get("sink", {}).get("numOutputRows") for p in query.recentProgress]
    out.rows = None if not counts or any(c is None or c < 0 for c in counts) else sum(counts)
    return out


def collect_garbage(spark) -> None:
    """A full collection in the JVM (driver and executors: local mode) and in this process, so a
    timed query starts with the heap of neither the warm-up nor the other engine's last run."""
    gc.collect()
    spark.sparkContext._jvm.java.lang.System.gc()


def run_native(spark, directory: str, expr: str, max_files: int, delay: str, chk: str,
               provider: str = HDFS) -> float:
    """Spark's native windowed aggregation with the state store ``provider``."""
    from pyspark.sql import functions as F
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", provider)
    schema = "k long, ts timestamp, v double"
    df = (spark.readStream.schema(schema).option("maxFilesPerTrigger", max_files).parquet(directory)
          .withWatermark("ts", delay).groupBy(F.expr(expr).alias("w"), "k")
          .agg(F.sum("v").alias("total"), F.count("*").alias("n")))
    q = df.writeStream.format("noop").outputMode("append").option("checkpointLocation", chk) \
        .trigger(availableNow=True).start()
    try:
        return timed(q)
    finally:
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", HDFS)


def run_ours(spark, directory: str, window: str, max_files: int, delay: str, chk: str, state: str,
             shards: int, extra: dict | None = None) -> float:
    reader = (spark.readStream.format("windowed").option("source", "parquet").option("path", directory)
              .option("timestampColumn", "ts").option("keyColumns", "k").option("window", window)
              .option("aggregate", "sum(v) AS total, count(*) AS n").option("watermark", f"bounded({delay})")
              .option("maxFilesPerTrigger", str(max_files)).option("shards", str(shards))
              .option("stateLocation", state))
    for k, v in (extra or {}).items():
        reader = reader.option(k, v)
    q = reader.load().writeStream.format("noop").option("checkpointLocation", chk) \
        .trigger(availableNow=True).start()
    return timed(q)


def run_operator(directory: str, window: str, bundles: int, delay_s: int) -> tuple[float, int]:
    """The operator alone over the same events: ``bundles`` bundles of whole files (as the
    micro-batches), read into memory first (untimed), stepped in this process on one thread
    with the source's watermark rule (max event time of the bundles before, minus the delay).
    Returns (seconds, panes)."""
    import pyarrow.compute as pc

    from spark_windowing import OperatorSpec, WindowedOperator
    files = sorted(glob.glob(os.path.join(directory, "*.parquet")))
    per = -(-len(files) // bundles)
    tables = [pa.concat_tables([pq.read_table(f) for f in files[i:i + per]]) for i in range(0, len(files), per)]
    spec = OperatorSpec.from_options(window=window, aggregate="sum(v) AS total, count(*) AS n", key_columns="k",
                                     timestamp_column="ts")
    op = WindowedOperator(spec, tables[0].schema)
    wm, panes = None, 0
    t0 = time.perf_counter()
    for i, t in enumerate(tables):
        panes += op.step(t, watermark=wm, processing_time=i, batch_seq=i + 1).panes.num_rows
        max_ts = pc.max(t.column("ts")).cast(pa.int64()).as_py()
        wm = max(wm or max_ts - delay_s * SEC, max_ts - delay_s * SEC)
    panes += op.step(None, watermark=wm, processing_time=len(tables), batch_seq=len(tables) + 1).panes.num_rows
    return time.perf_counter() - t0, panes


class WorkerWatch:
    """Peak resident memory of each Spark Python worker during a query (``VmHWM``, reset at
    start), and, with ``profile_to``, py-spy samples of the worker daemon and its workers."""

    def __init__(self, profile_to: str | None = None) -> None:
        self.profile_to, self.spies = profile_to, []

    def __enter__(self) -> "WorkerWatch":
        _, workers = jvm_and_python_workers()
        for pid in workers:
            reset_peak(pid)
        if self.profile_to:  # every worker daemon (Spark starts one per worker module) and its forks
            self.spies = [subprocess.Popen(
                [_py_spy(), "record", "--pid", str(d), "--subprocesses", "--rate", "50", "--format", "raw",
                 "--nonblocking", "--output", f"{self.profile_to}.{i}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i, d in enumerate(worker_daemons())]
            time.sleep(1.0)  # py-spy attaches before the query starts
        return self

    def __exit__(self, *exc) -> None:
        _, workers = jvm_and_python_workers()
        self.peaks = sorted((peak_rss(pid) for pid in workers), reverse=True)
        for spy in self.spies:
            spy.send_signal(2)
            spy.wait(timeout=60)
        if self.profile_to:
            with open(self.profile_to, "w") as out:
                for part in sorted(glob.glob(f"{self.profile_to}.*")):
                    with open(part) as f:
                        out.write(f.read())
                    os.remove(part)


def profile_summary(raw_path: str, top: int = 18) -> str:
    """Where the sampled workers' time went: per function of this project (``spark_windowing``,
    its plugin included), the share of samples it was on the stack (inclusive) and on top (self);
    then the functions (any library) most often on top."""
    inclusive: Counter = Counter()
    own: Counter = Counter()
    total = 0
    with open(raw_path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not count.isdigit() or not stack:
                continue
            frames = [_frame(fr) for fr in stack.split(";") if fr]
            total += int(count)
            for fr in set(frames):
                inclusive[fr] += int(count)
            own[frames[-1]] += int(count)
    if not total:
        return "  (no samples)"
    lines = [f"  {total} samples; % of samples on the stack / on top:"]
    ours = [(fr, c) for fr, c in inclusive.most_common() if fr[1]]
    for fr, c in ours[:top]:
        lines.append(f"  {100 * c / total:5.1f}% {100 * own[fr] / total:5.1f}%  {fr[0]}")
    lines.append("  most often on top:")
    for fr, c in own.most_common(10):
        lines.append(f"  {100 * c / total:5.1f}%  {fr[0]}")
    return "\n".join(lines)


def _frame(text: str) -> tuple[str, bool]:
    """``func (path:line)`` -> ("func (file)", whether it is this project's code)."""
    func, _, loc = text.partition(" (")
    path = loc.rsplit(":", 1)[0]
    return f"{func} ({os.path.basename(path)})", path.startswith("spark_windowing/") or "/spark_windowing/" in path


def _py_spy() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return here if os.path.exists(here) else "py-spy"


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


ENGINES = ("native", "rocksdb", "ours")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    events_dir = os.path.join(args.dir, f"events-{args.events}-{args.keys}-{args.files}")
    generate(events_dir, args.events, args.keys, args.files, args.disorder)
    from pyspark.sql import SparkSession

    import spark_windowing
    spark = (SparkSession.builder.master("local[2]").appName("spark-windowing-bench")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", args.driver_memory)
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.serializer", SERIALIZERS[args.serializer]).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_windowing.register(spark)
    max_files = max(1, args.files // args.batches)
    delay = f"{args.disorder} seconds"
    engines = [e for e in args.engines.split(",") if e]
    ours_options = {"stateMemoryRows": str(args.state_memory_rows)} if args.state_memory_rows else {}
    ours_options["execution"] = args.execution
    warm_up(spark, args, delay)
    print(f"events={args.events:,} keys={args.keys:,} files={args.files} maxFilesPerTrigger={max_files} "
          f"(~{args.batches} micro-batches) shards={args.shards} runs={args.runs} local[2], {os.cpu_count()} cores, "
          f"driver {args.driver_memory}, spark.serializer {args.serializer}, {time.strftime('%Y-%m-%d')}", flush=True)
    print_floors(spark, args, max_files, delay)
    runners = {
        "native": lambda exp, work: run_native(spark, events_dir, exp[1], max_files, delay, os.path.join(work, "n")),
        "rocksdb": lambda exp, work: run_native(spark, events_dir, exp[1], max_files, delay, os.path.join(work, "r"),
                                                ROCKSDB),
        "ours": lambda exp, work: run_ours(spark, events_dir, exp[0], max_files, delay, os.path.join(work, "o"),
                                           os.path.join(work, "state"), args.shards, ours_options),
    }
    for name, exp in CASES.items():
        if args.only and args.only != name:
            continue
        times: dict[str, list[float]] = {e: [] for e in engines}
        peaks: list[int] = []
        if "flink" in engines:   # its own JVM, all runs at once (flink_sql.py)
            times["flink"] = run_flink(events_dir, name, args.runs, args.disorder)
            print(f"{name:9s} flink runs {', '.join(f'{t:.2f}' for t in times['flink'])} s", flush=True)
        for run in range(args.runs):
            for engine in (e for e in engines if e != "flink"):
                work = tempfile.mkdtemp(prefix=f"bench-{name}-{engine}-")
                profile = None
                if engine == "ours" and args.profile and run == 0:
                    os.makedirs(args.profile, exist_ok=True)
                    profile = os.path.join(args.profile, f"{name}.txt")
                collect_garbage(spark)
                with WorkerWatch(profile) as watch:
                    times[engine].append(runners[engine](exp, work))
                if engine == "ours":
                    peaks.append(max(watch.peaks, default=0))
                shutil.rmtree(work, ignore_errors=True)
                print(f"{name:9s} run {run + 1} {engine:8s} {times[engine][-1]:8.2f} s", flush=True)
        operator = None if args.no_operator else run_operator(events_dir, exp[0], args.batches, args.disorder)
        print_summary(name, times, operator, peaks, args.events)
        if args.profile and "ours" in engines:
            print(f"{name}: where the Python workers' time went during run 1 of ours (py-spy)")
            print(profile_summary(os.path.join(args.profile, f"{name}.txt")), flush=True)
    spark.stop()


def run_flink(events_dir: str, kind: str, runs: int, delay_s: int) -> list[float]:
    """Flink SQL's window TVF over the same events, ``runs`` timed jobs after a warm-up, in
    PyFlink's own process and JVM (``flink_sql.py``; ``scripts/setup_flink.sh`` makes its
    virtualenv and fetches Flink's Parquet jar, once)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    setup = subprocess.run(["bash", os.path.join(root, "scripts", "setup_flink.sh")], capture_output=True,
                           text=True, check=True)
    jars = [line for line in setup.stdout.splitlines() if line.endswith(".jar")]
    python = os.environ.get("SPARK_WINDOWING_FLINK_VENV", os.path.join(root, ".venv-flink")) + "/bin/python"
    out = subprocess.run([python, os.path.join(root, "benchmarks", "flink_sql.py"), "--dir", events_dir,
                          "--kind", kind, "--runs", str(runs), "--delay", str(delay_s),
                          *(arg for jar in jars for arg in ("--jar", jar))],
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"flink_sql.py failed:\n{out.stderr[-4000:]}")
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[7:])


def add_run_args(ap: argparse.ArgumentParser, *, events: int, keys: int) -> None:
    """The arguments every engine comparison over generated files takes (here and in
    ``window_df_vs_native.py``): the data, the micro-batches, the shards, which kinds, how many runs."""
    ap.add_argument("--events", type=int, default=events)
    ap.add_argument("--keys", type=int, default=keys)
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--disorder", type=int, default=5, help="max out-of-orderness, seconds")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--execution", choices=("auto", "executors", "driver"), default="auto",
                    help="ours: where the operator steps (the reader's execution option)")
    ap.add_argument("--dir", default=os.path.join("out", "bench"))
    ap.add_argument("--only", default=None, help="tumbling | sliding | session")
    ap.add_argument("--runs", type=int, default=3, help="timed runs of each engine per window kind")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_args(ap, events=4_000_000, keys=10_000)
    ap.add_argument("--engines", default=",".join(ENGINES), help="any of native,rocksdb,ours,flink (flink: PyFlink's SQL, see flink_sql.py)")
    ap.add_argument("--no-operator", action="store_true", help="skip the operator-alone timing")
    ap.add_argument("--state-memory-rows", type=int, default=0, help="ours: stateMemoryRows (spilling)")
    ap.add_argument("--driver-memory", default="6g")
    add_serializer_arg(ap)
    ap.add_argument("--profile", default=None, help="py-spy the Python workers during run 1 of ours; raw "
                                                    "stacks go to this directory")
    return ap.parse_args(argv)


def warm_up(spark, args: argparse.Namespace, delay: str) -> None:
    """One small untimed query per engine, so none pays JVM/Python-worker start-up inside a
    measurement (steady state, as a long-running stream sees it)."""
    warm_dir = os.path.join(args.dir, "warmup")
    generate(warm_dir, 20_000, 100, 2, args.disorder)
    warm = tempfile.mkdtemp(prefix="bench-warmup-")
    run_native(spark, warm_dir, "window(ts, '1 minute')", 1, delay, os.path.join(warm, "n"))
    run_native(spark, warm_dir, "window(ts, '1 minute')", 1, delay, os.path.join(warm, "r"), ROCKSDB)
    run_ours(spark, warm_dir, "tumbling(1 minute)", 1, delay, os.path.join(warm, "o"), os.path.join(warm, "s"),
             args.shards, {"execution": args.execution})
    shutil.rmtree(warm, ignore_errors=True)


def print_floors(spark, args: argparse.Namespace, max_files: int, delay: str) -> None:
    """The same queries over files of one event each (same files and batches): what Spark's
    micro-batch machinery costs each engine whatever the data; a Python source that reads
    nothing; and Spark's own file source reading the events into ``noop`` with no operator."""
    floor_dir = os.path.join(args.dir, f"floor-{args.files}")
    generate(floor_dir, args.files, 1, args.files, 0)
    work = tempfile.mkdtemp(prefix="bench-floor-")
    floor_native = run_native(spark, floor_dir, "window(ts, '1 minute')", max_files, delay, os.path.join(work, "n"))
    floor_ours = run_ours(spark, floor_dir, "tumbling(1 minute)", max_files, delay, os.path.join(work, "o"),
                          os.path.join(work, "s"), args.shards, {"execution": args.execution})
    run_nothing(spark, args.batches, args.shards, os.path.join(work, "w"))  # warm-up
    floor_nothing = run_nothing(spark, args.batches, args.shards, os.path.join(work, "x"))
    events_dir = os.path.join(args.dir, f"events-{args.events}-{args.keys}-{args.files}")
    floor_files = run_files_to_noop(spark, events_dir, max_files, os.path.join(work, "f"))
    shutil.rmtree(work, ignore_errors=True)
    print(f"floor (1 event per file, same batches): spark native {floor_native:.2f} s, "
          f"spark-windowing {floor_ours:.2f} s; a Python source reading nothing, {args.batches} "
          f"batches: {floor_nothing:.2f} s; Spark's file source reading the events into noop, no "
          f"windowing: {floor_files:.2f} s", flush=True)


def run_files_to_noop(spark, directory: str, max_files: int, chk: str) -> float:
    """Spark's own Parquet file source over the same files and micro-batches into ``noop``, no
    operator at all: the JVM's floor for these batches (offset and commit logs, a job a batch)."""
    q = (spark.readStream.schema("k long, ts timestamp, v double").option("maxFilesPerTrigger", max_files)
         .parquet(directory).writeStream.format("noop").option("checkpointLocation", chk)
         .trigger(availableNow=True).start())
    return timed(q)


def print_summary(name: str, times: dict[str, list[float]], operator: tuple[float, int] | None,
                  peaks: list[int], events: int) -> None:
    def mmm(values: list[float], fmt: str) -> str:
        return " / ".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))

    print(f"{name}: seconds min / median / max, µs per event (median)")
    for engine, values in times.items():
        print(f"  {engine:8s} {mmm(values, '8.2f')}   {statistics.median(values) / events * 1e6:6.3f} µs/event")
    if "ours" in times:
        for engine in ("native", "rocksdb", "flink"):
            if engine in times:
                ratios = [n / o for n, o in zip(times[engine], times["ours"])]
                print(f"  speedup over {engine:8s} (per run, min / median / max): {mmm(ratios, '.2f')}x")
        if operator is not None:
            secs, panes = operator
            ratios = [o / secs for o in times["ours"]]
            print(f"  operator alone (1 thread, no Spark): {secs:.2f} s, {panes:,} panes; end to end / operator "
                  f"alone: {mmm(ratios, '.2f')}")
        if peaks:
            print(f"  peak RSS of the largest Python worker during ours (per run): "
                  f"{', '.join(f'{p / 2**20:.0f} MB' for p in peaks)}")
    print(flush=True)


if __name__ == "__main__":
    main()
