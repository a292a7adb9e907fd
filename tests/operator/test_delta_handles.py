"""``tables.delta.latest``: the sink's commit keeps Delta table handles across micro-batches and
catches them up instead of reopening; what another writer committed meanwhile must be seen."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from spark_windowing.datasource.tables import delta


def test_a_kept_handle_sees_commits_made_through_other_handles(tmp_path):
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"k": [1]}))
    first = delta.latest(uri)
    assert first.version() == 0
    write_deltalake(uri, pa.table({"k": [2]}), mode="append")       # another writer (another handle)
    DeltaTable(uri).update(updates={"k": "5"}, predicate="k = 1")
    again = delta.latest(uri)
    assert again is first                                             # kept, not reopened
    assert again.version() == 2
    assert sorted(again.to_pyarrow_table()["k"].to_pylist()) == [2, 5]


def test_forget_reopens_a_table_created_anew_at_the_same_path(tmp_path):
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"k": [1]}))
    for v in range(3):
        write_deltalake(uri, pa.table({"k": [v]}), mode="append")
    old = delta.latest(uri)
    assert old.version() == 3
    (tmp_path / "t").rename(tmp_path / "aside")                      # moved aside, created again
    write_deltalake(uri, pa.table({"k": [9]}))
    delta.forget(uri)
    new = delta.latest(uri)
    assert new is not old
    assert new.version() == 0 and new.to_pyarrow_table()["k"].to_pylist() == [9]
