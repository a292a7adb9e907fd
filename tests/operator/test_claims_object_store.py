"""Shard claims on an object store by conditional writes (issue #29), against a real S3-API
server (moto, ``object_store`` fixture): ``If-None-Match: *`` creates a claim only once, so the
partitions of a micro-batch run every shard exactly once with ``s3://`` state too, a retried
partition runs the shard it claimed, and the driver reads the shards' reports in parallel."""

from __future__ import annotations

import uuid

from spark_windowing.datasource import storage
from spark_windowing.datasource.affinity import claim_shard_conditional, shard_to_run
from tests.objectstore import count
from tests.operator.test_affinity import race_partitions


def _dir(object_store) -> str:
    return object_store.uri(f"claims-{uuid.uuid4().hex[:8]}")


def test_a_conditional_put_creates_an_object_only_once(object_store):
    uri = f"{_dir(object_store)}/shard-0"
    mark = object_store.proxy.mark()
    assert storage.create_exclusive(uri, b"3") is True
    assert storage.create_exclusive(uri, b"4") is False
    assert storage.read_bytes(uri) == b"3"
    puts = [r for r in object_store.proxy.since(mark) if r.kind == "PUT"]
    assert [(r.conditional, r.status) for r in puts] == [(True, 200), (True, 412)]


def test_claims_prefer_held_shards_then_the_own_number_and_a_retry_keeps_its_shard(object_store):
    d = _dir(object_store)
    assert claim_shard_conditional(d, partition=0, preferred=[2], shards=3) == 2
    assert claim_shard_conditional(d, partition=1, preferred=[2], shards=3) == 1
    assert claim_shard_conditional(d, partition=0, preferred=[1], shards=3) == 2  # a retry elsewhere
    assert claim_shard_conditional(d, partition=2, preferred=[5], shards=3) == 0  # 5: not a shard of 3
    mark = object_store.proxy.mark()
    assert claim_shard_conditional(d, partition=2, preferred=[], shards=3) == 0
    # a retry reads its intent and that claim (pyarrow: a HEAD and a GET each), writes nothing
    assert count(object_store.proxy.since(mark)) == {"HEAD": 2, "GET": 2}


def test_partitions_racing_on_the_object_store_cover_every_shard_once(object_store):
    d, n = _dir(object_store), 8
    got = race_partitions(n, lambda p: claim_shard_conditional(d, partition=p, preferred=[3], shards=n))
    assert sorted(got.values()) == list(range(n))


def test_shard_to_run_claims_on_s3(object_store):
    state = _dir(object_store)
    first = shard_to_run(state, 4, partition=1, start_seq=0, seq=1)
    second = shard_to_run(state, 4, partition=2, start_seq=0, seq=1)
    assert (first, second) == (1, 2)
    assert storage.read_bytes(f"{state}/claims/1/shard-1") == b"1"


def test_reports_are_read_in_parallel_in_order(object_store):
    d = _dir(object_store)
    for i in range(40):
        storage.write_atomic(f"{d}/r-{i}", str(i).encode(), durable=False)
    got = storage.read_many([f"{d}/r-{i}" for i in range(40)] + [f"{d}/missing"], missing_ok=True)
    assert got == [str(i).encode() for i in range(40)] + [None]
