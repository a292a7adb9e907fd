"""Executor-local copies of state segments (issue #29: no state reloads on object storage), against
the real S3-API server (``object_store`` fixture, requests counted by its proxy). A shard's store
on ``s3://`` writes each segment to the store and to the executor's local directory
(``SPARK_LOCAL_DIRS``); another worker of the same executor that opens the shard reads those
copies and GETs no segment; a copy that is missing is fetched whole once, one that is corrupt is
dropped and read from the store again; copies the latest snapshot no longer names are deleted."""

from __future__ import annotations

import os
import uuid

import pyarrow as pa
import pytest

from spark_windowing.datasource import storage
from spark_windowing.datasource.storage import local_copies
from spark_windowing.errors import SnapshotError
from spark_windowing.operator.spec import OperatorSpec
from spark_windowing.state.store import StateStore
from tests.objectstore import count

SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
SPEC = OperatorSpec.from_options(window="tumbling(10 milliseconds)", aggregate="sum(v) AS s, count(*) AS n",
                                 key_columns="k", timestamp_unit="ms", accumulation_mode="accumulating",
                                 allowed_lateness="1000 milliseconds")
BUCKETS = 8


@pytest.fixture
def executor_dir(tmp_path, monkeypatch):
    """The local directory Spark gives an executor's Python workers."""
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path / "blockmgr"))
    return tmp_path / "blockmgr"


def _events(batch: int) -> pa.Table:
    keys = [f"k{i}" for i in range(40)]
    return pa.table({"k": keys, "ts": [batch * 10 + i % 7 for i in range(40)], "v": list(range(40))}, schema=SCHEMA)


def _run(state: str, root: str, batches: range, store: StateStore | None = None) -> StateStore:
    """Step and snapshot shard 0 through ``batches`` as the reader does (``after_snapshot``)."""
    for b in batches:
        if store is None:
            store = StateStore.open(SPEC, local_copies.io_for(state, 0, root), root, b, SCHEMA, buckets=BUCKETS)
        store.step(_events(b), watermark=b * 10 - 30, processing_time=0, batch_seq=b + 1)
        store.persist(b + 1)
        local_copies.after_snapshot(store.io, b + 1, store.files.snapshot_files())
    return store


def _reopen(state: str, root: str, seq: int) -> StateStore:
    store = StateStore.open(SPEC, local_copies.io_for(state, 0, root), root, seq, SCHEMA, buckets=BUCKETS)
    store.load_all()
    return store


def test_a_second_worker_reads_the_shard_from_local_copies_and_gets_no_segment(object_store, executor_dir):
    state = object_store.uri(f"copies-{uuid.uuid4().hex[:8]}")
    root = f"{state}/state/shard-0"
    written = _run(state, root, range(4))
    copies = executor_dir / "spark-windowing-copies"
    assert local_copies.local_shards(state, 4) == [0]
    assert local_copies.local_shards(state, 3) == []
    kept = {p.name for p in copies.rglob("seg-*")}
    assert kept == written.files.snapshot_files()          # older copies were deleted

    mark = object_store.proxy.mark()
    other = _reopen(state, root, 4)                    # another Python worker of the executor
    assert other.io.local_reads > 0 and other.io.remote_reads == 0
    assert count(object_store.proxy.since(mark), r"/seg-") == {}
    assert count(object_store.proxy.since(mark), r"\.manifest$")["GET"] == 1
    plain = StateStore.open(SPEC, storage, root, 4, SCHEMA, buckets=BUCKETS)  # the store itself
    plain.load_all()
    assert other.op.num_windows == plain.op.num_windows > 0
    assert _step_panes(other) == _step_panes(plain)


def _step_panes(store: StateStore) -> list:
    out = store.step(None, watermark=10_000, processing_time=0, batch_seq=99)
    return sorted(map(str, out.panes.to_pylist()))


def test_a_missing_copy_is_fetched_whole_once(object_store, executor_dir):
    state = object_store.uri(f"copies-{uuid.uuid4().hex[:8]}")
    root = f"{state}/state/shard-0"
    written = _run(state, root, range(3))
    for p in (executor_dir / "spark-windowing-copies").rglob("seg-*"):
        p.unlink()
    mark = object_store.proxy.mark()
    other = _reopen(state, root, 3)
    segments = len(written.files.snapshot_files())
    assert other.io.remote_reads == segments
    assert count(object_store.proxy.since(mark), r"/seg-")["GET"] == segments
    mark = object_store.proxy.mark()
    again = _reopen(state, root, 3)
    assert again.io.remote_reads == 0 and count(object_store.proxy.since(mark), r"/seg-") == {}


def test_a_corrupt_copy_is_dropped_and_read_from_the_store(object_store, executor_dir):
    state = object_store.uri(f"copies-{uuid.uuid4().hex[:8]}")
    root = f"{state}/state/shard-0"
    _run(state, root, range(2))
    for p in (executor_dir / "spark-windowing-copies").rglob("seg-*"):
        data = bytearray(p.read_bytes())
        data[len(data) // 2] ^= 0x55
        p.write_bytes(bytes(data))
    plain = StateStore.open(SPEC, storage, root, 2, SCHEMA, buckets=BUCKETS)
    plain.load_all()
    other = _reopen(state, root, 2)
    assert other.io.remote_reads >= 1
    assert _step_panes(other) == _step_panes(plain)


def test_a_corrupt_segment_on_the_store_is_still_an_error(object_store, executor_dir):
    state = object_store.uri(f"copies-{uuid.uuid4().hex[:8]}")
    root = f"{state}/state/shard-0"
    written = _run(state, root, range(2))
    for name in written.files.snapshot_files():
        uri = f"{root}/{name}"
        data = bytearray(storage.read_bytes(uri))
        data[len(data) // 2] ^= 0x55
        storage.write_atomic(uri, bytes(data))
        (executor_dir / "spark-windowing-copies").joinpath(*_copy_parts(state, name)).unlink()
    with pytest.raises(SnapshotError, match="corrupt state segment"):
        _reopen(state, root, 2)


def _copy_parts(state: str, name: str) -> tuple[str, ...]:
    return (os.path.basename(local_copies.copies_dir(state)), "shard-0", name)


def test_no_copies_without_an_executor_directory_or_with_local_state(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    assert local_copies.io_for("s3://b/state", 0, "s3://b/state/shard-0") is storage
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path))
    assert local_copies.io_for(str(tmp_path / "state"), 0, str(tmp_path / "state" / "shard-0")) is storage
    assert isinstance(local_copies.io_for("s3://b/state", 0, "s3://b/state/shard-0"), local_copies.LocalCopies)


def test_a_task_claims_a_shard_whose_state_its_executor_wrote(object_store, executor_dir):
    """The claim order: shards this worker holds in memory, then shards whose snapshot at the
    batch's start this executor wrote (``local_shards``), then the partition's own number."""
    from spark_windowing.datasource.source.affinity import shard_to_run
    state = object_store.uri(f"copies-{uuid.uuid4().hex[:8]}")
    root = f"{state}/state/shard-2"
    store = StateStore.open(SPEC, local_copies.io_for(state, 2, root), root, 0, SCHEMA, buckets=BUCKETS)
    store.step(_events(0), watermark=0, processing_time=0, batch_seq=5)
    store.persist(5)
    local_copies.after_snapshot(store.io, 5, store.files.snapshot_files())
    assert shard_to_run(state, 4, partition=0, start_seq=5, seq=6) == 2
    assert shard_to_run(state, 4, partition=1, start_seq=5, seq=6) == 1   # 2 is taken: its own number
    assert shard_to_run(state, 4, partition=0, start_seq=6, seq=7) == 0   # nothing here as of 6


def test_reads_of_another_shards_segments_count_as_reads_from_the_store(object_store, executor_dir):
    """A rescale's new shard reads every old shard's segments through its own ``io``: they are
    reads from ``stateLocation`` (the shard's report then says ``state_reloads``, not
    ``local_reloads``)."""
    state = object_store.uri(f"copies-{uuid.uuid4().hex[:8]}")
    old = _run(state, f"{state}/state/shard-0", range(2))
    io = local_copies.io_for(state, 1, f"{state}/state/shard-1")
    name = sorted(old.files.snapshot_files())[0]
    assert io.read_range(f"{state}/state/shard-0/{name}", 0, 4) == storage.read_range(f"{state}/state/shard-0/{name}", 0, 4)
    assert (io.remote_reads, io.local_reads) == (1, 0)
