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


def test_the_remembered_app_transaction_follows_own_commits_and_sees_others(tmp_path):
    from deltalake import CommitProperties, Transaction
    uri, app = str(tmp_path / "t"), "app"
    write_deltalake(uri, pa.table({"k": [1]}))
    dt = delta.latest(uri)
    assert delta.transaction_version(uri, dt, app) is None
    before = dt.version()
    (dt.merge(pa.table({"k": [2]}), "t.k = s.k", source_alias="s", target_alias="t",
              commit_properties=CommitProperties(app_transactions=[Transaction(app, 5)]))
     .when_not_matched_insert_all().execute())
    delta.note_commit(uri, dt, app, before, 5)
    assert delta.transaction_version(uri, dt, app) == 5 == dt.transaction_version(app)
    before = dt.version()
    dt.update(updates={"k": "3"}, predicate="k = 2")                  # a commit without a transaction
    delta.note_commit(uri, dt, app, before)
    assert delta.transaction_version(uri, dt, app) == 5
    write_deltalake(uri, pa.table({"k": [9]}), mode="append",          # another writer, the same app
                    commit_properties=CommitProperties(app_transactions=[Transaction(app, 7)]))
    assert delta.transaction_version(uri, delta.latest(uri), app) == 7
