"""``tables.appends``: the pane log's appends write their Delta log entry themselves, from what the
process knows of the table; a commit made by anyone else in between must be neither lost nor
overwritten, and a batch the table holds must be skipped."""

from __future__ import annotations

import json
import os

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from spark_windowing.datasource import storage
from spark_windowing.datasource.tables import appends, delta

APP = "spark-windowing-sink-test"


def _table(tmp_path, name="t") -> str:
    uri = str(tmp_path / name)
    DeltaTable.create(uri, pa.schema([("k", pa.int64())]))
    appends.forget(uri)
    return uri


def _file(uri: str, values: list[int]) -> delta.DataFile:
    root, table = os.path.dirname(uri), os.path.basename(uri)
    return delta.write_data_file(root, table, pa.table({"k": pa.array(values, pa.int64())}), sort_by=["k"],
                                 name_hint="test")


def _append(uri: str, batch: int, values: list[int], app: str = APP) -> bool:
    return appends.append(uri, [_file(uri, values)], app_id=app, batch_id=batch,
                          metadata={"userMetadata": json.dumps({"batchId": batch})})


def _rows(uri: str) -> list[int]:
    return sorted(DeltaTable(uri).to_pyarrow_table()["k"].to_pylist())


def test_appends_are_delta_commits_with_their_app_transaction(tmp_path):
    uri = _table(tmp_path)
    assert _append(uri, 0, [1, 2]) and _append(uri, 1, [3])
    table = DeltaTable(uri)
    assert table.version() == 2
    assert table.transaction_version(APP) == 1
    assert _rows(uri) == [1, 2, 3]
    last = table.history(1)[0]
    assert last["operation"] == "WRITE" and last["isBlindAppend"] is True
    assert json.loads(last["userMetadata"]) == {"batchId": 1}
    assert sorted(pa.table(table.get_add_actions(flatten=True))["num_records"].to_pylist()) == [1, 2]


def test_a_batch_the_table_holds_is_skipped_also_by_a_new_process(tmp_path):
    uri = _table(tmp_path)
    assert _append(uri, 0, [1]) and _append(uri, 1, [2])
    assert not _append(uri, 1, [2])           # replayed in this process
    appends.forget(uri)                       # a new process: knows nothing yet
    delta.forget(uri)
    assert not _append(uri, 0, [1])
    assert not _append(uri, 1, [2])
    assert _append(uri, 2, [3])
    assert _rows(uri) == [1, 2, 3]
    assert DeltaTable(uri).version() == 3


def test_a_commit_made_by_another_writer_in_between_is_kept(tmp_path):
    uri = _table(tmp_path)
    assert _append(uri, 0, [1])
    write_deltalake(uri, pa.table({"k": pa.array([100], pa.int64())}), mode="append")   # version 2, not ours
    DeltaTable(uri).optimize.compact()                                                   # version 3, not ours
    assert _append(uri, 1, [2])
    assert DeltaTable(uri).version() == 4
    assert _rows(uri) == [1, 2, 100]
    assert DeltaTable(uri).transaction_version(APP) == 1


def test_another_writers_app_transaction_decides_a_replay(tmp_path):
    uri = _table(tmp_path)
    assert _append(uri, 0, [1])
    # a second process (another handle) commits batch 1 of the same app: this process must not repeat it
    DeltaTable(uri).create_write_transaction(
        [delta.add_action(_file(uri, [2]))], mode="append", schema=DeltaTable(uri).schema(),
        commit_properties=delta_commit(APP, 1))
    assert not _append(uri, 1, [2])
    assert _rows(uri) == [1, 2]


def delta_commit(app: str, batch: int):
    from deltalake import CommitProperties, Transaction
    return CommitProperties(app_transactions=[Transaction(app, batch)])


def test_a_table_whose_protocol_asks_more_is_appended_through_delta_rs(tmp_path):
    uri = _table(tmp_path)
    DeltaTable(uri).alter.add_constraint({"positive": "k > 0"})     # writer version 3
    appends.forget(uri)
    assert _append(uri, 0, [1])
    assert DeltaTable(uri).history(1)[0]["clientVersion"].startswith("delta-rs")   # delta-rs wrote it
    assert not _append(uri, 0, [1])
    assert _rows(uri) == [1] and DeltaTable(uri).transaction_version(APP) == 0


def test_publish_exclusive_never_replaces_a_file(tmp_path):
    uri = str(tmp_path / "log" / "00000000000000000001.json")
    assert storage.publish_exclusive(uri, b"first\n")
    assert not storage.publish_exclusive(uri, b"second\n")
    assert open(uri, "rb").read() == b"first\n"
    assert os.listdir(tmp_path / "log") == ["00000000000000000001.json"]     # no temporary file left
