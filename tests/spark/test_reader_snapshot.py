"""The shard task and its snapshot (spark_windowing.datasource.source.reader): a snapshot that fails fails the task — no
report, no manifest, so the batch is not complete — and the batch replayed afterwards gives the
same panes. Driven without a Spark session, as a task would call the reader."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.streaming.datasource import ReadMaxFiles

from spark_windowing.datasource.source import affinity, shard_reports
from spark_windowing.datasource.source.reader import WindowedStreamReader, stream_schema
from spark_windowing.state.segments import manifest_uri
from spark_windowing.state.store import StateStore

SEC = 1_000_000
T0 = 1_767_225_600_000_000


@pytest.fixture
def reader(tmp_path):
    return _reader(tmp_path, "state"), str(tmp_path / "state")


def _reader(tmp_path, state: str) -> WindowedStreamReader:
    """A 2-shard reader of three one-file micro-batches under ``tmp_path/in``, its state in
    ``tmp_path/<state>``."""
    src = tmp_path / "in"
    if not src.exists():
        src.mkdir()
        for b in range(3):
            ts = [T0 + (b * 10 + i) * SEC for i in range(10)]
            pq.write_table(pa.table({"k": [i % 3 for i in range(10)], "ts": pa.array(ts, pa.timestamp("us", "UTC")),
                                     "v": list(range(10))}), str(src / f"{b:03d}.parquet"))
    options = _options(tmp_path, state)
    return WindowedStreamReader(options, stream_schema(options))


def _options(tmp_path, state: str) -> dict[str, str]:
    return {"source": "parquet", "path": str(tmp_path / "in"), "timestampcolumn": "ts", "keycolumns": "k",
            "window": "tumbling(5 seconds)", "aggregate": "sum(v) AS s", "watermark": "bounded(1 second)",
            "shards": "2", "statelocation": str(tmp_path / state)}


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


def _batches(r: WindowedStreamReader, n: int, forget: list[int] | None):
    """Runs ``n`` micro-batches, partition 0 read first. ``forget``: the shards whose state the
    process drops before each read (None: all of them, so every read reloads). Per batch: the
    panes, the reports' ``state_reloads`` (shard -> count) and the claims (shard -> partition)."""
    state, start, out = r.cfg.state_location, r.initialOffset(), []
    for _ in range(n):
        end, parts = _next(r, start)
        panes = []
        for p in parts:
            for shard in (range(2) if forget is None else forget if start["seq"] else []):
                affinity._STORES.pop((state, shard), None)
            panes += [(row["k"], row["window_start"], row["s"]) for b in r.read(p) for row in b.to_pylist()]
        seq = str(end["seq"])
        reloads = {shard: json.loads(Path(uri).read_text())["state_reloads"]
                   for shard, uri in shard_reports.latest_report_files(state, int(seq)).items()}
        claims = {int(f[6:]): int(os.readlink(Path(state) / "claims" / seq / f))
                  for f in os.listdir(Path(state) / "claims" / seq)}
        out.append((sorted(panes), reloads, claims))
        r.commit(end)
        start = end
    return out


def test_a_partition_runs_the_shard_its_worker_holds_and_the_panes_do_not_change(tmp_path):
    """The process keeps only shard 1's state between batches, as a Python worker that ran
    shard 1 would: partition 0, read first, claims shard 1 and reuses it; partition 1 runs
    shard 0, reading it back. The panes are those of a run where every read reloads."""
    held = _batches(_reader(tmp_path, "held"), 3, forget=[0])
    assert [claims for _, _, claims in held] == [{0: 0, 1: 1}, {1: 0, 0: 1}, {1: 0, 0: 1}]
    assert [reloads for _, reloads, _ in held] == [{0: 0, 1: 0}, {0: 1, 1: 0}, {0: 1, 1: 0}]
    reloading = _batches(_reader(tmp_path, "reloading"), 3, forget=None)
    assert [claims for _, _, claims in reloading] == [{0: 0, 1: 1}] * 3
    assert [reloads for _, reloads, _ in reloading] == [{0: 0, 1: 0}, {0: 1, 1: 1}, {0: 1, 1: 1}]
    assert any(panes for panes, _, _ in held)
    assert [panes for panes, _, _ in held] == [panes for panes, _, _ in reloading]
