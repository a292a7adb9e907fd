"""``current`` as a blind append: when the panes' spec fires each window once (a one-shot trigger,
no allowed lateness) a batch's panes are new rows of ``current``, appended with the batch's app
transaction and their ``window_end_bucket`` partition values instead of MERGEd. A replay appends
nothing; panes of windows an earlier query wrote (ending by the latest end the table held) are
MERGEd, so ``current`` keeps one row per key and window."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from spark_windowing.datasource._types import arrow_to_spark_schema
from spark_windowing.datasource.sink import commit
from spark_windowing.datasource.sink.commit import BatchCommit
from spark_windowing.datasource.sink.writer import PaneStreamWriter, _one_pane_per_window
from spark_windowing.datasource.sink.settings import SinkOptions
from spark_windowing.datasource.tables import delta
from tests.spark.pane_source import ARROW_SCHEMA

T = datetime(2024, 1, 1, tzinfo=timezone.utc)
S = timedelta(seconds=1)


def _pane(key: str, end_s: int, batch: int) -> dict:
    return {"user_id": key, "window_start": T + (end_s - 60) * S, "window_end": T + end_s * S, "total": 1.0, "n": 1,
            "kind": "TRIGGER", "pane_timing": "ON_TIME", "pane_index": 0, "is_final": True,
            "pane_timestamp": T + end_s * S, "watermark": T + end_s * S, "batch_time": T, "batch_seq": batch}


def _commit(writer: PaneStreamWriter, batch: int, panes: list[dict], app: str) -> None:
    message = writer.write(iter(pa.Table.from_pylist(panes, schema=ARROW_SCHEMA).to_batches()))
    BatchCommit(writer.options, writer.schema, [message], batch, app, closing=0, one_pane_per_window=True).run()


def _rows(root: str) -> list[tuple]:
    table = DeltaTable(f"{root}/current").to_pyarrow_table(columns=["user_id", "window_end", delta.BUCKET_COLUMN])
    return sorted((r["user_id"], r["window_end"], r[delta.BUCKET_COLUMN]) for r in table.to_pylist())


@pytest.fixture
def merges(monkeypatch):
    calls = []
    real = DeltaTable.merge
    monkeypatch.setattr(DeltaTable, "merge", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    monkeypatch.setattr(commit, "_HIGH_WATER", {})
    return calls


def _writer(root: str) -> PaneStreamWriter:
    return PaneStreamWriter({"path": root, "appId": "app"}, arrow_to_spark_schema(ARROW_SCHEMA), False)


def test_one_pane_per_window_appends_to_current_with_partition_values(tmp_path, merges):
    root = str(tmp_path / "panes")
    writer = _writer(root)
    _commit(writer, 0, [_pane("a", 60, 0), _pane("b", 60, 0)], "app")
    _commit(writer, 1, [_pane("a", 120, 1), _pane("c", 4000, 1)], "app")   # two buckets in one batch
    assert merges == []
    bucket = delta.current_bucket_seconds(DeltaTable(f"{root}/current"))
    want = sorted((k, T + e * S, delta.window_end_buckets(pa.array([T + e * S]), bucket)[0].as_py())
                  for k, e in [("a", 60), ("b", 60), ("a", 120), ("c", 4000)])
    assert _rows(root) == want
    log = f"{root}/current/_delta_log"
    last = max(n for n in os.listdir(log) if n.endswith(".json"))
    with open(f"{log}/{last}") as f:
        actions = [json.loads(line) for line in f]
    adds = [a["add"] for a in actions if "add" in a]
    assert len(adds) == 2 and all(set(a["partitionValues"]) == {delta.BUCKET_COLUMN} for a in adds)
    assert [a["txn"] for a in actions if "txn" in a][0]["version"] == 1
    files = set(os.listdir(f"{root}/current"))
    _commit(writer, 1, [_pane("a", 120, 1), _pane("c", 4000, 1)], "app")   # a replay: nothing appended
    assert _rows(root) == want and set(os.listdir(f"{root}/current")) == files


def test_windows_an_earlier_query_wrote_are_merged(tmp_path, merges):
    root = str(tmp_path / "panes")
    writer = _writer(root)
    _commit(writer, 0, [_pane("a", 60, 0), _pane("b", 120, 0)], "old")
    assert merges == []
    _commit(writer, 0, [_pane("a", 60, 0)], "new")        # a new query over the same path, same windows
    assert merges == [1]
    _commit(writer, 1, [_pane("a", 180, 1)], "new")       # past every window the table held: appended
    assert merges == [1]
    assert [(k, e) for k, e, _ in _rows(root)] == [("a", T + 60 * S), ("a", T + 180 * S), ("b", T + 120 * S)]


@pytest.mark.parametrize("produced, allow, want", [
    ({"trigger": "Default()", "allowedLatenessUs": 0}, False, True),
    ({"trigger": "AfterWatermark()", "allowedLatenessUs": 0}, False, True),
    ({"trigger": "Default()", "allowedLatenessUs": 0}, True, False),       # allowSpecChange
    ({"trigger": "Default()", "allowedLatenessUs": 5_000_000}, False, False),
    ({"trigger": "AfterWatermark(early=AfterCount(2))", "allowedLatenessUs": 0}, False, False),
    ({"trigger": "Default()"}, False, False),                               # lateness not recorded
    (None, False, False),                                                   # spec unknown
])
def test_only_a_spec_that_fires_each_window_once_appends(produced, allow, want):
    options = SinkOptions.parse({"path": "/tmp/x", "allowSpecChange": str(allow).lower()})
    assert _one_pane_per_window(options, produced) is want
