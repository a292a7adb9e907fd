"""Kafka clicks: a topic of click events -> per-user tumbling minutes -> the windowed sink.

Start a local broker first (fetched from Maven Central on first use, cached)::

    scripts/kafka.sh start            # prints 127.0.0.1:<port>; writes .kafka/bootstrap
    python examples/kafka_clicks.py [--bootstrap HOST:PORT] [--events 3000] [--output DIR]
    scripts/kafka.sh stop

The example creates a fresh topic ``clicks-<n>`` with 3 partitions, produces JSON clicks keyed by
user (so a user's clicks are in one partition, and shards read disjoint partitions:
``keyColumns=key``), plus a few malformed records, then reads it with ``source=kafka`` under an
``availableNow`` trigger: EARLY panes every 10 clicks, an ON_TIME pane per user and minute, late
and malformed records in the late-data table with their topic, partition and offset.
Every windowing setting comes from ``conf/kafka_clicks.conf`` (``spark.windowed.*``).
Outputs go to ``./out/kafka_clicks/`` (emptied first).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from typing import TYPE_CHECKING, Sequence

import _common

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

NAME = "kafka_clicks"
PAGES = ("home", "search", "product", "cart", "checkout")
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z

#: Clicks and revenue per user and minute, from the current table (the record key is the user).
PER_MINUTE_SQL = """\
SELECT CAST(key AS STRING) AS user_id, window_start, clicks, round(revenue, 2) AS revenue, pane_timing
FROM clicks
ORDER BY window_start, user_id
LIMIT 12"""

#: Where the malformed records were: topic, partition, offset and the raw value.
MALFORMED_SQL = """\
SELECT topic, partition, offset, CAST(value AS STRING) AS value
FROM clicks_late WHERE reason = 'malformed' ORDER BY partition, offset"""


def produce_clicks(bootstrap: str, events: int, seed: int = 7) -> str:
    """A new 3-partition topic with ``events`` JSON clicks of 12 users keyed by user (one a second
    of event time, up to 20 s out of order), and 3 malformed records; returns the topic name."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    topic = f"clicks-{int(time.time() * 1000)}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    admin.create_topics(
        [NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(30)
    rnd = random.Random(seed)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "log_level": 0})
    for i in range(events):
        user = f"user-{rnd.randrange(12)}"
        t = T0 + i - rnd.randrange(20)
        value = {"user_id": user, "page": rnd.choice(PAGES), "amount": round(rnd.uniform(0, 50), 2),
                 "event_time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))}
        p.produce(topic, key=user.encode(), value=json.dumps(value).encode())
        if i % 5000 == 0:
            p.poll(0)
    for bad in (b"{broken json", json.dumps({"user_id": "user-1", "page": "home"}).encode(), b"\x00\x01"):
        p.produce(topic, key=b"user-1", value=bad)
    if p.flush(60):
        raise RuntimeError(f"could not deliver every click to {bootstrap}")
    return topic


def _bootstrap(given: str | None) -> str:
    if given:
        return given
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".kafka", "bootstrap")
    if not os.path.exists(path):
        raise SystemExit("no broker: start one with scripts/kafka.sh start, or pass --bootstrap HOST:PORT")
    return open(path).read().strip()


def main(argv: Sequence[str] | None = None, *, spark: "SparkSession | None" = None) -> _common.Outputs:
    """Run the example; return where its outputs are. ``spark``: use this session (tests)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--bootstrap")
    pre.add_argument("--events", type=int, default=3000)
    ns, rest = pre.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    args = _common.Args.parse(NAME, __doc__, rest)
    out = _common.Outputs.fresh(args.output)
    bootstrap = _bootstrap(ns.bootstrap)
    topic = produce_clicks(bootstrap, ns.events)
    with _common.windowed_session(args, spark) as session:
        _common.print_banner("Kafka clicks", session, args)
        panes = (session.readStream.format("windowed")          # the rest: spark.windowed.*
                 .option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", topic)
                 .option("stateLocation", out.state)
                 .option("lateDataPath", out.late)
                 .load())
        seconds = _common.run_to_end(panes, out, query_name="clicks", spark=session)
        _common.create_views(session, out, "clicks")
        _common.show_sql(session, "Panes by kind and timing", _common.PANE_COUNTS_SQL.format(name="clicks"))
        _common.show_sql(session, "Clicks per user and minute (current table)", PER_MINUTE_SQL)
        if _common.show_late_data(session, out, "clicks_late"):
            _common.show_sql(session, "Malformed records (late-data table)", MALFORMED_SQL)
    _common.print_outputs("Kafka clicks", out, seconds, with_timeline=False)
    return out


if __name__ == "__main__":
    main()
    sys.exit(0)
