"""``source=kafka`` against a real Apache Kafka broker (KRaft, started by the ``kafka_broker``
fixture): the panes and late rows Spark writes to Delta equal a TestStream replaying the very
same micro-batches (the records between the offsets in Spark's offset log, the watermark and
batch time of each batch); malformed records reach the late table with topic, partition and
offset; the per-partition watermark and idleness; exactly-once offsets."""

from __future__ import annotations

import json
import random
import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_windowing.testing import TestStream
from tests.spark._helpers import micros, offsets, rows, run_to_sink
from tests.spark.kafka_helpers import batches_by_offsets, new_topic, produce, produce_json
from tests.spark.test_source import SEC, T0

pytestmark = pytest.mark.spark
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64()), ("id", pa.int64())])
DDL = "k string, ts long, v long, id long"
AGG = "sum(v) AS total, count(*) AS n"


def _records(seed: int, n: int, partitions: int) -> list[tuple[int, dict]]:
    """(partition, row): keys a..d spread over the partitions, event times drifting forward with disorder."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        k = rnd.choice("abcd")
        out.append((rnd.randrange(partitions), {"k": k, "ts": T0 + i * SEC // 2 + rnd.randrange(-6 * SEC, SEC),
                                                "v": rnd.randrange(100), "id": i}))
    return out


def _options(topic: str, broker, tmp_path, **extra) -> dict[str, str]:
    return {"source": "kafka", "kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic,
            "startingOffsets": "earliest", "valueFormat": "json", "schema": DDL, "timestampColumn": "ts",
            "timestampUnit": "us", "keyColumns": "k", "window": "tumbling(10 seconds)", "aggregate": AGG,
            "watermark": "bounded(2 seconds)", "maxOffsetsPerTrigger": "7", "shards": "2",
            "stateLocation": str(tmp_path / "state"), "lateDataPath": str(tmp_path / "late"), **extra}


def _replay(chk: str, by_partition: dict, stream: TestStream) -> None:
    for batch, end in batches_by_offsets(chk, by_partition):
        events = [{c: r.get(c) for c in SCHEMA.names} for r in batch]
        stream.add_elements(pa.Table.from_pylist(events, schema=SCHEMA), watermark=end["wm"],
                            processing_time=end["bt"])


@pytest.mark.parametrize("trigger,mode", [
    (None, "discarding"),
    ("AfterWatermark(early=AfterCount(2), late=AfterCount(1))", "accumulating"),
    ("Repeatedly(AfterCount(3))", "accumulating_and_retracting"),
])
def test_kafka_panes_equal_a_teststream_replay(spark, kafka_broker, tmp_path, trigger, mode):
    topic = new_topic(kafka_broker, partitions=3)
    recs = _records(len(mode), 60, 3)
    produce_json(kafka_broker, topic, [r for _, r in recs], partition_of=lambda r: recs[r["id"]][0])
    by_partition: dict = {}
    for p, r in recs:
        by_partition.setdefault((topic, p), []).append(r)
    extra = {"accumulationMode": mode, **({"trigger": trigger} if trigger else {})}
    chk = run_to_sink(spark, _options(topic, kafka_broker, tmp_path, **extra), tmp_path)
    ups = [e["up"][topic] for _, e in offsets(chk)]
    assert len(ups) >= 60 // 7 and sum(map(int, ups[-1].values())) == 60  # several batches, every record read
    triggers = DeltaTable(str(tmp_path / "panes" / "triggers")).to_pyarrow_table()
    retractions = DeltaTable(str(tmp_path / "panes" / "retractions")).to_pyarrow_table() \
        if mode == "accumulating_and_retracting" else None

    s = TestStream(window="tumbling(10 seconds)", aggregate=AGG, key_columns="k", timestamp_unit="us",
                   accumulation_mode=mode, schema=SCHEMA, **({"trigger": trigger} if trigger else {}))
    _replay(chk, by_partition, s)
    panes = s.take_panes()
    expected = pa.Table.from_pylist([{c: p[c] for c in triggers.column_names} for p in panes if p["kind"] == "TRIGGER"])
    assert triggers.num_rows > 8
    assert rows(triggers, drop=("batch_seq",)) == rows(expected, drop=("batch_seq",))
    if retractions is not None:
        want = pa.Table.from_pylist([{c: p[c] for c in retractions.column_names} for p in panes
                                     if p["kind"] == "RETRACTION"])
        assert retractions.num_rows > 0
        assert rows(retractions, drop=("batch_seq",)) == rows(want, drop=("batch_seq",))
    want_late = sorted(r["id"] for r in s.take_late())
    got_late = sorted(DeltaTable(str(tmp_path / "late")).to_pyarrow_table().column("id").to_pylist()) \
        if want_late else []
    assert got_late == want_late


def test_malformed_records_reach_the_late_table_with_topic_partition_offset(spark, kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, partitions=1)
    good = [{"k": "a", "ts": T0 + i * SEC, "v": i, "id": i} for i in range(6)] + [
        {"k": "a", "ts": T0 + 100 * SEC, "v": 0, "id": 6}]  # moves the watermark past the first window
    values = [json.dumps(r).encode() for r in good]
    bad = [b"{not json", json.dumps({"k": "a", "v": 1, "id": 90}).encode(),  # no event time
           json.dumps({"k": "a", "ts": "yesterday", "v": 1, "id": 91}).encode(), None, b"[1, 2]"]
    produce(kafka_broker, topic, [(0, b"a", v) for v in values[:3] + bad + values[3:]])
    run_to_sink(spark, _options(topic, kafka_broker, tmp_path, maxOffsetsPerTrigger="4"), tmp_path)
    late = DeltaTable(str(tmp_path / "late")).to_pyarrow_table().to_pylist()
    malformed = sorted((r["topic"], r["partition"], r["offset"], r["value"]) for r in late if r["reason"] == "malformed")
    assert malformed == [(topic, 0, 3 + i, bad[i]) for i in range(5)]
    panes = DeltaTable(str(tmp_path / "panes" / "triggers")).to_pyarrow_table().to_pylist()
    assert [(micros(r["window_start"]), r["n"], r["total"]) for r in panes] == [(T0, 6, sum(range(6)))]


def test_per_partition_watermark_a_partition_behind_holds_it_back(spark, kafka_broker, tmp_path):
    """Partition 0 is at T0+60 s, partition 1 at T0+5 s: the watermark is partition 1's max − delay,
    not the stream's max − delay, so partition 1's window [T0, T0+10 s) is still open; the events
    of partition 1 that the stream-wide max would have made late are on time."""
    topic = new_topic(kafka_broker, partitions=2)
    p0 = [(0, b"a", json.dumps({"k": "a", "ts": T0 + (50 + i) * SEC, "v": 1, "id": i}).encode()) for i in range(10)]
    p1 = [(1, b"b", json.dumps({"k": "b", "ts": T0 + i * SEC, "v": 1, "id": 100 + i}).encode()) for i in range(6)]
    produce(kafka_broker, topic, p0 + p1)
    chk = run_to_sink(spark, _options(topic, kafka_broker, tmp_path, maxOffsetsPerTrigger="4"), tmp_path)
    ends = [e for _, e in offsets(chk)]
    last = ends[-1]  # its per-partition maxima are those of the batches before it
    pmax = last["kwm"]["max"]
    assert set(pmax) == {f"{topic}:0", f"{topic}:1"}
    assert pmax[f"{topic}:0"] >= T0 + 55 * SEC and pmax[f"{topic}:1"] <= T0 + 5 * SEC
    assert last["wm"] == pmax[f"{topic}:1"] - 2 * SEC  # the minimum over partitions of (max - 2 s)
    assert last["max_event"] - 2 * SEC > T0 + 10 * SEC  # a stream-wide watermark would have closed [T0, T0+10 s)
    late = DeltaTable(str(tmp_path / "late")).to_pyarrow_table()
    assert late.num_rows == 0  # nothing late: partition 1 held the watermark (the table exists from the start)
    panes = DeltaTable(str(tmp_path / "panes" / "triggers")).to_pyarrow_table().to_pylist()
    assert not [r for r in panes if r["k"] == "b"]  # partition 1's window is still open


def test_an_idle_partition_stops_holding_the_watermark(spark, kafka_broker, tmp_path):
    """Partition 1 got one early record and then nothing: after watermarkIdleTimeout the watermark
    follows partition 0 alone and partition 0's windows fire. Partition 0's records reach T0+45 s,
    so its own watermark (T0+43 s) closes ``[T0+30, T0+40)`` as soon as partition 1 counts as idle
    (the per-partition rule), not only after the whole source has been quiet for seconds."""
    topic = new_topic(kafka_broker, partitions=2)
    produce(kafka_broker, topic, [(1, b"b", json.dumps({"k": "b", "ts": T0, "v": 1, "id": 0}).encode())])
    opts = _options(topic, kafka_broker, tmp_path, watermarkIdleTimeout="2 seconds", maxOffsetsPerTrigger="50")
    name = "idle_" + topic
    reader = spark.readStream.format("windowed")
    for k, v in opts.items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.format("memory").queryName(name)
         .option("checkpointLocation", str(tmp_path / "chk")).trigger(processingTime="500 milliseconds").start())
    try:
        import time
        time.sleep(4)  # partition 1's record is read; then it stays idle
        produce(kafka_broker, topic, [(0, b"a", json.dumps({"k": "a", "ts": T0 + (30 + i) * SEC, "v": 1,
                                                             "id": i + 1}).encode()) for i in range(16)])
        deadline = time.time() + 240
        fired = []
        while time.time() < deadline and not fired:
            time.sleep(1)
            fired = [r for r in spark.table(name).collect() if r["k"] == "a"]
        assert q.exception() is None
    finally:
        q.stop()
    last = offsets(str(tmp_path / "chk"))[-1][1]
    assert last["wm"] >= T0 + 40 * SEC  # partition 0's max (T0+45 s) − 2 s; partition 1 (T0) no longer counts
    assert fired and micros(fired[0]["window_start"]) == T0 + 30 * SEC


def test_replayed_batches_read_the_same_records(spark, kafka_broker, tmp_path):
    """Offsets per partition in the offset log: every record is read exactly once over all
    batches, and re-running a finished query from its checkpoint reads nothing more."""
    topic = new_topic(kafka_broker, partitions=3)
    recs = _records(7, 40, 3)
    produce_json(kafka_broker, topic, [r for _, r in recs], partition_of=lambda r: recs[r["id"]][0])
    opts = _every_record(topic, kafka_broker, tmp_path)
    chk = run_to_sink(spark, opts, tmp_path)
    ids = _ids_read(tmp_path)
    assert ids == list(range(40))
    n_batches = len(offsets(chk))
    run_to_sink(spark, opts, tmp_path)  # resumes: no new records -> no new data batch
    ids2 = _ids_read(tmp_path)
    assert ids2 == ids and len(offsets(chk)) == n_batches


def _admin(broker):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _ids_read(tmp_path) -> list[int]:
    return sorted(i for r in DeltaTable(str(tmp_path / "panes" / "triggers")).to_pyarrow_table().to_pylist()
                  for i in r["ids"])


def _every_record(topic, broker, tmp_path, **extra) -> dict[str, str]:
    """Each record in a pane of its own batch (global window, a pane per count), so the ids in
    ``triggers`` are exactly the records read."""
    return _options(topic, broker, tmp_path, aggregate="count(*) AS n, collect_list(id) AS ids",
                    watermark="bounded(1 hour)", window="global", trigger="Repeatedly(AfterCount(1))",
                    accumulationMode="discarding", **extra)


def test_partitions_added_to_the_topic_are_picked_up(spark, kafka_broker, tmp_path):
    """A topic grows from 1 to 3 partitions between two runs of the same query: the second run
    reads the new partitions from their earliest offset, and the offset log names all three."""
    from confluent_kafka.admin import NewPartitions
    topic = new_topic(kafka_broker, partitions=1)
    produce_json(kafka_broker, topic, [{"k": "a", "ts": T0 + i * SEC, "v": 1, "id": i} for i in range(10)])
    opts = _every_record(topic, kafka_broker, tmp_path)
    run_to_sink(spark, opts, tmp_path)
    assert _ids_read(tmp_path) == list(range(10))

    admin = _admin(kafka_broker)   # kept alive until the future resolves
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
    deadline = time.time() + 30
    while len(admin.list_topics(topic, timeout=10).topics[topic].partitions) < 3:  # metadata catches up
        assert time.time() < deadline, "the broker's metadata never showed 3 partitions"
        time.sleep(0.2)
    later = [{"k": "b", "ts": T0 + (10 + i) * SEC, "v": 1, "id": 10 + i} for i in range(12)]
    produce_json(kafka_broker, topic, later, partition_of=lambda r: r["id"] % 3)
    chk = run_to_sink(spark, opts, tmp_path)

    assert _ids_read(tmp_path) == list(range(22))
    assert offsets(chk)[-1][1]["up"][topic] == {"0": 14, "1": 4, "2": 4}


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_records_deleted_before_they_were_read(spark, kafka_broker, tmp_path, fail_on_data_loss):
    """Records deleted from a partition (as retention does; here the broker's DeleteRecords)
    after the query's last batch and before it read them: ``failOnDataLoss=true`` fails naming
    the topic, the partition and the missing offsets; ``false`` reads on from the earliest offset
    left and reports how many offsets it skipped."""
    from confluent_kafka import TopicPartition
    from spark_windowing.datasource.progress import format_progress, read_batch_report
    topic = new_topic(kafka_broker, partitions=2)
    rows = [{"k": "a", "ts": T0 + i * SEC, "v": 1, "id": i} for i in range(30)]
    produce_json(kafka_broker, topic, rows[:10], partition_of=lambda r: r["id"] % 2)   # 5 per partition
    opts = _every_record(topic, kafka_broker, tmp_path, failOnDataLoss=fail_on_data_loss)
    run_to_sink(spark, opts, tmp_path)
    produce_json(kafka_broker, topic, rows[10:], partition_of=lambda r: r["id"] % 2)   # offsets 5..14
    admin = _admin(kafka_broker)   # kept alive until the future resolves
    done = admin.delete_records([TopicPartition(topic, 0, 12)])    # drops offsets 0..11 of partition 0
    list(done.values())[0].result(30)

    reader = spark.readStream.format("windowed")
    for k, v in opts.items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.format("windowed").option("path", str(tmp_path / "panes"))
         .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start())
    if fail_on_data_loss == "true":
        with pytest.raises(Exception) as info:
            q.awaitTermination(240)
        text = str(info.value)
        assert f"topic {topic} partition 0: offsets 5..11 were deleted" in text and "failOnDataLoss=false" in text
        assert _ids_read(tmp_path) == list(range(10))             # nothing of the second lot
        return
    q.awaitTermination(240)
    assert not q.isActive and q.exception() is None, q.exception()
    unread_p0 = [r["id"] for r in rows[10:] if r["id"] % 2 == 0][:7]   # offsets 5..11 of partition 0
    assert _ids_read(tmp_path) == sorted(set(range(30)) - set(unread_p0))
    reports = [read_batch_report(opts["stateLocation"], end["seq"]) for _, end in offsets(str(tmp_path / "chk"))]
    assert sum(r.skipped_offsets for r in reports if r is not None) == 7
    line = format_progress(next(r for r in reports if r is not None and r.skipped_offsets), batch_id=0,
                           query_name="q", duration_ms=None)
    assert "skipped offsets 7 (data loss)" in line


_VALUE = st.one_of(
    st.tuples(st.sampled_from("ab"), st.integers(-40, 60)).map(
        lambda t: json.dumps({"k": t[0], "ts": T0 + t[1] * SEC, "v": 1, "id": 0}).encode()),
    st.sampled_from([b"{oops", b"[1]", json.dumps({"k": "a", "ts": "x", "v": 1, "id": 0}).encode(),
                     json.dumps({"k": None, "ts": T0, "v": 1, "id": 0}).encode(),
                     json.dumps({"k": "a", "ts": 4_070_908_800_000_000, "v": 1, "id": 0}).encode()]),  # 2099
)


@settings(max_examples=3, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(values=st.lists(_VALUE, min_size=1, max_size=25))
def test_every_record_is_in_a_pane_or_the_late_table(spark, kafka_broker, tmp_path_factory, values):
    """The conservation law over Kafka: ``sum(n over every pane) + rows in the late table`` equals
    the records the topic handed over, whatever mix of good, late, undecodable and future records."""
    from tests.spark._helpers import run_panes
    root = tmp_path_factory.mktemp("kafka_conserve")
    topic = new_topic(kafka_broker, partitions=2)
    produce(kafka_broker, topic, [(i % 2, b"k", v) for i, v in enumerate(values)])
    opts = _options(topic, kafka_broker, root, aggregate="count(*) AS n", malformedEvents="late",
                    trigger="AfterWatermark(early=AfterCount(1), late=AfterCount(1))", allowedLateness="5 seconds")
    panes = run_panes(spark, opts, str(root / "chk"))
    late = DeltaTable(str(root / "late")).to_pyarrow_table().to_pylist()
    assert sum(r["n"] for r in panes.to_pylist()) + len(late) == len(values), [r["reason"] for r in late]
