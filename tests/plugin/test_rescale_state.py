"""Rescaling state between shard counts (spark_windowing.datasource.source.rescale), without Spark.

A stream runs through key-sharded state stores, as the Spark reader runs them (every shard steps
every batch with the same watermark, keeps its keys' events, snapshots per batch); the shard
count changes between batches (2 -> 5 -> 3, and 4 -> 1 -> 2), each change redistributing the
snapshots. The panes and late rows of every batch, and the final windows, must equal those of an
unsharded run. The redistribution is deterministic (a replay rebuilds the same state), leaves
the old snapshots alone, and a missing old snapshot is an error, never an empty shard.
"""

from __future__ import annotations

import os
import random

import numpy as np
import pyarrow as pa
import pytest

from spark_windowing.datasource import storage
from spark_windowing.datasource.source import rescale
from spark_windowing.datasource.source.sharding import shard_of
from spark_windowing.datasource.storage import layout
from spark_windowing.errors import OptionError, SnapshotError
from spark_windowing.operator.spec import OperatorSpec
from spark_windowing.state.segments import manifest_uri
from spark_windowing.state.store import StateStore

MS = 1000
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
KW = dict(buckets=8, max_rows=40)
CASES = {
    "tumbling_early": dict(window="tumbling(20 milliseconds)", trigger="AfterWatermark(early=AfterCount(2))",
                           aggregate="sum(v) AS s, count(*) AS n", accumulation_mode="accumulating",
                           allowed_lateness="10 milliseconds"),
    "session_retracting": dict(window="session(6 milliseconds)",
                               trigger="AfterWatermark(early=AfterCount(2), late=AfterCount(1))",
                               aggregate="sum(v) AS s, collect_list(v) AS l",
                               accumulation_mode="accumulating_and_retracting", allowed_lateness="15 milliseconds"),
}


def _spec(case: str) -> OperatorSpec:
    return OperatorSpec.from_options(key_columns="k", timestamp_unit="ms", **CASES[case])


def _batches(n: int, seed: int) -> list[tuple[pa.Table, int, int]]:
    """(events, watermark, processing time) per batch: 30 keys, out-of-order times, some late."""
    rnd, out, t = random.Random(seed), [], 0
    for _ in range(n):
        rows = [(f"k{rnd.randrange(30)}", t + rnd.randrange(-25, 15), rnd.randrange(10)) for _ in range(rnd.randrange(0, 40))]
        t += rnd.randrange(3, 12)
        out.append((pa.table({"k": [r[0] for r in rows], "ts": [r[1] for r in rows], "v": [r[2] for r in rows]},
                             schema=SCHEMA), (t - 10) * MS, t * MS))
    return out


def _rows(tables: list[pa.Table]) -> list[str]:
    return sorted(repr(sorted(r.items())) for t in tables for r in t.to_pylist())


def _run(spec, state: str, batches, counts: dict[int, int]) -> list[tuple[list[str], list[str]]]:
    """Run ``batches`` through sharded stores under ``state``; ``counts``: batch seq -> shard count
    from that batch on. Returns each batch's (panes, late rows), merged over the shards."""
    shards, out = counts[1], []
    for seq, (events, wm, proc) in enumerate(batches, start=1):
        old, shards = shards, counts.get(seq, shards)
        panes, late = [], []
        for shard in range(shards):
            root = layout.store_root(state, shard)
            if seq > 1 and old != shards:
                store = rescale.redistribute(spec, storage, [layout.store_root(state, i) for i in range(old)],
                                             seq - 1, shard, shards, root, SCHEMA, **KW)
            else:
                store = StateStore.open(spec, storage, root, seq - 1, SCHEMA, **KW)
            mine = events.filter(pa.array(shard_of(events, ("k",), shards) == shard))
            result = store.step(mine if mine.num_rows else None, watermark=wm, processing_time=proc, batch_seq=seq)
            store.persist(seq)
            panes.append(result.panes)
            late.append(result.late)
        out.append((_rows(panes), _rows(late)))
    return out


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("counts", [{1: 2, 5: 5, 9: 3}, {1: 4, 4: 1, 7: 2}], ids=["2-5-3", "4-1-2"])
def test_rescaled_run_gives_the_panes_of_an_unsharded_run(tmp_path, case, counts):
    spec, batches = _spec(case), _batches(14, seed=len(case))
    plain = _run(spec, str(tmp_path / "plain"), batches, {1: 1})
    rescaled = _run(spec, str(tmp_path / "rescaled"), batches, counts)
    assert sum(len(p) for p, _ in plain) > 30 and any(late for _, late in plain)
    for seq, (a, b) in enumerate(zip(plain, rescaled), start=1):
        assert b == a, f"batch {seq}"


def test_redistribution_is_deterministic_and_keeps_the_old_snapshots(tmp_path):
    spec, batches = _spec("session_retracting"), _batches(6, seed=3)
    state = str(tmp_path)
    _run(spec, state, batches, {1: 2})
    old_roots = [layout.store_root(state, i) for i in range(2)]
    before = [open(manifest_uri(r, 6), "rb").read() for r in old_roots]

    def rebuilt(where: str) -> tuple[list, dict]:
        store = rescale.redistribute(spec, storage, old_roots, 6, 1, 3, where, SCHEMA, **KW)
        store.load_all()
        t = store.op.table
        order = np.argsort(t.rid[:store.op.num_windows])
        keys = t.key_rows(order).to_pylist()
        return keys, {"rid": t.rid[order].tolist(), "wm": store.op.wm, "next_rid": store.op.next_rid}

    first, again = rebuilt(str(tmp_path / "a")), rebuilt(str(tmp_path / "b"))
    assert first == again and first[0]
    assert {k["k"] for k in first[0]} <= {f"k{i}" for i in range(30)}
    assert set(first[1]["rid"]) == set(range(len(first[0])))  # unique, renumbered row ids
    assert [open(manifest_uri(r, 6), "rb").read() for r in old_roots] == before


def test_every_key_lands_in_exactly_one_new_shard(tmp_path):
    spec, batches = _spec("tumbling_early"), _batches(4, seed=7)
    state = str(tmp_path)
    _run(spec, state, batches, {1: 3})
    old_roots = [layout.store_root(state, i) for i in range(3)]
    total = 0
    for i in range(3):
        s = StateStore.open(spec, storage, old_roots[i], 4, SCHEMA, **KW)
        total += s.num_windows
    seen: dict[str, int] = {}
    for shard in range(5):
        store = rescale.redistribute(spec, storage, old_roots, 4, shard, 5, str(tmp_path / f"n{shard}"), SCHEMA, **KW)
        store.load_all()
        keys = store.op.table.key_rows(np.arange(store.op.num_windows)).column("k").to_pylist()
        assert all(seen.setdefault(k, shard) == shard for k in keys)
        total -= store.num_windows
    assert total == 0 and len(seen) > 5


def test_a_missing_old_snapshot_is_an_error_not_an_empty_shard(tmp_path):
    spec, batches = _spec("tumbling_early"), _batches(3, seed=5)
    state = str(tmp_path)
    _run(spec, state, batches, {1: 2})
    os.remove(manifest_uri(layout.store_root(state, 1), 3))
    with pytest.raises(SnapshotError, match="missing state snapshot"):
        rescale.redistribute(spec, storage, [layout.store_root(state, i) for i in range(2)], 3, 0, 3,
                             str(tmp_path / "new"), SCHEMA, **KW)


@pytest.mark.parametrize("window", ["count(3)", "count(3, 10 milliseconds)", "record_sliding(10 milliseconds)"])
def test_windows_with_state_outside_the_rows_refuse_a_rescale_naming_shards(window):
    spec = OperatorSpec.from_options(window=window, aggregate="sum(v) AS s", key_columns="k", timestamp_unit="ms")
    with pytest.raises(OptionError, match="invalid option 'shards'.*written with shards=2"):
        rescale.check_rescale(spec, False, "/s", 2, 3)
    rescale.check_rescale(spec, False, "/s", 2, 2)  # an unchanged count is fine
    tumbling = _spec("tumbling_early")
    rescale.check_rescale(tumbling, False, "/s", 2, 3)
    with pytest.raises(OptionError, match="routes events to shards itself"):
        rescale.check_rescale(tumbling, True, "/s", 2, 3)
