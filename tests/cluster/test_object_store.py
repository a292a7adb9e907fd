"""State snapshots and pane tables on a real S3-API server (moto on localhost, behind the counting
proxy of ``tests/objectstore.py``): what each snapshot costs in requests, that readers only ever see
complete snapshots, and that the pane sink's commits are safe and single-writer."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from spark_windowing.datasource import storage
from spark_windowing.datasource._types import arrow_to_spark_schema
from spark_windowing.datasource.sink.writer import PaneStreamWriter
from spark_windowing.errors import SnapshotError
from spark_windowing.operator.spec import OperatorSpec
from spark_windowing.state.segments import collect_garbage, manifest_uri
from spark_windowing.state.store import StateStore
from tests.objectstore import count
from tests.spark import pane_source
from tests.spark.sink_helpers import TABLE_NAMES, rows

SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
SPEC = OperatorSpec.from_options(window="tumbling(10 milliseconds)", aggregate="sum(v) AS s", key_columns="k",
                                 timestamp_unit="ms")
SPARK_SCHEMA = arrow_to_spark_schema(pane_source.ARROW_SCHEMA)


def _events(keys: list[str], ts: int) -> pa.Table:
    return pa.table({"k": keys, "ts": [ts] * len(keys), "v": [1] * len(keys)}, schema=SCHEMA)


def _snapshot(store: StateStore, proxy, events, seq: int):
    mark = proxy.mark()
    store.step(events, watermark=0, processing_time=0, batch_seq=seq)
    store.persist(seq)
    return proxy.since(mark)


def test_a_snapshot_costs_requests_for_what_changed_only(object_store, tmp_path):
    proxy, root = object_store.proxy, object_store.uri("state-cost/shards/0000")
    store = StateStore(SPEC, storage, root, SCHEMA, buckets=16)
    first = _snapshot(store, proxy, _events([f"k{i}" for i in range(200)], 1), 1)   # every bucket
    key = "k7"
    one = _snapshot(store, proxy, _events([key, key], 2), 2)                        # one bucket
    none = _snapshot(store, proxy, None, 3)                                          # nothing changed

    # one segment (the changed buckets) + the manifest, written last; nothing read, nothing listed
    assert count(first) == {"PUT": 2} and first[-1].key.endswith("000000000001.manifest")
    assert count(one) == {"PUT": 2} and one[-1].key.endswith("000000000002.manifest")
    assert count(none) == {"PUT": 1} and none[0].key.endswith("000000000003.manifest")
    sizes = {r.key: r for r in one}
    assert len(sizes) == 2
    # reopened elsewhere (another executor): the manifest, then the segments
    mark = proxy.mark()
    other = StateStore.open(SPEC, storage, root, 3, SCHEMA, buckets=16)
    out = other.step(_events([key], 3), watermark=10_000, processing_time=0, batch_seq=4)
    reads = proxy.since(mark)
    assert count(reads)["LIST"] == 0 and count(reads)["PUT"] == 0
    assert count(reads, r"\.manifest$") == {"HEAD": 1, "GET": 1}
    # the operator's extras (kept in the newest segment), then one ranged GET per segment file (2)
    assert count(reads, r"seg-")["GET"] == 3
    assert {r["k"]: r["s"] for r in out.panes.to_pylist()}[key] == 3
    assert len(out.panes) == 200
    assert out.panes.equals(store.step(_events([key], 3), watermark=10_000, processing_time=0, batch_seq=4).panes)


def test_only_complete_snapshots_are_read_and_a_missing_one_is_an_error(object_store):
    root = object_store.uri("state-torn/shards/0000")
    store = StateStore(SPEC, storage, root, SCHEMA, buckets=4)
    store.step(_events(["a", "b"], 1), watermark=0, processing_time=0, batch_seq=1)
    store.persist(1)
    store.step(_events(["a"], 2), watermark=0, processing_time=0, batch_seq=2)
    # an attempt of batch 2 that died after its segment, before its manifest: batch 2 does not exist
    store._flush(2)
    with pytest.raises(SnapshotError, match="missing state snapshot .*000000000002.manifest"):
        StateStore.open(SPEC, storage, root, 2, SCHEMA, buckets=4)
    # a retry of batch 2 writes its own segment (new name) and publishes it with the manifest
    retry = StateStore.open(SPEC, storage, root, 1, SCHEMA, buckets=4)
    retry.step(_events(["a"], 2), watermark=0, processing_time=0, batch_seq=2)
    retry.persist(2)
    names = {i.base_name for i in storage.list_dir(root)}
    assert len([n for n in names if n.startswith("seg-000000000002-")]) == 2   # the dead attempt's and the retry's
    reopened = StateStore.open(SPEC, storage, root, 2, SCHEMA, buckets=4)
    out = reopened.step(None, watermark=10_000, processing_time=0, batch_seq=3)
    assert sorted((r["k"], r["s"]) for r in out.panes.to_pylist()) == [("a", 2), ("b", 1)]
    # garbage collection keeps what the kept manifest refers to and the kept batch's own segments
    collect_garbage(storage, root, 2)
    left = {i.base_name for i in storage.list_dir(root)}
    assert "000000000001.manifest" not in left and "000000000002.manifest" in left
    StateStore.open(SPEC, storage, root, 2, SCHEMA, buckets=4).step(None, watermark=10_000, processing_time=0,
                                                                     batch_seq=3)
    # a corrupt manifest is an error, never an empty state
    storage.write_atomic(manifest_uri(root, 2), b"SWMANIF\x01" + b"0" * 64 + b"{}")
    with pytest.raises(SnapshotError, match="corrupt state manifest"):
        StateStore.open(SPEC, storage, root, 2, SCHEMA, buckets=4)


# --------------------------------------------------------------------------- the pane sink on S3

def _writer(root: str, app_id: str, **options: str) -> PaneStreamWriter:
    return PaneStreamWriter({"path": root, "appId": app_id, **options}, SPARK_SCHEMA, False)


def _batch(b: int, keys: int = 3) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(pane_source.COLUMNS, r)) for r in pane_source.simulate(b + 1, keys)[-1]],
                                schema=pane_source.ARROW_SCHEMA)


def _tables(root: str) -> dict[str, list[tuple]]:
    return {t: rows(DeltaTable(f"{root}/{t}").to_pyarrow_table()) for t in TABLE_NAMES}


def test_pane_sink_on_s3_commits_with_conditional_puts_and_refuses_a_second_query(object_store, tmp_path):
    proxy, root = object_store.proxy, object_store.uri("sink/panes")
    writer = _writer(root, "query-a")
    mark = proxy.mark()
    for b in range(3):
        writer.commit([writer.write(iter(_batch(b).to_batches(max_chunksize=4)))], b)
    log_puts = [r for r in proxy.since(mark, "sink/panes/") if r.kind == "PUT" and "/_delta_log/" in r.key
                and r.key.endswith(".json")]
    # every commit after the tables' creation (version 0) is one PUT with If-None-Match: *
    assert len(log_puts) == sum(DeltaTable(f"{root}/{t}").version() for t in TABLE_NAMES) >= 6
    assert all(r.conditional for r in log_puts)

    local = tmp_path / "local"
    baseline = _writer(str(local), "query-a")
    for b in range(3):
        baseline.commit([baseline.write(iter(_batch(b).to_batches(max_chunksize=4)))], b)
    assert _tables(root) == _tables(str(local))
    assert _tables(root)["current"]

    before = {t: DeltaTable(f"{root}/{t}").version() for t in TABLE_NAMES}
    with pytest.raises(RuntimeError, match="written by another query \\(appId 'query-a'.*writerLease"):
        _writer(root, "query-b")       # refused when its writer is created: the query's start
    assert {t: DeltaTable(f"{root}/{t}").version() for t in TABLE_NAMES} == before
    # the owner goes on; a query told to take over at once (writerLease 0) may
    writer.commit([writer.write(iter(_batch(3).to_batches()))], 3)
    taker = _writer(root, "query-b", writerLease="0 seconds")
    taker.commit([taker.write(iter(_batch(4).to_batches()))], 0)
    with pytest.raises(RuntimeError, match="written by another query \\(appId 'query-b'"):
        writer.commit([writer.write(iter(_batch(5).to_batches()))], 4)


def test_a_store_refusing_requests_for_seconds_is_waited_out(object_store):
    """503 Slow Down for 3 seconds: the snapshot's writes and reads retry with back-off and land
    whole; the pane sink's commit (delta-rs retries likewise) too."""
    proxy, root = object_store.proxy, object_store.uri("state-outage/shards/0000")
    store = StateStore(SPEC, storage, root, SCHEMA, buckets=4)
    store.step(_events(["a", "b"], 1), watermark=0, processing_time=0, batch_seq=1)
    mark = proxy.mark()
    proxy.refuse_for(3)
    store.persist(1)
    writer = _writer(object_store.uri("sink-outage/panes"), "query-a")
    writer.commit([writer.write(iter(_batch(0).to_batches()))], 0)
    assert count(proxy.since(mark))["REFUSED"] >= 2
    out = StateStore.open(SPEC, storage, root, 1, SCHEMA, buckets=4).step(None, watermark=10_000,
                                                                        processing_time=0, batch_seq=2)
    assert sorted((r["k"], r["s"]) for r in out.panes.to_pylist()) == [("a", 1), ("b", 1)]
    assert _tables(object_store.uri("sink-outage/panes"))["triggers"]
