"""The sink's commits to ``current`` over a concurrent commit of another writer (#56 item 2): a
MERGE whose table another writer compacted after the MERGE read it fails in delta-rs
(``CommitFailedError``); the sink tries it again on the table as it is then, and after
``COMMIT_ATTEMPTS`` failures fails the batch with an error naming the table, the other writer's
operation and what to do. Real tables and real conflicts: the attempt itself lets another handle
compact the table between its read and its commit. Under Spark, with maintenance looping beside
the batches: ``tests/spark/test_maintenance_while_running.py``."""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from spark_windowing.datasource._types import arrow_to_spark_schema
from spark_windowing.datasource.sink import commit
from spark_windowing.datasource.sink.commit import BatchCommit
from spark_windowing.datasource.sink.writer import PaneStreamWriter
from spark_windowing.datasource.tables import delta
from spark_windowing.errors import WindowingError
from tests.spark.pane_source import ARROW_SCHEMA


def _commit(tmp_path) -> tuple[BatchCommit, str]:
    writer = PaneStreamWriter({"path": str(tmp_path / "panes")}, arrow_to_spark_schema(ARROW_SCHEMA), False)
    uri = delta.table_uri(writer.options.root, "current")
    return BatchCommit(writer.options, writer.schema, [], 7, "app"), uri


def _conflicting_update(uri: str, compact: bool) -> None:
    """An UPDATE on a handle read before another writer (``compact``) rewrote the table's files."""
    stale = DeltaTable(uri)
    if compact:
        fresh = DeltaTable(uri)
        fresh.optimize.compact()
    stale.update(updates={"n": "n + 1"}, predicate="n >= 0")


def _two_files(uri: str) -> None:
    """Two small files in ``current`` (something for a compaction to rewrite)."""
    schema = pa.schema(DeltaTable(uri).schema().to_arrow())
    for k in ("a", "b"):
        row = {f.name: None for f in schema}
        row.update({f.name: datetime(2026, 1, 1, tzinfo=timezone.utc) for f in schema if pa.types.is_timestamp(f.type)})
        row.update({f.name: 0 for f in schema if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)})
        row.update({f.name: False for f in schema if pa.types.is_boolean(f.type)})
        row.update({f.name: "x" for f in schema if pa.types.is_string(f.type)})
        row.update({"user_id": k, "n": 1, delta.BUCKET_COLUMN: "0"})
        write_deltalake(uri, pa.Table.from_pylist([row], schema=schema), mode="append")


def test_a_conflict_with_a_compaction_is_tried_again(tmp_path):
    batch, uri = _commit(tmp_path)
    _two_files(uri)
    with pytest.raises(CommitFailedError):                 # the conflict is real
        _conflicting_update(uri, compact=True)
    _two_files(uri)
    attempts = []

    def attempt() -> None:
        attempts.append(1)
        _conflicting_update(uri, compact=len(attempts) == 1)

    batch._retrying("UPDATE", attempt)
    assert len(attempts) == 2
    assert "UPDATE" in [h["operation"] for h in DeltaTable(uri).history(1)]


def test_conflicts_that_go_on_fail_naming_the_other_writers_operation(tmp_path, monkeypatch):
    monkeypatch.setattr(commit, "COMMIT_ATTEMPTS", 2)
    batch, uri = _commit(tmp_path)

    def attempt() -> None:
        _two_files(uri)
        _conflicting_update(uri, compact=True)

    with pytest.raises(WindowingError, match=r"(?s)UPDATE of micro-batch 7 into .*current failed 2 times.*"
                                             r"OPTIMIZE \(version.*compactEvery.*restart the query"):
        batch._retrying("UPDATE", attempt)
