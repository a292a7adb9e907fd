"""The state store (spark_windowing.state.store): bucketed, lazily loaded, incrementally persisted and
spilled state gives exactly the panes and late rows of the plain in-memory operator.

The property test runs the same random stream through a plain ``WindowedOperator`` and through a
``StateStore`` with a tiny memory budget (most buckets spilled after every step), a snapshot per
step, random reopening from the last manifest (a restarted executor) and few segment files
(frequent compaction), and compares every step's output, row for row and in order.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_properties import triggers

from spark_windowing.datasource import storage
from spark_windowing.errors import SnapshotError
from spark_windowing.operator.spec import OperatorSpec
from spark_windowing.operator.windowed import WindowedOperator
from spark_windowing.state.segments import collect_garbage, manifest_uri
from spark_windowing.state.store import StateStore

MS = 1000
WINDOWS = ["tumbling(10 milliseconds)", "sliding(20 milliseconds, 5 milliseconds)", "session(7 milliseconds)",
           "cumulate(20 milliseconds, 5 milliseconds)", "count(3, 2)", "global",
           "count(3, 10 milliseconds)", "sliding(10 milliseconds, 2 elements)", "record_sliding(10 milliseconds)"]
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
PROCESS = "tests.core.fixtures.process_functions:values"


@st.composite
def scenarios(draw):
    window = draw(st.sampled_from(WINDOWS))
    trigger = draw(triggers()) if window != "global" else "AfterCount(2)"
    if window.startswith("count"):
        trigger = draw(st.sampled_from(["", "AfterCount(2)"]))
    mixed = "milliseconds)" in window and window.startswith("count") or "elements" in window
    if mixed or window.startswith("record_sliding"):  # fire once, final: no trigger
        trigger = ""
    mode = draw(st.sampled_from(["discarding", "accumulating", "accumulating_and_retracting"]))
    lateness = 0 if mixed else draw(st.sampled_from([0, 5, 30]))
    agg = draw(st.sampled_from(["sum(v) AS s, count(*) AS n", "collect_list(v) AS l, max(v) AS m",
                                PROCESS + " count(3)", PROCESS + " time(8 milliseconds)"]))
    steps = []
    t = 0
    for _ in range(draw(st.integers(2, 8))):
        n = draw(st.integers(0, 12))
        rows = [(f"k{draw(st.integers(0, 9))}", t + draw(st.integers(-15, 25)), draw(st.integers(0, 9)))
                for _ in range(n)]
        t += draw(st.integers(0, 20))
        steps.append((rows, t - draw(st.integers(0, 10)), t * 2, draw(st.booleans())))
    return window, trigger, mode, lateness, agg, steps


def _spec(window, trigger, mode, lateness, agg):
    if agg.startswith(PROCESS):  # a process function (buffered elements) with an evictor
        fn, evictor = agg.split(" ", 1)
        how = dict(process=fn, evictor=evictor)
    else:
        how = dict(aggregate=agg)
    return OperatorSpec.from_options(window=window, trigger=trigger or None, **how, key_columns="k",
                                     timestamp_unit="ms", accumulation_mode=mode,
                                     allowed_lateness=f"{lateness} milliseconds")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(scenarios(), st.integers(1, 6), st.integers(1, 3))
def test_store_matches_in_memory_operator(tmp_path_factory, case, max_rows, max_files):
    window, trigger, mode, lateness, agg, steps = case
    spec = _spec(window, trigger, mode, lateness, agg)
    root = str(tmp_path_factory.mktemp("store"))
    plain = WindowedOperator(spec, SCHEMA)
    kw = dict(buckets=8, max_rows=max_rows, max_files=max_files)
    store = StateStore(spec, storage, root, SCHEMA, **kw)
    split = False  # once a batch ran in parts, row ids (hence the order of panes) may differ
    for seq, (rows, wm, proc, reopen) in enumerate(steps, start=1):
        events = pa.table({"k": [r[0] for r in rows], "ts": [r[1] for r in rows], "v": [r[2] for r in rows]},
                          schema=SCHEMA) if rows else None
        a = plain.step(events, watermark=wm * MS, processing_time=proc * MS, batch_seq=seq)
        b = store.step(events, watermark=wm * MS, processing_time=proc * MS, batch_seq=seq)
        split |= b.metrics.get("parts", 1) > 1
        if split:
            assert _sorted(b.panes) == _sorted(a.panes), f"step {seq}"
            assert _sorted(b.late) == _sorted(a.late), f"step {seq}"
        else:
            assert b.panes.to_pylist() == a.panes.to_pylist(), f"step {seq}"
            assert b.late.to_pylist() == a.late.to_pylist(), f"step {seq}"
        assert store.num_windows == plain.num_windows
        assert store.next_timers() == plain.next_timers()
        store.persist(seq)
        store.evict()
        assert store.op.num_windows <= max_rows or len(np.unique(store.op.cols["bkt"])) == 1  # a bucket may exceed it
        if reopen:
            store = StateStore.open(spec, storage, root, seq, SCHEMA, **kw)
        collect_garbage(storage, root, seq)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(scenarios(), st.integers(1, 6), st.data())
def test_workers_taking_turns_catch_up_to_the_in_memory_operator(tmp_path_factory, case, max_rows, data):
    """Spark's Python workers take turns on a shard (with a Python sink, the reading and the writing
    worker swap every batch). Each worker keeps its store; the next time it runs the shard it
    brings the store up to the batch's start (``catch_up``: buckets written since are dropped and
    read back when needed) instead of opening it from the snapshot. Panes, late rows, windows and
    timers equal one in-memory operator's, batch by batch."""
    window, trigger, mode, lateness, agg, steps = case
    spec = _spec(window, trigger, mode, lateness, agg)
    root = str(tmp_path_factory.mktemp("turns"))
    plain = WindowedOperator(spec, SCHEMA)
    kw = dict(buckets=8, max_rows=max_rows, max_files=2)
    held: dict[int, StateStore] = {}
    split = False
    for seq, (rows, wm, proc, _) in enumerate(steps, start=1):
        worker = data.draw(st.integers(0, 2), label=f"worker of batch {seq}")
        store = held.get(worker)
        if store is None:
            store = StateStore.open(spec, storage, root, seq - 1, SCHEMA, **kw)
        elif store.op.seq < seq - 1:
            store.catch_up(storage.read_bytes(manifest_uri(root, seq - 1)), manifest_uri(root, seq - 1))
        events = pa.table({"k": [r[0] for r in rows], "ts": [r[1] for r in rows], "v": [r[2] for r in rows]},
                          schema=SCHEMA) if rows else None
        a = plain.step(events, watermark=wm * MS, processing_time=proc * MS, batch_seq=seq)
        b = store.step(events, watermark=wm * MS, processing_time=proc * MS, batch_seq=seq)
        split |= b.metrics.get("parts", 1) > 1
        assert _sorted(b.panes) == _sorted(a.panes), f"step {seq}"
        assert _sorted(b.late) == _sorted(a.late), f"step {seq}"
        assert store.num_windows == plain.num_windows
        assert store.next_timers() == plain.next_timers()
        store.persist(seq)
        store.evict()
        held[worker] = store


def test_catch_up_keeps_the_buckets_nobody_changed(tmp_path):
    """A worker two batches behind reads back only the bucket the batch in between changed."""
    spec = _spec("tumbling(1000 milliseconds)", "", "accumulating", 5000, "sum(v) AS s")
    root = str(tmp_path)
    mine = StateStore(spec, storage, root, SCHEMA, buckets=16)
    keys = [f"k{i}" for i in range(2000)]
    mine.step(pa.table({"k": keys, "ts": [1] * 2000, "v": [1] * 2000}, schema=SCHEMA), watermark=0,
              processing_time=0, batch_seq=1)
    mine.persist(1)
    other = StateStore.open(spec, storage, root, 1, SCHEMA, buckets=16)   # the batch in between
    other.step(pa.table({"k": ["k1"], "ts": [2], "v": [5]}, schema=SCHEMA), watermark=0, processing_time=0,
               batch_seq=2)
    other.persist(2)
    assert mine.catch_up(storage.read_bytes(manifest_uri(root, 2)), manifest_uri(root, 2)) == 1
    assert mine.resident.sum() == 15 and mine.op.num_windows == 2000 - other.op.num_windows
    out = mine.step(None, watermark=2_000_000, processing_time=0, batch_seq=3)
    sums = {r["k"]: r["s"] for r in out.panes.to_pylist()}
    assert len(sums) == 2000 and sums["k1"] == 6 and sums["k2"] == 1


def _sorted(table):
    return sorted(table.to_pylist(), key=repr)


def _filled_store(root, **kw):
    spec = _spec("tumbling(10 milliseconds)", "", "discarding", 0, "sum(v) AS s")
    store = StateStore(spec, storage, root, SCHEMA, buckets=4, **kw)
    events = pa.table({"k": [f"k{i}" for i in range(40)], "ts": list(range(40)), "v": [1] * 40}, schema=SCHEMA)
    store.step(events, watermark=0, processing_time=0, batch_seq=1)
    store.persist(1)
    return spec, store


def test_snapshot_writes_only_changed_buckets(tmp_path):
    spec = _spec("tumbling(1000 milliseconds)", "", "discarding", 0, "sum(v) AS s")
    store = StateStore(spec, storage, str(tmp_path), SCHEMA, buckets=16)
    keys = [f"k{i}" for i in range(20000)]
    store.step(pa.table({"k": keys, "ts": [1] * 20000, "v": [1] * 20000}, schema=SCHEMA), watermark=0,
               processing_time=0, batch_seq=1)
    full = store.persist(1)
    store.step(pa.table({"k": ["k1"], "ts": [2], "v": [5]}, schema=SCHEMA), watermark=0, processing_time=0,
               batch_seq=2)
    small = store.persist(2)
    assert small < full / 8  # one bucket of 16 (plus the manifest), not the whole state
    reopened = StateStore.open(spec, storage, str(tmp_path), 2, SCHEMA, buckets=16)
    out = reopened.step(None, watermark=2_000_000, processing_time=0, batch_seq=3)
    sums = {r["k"]: r["s"] for r in out.panes.to_pylist()}
    assert len(sums) == 20000 and sums["k1"] == 6 and sums["k2"] == 1


def test_spilled_store_keeps_memory_bounded_and_reads_back(tmp_path):
    spec, store = _filled_store(str(tmp_path), max_rows=10)
    dropped = store.evict()
    assert dropped > 0 and store.op.num_windows <= 10 + 40 // 4 and store.num_windows == 40
    out = store.step(None, watermark=100_000, processing_time=0, batch_seq=2)
    assert sorted(r["k"] for r in out.panes.to_pylist()) == sorted(f"k{i}" for i in range(40))


def test_a_second_step_of_the_same_batch_runs_in_parts_and_persists_once(tmp_path):
    """window(df)'s end of input: the batch's events, then the end-of-time watermark, in one batch.
    The second step runs in parts (too little memory for the 40 due windows) over the first's
    unpersisted changes; a different batch without persist() in between stays refused."""
    spec, store = _filled_store(str(tmp_path), max_rows=10)
    plain = WindowedOperator(spec, SCHEMA)
    plain.step(pa.table({"k": [f"k{i}" for i in range(40)], "ts": list(range(40)), "v": [1] * 40}, schema=SCHEMA),
               watermark=0, processing_time=0, batch_seq=1)
    more = pa.table({"k": ["k1", "k50"], "ts": [45, 46], "v": [2, 3]}, schema=SCHEMA)
    want = [plain.step(more, watermark=0, processing_time=0, batch_seq=2),
            plain.step(None, watermark=10**9, processing_time=0, batch_seq=2)]
    got = [list(store.step_parts(more, watermark=0, processing_time=0, batch_seq=2)),
           list(store.step_parts(None, watermark=10**9, processing_time=0, batch_seq=2))]
    assert len(got[1]) > 1   # in parts
    for w, g in zip(want, got):
        assert _sorted(pa.concat_tables([p.panes for p in g])) == _sorted(w.panes)
    store.persist(2)
    assert StateStore.open(spec, storage, str(tmp_path), 2, SCHEMA, buckets=4).num_windows == plain.num_windows == 0
    later = pa.table({"k": [f"k{i}" for i in range(40)], "ts": [2_000_000] * 40, "v": [1] * 40}, schema=SCHEMA)
    store.step(later, watermark=10**9, processing_time=0, batch_seq=3)
    with pytest.raises(AssertionError, match="persist"):
        list(store.step_parts(None, watermark=10**10, processing_time=0, batch_seq=4))


def test_missing_manifest_is_an_error_naming_the_path(tmp_path):
    spec, store = _filled_store(str(tmp_path))
    with pytest.raises(SnapshotError, match="missing state snapshot .*000000000002.manifest"):
        StateStore.open(spec, storage, str(tmp_path), 2, SCHEMA, buckets=4)


def test_corrupt_manifest_and_segment_are_errors(tmp_path):
    spec, store = _filled_store(str(tmp_path))
    m = manifest_uri(str(tmp_path), 1)
    blob = bytearray(open(m, "rb").read())
    blob[-3] ^= 0x55
    open(m, "wb").write(bytes(blob))
    with pytest.raises(SnapshotError, match="corrupt state manifest"):
        StateStore.open(spec, storage, str(tmp_path), 1, SCHEMA, buckets=4)
    spec, store = _filled_store(str(tmp_path / "b"))
    seg = [f for f in os.listdir(tmp_path / "b") if f.startswith("seg-")][0]
    path = tmp_path / "b" / seg
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x55
    path.write_bytes(bytes(data))
    reopened = StateStore.open(spec, storage, str(tmp_path / "b"), 1, SCHEMA, buckets=4)
    with pytest.raises(SnapshotError, match="corrupt state segment"):
        reopened.step(None, watermark=100_000, processing_time=0, batch_seq=2)
    os.remove(path)
    with pytest.raises(SnapshotError, match="missing state segment"):
        StateStore.open(spec, storage, str(tmp_path / "b"), 1, SCHEMA, buckets=4)


def test_other_spec_or_bucket_count_is_refused(tmp_path):
    spec, store = _filled_store(str(tmp_path))
    other = _spec("tumbling(20 milliseconds)", "", "discarding", 0, "sum(v) AS s")
    with pytest.raises(SnapshotError, match="different windowing spec"):
        StateStore.open(other, storage, str(tmp_path), 1, SCHEMA, buckets=4)
    with pytest.raises(SnapshotError, match="4 key buckets"):
        StateStore.open(spec, storage, str(tmp_path), 1, SCHEMA, buckets=8)


def test_garbage_collection_keeps_what_the_manifest_refers_to(tmp_path):
    root = str(tmp_path)
    spec = _spec("tumbling(10 milliseconds)", "", "accumulating", 1000, "sum(v) AS s")
    store = StateStore(spec, storage, root, SCHEMA, buckets=4, max_files=2)
    for seq in range(1, 8):
        store.step(pa.table({"k": [f"k{seq % 3}"], "ts": [seq], "v": [seq]}, schema=SCHEMA), watermark=0,
                   processing_time=0, batch_seq=seq)
        store.persist(seq)
        collect_garbage(storage, root, seq)
    names = set(os.listdir(root))
    assert names >= store.files.referenced_files() and "000000000007.manifest" in names
    assert not any(n.endswith(".manifest") and n != "000000000007.manifest" for n in names)
    assert len([n for n in names if n.startswith("seg-")]) <= 3
    out = StateStore.open(spec, storage, root, 7, SCHEMA, buckets=4).step(
        None, watermark=10_000_000, processing_time=0, batch_seq=8)
    assert sum(r["s"] for r in out.panes.to_pylist()) == sum(range(1, 8))


JOIN_WINDOWS = [w for w in WINDOWS if not w.startswith(("count", "record_sliding")) and "elements" not in w]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(scenarios(), st.sampled_from(JOIN_WINDOWS), st.sampled_from(["inner", "left", "outer", "cogroup"]),
       st.integers(1, 6), st.data())
def test_store_matches_in_memory_operator_for_joins(tmp_path_factory, case, window, how, max_rows, data):
    """Two streams (spark_windowing.operator.join): the store keeps the side counters like any state."""
    from spark_windowing.operator import join
    _, trigger, mode, lateness, agg, steps = case
    if agg.startswith(PROCESS):  # no process functions with join
        agg = "sum(v) AS s, count(*) AS n"
    if window == "global":
        trigger = "AfterCount(2)"
    spec = OperatorSpec.from_options(window=window, trigger=trigger or None, aggregate=agg, key_columns="k",
                                     timestamp_unit="ms", accumulation_mode=mode, join=how,
                                     allowed_lateness=f"{lateness} milliseconds")
    schema = join.union_schema(SCHEMA, SCHEMA, spec)
    root = str(tmp_path_factory.mktemp("store"))
    plain = WindowedOperator(spec, schema)
    kw = dict(buckets=8, max_rows=max_rows, max_files=2)
    store = StateStore(spec, storage, root, schema, **kw)
    for seq, (rows, wm, proc, reopen) in enumerate(steps, start=1):
        side2 = [data.draw(st.booleans()) for _ in rows]
        t1, t2 = ([r for r, s in zip(rows, side2) if s == pick] for pick in (False, True))
        events = join.union(*(pa.table({"k": [r[0] for r in t], "ts": [r[1] for r in t], "v": [r[2] for r in t]},
                                       schema=SCHEMA) for t in (t1, t2)), spec, schema)
        a = plain.step(events, watermark=wm * MS, processing_time=proc * MS, batch_seq=seq)
        b = store.step(events, watermark=wm * MS, processing_time=proc * MS, batch_seq=seq)
        assert _sorted(b.panes) == _sorted(a.panes), f"step {seq}"
        assert _sorted(b.late) == _sorted(a.late), f"step {seq}"
        store.persist(seq)
        store.evict()
        if reopen:
            store = StateStore.open(spec, storage, root, seq, schema, **kw)
        collect_garbage(storage, root, seq)


def test_event_times_parsed_by_the_caller_give_the_same_step(tmp_path):
    """The Spark reader parses a batch's event times once (for the watermark) and hands them to
    the step: a spilling store fed those gives what it gives when it parses them itself, and the
    caller's validity mask is left as it was."""
    spec = OperatorSpec.from_options(window="session(7 milliseconds)", aggregate="sum(v) AS s",
                                     trigger="AfterWatermark(early=AfterCount(2))", key_columns="k",
                                     timestamp_unit="ms", accumulation_mode="accumulating_and_retracting")
    rng = np.random.default_rng(3)
    stores = [StateStore(spec, storage, str(tmp_path / name), SCHEMA, buckets=8, max_rows=3)
              for name in ("parsed_here", "parsed_by_caller")]
    for seq in range(1, 7):
        n = 40
        ts = pa.array(rng.integers(seq * 20 - 30, seq * 20, n), pa.int64())
        ts = pa.array(ts.to_pylist()[:-2] + [None, None], pa.int64())  # two malformed rows
        events = pa.table({"k": [f"k{i}" for i in rng.integers(0, 12, n)], "ts": ts,
                           "v": pa.array(rng.integers(0, 9, n), pa.int64())}, schema=SCHEMA)
        times = stores[1].op.event_times(events)
        mask = times[1].copy()
        results = [store.step(events, watermark=seq * 20 * MS - 15 * MS, batch_seq=seq, event_times=t)
                   for store, t in zip(stores, (None, times))]
        assert np.array_equal(times[1], mask)
        assert results[0].panes.equals(results[1].panes) and results[0].late.equals(results[1].late)
        assert results[0].panes.num_rows and results[0].metrics["parts"] > 1
        for store in stores:
            store.persist(seq)


def test_segments_written_without_compression_are_read(tmp_path, monkeypatch):
    """A state location written as releases before LZ4 segments and version-2 manifests wrote it
    (plain IPC segments, every state column in them, manifest version 1) restores to the same
    panes."""
    import spark_windowing.state.segments as segments_module
    import spark_windowing.state.store as store_module
    spec = _spec("tumbling(1000 milliseconds)", "", "discarding", 0, "sum(v) AS s")
    monkeypatch.setattr(segments_module, "_SEGMENT_IPC", pa.ipc.IpcWriteOptions(compression=None))
    monkeypatch.setattr(segments_module, "MANIFEST_VERSION", 1)
    monkeypatch.setattr(store_module, "constant_columns", lambda op: frozenset())
    plain = StateStore(spec, storage, str(tmp_path), SCHEMA, buckets=4)
    plain.step(pa.table({"k": ["a", "b", "a"], "ts": [1, 2, 3], "v": [1, 2, 3]}, schema=SCHEMA), watermark=0,
               processing_time=0, batch_seq=1)
    plain.persist(1)
    monkeypatch.undo()
    reopened = StateStore.open(spec, storage, str(tmp_path), 1, SCHEMA, buckets=4)
    out = reopened.step(None, watermark=2_000_000, processing_time=0, batch_seq=2)
    assert sorted((r["k"], r["s"]) for r in out.panes.to_pylist()) == [("a", 4), ("b", 2)]


def test_constant_state_columns_are_left_out_of_segments_and_restored(tmp_path):
    """Columns every window has at their default (fresh windows: no pane yet, not closed) are not
    written; the manifest names them per segment and a restored store puts the defaults back, so
    its panes are the in-memory operator's. A column that leaves its default is written again."""
    import json
    spec = _spec("tumbling(10 milliseconds)", "AfterWatermark(early=AfterCount(2))", "accumulating", 0,
                 "sum(v) AS s")
    plain = WindowedOperator(spec, SCHEMA)
    store = StateStore(spec, storage, str(tmp_path), SCHEMA, buckets=4)
    batches = [pa.table({"k": [f"k{i % 7}" for i in range(n)], "ts": list(range(n)), "v": list(range(n))},
                        schema=SCHEMA) for n in (5, 30)]

    def omitted(seq):
        blob = open(manifest_uri(str(tmp_path), seq), "rb").read()
        return json.loads(blob[len(b"SWMANIF\x01") + 64:])["omitted"]

    for seq, events in enumerate(batches, start=1):
        a = plain.step(events, watermark=0, processing_time=0, batch_seq=seq)
        b = store.step(events, watermark=0, processing_time=0, batch_seq=seq)
        assert b.panes.to_pylist() == a.panes.to_pylist()
        store.persist(seq)
        store = StateStore.open(spec, storage, str(tmp_path), seq, SCHEMA, buckets=4)
    first, second = omitted(1), omitted(2)
    assert {"closed", "pidx", "lp_idx"} <= set(next(iter(first.values())))  # no early pane yet
    assert "pidx" not in set().union(*map(set, second.values()))  # early panes fired: written
    out = store.step(None, watermark=100_000, processing_time=0, batch_seq=3)
    assert out.panes.to_pylist() == plain.step(None, watermark=100_000, processing_time=0, batch_seq=3).panes.to_pylist()


def test_a_stores_storage_handle_can_be_replaced(tmp_path):
    """``window(df)`` keeps a shard's store open across micro-batches and hands it each batch's
    own storage handle (``store.io = ...``): what the store writes next goes through the new one."""
    class Recording:
        def __init__(self):
            self.written = []

        def __getattr__(self, name):
            return getattr(storage, name)

        def write_atomic(self, uri, data, *, durable=True):
            self.written.append(uri)
            storage.write_atomic(uri, data, durable=durable)

    spec = _spec("tumbling(1000 milliseconds)", "", "discarding", 0, "sum(v) AS s")
    first, second = Recording(), Recording()
    store = StateStore(spec, first, str(tmp_path), SCHEMA, buckets=4)
    store.step(pa.table({"k": ["a"], "ts": [1], "v": [1]}, schema=SCHEMA), watermark=0, processing_time=0, batch_seq=1)
    store.persist(1)
    store.io = second
    store.step(pa.table({"k": ["b"], "ts": [2], "v": [2]}, schema=SCHEMA), watermark=0, processing_time=0, batch_seq=2)
    store.persist(2)
    assert store.io is second and first.written and second.written
    assert manifest_uri(str(tmp_path), 2) in second.written and manifest_uri(str(tmp_path), 2) not in first.written
