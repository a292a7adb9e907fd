"""spark-windowing's Kafka upstream vs Spark's Kafka source + native windows: same topic, same
machine, same run.

    python benchmarks/kafka_vs_native.py                        # 10 M events, 4 partitions, 10 k keys
    python benchmarks/kafka_vs_native.py --events 1000000 --bootstrap 127.0.0.1:9092

Starts a local broker (``scripts/kafka_broker.py``; or uses ``--bootstrap``), produces
``--events`` JSON events ``{"k", "ts", "v"}`` keyed by ``k`` into a new topic (``--partitions``),
then in one local[2] Spark session (with ``spark-sql-kafka-0-10`` of the installed pyspark) times:

* native: ``format("kafka")`` -> ``from_json`` -> ``withWatermark`` -> ``groupBy(window(ts, '1
  minute'), k).agg(count, sum)``, append mode, ``noop`` sink;
* ours: ``format("windowed")`` with ``source=kafka``, ``tumbling(1 minute)``, the same
  aggregates and watermark, ``noop`` sink, twice: ``keyColumns=key`` (shards read disjoint
  partitions) and ``keyColumns=k`` (a value field: every shard reads every record);

all ``availableNow`` with the same ``maxOffsetsPerTrigger`` (≈10 micro-batches). Prints seconds
and events/second. Not part of the test suite.

Spark's Kafka connector is published on Maven Central per Spark version; for the newest pyspark
it may not be there yet, so run this with the interpreter of the second virtualenv (pyspark 4.2,
made by ``scripts/test.sh``): ``.venv-delta/bin/python benchmarks/kafka_vs_native.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]


def produce(bootstrap: str, topic: str, events: int, keys: int, partitions: int) -> float:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1 << 20,
                  "compression.type": "lz4", "queue.buffering.max.messages": 2_000_000, "log_level": 0})
    t0, start = time.perf_counter(), 1_767_225_600_000_000
    for i in range(events):
        k = (i * 2654435761) % keys
        key = b"k%d" % k
        value = b'{"k":"k%d","ts":%d,"v":%d}' % (k, start + i * 1000 - (i * 7919) % 2_000_000, i % 100)
        while True:
            try:
                p.produce(topic, value=value, key=key)
                break
            except BufferError:
                p.poll(0.05)
        if i % 50_000 == 0:
            p.poll(0)
    assert p.flush(300) == 0
    return time.perf_counter() - t0


def timed(query) -> float:
    t0 = time.perf_counter()
    q = query.trigger(availableNow=True).start()
    q.awaitTermination()
    if q.exception() is not None:
        raise RuntimeError(q.exception())
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--bootstrap", default=None)
    ap.add_argument("--skip", default="", help="comma list of runs to skip: native,key,value")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    work = Path(tempfile.mkdtemp(prefix="kafka-bench-"))
    broker = None
    if args.bootstrap is None:
        from kafka_broker import KafkaBroker
        broker = KafkaBroker(work / "broker").start()
    bootstrap = args.bootstrap or broker.bootstrap
    try:
        topic = f"bench-{int(time.time())}"
        secs = produce(bootstrap, topic, args.events, args.keys, args.partitions)
        print(f"produced {args.events:,} events into {topic} ({args.partitions} partitions) in {secs:.1f} s")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        import pyspark
        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F

        import spark_windowing
        from spark_windowing.tools.packages import jar_confs
        spark = (SparkSession.builder.master("local[2]").appName("kafka-bench")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
                 .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "3g")
                 .config(map=jar_confs(f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"))
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark_windowing.register(spark)
        per_trigger = str(max(1, args.events // 10))
        results = {}
        if "native" not in skip:
            raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                   .option("subscribe", topic).option("startingOffsets", "earliest")
                   .option("maxOffsetsPerTrigger", per_trigger).load())
            agg = (raw.select(F.from_json(F.col("value").cast("string"), "k string, ts long, v long").alias("j"))
                   .select("j.*").withColumn("ts", F.timestamp_micros("ts")).withWatermark("ts", "5 seconds")
                   .groupBy(F.window("ts", "1 minute"), "k").agg(F.count("*").alias("n"), F.sum("v").alias("s")))
            results["native (Spark Kafka source + groupBy(window))"] = timed(
                agg.writeStream.outputMode("append").format("noop").option("checkpointLocation", str(work / "c0")))
        for label, key in [("key", "key"), ("value", "k")]:
            if label in skip:
                continue
            panes = (spark.readStream.format("windowed").option("source", "kafka")
                     .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
                     .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", per_trigger)
                     .option("schema", "k string, ts long, v long").option("timestampColumn", "ts")
                     .option("timestampUnit", "us").option("keyColumns", key).option("window", "tumbling(1 minute)")
                     .option("aggregate", "count(*) AS n, sum(v) AS s").option("watermark", "bounded(5 seconds)")
                     .option("shards", "2").option("stateLocation", str(work / f"state-{label}")).load())
            results[f"ours, keyColumns={key}"] = timed(
                panes.writeStream.format("noop").option("checkpointLocation", str(work / f"c-{label}")))
        for name, s in results.items():
            print(f"{name:55s} {s:8.1f} s  {args.events / s:12,.0f} events/s")
        spark.stop()
    finally:
        if broker is not None:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
