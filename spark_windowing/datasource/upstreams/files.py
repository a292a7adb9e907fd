"""The file upstreams (``source`` = ``parquet``, ``json``, ``csv``): a directory files are added to.

A position is an index into an append-only manifest of the files discovered so far, kept under
``<stateLocation>/sources/manifest.json`` (``sources2`` for a join's stream 2): a replayed batch
``[start, end)`` reads exactly the same files, even if files were added since or their listing
order changed. Files are discovered in (modification time, path) order; names starting with
``.`` or ``_`` are skipped. ``maxFilesPerTrigger`` limits the files of a batch, ``maxEventsPerBatch``
its rows in whole files (at least one file per batch).

``read_files`` and ``row_count`` are shared with the other file-backed kinds (``delta``, ``panes``).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from spark_windowing.datasource import storage
from spark_windowing.datasource.options.ddl import DDL_FORMS, parse_ddl
from spark_windowing.datasource.storage.layout import source_manifest
from spark_windowing.datasource.upstreams.base import Upstream
from spark_windowing.errors import OptionError

SUFFIXES = {"parquet": ".parquet", "json": ".json", "csv": ".csv"}


class FilesUpstream(Upstream):
    """Positions: an index into the file manifest (int). The format is ``cfg.source``."""

    def schema(self) -> pa.Schema:
        """The ``schema`` option, else the first file's."""
        declared = self.declared_schema()
        if declared is not None:
            return declared
        files = self.list_files()
        if not files:
            raise OptionError(self.option("schema"), None, DDL_FORMS,
                              why=f"{self.cfg.path} has no {self.cfg.source} files yet to take the schema from; pass it")
        return read_files(self.cfg.source, files[:1], None, self.cfg.schema_ddl).schema

    def initial_position(self) -> int:
        return 0

    def latest_position(self, start: Any, max_files: int | None, max_rows: int | None) -> int:
        """The manifest's end (new files appended first), within ``max_files`` and ``max_rows``."""
        manifest = self.update_manifest()
        end = len(manifest)
        if max_files is not None:
            end = min(end, start + max_files)
        if max_rows is not None and end > start:
            rows, stop = 0, start
            while stop < end:
                n = row_count(manifest[stop], self.cfg.source)
                if stop > start and rows + n > max_rows:
                    break
                rows, stop = rows + n, stop + 1
            end = stop
        return max(start, end)

    def plan(self, start: Any, end: Any) -> list[str]:
        return self.read_manifest()[int(start):int(end)]

    def read(self, planned: Any, columns: list[str] | None) -> pa.Table:
        if not planned:
            return self.cached_schema(columns).empty_table()
        return read_files(self.cfg.source, planned, columns, self.cfg.schema_ddl)

    # ------------------------------------------------------------------ the manifest (driver)
    def list_files(self) -> list[str]:
        """The directory's files of this format, oldest first."""
        cfg = self.cfg
        fs, root = storage.filesystem(cfg.path)
        suffix = SUFFIXES[cfg.source]
        try:
            infos = fs.get_file_info(storage.selector(root))
        except FileNotFoundError:
            raise OptionError(self.option("path"), cfg.path, f"a directory of {cfg.source} files",
                              why="does not exist") from None
        files = [i for i in infos if i.is_file and (i.path.endswith(suffix) or i.path.endswith(suffix + "l"))
                 and not i.base_name.startswith((".", "_"))]
        files.sort(key=lambda i: (i.mtime_ns or 0, i.path))
        return [storage.join_uri(cfg.path, root, i.path) for i in files]

    def manifest_path(self) -> str:
        return source_manifest(self.cfg.state_location, self.cfg.manifest_dir)

    def read_manifest(self) -> list[str]:
        raw = storage.read_bytes(self.manifest_path(), missing_ok=True)
        return [] if raw is None else json.loads(raw)

    def update_manifest(self) -> list[str]:
        """Append newly discovered files to the manifest (driver only); return the manifest."""
        manifest = self.read_manifest()
        seen = set(manifest)
        new = [f for f in self.list_files() if f not in seen]
        if new:
            manifest = manifest + new
            storage.write_atomic(self.manifest_path(), json.dumps(manifest).encode())
        return manifest


def row_count(uri: str, fmt: str = "parquet") -> int:
    """Rows in a file of format ``fmt``, from the parquet footer (cheap) or by reading json/csv."""
    fs, path = storage.filesystem(uri)
    if fmt == "parquet":
        with fs.open_input_file(path) as f:
            return pq.ParquetFile(f).metadata.num_rows
    with fs.open_input_stream(path) as f:
        return (pajson.read_json(f) if fmt == "json" else pacsv.read_csv(f)).num_rows


def read_files(fmt: str, files: list[str], columns: list[str] | None, schema_ddl: str | None) -> pa.Table:
    """The rows of ``files`` (``fmt``: ``parquet``, ``json`` or ``csv``), projected to ``columns``,
    cast to the ``schema`` option's types when given."""
    tables = []
    for uri in files:
        fs, path = storage.filesystem(uri)
        if fmt == "parquet":
            tables.append(pq.read_table(path, filesystem=fs, columns=columns))
        else:
            with fs.open_input_stream(path) as f:
                t = pajson.read_json(f) if fmt == "json" else pacsv.read_csv(f)
            tables.append(t.select(columns) if columns else t)
    if schema_ddl:
        target = parse_ddl(schema_ddl)
        tables = [t.cast(pa.schema([target.field(n) for n in t.column_names])) for t in tables]
    return pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
