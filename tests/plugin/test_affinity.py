"""Shard claims (spark_windowing.datasource.source.affinity): the partitions of a micro-batch run every shard exactly
once, a partition runs a shard its worker holds when it can, and a retried partition runs the
shard it claimed before."""

from __future__ import annotations

import os
import threading

import pytest

from spark_windowing.datasource.source.affinity import claim_shard


def test_a_partition_prefers_the_shards_its_worker_holds_then_its_own_number(tmp_path):
    d = str(tmp_path)
    assert claim_shard(d, partition=0, preferred=[2], shards=3) == 2
    assert claim_shard(d, partition=1, preferred=[2], shards=3) == 1   # 2 is taken: its own number
    assert claim_shard(d, partition=2, preferred=[], shards=3) == 0    # 2 and 1 taken: the first free one
    assert sorted(os.listdir(d)) == ["shard-0", "shard-1", "shard-2"]


def test_a_retried_partition_runs_the_shard_it_claimed(tmp_path):
    d = str(tmp_path)
    assert claim_shard(d, partition=0, preferred=[1], shards=2) == 1
    assert claim_shard(d, partition=0, preferred=[0], shards=2) == 1  # a retry, on a worker holding shard 0
    assert claim_shard(d, partition=1, preferred=[1], shards=2) == 0


def race_partitions(n: int, claim) -> dict[int, int]:
    """Partitions 0..n-1 call ``claim(partition)`` at the same moment, one thread each; partition ->
    the shard it got."""
    got: dict[int, int] = {}
    barrier = threading.Barrier(n)

    def task(p):
        barrier.wait()
        got[p] = claim(p)

    threads = [threading.Thread(target=task, args=(p,)) for p in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return got


def test_partitions_racing_for_the_same_shard_still_cover_every_shard_once(tmp_path):
    d, n = str(tmp_path), 8
    got = race_partitions(n, lambda p: claim_shard(d, partition=p, preferred=[3], shards=n))
    assert sorted(got.values()) == list(range(n))
    assert [claim_shard(d, partition=p, preferred=[], shards=n) for p in range(n)] == [got[p] for p in range(n)]


def test_claims_that_leave_a_partition_no_shard_are_an_error(tmp_path):
    d = str(tmp_path)
    for shard, partition in ((0, 5), (1, 6)):  # made by partitions that do not exist
        os.symlink(str(partition), tmp_path / f"shard-{shard}")
    with pytest.raises(RuntimeError, match=r"every shard of this micro-batch is claimed.*none by partition 0"):
        claim_shard(d, partition=0, preferred=[], shards=2)
