"""Helpers for the Kafka tests: topics and records on the session's real broker, and the
per-batch records of a finished query (from its offset log) for a TestStream replay."""

from __future__ import annotations

import importlib.util
import json
import uuid
from pathlib import Path

import pyarrow as pa

from tests.spark._helpers import offsets

_spec = importlib.util.spec_from_file_location(
    "kafka_broker", Path(__file__).resolve().parents[2] / "scripts" / "kafka_broker.py")
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
KafkaBroker = _mod.KafkaBroker


def new_topic(broker, partitions: int = 1, config: dict | None = None) -> str:
    """A new topic with ``partitions`` partitions (waits until it exists)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    name = "t_" + uuid.uuid4().hex[:10]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})])
    fs[name].result(30)
    return name


def produce(broker, topic: str, records: list[tuple[int, bytes | None, bytes | None]], *,
            timestamps: list[int] | None = None, headers: list | None = None) -> None:
    """``(partition, key, value)`` records, in order, acknowledged before returning."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "enable.idempotence": True,
                  "log_level": 0})
    errors = []
    for i, (part, key, value) in enumerate(records):
        kw = {}
        if timestamps is not None:
            kw["timestamp"] = timestamps[i]
        if headers is not None and headers[i]:
            kw["headers"] = headers[i]
        p.produce(topic, value=value, key=key, partition=part,
                  on_delivery=lambda err, msg: errors.append(err) if err else None, **kw)
        if i % 10_000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors


def produce_json(broker, topic: str, rows: list[dict], partition_of=None) -> None:
    """JSON values of ``rows``; ``partition_of(row)`` picks the partition (default 0), the key is ``row['k']``."""
    produce(broker, topic, [((partition_of or (lambda r: 0))(r), str(r.get("k")).encode(),
                             json.dumps(r).encode()) for r in rows])


def batches_by_offsets(checkpoint: str, records: dict[tuple[str, int], list[dict]]) -> list[tuple[list[dict], dict]]:
    """Per micro-batch of a finished query: the records it read (by the offsets in its offset log:
    per partition ``[start, end)``, ordered by topic, partition, offset) and its end offset.
    ``records[(topic, partition)]`` lists a partition's records in offset order, from offset 0."""
    out = []
    for start, end in offsets(checkpoint):
        batch = []
        for t in sorted(end["up"]):
            for p in sorted(end["up"][t], key=int):
                s = (start or {"up": {}})["up"].get(t, {}).get(p)
                s = 0 if s is None else int(s)
                batch.extend(records.get((t, int(p)), [])[s:int(end["up"][t][p])])
        out.append((batch, end))
    return out


def as_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)
