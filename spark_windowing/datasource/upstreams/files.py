"""The file upstreams (``source`` = ``parquet``, ``json``, ``csv``): a directory files are added to.

A position is an index into an append-only manifest of the files discovered so far, kept under
``<stateLocation>/sources/manifest.json`` (``sources2`` for a join's stream 2): a replayed batch
``[start, end)`` reads exactly the same files, even if files were added since or their listing
order changed. Files are discovered in (modification time, path) order; names starting with
``.`` or ``_`` are skipped. ``maxFilesPerTrigger`` limits the files of a batch, ``maxEventsPerBatch``
its rows in whole files (at least one file per batch).

Rows that cannot be read do not stop the stream (``upstreams.corrupt``): the schema (the
``schema`` option, else the first readable file's) gets two columns, ``_corrupt_record`` and
``_origin``, and a line or row that does not parse or cast becomes a row with only those set (its
raw text, ``file:line``), which the operator sends to the late-data table as ``malformed``. The
rules, as Spark's file sources in ``PERMISSIVE`` mode: an empty file has no rows; a JSON field not
in the schema is ignored and one missing is null; a CSV header's column not in the schema is
ignored and a schema column missing from the header is null in every row, while a line with more
or fewer fields than the header is malformed (its values cannot be told apart); a Parquet file
that cannot be read at all is one malformed row naming the file and the error.

``read_files`` and ``row_count`` are shared with the other file-backed kinds (``delta``, ``panes``),
which read what Delta wrote and keep the strict read.
"""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from spark_windowing._arrow import empty_table
from spark_windowing.datasource import storage
from spark_windowing.datasource.options.ddl import DDL_FORMS, parse_ddl
from spark_windowing.datasource.storage.layout import source_manifest
from spark_windowing.datasource.upstreams.base import Upstream
from spark_windowing.datasource.upstreams.corrupt import (CORRUPT_FIELDS, cast_rows, clean, nulls, parse_lines,
                                                          row_text, with_corrupt)
from spark_windowing.panes import CORRUPT_RECORD, ORIGIN
from spark_windowing.errors import OptionError

if TYPE_CHECKING:
    from spark_windowing.datasource.options.config import SourceConfig

SUFFIXES = {"parquet": ".parquet", "json": ".json", "csv": ".csv"}


class FilesUpstream(Upstream):
    """Positions: an index into the file manifest (int). The format is ``cfg.source``."""

    keeps_corrupt_rows = True

    def __init__(self, cfg: "SourceConfig") -> None:
        super().__init__(cfg)
        self._row_counts: dict[str, int] = {}   # rows per file, for the read limits and ``planned_events``

    def schema(self) -> pa.Schema:
        """The ``schema`` option, else the first readable file's; then the corrupt-row columns."""
        return pa.schema([*self.row_schema(), *CORRUPT_FIELDS])

    def row_schema(self) -> pa.Schema:
        """The rows' own columns: the ``schema`` option, else the first file that can be read."""
        declared = self.declared_schema()
        if declared is not None:
            return declared
        for uri in self.list_files():
            try:
                found = file_schema(self.cfg.source, uri)
            except (pa.ArrowInvalid, OSError):   # a broken or empty file says nothing of the schema
                continue
            if len(found):
                return found
        raise OptionError(self.option("schema"), None, DDL_FORMS,
                          why=f"{self.cfg.path} has no readable {self.cfg.source} file yet to take the schema "
                              "from; pass it")

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
                n = self._rows(manifest[stop])
                if stop > start and rows + n > max_rows:
                    break
                rows, stop = rows + n, stop + 1
            end = stop
        return max(start, end)

    def planned_events(self, start: Any, end: Any) -> int | None:
        """Parquet: the rows in the files' footers (one read per file, remembered); other formats:
        None (counting their records means reading them)."""
        if self.cfg.source != "parquet":
            return None
        return sum(self._rows(uri) for uri in self.plan(start, end))

    def _rows(self, uri: str) -> int:
        """A manifest file's rows (``row_count``), counted once: files are immutable once listed."""
        if uri not in self._row_counts:
            self._row_counts[uri] = row_count(uri, self.cfg.source)
        return self._row_counts[uri]

    def plan(self, start: Any, end: Any) -> list[str]:
        return self.read_manifest()[int(start):int(end)]

    def read(self, planned: Any, columns: list[str] | None) -> pa.Table:
        if not planned:
            return empty_table(self.cached_schema(columns))
        rows = [f for f in self.cached_schema(None) if f.name not in (CORRUPT_RECORD, ORIGIN)]
        if columns:   # projected: only these columns are read (and must be readable)
            rows = [f for f in rows if f.name in columns]
        tables = [read_permissive(self.cfg.source, uri, pa.schema(rows)) for uri in planned]
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        return table.select(columns) if columns else table

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
    """Rows in a file of format ``fmt``: from the parquet footer (cheap; 1 for a file that cannot
    be read, its one malformed row), or json/csv records as ``read_permissive`` counts them."""
    fs, path = storage.filesystem(uri)
    if fmt == "parquet":
        try:
            with fs.open_input_file(path) as f:
                return pq.ParquetFile(f).metadata.num_rows
        except (pa.ArrowInvalid, OSError):
            return 1
    with fs.open_input_stream(path) as f:
        data = f.read()
    whole = _parse_whole(data, fmt, None)
    return whole.num_rows if whole is not None else len(_records(data, fmt)[1])


def read_permissive(fmt: str, uri: str, schema: pa.Schema) -> pa.Table:
    """The rows of one file in ``schema`` plus the corrupt-row columns (``upstreams.corrupt``):
    a clean file in one vectorized read; a broken one line by line where it breaks."""
    fs, path = storage.filesystem(uri)
    if fmt == "parquet":
        try:
            with fs.open_input_file(path) as f:
                file = pq.ParquetFile(f)
                raw = file.read(columns=[c for c in schema.names if c in file.schema_arrow.names])
        except (pa.ArrowInvalid, OSError) as e:
            why = f"unreadable Parquet file: {e}"
            return with_corrupt(nulls(schema, 1), np.ones(1, dtype=bool), lambda _: why, lambda _: uri)
        table, bad = cast_rows(raw, schema)
        return with_corrupt(table, bad, lambda i: row_text(raw, i), lambda i: f"{uri}:row {i}")
    with fs.open_input_stream(path) as f:
        data = f.read()
    whole = _parse_whole(data, fmt, schema)
    if whole is not None:   # a clean file: one vectorized read, no corrupt rows
        return clean(whole)
    header, lines, numbers = _records(data, fmt)
    names = _csv_names(header) if fmt == "csv" else None
    if fmt == "csv" and names is None:
        table, bad = nulls(schema, len(lines)), np.ones(len(lines), dtype=bool)  # an unreadable header
    else:
        table, bad = parse_lines(lines, fmt, schema, names)
    return with_corrupt(table, bad, lambda i: lines[i].decode("utf-8", errors="replace"),
                        lambda i: f"{uri}:{numbers[i]}")


def _parse_whole(data: bytes, fmt: str, schema: pa.Schema | None) -> pa.Table | None:
    """A whole json/csv file in ``schema`` (None: inferred) in one call; None if any of it fails
    (then it is read line by line) or it is empty."""
    if not data.strip():
        return empty_table(schema) if schema is not None else pa.table({})
    try:
        if fmt == "json":
            opts = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore") if schema else None
            t = pajson.read_json(io.BytesIO(data), parse_options=opts)
        else:
            conv = pacsv.ConvertOptions(column_types=schema, strings_can_be_null=True, include_columns=schema.names,
                                        include_missing_columns=True) if schema else None
            t = pacsv.read_csv(io.BytesIO(data), convert_options=conv)
        return t.select(schema.names).cast(schema) if schema is not None else t
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def _records(data: bytes, fmt: str) -> tuple[bytes | None, list[bytes], list[int]]:
    """(CSV header line, the non-blank record lines, their 1-based line numbers)."""
    raw = data.split(b"\n")
    numbered = [(n, line.rstrip(b"\r")) for n, line in enumerate(raw, 1)]
    numbered = [(n, line) for n, line in numbered if line.strip()]
    header = None
    if fmt == "csv" and numbered:
        header, numbered = numbered[0][1], numbered[1:]
    return header, [line for _, line in numbered], [n for n, _ in numbered]


def _csv_names(header: bytes | None) -> list[str] | None:
    """The column names of a CSV header line (None: it does not parse)."""
    if header is None:
        return []
    try:
        return pacsv.read_csv(io.BytesIO(header + b"\n")).column_names
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None


def file_schema(fmt: str, uri: str) -> pa.Schema:
    """The columns of one file: a Parquet file's from its footer alone (``pq.read_table`` would
    read the whole file, and import ``pyarrow.dataset`` and with it pandas: 0.2 s of a query's
    start in the reader's planning process); a json/csv file's by reading it."""
    if fmt == "parquet":
        fs, path = storage.filesystem(uri)
        with fs.open_input_file(path) as f:
            return pq.ParquetFile(f).schema_arrow
    return read_files(fmt, [uri], None, None).schema


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
