"""The ``delta`` upstream's commit rules without Spark, on tables ``deltalake`` writes: appends are
read, OPTIMIZE (dataChange=false) is not re-read, a DELETE that rewrites files fails unless
``skipChangeCommits``, a delete-only commit fails unless ``ignoreDeletes``, partition values come
from the log, an unsupported reader feature is refused by name."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from spark_windowing.datasource.upstreams import delta_log
from spark_windowing.datasource.upstreams.delta_log import DeltaSourceError
from spark_windowing.errors import OptionError


def batch(ids: list[int], key: str = "a") -> pa.Table:
    return pa.table({"k": [key] * len(ids), "ts": pa.array(ids, pa.timestamp("us", tz="UTC")), "id": ids})


def read(path, version: int, **rules) -> list[int]:
    stream = delta_log.open_stream(str(path))
    files = delta_log.added_files(stream, version, skip_change_commits=rules.get("skip", False),
                                     ignore_deletes=rules.get("ignore", False))
    return sorted(delta_log.read_added_files(stream, files, None)["id"].to_pylist())


def test_appends_are_read_and_optimize_is_not_read_again(tmp_path):
    for ids in ([1, 2], [3], [4, 5]):
        write_deltalake(str(tmp_path), batch(ids), mode="append")
    DeltaTable(str(tmp_path)).optimize.compact()                     # version 3: dataChange=false

    assert [read(tmp_path, v) for v in range(4)] == [[1, 2], [3], [4, 5], []]


def test_a_delete_that_rewrites_files_fails_unless_change_commits_are_skipped(tmp_path):
    write_deltalake(str(tmp_path), batch([1, 2, 3]), mode="append")
    DeltaTable(str(tmp_path)).delete("id = 2")                       # version 1: remove + add

    with pytest.raises(DeltaSourceError, match="data update \\(DELETE\\) at version 1.*skipChangeCommits=true"):
        read(tmp_path, 1)
    with pytest.raises(DeltaSourceError, match="data update"):
        read(tmp_path, 1, ignore=True)                               # not a delete-only commit
    assert read(tmp_path, 1, skip=True) == []


def test_a_delete_only_commit_fails_unless_deletes_are_ignored(tmp_path):
    write_deltalake(str(tmp_path), pa.concat_tables([batch([1], "a"), batch([2], "b")]), mode="append",
                    partition_by=["k"])
    DeltaTable(str(tmp_path)).delete("k = 'a'")                      # version 1: removes one file

    assert read(tmp_path, 0) == [1, 2]
    stream = delta_log.open_stream(str(tmp_path))
    files = delta_log.added_files(stream, 0, skip_change_commits=False, ignore_deletes=False)
    assert sorted(delta_log.read_added_files(stream, files, ["k", "id"]).to_pylist(),
                  key=lambda r: r["id"]) == [{"k": "a", "id": 1}, {"k": "b", "id": 2}]
    with pytest.raises(DeltaSourceError, match="deleted data .* at version 1.*ignoreDeletes=true"):
        read(tmp_path, 1)
    assert read(tmp_path, 1, ignore=True) == [] and read(tmp_path, 1, skip=True) == []


def test_unsupported_reader_features_are_refused_by_name(tmp_path):
    write_deltalake(str(tmp_path), batch([1]), mode="append")
    log = tmp_path / "_delta_log" / "00000000000000000001.json"
    log.write_text('{"protocol":{"minReaderVersion":3,"minWriterVersion":7,'
                   '"readerFeatures":["timestampNtz","futureFeature"],"writerFeatures":["timestampNtz","futureFeature"]}}\n'
                   '{"commitInfo":{"operation":"SET TBLPROPERTIES"}}\n')

    with pytest.raises(OptionError, match="futureFeature"):
        delta_log.open_stream(str(tmp_path))


def test_missing_log_entries_name_the_version_and_the_way_out(tmp_path):
    write_deltalake(str(tmp_path), batch([1]), mode="append")
    stream = delta_log.open_stream(str(tmp_path))

    with pytest.raises(DeltaSourceError, match="no log entry for version 7.*startingVersion"):
        delta_log.added_files(stream, 7, skip_change_commits=False, ignore_deletes=False)
