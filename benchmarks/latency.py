"""Latency of ON_TIME panes in a live query, next to Spark's native append mode on the same input.

    python benchmarks/latency.py                        # 90 s per engine, 20 k events/s, 1 s trigger
    python benchmarks/latency.py --seconds 30 --engines ours
    python benchmarks/latency.py --rates 100000,200000,300000,400000 --seconds 40   # sustained throughput
    .venv-delta/bin/python benchmarks/latency.py --feed kafka      # the same through Kafka

A feeder thread hands one batch of ``--rate`` events ``k, ts, v`` to the feed every wall-clock
second; event time runs ``--event-speed`` times faster than the wall clock (up to 1 s out of
order), so windows keep closing. Every engine gets its own fresh input, fed live while its query
runs, with the same seed: the same event stream, second by second. The feed (``--feed``) is

* ``files`` (default): one parquet file per second into a directory (written under a hidden name,
  then renamed: readers never see a partial file);
* ``kafka``: a new topic per engine (``--partitions``, default 2) on a local broker started for
  the run (``scripts/kafka_broker.py``; or ``--bootstrap``), each second's events produced as
  JSON records ``{"k", "ts", "v"}`` (``ts`` in epoch microseconds) keyed by ``k`` and flushed.
  Both engines read from ``earliest``. Spark's Kafka connector (``spark-sql-kafka-0-10`` of the
  installed pyspark, fetched through ``spark.jars.packages``) is on Maven Central per Spark
  version and may not exist yet for the newest pyspark: run the kafka feed with the interpreter
  of the second virtualenv (pyspark 4.2, made by ``scripts/test.sh``), ``.venv-delta/bin/python``.

Each engine reads its input with ``trigger(processingTime="1 second")`` (``--trigger``):

* ``ours``: ``readStream.format("windowed")`` (``source=parquet`` or ``source=kafka``;
  ``tumbling(10 seconds)``, ``bounded(2 seconds)``, sum and count, 2 shards; keyed by ``k`` for
  files and by the record ``key`` for Kafka, as docs/kafka.md recommends: each shard then reads only
  its own partitions) into the pane sink (``writeStream.format("windowed")``: Delta tables
  ``triggers``, ``retractions``, ``current``);
* ``native``: (``format("kafka")`` -> ``from_json`` for Kafka)
  ``withWatermark("ts", "2 seconds").groupBy(window(ts, "10 seconds"), k).agg(sum, count)``,
  append mode, ``foreachBatch`` writing each batch's windows as parquet.

Latency of a window: from the start of the micro-batch whose watermark passed the window's end
(ours: the batch time in the pane row, chosen on the driver as the batch is planned; native: the
batch's ``timestamp`` in Spark's progress) to its pane being committed (ours: the commit of that
batch to ``current``, from the Delta log; native: ``foreachBatch`` returning after the write).
Prints p50 / p90 / p99 / max over the windows closed once the query runs steadily — from the first
micro-batch that starts at least ``--skip`` seconds in and takes no longer than one trigger interval
(so the catch-up after a slow cold start, when the feed ran ahead, is not counted) — in
seconds and in trigger intervals, and the mean cost of a micro-batch: Spark's own phases
(``durationMs``: offsets, planning, the batch, the commit log) and, for ours, a shard's mean
read / step / snapshot (over the shard reports).

Sustained throughput (``--rates R1,R2,...``): the same live run at each rate in turn, for each
engine, and whether the engine kept up with the trigger at that rate. It kept up when, over the
micro-batches that start ``--skip`` seconds or more after the query started, (1) the median
batch (``triggerExecution``) took no longer than the trigger interval and (2) the batches took in
at least 90% of the events the feed wrote in that time (a query that falls behind reads ever
more files per batch and its batches outgrow the trigger). Prints a line per rate and engine and,
last, the largest rate each engine kept up with. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import glob
import itertools
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
START_US = 1_767_225_600 * SEC  # event time of the first batch: 2026-01-01
UNIT_SECONDS = {"ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001, "second": 1.0, "seconds": 1.0,
                "minute": 60.0, "minutes": 60.0}
PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets", "triggerExecution")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=90.0, help="how long the feeder runs, per engine")
    ap.add_argument("--rate", type=int, default=20_000, help="events per second")
    ap.add_argument("--keys", type=int, default=1_000)
    ap.add_argument("--event-speed", type=float, default=10.0, help="event seconds per wall-clock second")
    ap.add_argument("--trigger", default="1 second")
    ap.add_argument("--skip", type=float, default=15.0,
                    help="wall seconds of warm-up not counted, at least (then until a batch keeps up)")
    ap.add_argument("--engines", default="ours,native")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--feed", choices=("files", "kafka"), default="files")
    ap.add_argument("--partitions", type=int, default=2, help="partitions of each engine's topic (kafka feed)")
    ap.add_argument("--bootstrap", default=None, help="an existing broker (kafka feed); default: start a local one")
    ap.add_argument("--rates", default=None,
                    help="sustained throughput: comma-separated events/s, each run in turn (see the docstring)")
    return ap.parse_args(argv)


def event_batches(rate: int, keys: int, event_speed: float, seed: int = 7):
    """Endless event batches ``k, ts, v``, one per wall-clock second: batch ``i`` holds ``rate``
    events whose event times lie in ``[i, i + 1) * event_speed`` seconds (in order, then each moved
    back by up to 1 s: out of order). The same seed gives the same stream to every engine and feed."""
    rng = np.random.default_rng(seed)
    step = int(event_speed * SEC)
    for i in itertools.count():
        ts = i * step + np.sort(rng.integers(0, step, rate)) - rng.integers(0, SEC, rate)
        yield pa.table({"k": rng.integers(0, keys, rate),
                        "ts": pa.array(ts + START_US, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                        "v": rng.random(rate)})


class Feeder(threading.Thread):
    """Hands one batch of ``event_batches`` per wall-clock second to ``sink(i, table)``, for
    ``seconds``."""

    def __init__(self, sink, args: argparse.Namespace) -> None:
        super().__init__(daemon=True)
        self.sink, self.args = sink, args

    def run(self) -> None:
        t0 = time.time()
        self.late = 0     # seconds whose batch the feeder handed over after that second had ended
        batches = event_batches(self.args.rate, self.args.keys, self.args.event_speed)
        for i, table in enumerate(batches):
            if time.time() - t0 >= self.args.seconds:
                break
            self.sink(i, table)
            self.late += time.time() > t0 + i + 1
            time.sleep(max(0.0, t0 + i + 1 - time.time()))


class FileFeed:
    """A directory that gets one parquet file per batch (written under a hidden name, then renamed:
    readers never see a partial file)."""

    key = "k"

    def __init__(self, work: str) -> None:
        self.directory = os.path.join(work, "in")
        os.makedirs(self.directory)

    def write(self, i: int, table: pa.Table) -> None:
        hidden = os.path.join(self.directory, f".part-{i:06d}.parquet")
        pq.write_table(table, hidden)
        os.replace(hidden, os.path.join(self.directory, f"part-{i:06d}.parquet"))

    def ours(self, reader):
        return reader.option("source", "parquet").option("path", self.directory)

    def native(self, spark):
        return spark.readStream.schema("k long, ts timestamp, v double").parquet(self.directory)


class KafkaFeed:
    """A new topic (``--partitions``) that gets each batch as JSON records ``{"k", "ts", "v"}``
    (``ts`` in epoch microseconds) keyed by ``k``, flushed at once so the rate stays steady. Ours
    keys windows by the record ``key`` (so each shard reads only its own partitions)."""

    key = "key"

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)
        self.bootstrap, self.topic = bootstrap, topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0,
                                  "queue.buffering.max.messages": 1_000_000})

    def write(self, i: int, table: pa.Table) -> None:
        ts = table.column("ts").cast(pa.int64()).to_pylist()
        for k, t, v in zip(table.column("k").to_pylist(), ts, table.column("v").to_pylist()):
            self.producer.produce(self.topic, key=b"%d" % k, value=b'{"k":%d,"ts":%d,"v":%r}' % (k, t, v))
        self.producer.flush(30)

    def ours(self, reader):
        return (reader.option("source", "kafka").option("kafka.bootstrap.servers", self.bootstrap)
                .option("subscribe", self.topic).option("startingOffsets", "earliest")
                .option("schema", "k long, ts long, v double").option("timestampUnit", "us"))

    def native(self, spark):
        from pyspark.sql import functions as F
        raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", self.bootstrap)
               .option("subscribe", self.topic).option("startingOffsets", "earliest").load())
        rows = raw.select(F.from_json(F.col("value").cast("string"), "k long, ts long, v double").alias("j"))
        return rows.select("j.k", F.timestamp_micros("j.ts").alias("ts"), "j.v")


def live(feed, args: argparse.Namespace, start_query) -> tuple[float, list[dict]]:
    """Feed for ``--seconds`` with the query ``start_query()`` starts running (1.5 s after the feed:
    the file source takes its schema from the first file), then 3 s more; stop it and return when it
    started and its progress."""
    feeder = Feeder(feed.write, args)
    feeder.start()
    time.sleep(1.5)
    q = start_query()
    started = time.time()
    feeder.join()
    time.sleep(3)
    q.stop()
    if feeder.late > 1:   # the rate was not what it says: the feeder itself could not write it
        print(f"  (the feeder was late {feeder.late} times: it wrote less than {args.rate:,} events/s)", flush=True)
    return started, [json.loads(p.json) for p in q.recentProgress]


def run_ours(spark, args: argparse.Namespace, work: str, feed) -> tuple[list[float], list[dict], list[dict]]:
    """Latencies (s) of the ON_TIME panes, Spark's progress, and our shard reports."""
    panes = os.path.join(work, "panes")

    def start():
        reader = feed.ours(spark.readStream.format("windowed"))
        df = (reader.option("timestampColumn", "ts").option("keyColumns", feed.key)
              .option("window", "tumbling(10 seconds)").option("aggregate", "sum(v) AS total, count(*) AS n")
              .option("watermark", "bounded(2 seconds)").option("shards", "2")
              .option("stateLocation", os.path.join(work, "state")).load())
        return (df.writeStream.format("windowed").option("path", panes)
                .option("checkpointLocation", os.path.join(work, "chk")).trigger(processingTime=args.trigger).start())

    started, progress = live(feed, args, start)
    steady = steady_start(progress, started, args)
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
        latencies += [committed - p for p in planned if p >= steady]
    reports = []
    for path in glob.glob(os.path.join(work, "state", "reports", "*", "shard-*.json")):
        with open(path) as f:
            reports.append(json.load(f))
    return latencies, progress, reports


def run_native(spark, args: argparse.Namespace, work: str, feed) -> tuple[list[float], list[dict], list[dict]]:
    from pyspark.sql import functions as F
    out = os.path.join(work, "out")
    committed: dict[int, tuple[float, int]] = {}

    def write(df, batch_id: int) -> None:
        df.persist()
        df.write.mode("append").parquet(os.path.join(out, f"batch={batch_id}"))
        done = time.time()
        committed[batch_id] = (done, df.count())
        df.unpersist()

    def start():
        df = (feed.native(spark).withWatermark("ts", "2 seconds").groupBy(F.window("ts", "10 seconds").alias("w"), "k")
              .agg(F.sum("v").alias("total"), F.count("*").alias("n")))
        return (df.writeStream.foreachBatch(write).outputMode("append")
                .option("checkpointLocation", os.path.join(work, "chk")).trigger(processingTime=args.trigger).start())

    started, progress = live(feed, args, start)
    steady = steady_start(progress, started, args)
    begun = {p["batchId"]: _epoch(p["timestamp"]) for p in progress}
    latencies = []
    for batch_id, (done, windows) in committed.items():
        if batch_id in begun and begun[batch_id] >= steady:
            latencies += [done - begun[batch_id]] * windows
    return latencies, progress, []


def steady_start(progress: list[dict], started: float, args: argparse.Namespace) -> float:
    """When the warm-up ends (epoch s): the start of the first micro-batch at least ``--skip``
    seconds after the query started that took no longer than one trigger interval — the query
    has caught up with the feed. (Infinity when no batch did: nothing is counted.)"""
    limit_ms = 1000 * trigger_seconds(args.trigger)
    for p in progress:
        begun = _epoch(p["timestamp"])
        if begun - started >= args.skip and p["durationMs"].get("triggerExecution", 0) <= limit_ms:
            return begun
    return float("inf")


def trigger_seconds(trigger: str) -> float:
    """``"1 second"``, ``"500 milliseconds"``, ``"2 minutes"`` in seconds."""
    amount, unit = trigger.split()
    return float(amount) * UNIT_SECONDS[unit]


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


def kept_up(progress: list[dict], started: float, args: argparse.Namespace) -> dict:
    """Whether the batches kept up with the trigger at ``args.rate`` (the rule in the docstring),
    with the figures behind it."""
    limit_ms = 1000 * trigger_seconds(args.trigger)
    later = [p for p in progress if _epoch(p["timestamp"]) - started >= args.skip]
    if len(later) < 3:
        return {"batches": len(later), "kept_up": False}
    span = (_epoch(later[-1]["timestamp"]) + later[-1]["durationMs"].get("triggerExecution", 0) / 1000
            - _epoch(later[0]["timestamp"]))
    rows = sum(_events_in(p, args.rate) for p in later)
    durations = [p["durationMs"].get("triggerExecution", 0) for p in later]
    median_ms = statistics.median(durations)
    taken = rows / span if span > 0 else 0.0
    return {"batches": len(later), "median_ms": median_ms, "p90_ms": float(np.percentile(durations, 90)),
            "events_per_s": taken, "kept_up": median_ms <= limit_ms and taken >= 0.9 * args.rate}


def _events_in(progress: dict, rate: int) -> int:
    """The events a micro-batch took in: Spark's ``numInputRows``, except for ours, whose source
    rows are panes; there the files the batch read (its offsets' ``up``) times the events a file
    holds (each holds one second's ``rate``)."""
    source = progress["sources"][0]
    end = source.get("endOffset")
    if isinstance(end, dict) and "windowed" in end:
        start = source.get("startOffset") or {"up": 0}
        return (int(end["up"]) - int(start["up"])) * rate
    return progress.get("numInputRows", 0)


def sustained(spark, args: argparse.Namespace, base: str) -> None:
    """The ``--rates`` mode: each rate and engine live for ``--seconds``; prints whether it kept up."""
    best: dict[str, int] = {}
    for rate in (int(r) for r in args.rates.split(",")):
        args.rate = rate
        for engine in args.engines.split(","):
            work = os.path.join(base, f"{engine}-{rate}")
            shutil.rmtree(work, ignore_errors=True)
            os.makedirs(work)
            run = {"ours": run_ours, "native": run_native}[engine]
            _, progress, _ = run(spark, args, work, FileFeed(work))
            started = _epoch(progress[0]["timestamp"]) if progress else time.time()
            k = kept_up(progress, started, args)
            if k["kept_up"]:
                best[engine] = max(best.get(engine, 0), rate)
            figures = (f"median batch {k['median_ms']:.0f} ms, p90 {k['p90_ms']:.0f} ms, took in "
                       f"{k['events_per_s']:,.0f} events/s" if "median_ms" in k else "too few batches")
            print(f"rate {rate:>9,}/s  {engine:6s} {'kept up' if k['kept_up'] else 'FELL BEHIND':11s} "
                  f"({k['batches']} batches after {args.skip:g} s: {figures})", flush=True)
            shutil.rmtree(work, ignore_errors=True)
    for engine in args.engines.split(","):
        print(f"largest rate kept up, {engine}: " + (f"{best[engine]:,} events/s" if engine in best else "none"))


def session(args: argparse.Namespace):
    from pyspark.sql import SparkSession
    builder = (SparkSession.builder.master("local[2]").appName("spark-windowing-latency")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.streaming.numRecentProgressUpdates", "10000"))
    if args.feed == "kafka":  # Spark's own Kafka source, for native (see the docstring)
        import pyspark

        from spark_windowing.tools.packages import jar_confs
        builder = builder.config(map=jar_confs(f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def broker(args: argparse.Namespace, base: str):
    """The bootstrap servers for the kafka feed, and the local broker started for it (or None)."""
    if args.feed != "kafka" or args.bootstrap:
        return args.bootstrap, None
    sys.path.insert(0, str(ROOT / "scripts"))
    from kafka_broker import KafkaBroker
    local = KafkaBroker(os.path.join(base, "broker")).start()
    return local.bootstrap, local


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import spark_windowing
    spark = session(args)
    spark_windowing.register(spark)
    trigger_s = trigger_seconds(args.trigger)
    feed_text = "parquet files" if args.feed == "files" else f"Kafka, {args.partitions} partitions"
    print(f"{args.rates or format(args.rate, ',')} events/s ({feed_text}), {args.keys:,} keys, event time {args.event_speed:g}x wall time, "
          f"tumbling 10 s windows, bounded(2 s), trigger {args.trigger}, {args.seconds:g} s per engine (not counted: "
          f"the first {args.skip:g} s and then until a batch keeps up with the trigger), local[2], "
          f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}", flush=True)
    base = args.dir or tempfile.mkdtemp(prefix="latency-")
    if args.rates:
        try:
            sustained(spark, args, base)
        finally:
            spark.stop()
        return
    bootstrap, local = broker(args, base)
    try:
        for engine in args.engines.split(","):
            work = os.path.join(base, engine)
            shutil.rmtree(work, ignore_errors=True)
            os.makedirs(work)
            feed = (FileFeed(work) if args.feed == "files"
                    else KafkaFeed(bootstrap, f"latency-{engine}-{int(time.time())}", args.partitions))
            run = {"ours": run_ours, "native": run_native}[engine]
            report(engine, *run(spark, args, work, feed), trigger_s)
    finally:
        spark.stop()
        if local is not None:
            local.stop()


if __name__ == "__main__":
    main()
