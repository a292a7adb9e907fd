"""The ``delta`` upstream: a Delta table read as a stream, commit by commit.

A position is a table version (an int; ``startingVersion - 1``, or ``-1``, before the first); a
micro-batch reads only the files the commits ``start+1 .. end`` *added*, by the rules of Spark's
Delta streaming source (``spark_windowing.datasource.upstreams.delta_log``), so a replay reads exactly
the same files. ``maxFilesPerTrigger`` and ``maxEventsPerBatch`` take whole commits (at least one).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from spark_windowing.datasource.upstreams import delta_log
from spark_windowing.datasource.upstreams.base import Upstream
from spark_windowing.datasource.upstreams.files import row_count

_DELTA_STREAMS: dict[str, delta_log.DeltaStream] = {}


class DeltaUpstream(Upstream):
    """Positions: the last table version read (int)."""

    def schema(self) -> pa.Schema:
        """The ``schema`` option, else the table's when this driver opened the stream."""
        declared = self.declared_schema()
        return self.stream(refresh=True).schema if declared is None else declared

    def initial_position(self) -> int:
        return -1 if self.cfg.starting_version is None else self.cfg.starting_version - 1

    def latest_position(self, start: Any, max_files: int | None, max_rows: int | None) -> int:
        """The table's latest version, or fewer whole commits within ``max_files`` / ``max_rows``."""
        from deltalake import DeltaTable
        latest = DeltaTable(self.cfg.path).version()
        if (max_files is None and max_rows is None) or latest <= start:
            return max(start, latest)
        end, files, rows = start, 0, 0
        while end < latest:
            added = self.commit_files(end + 1)
            n = sum(f.rows if f.rows is not None else row_count(f.uri) for f in added) if max_rows is not None else 0
            if end > start and ((max_files is not None and files + len(added) > max_files)
                                or (max_rows is not None and rows + n > max_rows)):
                break
            files, rows, end = files + len(added), rows + n, end + 1
        return end

    def plan(self, start: Any, end: Any) -> dict:
        """``{"stream": DeltaStream, "files": [AddedFile, ...]}`` of the commits ``start+1 .. end``."""
        files = [f for v in range(int(start) + 1, int(end) + 1) for f in self.commit_files(v)]
        return {"stream": self.stream(), "files": files}

    def read(self, planned: Any, columns: list[str] | None) -> pa.Table:
        return delta_log.read_added_files(planned["stream"], planned["files"], columns)

    # ------------------------------------------------------------------ the table (driver)
    def stream(self, *, refresh: bool = False) -> delta_log.DeltaStream:
        """The table as the stream reads it: its schema when this driver first opened it (at
        ``load()``), kept for the life of the driver process (see ``delta_source``)."""
        path = self.cfg.path
        if refresh or path not in _DELTA_STREAMS:
            _DELTA_STREAMS[path] = delta_log.open_stream(path, self.option("path"))
        return _DELTA_STREAMS[path]

    def commit_files(self, version: int) -> list[delta_log.AddedFile]:
        """The files commit ``version`` adds to the stream."""
        return delta_log.added_files(self.stream(), version, skip_change_commits=self.cfg.skip_change_commits,
                                        ignore_deletes=self.cfg.ignore_deletes)
