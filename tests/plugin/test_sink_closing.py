"""``current``'s ``is_final``: the sink marks a window final once the watermark passes its end plus
the allowed lateness, also a window a previous process wrote, and runs no UPDATE when no open
window can have closed."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pyarrow as pa
from deltalake import DeltaTable

from spark_windowing.datasource._types import arrow_to_spark_schema
from spark_windowing.datasource.sink import commit
from spark_windowing.datasource.sink.commit import BatchCommit
from spark_windowing.datasource.sink.writer import PaneStreamWriter
from tests.spark.pane_source import ARROW_SCHEMA

T = datetime(2024, 1, 1, tzinfo=timezone.utc)
S = timedelta(seconds=1)


def _pane(key: str, end_s: int, watermark_s: int, batch: int) -> dict:
    return {"user_id": key, "window_start": T + (end_s - 60) * S, "window_end": T + end_s * S, "total": 1.0, "n": 1,
            "kind": "TRIGGER", "pane_timing": "EARLY", "pane_index": 0, "is_final": False,
            "pane_timestamp": T, "watermark": T + watermark_s * S, "batch_time": T, "batch_seq": batch}


def _commit(writer: PaneStreamWriter, batch: int, panes: list[dict]) -> None:
    message = writer.write(iter(pa.Table.from_pylist(panes, schema=ARROW_SCHEMA).to_batches()))
    BatchCommit(writer.options, writer.schema, [message], batch, "app", closing=0).run()


def _final(root: str) -> dict[str, bool]:
    rows = DeltaTable(f"{root}/current").to_pyarrow_table(columns=["user_id", "is_final"]).to_pylist()
    return {r["user_id"]: r["is_final"] for r in rows}


def test_windows_close_in_current_also_those_an_earlier_process_wrote(tmp_path, monkeypatch):
    root = str(tmp_path / "panes")
    writer = PaneStreamWriter({"path": root, "appId": "app"}, arrow_to_spark_schema(ARROW_SCHEMA), False)
    monkeypatch.setattr(commit, "_OPEN_ENDS", {})
    monkeypatch.setattr(commit, "_CLOSED_THROUGH", {})
    _commit(writer, 0, [_pane("a", 60, 0, 0)])
    assert _final(root) == {"a": False}
    monkeypatch.setattr(commit, "_OPEN_ENDS", {})          # a new process: it knows nothing of "a"
    monkeypatch.setattr(commit, "_CLOSED_THROUGH", {})
    _commit(writer, 1, [_pane("b", 120, 61, 1)])            # the watermark passed a's end
    assert _final(root) == {"a": True, "b": False}
    updates = []
    real_update = DeltaTable.update
    monkeypatch.setattr(DeltaTable, "update", lambda self, *a, **k: updates.append(k) or real_update(self, *a, **k))
    _commit(writer, 2, [_pane("c", 180, 90, 2)])            # nothing open ends by 90 s: no UPDATE runs
    assert updates == []
    assert _final(root) == {"a": True, "b": False, "c": False}
    _commit(writer, 3, [_pane("d", 240, 121, 3)])           # b ends at 120 s
    assert len(updates) == 1
    assert _final(root) == {"a": True, "b": True, "c": False, "d": False}
    _commit(writer, 4, [_pane("e", 300, 181, 4)])           # c (written by this process) ends at 180 s
    assert _final(root) == {"a": True, "b": True, "c": True, "d": False, "e": False}


def test_panes_without_their_spec_and_without_a_checkpoint_are_warned_about(tmp_path, caplog, monkeypatch):
    """The sink cannot close windows it does not know the lateness of: execution=driver panes
    (no column metadata) reach their spec only through a checkpointLocation option."""
    from spark_windowing.datasource.sink import writer as sink_writer
    monkeypatch.setattr(sink_writer, "_WARNED_UNKNOWN", set())
    root = str(tmp_path / "panes")
    with caplog.at_level("WARNING"):
        w = PaneStreamWriter({"path": root, "appId": "app"}, arrow_to_spark_schema(ARROW_SCHEMA), False)
    assert w.produced is None
    assert any(root in r.getMessage() and "checkpointLocation" in r.getMessage() for r in caplog.records)
