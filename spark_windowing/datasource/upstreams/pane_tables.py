"""The ``panes`` upstream: the pane tables of another windowed query (``path`` = that query's
``writeStream.format("windowed")`` path), for chained queries (``window=inherit``).

A position is the last of the upstream query's micro-batches (its ``batchId``, kept as commit
metadata by the sink: ``layout.BATCH_ID_KEY``) read; ``-1`` before the first. A batch's
``triggers`` and ``retractions`` rows arrive together, so a downstream ``window=inherit`` never sees
a new pane without the retraction of the one it replaces. ``maxFilesPerTrigger`` limits how many
upstream batches one micro-batch takes. A replay reads the same data files: those the sink's
commits for the batches ``start+1 .. end`` added.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from spark_windowing._arrow import empty_table
from spark_windowing.datasource.storage.layout import BATCH_ID_KEY, CURRENT, HISTORY_TABLES, TRIGGERS, table_uri
from spark_windowing.datasource.upstreams.base import Upstream
from spark_windowing.datasource.upstreams.files import read_files
from spark_windowing.errors import OptionError


class PanesUpstream(Upstream):
    """Positions: the last upstream ``batchId`` read (int)."""

    joinable = False

    def schema(self) -> pa.Schema:
        declared = self.declared_schema()
        return panes_schema(self.cfg.path) if declared is None else declared

    def initial_position(self) -> int:
        return -1

    def latest_position(self, start: Any, max_files: int | None, max_rows: int | None) -> int:
        return panes_latest_batch(self.cfg.path, start, max_files)

    def plan(self, start: Any, end: Any) -> list[str]:
        return panes_files(self.cfg.path, int(start), int(end))

    def read(self, planned: Any, columns: list[str] | None) -> pa.Table:
        if not planned:
            return empty_table(self.cached_schema(columns))
        return read_files("parquet", planned, columns, self.cfg.schema_ddl)


def panes_schema(root: str) -> pa.Schema:
    """The pane rows' schema (of the ``triggers`` table)."""
    from deltalake import DeltaTable
    uri = table_uri(root, TRIGGERS)
    try:
        return pa.schema(DeltaTable(uri).schema().to_arrow())
    except Exception as e:  # deltalake raises TableNotFoundError and friends
        raise OptionError("path", root, "the path of a writeStream.format(\"windowed\") sink (its pane tables)",
                          why=str(e).splitlines()[0]) from None


def _batch_versions(uri: str) -> list[tuple[int, int]]:
    """(batchId, version) of the pane sink's commits to a table, oldest first."""
    from deltalake import DeltaTable
    try:
        history = DeltaTable(uri).history()
    except Exception:  # the table does not exist yet
        return []
    out = [(int(h[BATCH_ID_KEY]), int(h["version"])) for h in history if h.get(BATCH_ID_KEY) is not None]
    return sorted(out, key=lambda bv: bv[1])


def panes_latest_batch(root: str, start: int, max_batches: int | None) -> int:
    """The last upstream micro-batch whose pane tables are complete. The sink commits
    ``triggers``, ``retractions`` and last ``current`` per batch (``current`` whenever the batch
    had any row), so a batch is complete once ``current`` holds it. ``maxFilesPerTrigger``
    limits how many upstream batches one micro-batch takes."""
    done = sorted({b for b, _ in _batch_versions(table_uri(root, CURRENT)) if b > start})
    if not done:
        return start
    if max_batches is not None:
        done = done[:max_batches]
    return max(start, done[-1])


def panes_files(root: str, start: int, end: int) -> list[str]:
    """Data files the upstream batches ``start+1 .. end`` added to ``triggers`` and ``retractions``."""
    files: list[str] = []
    for table in HISTORY_TABLES:
        uri = table_uri(root, table)
        for batch, version in _batch_versions(uri):
            if start < batch <= end:
                files.extend(added_files(uri, version))
    return files


def added_files(path: str, version: int) -> list[str]:
    """Files added by ``version`` of the Delta table at ``path`` (in a stable order)."""
    from deltalake import DeltaTable
    now = set(DeltaTable(path, version=version).file_uris())
    before = set(DeltaTable(path, version=version - 1).file_uris()) if version > 0 else set()
    return sorted(now - before)
