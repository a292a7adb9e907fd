"""``python -m spark_windowing.tools.nexmark --to kafka:...``: NEXMark bids as JSON records on the
test broker, keyed by auction, exactly the generated rows. The record timestamps are the time of
writing: the test broker checks retention every second, and records stamped with NEXMark's 2015
event times were deleted under its 7-day retention before a consumer read them."""

from __future__ import annotations

import json
import time

from spark_windowing.datasource.upstreams.nexmark_events import NexmarkConfig, generate
from spark_windowing.tools import nexmark as writer
from tests.spark.kafka_helpers import new_topic


def test_bids_reach_a_topic_as_json_keyed_by_auction(kafka_broker):
    from confluent_kafka import Consumer
    g = NexmarkConfig(total_events=3_000, seed=5)
    topic = new_topic(kafka_broker)
    before_ms = int(time.time() * 1000)
    assert writer.write(g, "bid", f"kafka:{kafka_broker.bootstrap}/{topic}", 3_000, chunk=1_000) == 2_760
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    after_ms = int(time.time() * 1000)
    records = []
    while len(records) < 2_760:
        msg = consumer.poll(30)
        assert msg is not None, f"{len(records)} records read, then nothing for 30 s"
        records.append(msg)
    consumer.close()
    want = generate(g, 0, 3_000, "bid")
    assert [json.loads(m.value()) for m in records] == json.loads(json.dumps(want.to_pylist(), default=writer._iso))
    assert [m.key().decode() for m in records] == [str(a) for a in want.column("auction").to_pylist()]
    assert all(before_ms - 1 <= m.timestamp()[1] <= after_ms + 1 for m in records)   # written now, kept
