"""Every cache that outlives a query knows the identity of what it caches, not only its path: each
test deletes a table (or a state location) and creates it anew under the same path, in the same
process, then writes again. Spark reuses its Python workers across queries, so a notebook's re-run
or a test suite reusing a temporary path meets exactly this."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from spark_windowing.datasource._types import arrow_to_spark_schema
from spark_windowing.datasource.sink import commit
from spark_windowing.datasource.sink.commit import BatchCommit
from spark_windowing.datasource.sink.writer import PaneStreamWriter
from spark_windowing.datasource.source.reader import WindowedStreamReader, stream_schema
from spark_windowing.datasource.tables import appends, delta
from spark_windowing.datasource.tables.delta import DataFile
from spark_windowing.errors import OptionError
from tests.plugin.test_sink_closing import _final, _pane
from tests.spark.pane_source import ARROW_SCHEMA


def _recreate(tmp_path, name: str, versions: int) -> str:
    """The table ``name`` deleted and created anew with ``versions`` versions (k = 100, 101, ...)."""
    shutil.rmtree(tmp_path / name, ignore_errors=True)
    uri = str(tmp_path / name)
    for v in range(versions):
        write_deltalake(uri, pa.table({"k": [100 + v]}), mode="append")
    return uri


def test_a_kept_handle_is_not_caught_up_from_another_table_at_the_path(tmp_path):
    uri = _recreate(tmp_path, "t", 2)                  # versions 0, 1
    old = delta.latest(uri)
    assert old.version() == 1
    _recreate(tmp_path, "t", 4)                        # another table: versions 0..3
    new = delta.latest(uri)
    assert new is not old and delta.table_id(new) != delta.table_id(old)
    assert sorted(new.to_pyarrow_table()["k"].to_pylist()) == [100, 101, 102, 103]


def test_a_kept_handle_of_a_table_created_anew_with_fewer_versions_reopens(tmp_path):
    uri = _recreate(tmp_path, "t", 4)
    old = delta.latest(uri)
    _recreate(tmp_path, "t", 1)
    assert delta.latest(uri).version() == 0
    assert delta.latest(uri) is not old


def test_a_remembered_app_transaction_is_not_another_tables(tmp_path):
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"k": [1]}), commit_properties=CommitProperties(
        app_transactions=[Transaction("app", 7)]))
    assert delta.transaction_version(uri, delta.latest(uri), "app") == 7
    shutil.rmtree(tmp_path / "t")
    write_deltalake(uri, pa.table({"k": [2]}))           # the same version number, no transaction
    assert delta.transaction_version(uri, delta.latest(uri), "app") is None


def _file(tmp_path, uri: str, name: str) -> DataFile:
    """A data file of one row (k = 9) written into the table's directory, not yet committed."""
    pq.write_table(pa.table({"k": [9]}), f"{uri}/{name}.parquet")
    return DataFile(table="t", path=f"{name}.parquet", size=(tmp_path / "t" / f"{name}.parquet").stat().st_size,
                    num_rows=1, stats=json.dumps({"numRecords": 1}))


def test_a_blind_append_goes_to_the_next_version_of_the_table_there_now(tmp_path):
    uri = _recreate(tmp_path, "t", 3)
    assert appends.append(uri, [_file(tmp_path, uri, "a")], app_id="app", batch_id=5, metadata={})
    assert appends.known_version(uri) == 3
    uri = _recreate(tmp_path, "t", 1)                  # versions 0 only: no gap may follow
    assert appends.append(uri, [_file(tmp_path, uri, "b")], app_id="app", batch_id=5, metadata={})  # not "held"
    table = DeltaTable(uri)
    assert table.version() == 1 and table.transaction_version("app") == 5
    assert sorted(table.to_pyarrow_table()["k"].to_pylist()) == [9, 100]


def test_currents_closing_bound_and_open_windows_belong_to_the_table_they_were_read_from(tmp_path, monkeypatch):
    """The sink's memory of ``current`` (which windows it marked final, which may still be open,
    the latest window end) is per table: a ``current`` created anew gets its windows closed."""
    root = str(tmp_path / "panes")
    monkeypatch.setattr(commit, "_OPEN_ENDS", {})
    monkeypatch.setattr(commit, "_CLOSED_THROUGH", {})
    monkeypatch.setattr(commit, "_HIGH_WATER", {})

    def run() -> dict[str, bool]:
        writer = PaneStreamWriter({"path": root, "appId": "app"}, arrow_to_spark_schema(ARROW_SCHEMA), False)
        for batch, panes in enumerate([[_pane("a", 60, 0, 0)], [_pane("b", 120, 61, 1)], [_pane("c", 180, 121, 2)]]):
            message = writer.write(iter(pa.Table.from_pylist(panes, schema=ARROW_SCHEMA).to_batches()))
            BatchCommit(writer.options, writer.schema, [message], batch, "app", closing=0).run()
        return _final(root)

    first = run()
    assert first == {"a": True, "b": True, "c": False}
    shutil.rmtree(root)
    assert run() == first


def _reader_panes(state: str) -> list[list[str]]:
    from tests.plugin.test_rescale_reader import _options
    options = _options(state, 2)
    reader = WindowedStreamReader(options, stream_schema(options))
    start, out = reader.initialOffset(), []
    for _ in range(5):
        end = json.loads(json.dumps(reader.latestOffset(start, reader.getDefaultReadLimit())))
        out.append(sorted(repr(sorted((k, v) for k, v in r.items() if k != "batch_time"))
                          for p in reader.partitions(start, end) for b in reader.read(p) for r in b.to_pylist()))
        reader.commit(end)
        start = end
    return out


def test_shard_stores_kept_open_are_not_taken_for_a_state_location_created_anew(tmp_path):
    """The worker keeps each shard's store open between batches (``affinity``); a new run over the
    same (deleted and re-created) state location gets the panes of a run in a fresh process."""
    state = str(tmp_path / "state")
    first = _reader_panes(state)
    assert sum(map(len, first)) > 50
    shutil.rmtree(state)
    assert _reader_panes(state) == first


def test_a_restart_whose_pane_tables_were_deleted_is_refused_naming_what_is_missing(tmp_path, monkeypatch):
    """Only the sink path deleted, the checkpoint kept: the restarted query's sink would create the
    tables empty and lose every pane the checkpoint's committed batches wrote."""
    root, chk = str(tmp_path / "panes"), tmp_path / "chk"
    options = {"path": root, "appId": "app", "checkpointLocation": str(chk)}
    PaneStreamWriter(options, arrow_to_spark_schema(ARROW_SCHEMA), False)     # a first start: tables created
    (chk / "commits").mkdir(parents=True)
    (chk / "commits" / "0").write_text("v1\n{}")
    shutil.rmtree(tmp_path / "panes" / "retractions")
    from spark_windowing.datasource.sink import writer as sink_writer
    monkeypatch.setattr(sink_writer, "_TABLES_CHECKED", set())       # a restart: another process
    with pytest.raises(OptionError, match=r"(?s)'path'.*retractions.*committed 1 micro-batch.*new\s+checkpointLocation"):
        PaneStreamWriter(options, arrow_to_spark_schema(ARROW_SCHEMA), False)
    shutil.rmtree(chk)                                  # a new checkpoint: the tables are created again
    PaneStreamWriter(options, arrow_to_spark_schema(ARROW_SCHEMA), False)
    assert (tmp_path / "panes" / "retractions" / "_delta_log").is_dir()


def test_a_restart_whose_state_location_was_deleted_fails_naming_the_missing_state(tmp_path):
    """Only the stateLocation deleted, the checkpoint kept: the restarted reader's next batch
    raises ``SnapshotError`` naming what is missing, never starts over from empty state."""
    from spark_windowing.errors import SnapshotError
    from tests.plugin.test_rescale_reader import _options
    state = str(tmp_path / "state")
    options = _options(state, 2)
    reader = WindowedStreamReader(options, stream_schema(options))
    start = reader.initialOffset()
    for _ in range(3):
        end = json.loads(json.dumps(reader.latestOffset(start, reader.getDefaultReadLimit())))
        [b for p in reader.partitions(start, end) for b in reader.read(p)]
        reader.commit(end)
        start = end
    shutil.rmtree(state)
    restarted = WindowedStreamReader(options, stream_schema(options))     # Spark restarts from its log
    with pytest.raises(SnapshotError, match=state):
        end = restarted.latestOffset(start, restarted.getDefaultReadLimit())
        [b for p in restarted.partitions(start, end) for b in restarted.read(p)]
