"""Shard claims on an object store by conditional writes (issue #29), against a real S3-API
server (moto, ``object_store`` fixture): ``If-None-Match: *`` creates a claim only once, so the
partitions of a micro-batch run every shard exactly once with ``s3://`` state too, a retried
partition runs the shard it claimed, and the driver reads the shards' reports in parallel."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from spark_windowing.datasource import storage
from spark_windowing.datasource.source.affinity import claim_shard_conditional, executor_tag, shard_to_run, slots
from tests.objectstore import count
from tests.plugin.test_affinity import race_partitions


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


def test_object_store_batches_get_spare_slots_where_slots_wait(object_store, tmp_path):
    state = _dir(object_store)
    assert [slots(state, 4, 3.0), slots(state, 4, 0.0), slots(state, 1, 3.0)] == [8, 4, 1]
    assert slots(str(tmp_path), 4, 3.0) == 4   # a local stateLocation: nobody waits


@pytest.fixture
def on_executor(monkeypatch, tmp_path):
    """Run the claims as a Python worker of an executor (its ``SPARK_LOCAL_DIRS``); its tag."""
    def switch(name: str) -> str:
        monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path / name))
        return executor_tag()
    return switch


def _previous(d: str, claims: dict[int, str]) -> str:
    """The claims of the batch before: shard -> the executor tag that ran it."""
    for shard, tag in claims.items():
        assert storage.create_exclusive(f"{d}/prev/shard-{shard}", f"{shard} {tag}".encode())
    return f"{d}/prev"


def test_a_spare_slot_runs_nothing_once_every_shard_is_claimed(object_store, on_executor):
    d, a = _dir(object_store), on_executor("a")
    previous = _previous(d, {0: a, 1: a})
    got = [claim_shard_conditional(f"{d}/now", partition=p, preferred=[], shards=2, previous=previous,
                                   claim_wait=5.0) for p in range(4)]
    assert got == [0, 1, None, None]
    assert storage.read_bytes(f"{d}/now/shard-1") == f"1 {a}".encode()   # the claim names the executor


def test_a_slot_leaves_a_shard_to_the_executor_that_ran_it_until_that_one_claims_it(object_store, on_executor):
    """Spark gave executor A a third task while B is busy: A's slot finds its own shards claimed and
    shard 1 (B ran it last batch) unclaimed, and waits; B's next task claims it; A's runs nothing."""
    d, b, a = _dir(object_store), on_executor("b"), on_executor("a")
    previous = _previous(d, {0: a, 1: b, 2: a})
    now = f"{d}/now"
    assert claim_shard_conditional(now, partition=0, preferred=[0], shards=3, previous=previous, claim_wait=5.0) == 0
    assert claim_shard_conditional(now, partition=1, preferred=[2], shards=3, previous=previous, claim_wait=5.0) == 2
    later = threading.Timer(0.6, lambda: storage.create_exclusive(f"{now}/shard-1", f"4 {b}".encode()))
    later.start()
    t0 = time.monotonic()
    got = claim_shard_conditional(now, partition=2, preferred=[], shards=3, previous=previous, claim_wait=60.0)
    waited = time.monotonic() - t0
    later.join()
    # it waited for B's claim (at least the timer's 0.6 s), and B's claim ended the wait: it never
    # took the shard itself (claim_wait is far above any machine's delay)
    assert got is None and waited >= 0.5, (got, waited)
    assert storage.read_bytes(f"{now}/shard-1") == f"4 {b}".encode()


def test_after_claim_wait_a_slot_takes_the_shard_its_holder_left(object_store, on_executor):
    """The executor that ran shard 1 was lost (or is busy that long): after ``claim_wait`` the
    waiting slot claims it (and will read its state from the store)."""
    d, b, a = _dir(object_store), on_executor("b"), on_executor("a")
    previous = _previous(d, {0: a, 1: b})
    now = f"{d}/now"
    assert claim_shard_conditional(now, partition=0, preferred=[0], shards=2, previous=previous, claim_wait=0.8) == 0
    t0 = time.monotonic()
    assert claim_shard_conditional(now, partition=1, preferred=[], shards=2, previous=previous, claim_wait=0.8) == 1
    assert time.monotonic() - t0 >= 0.8


def test_an_executor_that_ran_no_shard_before_waits_for_nobody(object_store, on_executor):
    """After a restart every executor is new: none of them ran a shard of the batch before, so none
    waits for the executors named there (they are gone); likewise an executor added to the cluster."""
    d, b, c, a = _dir(object_store), on_executor("b"), on_executor("c"), on_executor("a")
    previous = _previous(d, {0: b, 1: c})
    t0 = time.monotonic()
    got = [claim_shard_conditional(f"{d}/now", partition=p, preferred=[], shards=2, previous=previous,
                                   claim_wait=60.0) for p in (0, 1)]
    assert got == [0, 1] and time.monotonic() - t0 < 30   # no 60 s wait for anybody


def test_reports_are_read_in_parallel_in_order(object_store):
    d = _dir(object_store)
    for i in range(40):
        storage.write_atomic(f"{d}/r-{i}", str(i).encode(), durable=False)
    got = storage.read_many([f"{d}/r-{i}" for i in range(40)] + [f"{d}/missing"], missing_ok=True)
    assert got == [str(i).encode() for i in range(40)] + [None]


def test_claim_wait_is_a_duration_option_refused_by_name():
    from spark_windowing.datasource.source.parse import parse_options
    from spark_windowing.errors import OptionError

    base = {"source": "generator", "window": "tumbling(1 minute)", "aggregate": "count(*) AS n",
            "statelocation": "s3://b/state"}
    assert parse_options(base).claim_wait == 3.0
    assert parse_options({**base, "claimwait": "500 milliseconds"}).claim_wait == 0.5
    with pytest.raises(OptionError, match=r"claimWait.*soon.*\d+ seconds"):
        parse_options({**base, "claimwait": "soon"})
