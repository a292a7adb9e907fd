"""The shard task and its snapshot (datasource.reader): a snapshot that fails fails the task — no
report, no manifest, so the batch is not complete — and the batch replayed afterwards gives the
same panes. Driven without a Spark session, as a task would call the reader."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.streaming.datasource import ReadMaxFiles

from datasource.reader import WindowedStreamReader, stream_schema
from spark_windowing.store import StateStore, manifest_uri

SEC = 1_000_000
T0 = 1_767_225_600_000_000


@pytest.fixture
def reader(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    for b in range(3):
        ts = [T0 + (b * 10 + i) * SEC for i in range(10)]
        pq.write_table(pa.table({"k": [i % 3 for i in range(10)], "ts": pa.array(ts, pa.timestamp("us", "UTC")),
                                 "v": list(range(10))}), str(src / f"{b:03d}.parquet"))
    opts = {"source": "parquet", "path": str(src), "timestampcolumn": "ts", "keycolumns": "k",
            "window": "tumbling(5 seconds)", "aggregate": "sum(v) AS s", "watermark": "bounded(1 second)",
            "shards": "2", "statelocation": str(tmp_path / "state")}
    return WindowedStreamReader(opts, stream_schema(opts)), str(tmp_path / "state")


def _next(reader, start):
    end = json.loads(json.dumps(reader.latestOffset(start, ReadMaxFiles(1))))
    return end, reader.partitions(start, end)


def _panes(reader, parts):
    return sorted((r["k"], r["window_start"], r["s"]) for p in parts for b in reader.read(p) for r in b.to_pylist())


def test_a_failed_snapshot_fails_the_task_and_the_replay_gives_the_same_panes(reader, monkeypatch):
    r, state = reader
    start = r.initialOffset()
    end, parts = _next(r, start)
    assert _panes(r, parts) == []  # nothing closed yet
    r.commit(end)
    start = end
    end, parts = _next(r, start)  # this batch's watermark closes the first windows

    def full(self, seq, **kw):
        raise OSError("No space left on device")

    monkeypatch.setattr(StateStore, "persist", full)
    with pytest.raises(OSError, match="No space left"):
        _panes(r, parts)
    seq = end["seq"]
    shard_dirs = sorted(os.listdir(os.path.join(state, "shards")))
    assert not any(os.path.exists(manifest_uri(os.path.join(state, "shards", d), seq)) for d in shard_dirs)
    assert not os.path.exists(os.path.join(state, "reports", str(seq)))
    monkeypatch.undo()
    replayed = _panes(r, parts)
    assert replayed and replayed == _panes(r, parts)  # and once more: the same panes again
    assert all(os.path.exists(manifest_uri(os.path.join(state, "shards", d), seq)) for d in shard_dirs)
