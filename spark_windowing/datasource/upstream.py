"""Upstream event readers: Delta tables, parquet/json/csv directories, and a deterministic generator.

Positions are plain JSON values kept in the source's offsets:

* ``delta``: the table version. A micro-batch reads only the files its versions *added*, by the
  rules of Spark's Delta streaming source (``spark_windowing.datasource.delta_source``).
* files: an index into an append-only manifest of discovered files, recorded under
  ``<stateLocation>/sources/manifest.json`` — a replayed batch reads exactly the same files, even
  if files were added since (or their listing order changed).
* ``generator``: the number of events generated so far; event ``i`` is a pure function of
  ``(seed, i)``.
* ``kafka``: ``{topic: {partition: next offset}}`` (see ``spark_windowing.datasource.kafka``).
* ``panes``: the pane tables of another windowed query (``path`` = that query's
  ``writeStream.format("windowed")`` path): the last of its micro-batches (``batchId``) read.
  Its ``triggers`` and ``retractions`` rows arrive together, so a downstream ``window=inherit``
  never sees a new pane without the retraction of the one it replaces (see ``panes_*`` below).

The driver resolves a batch's file list once (``plan``); each shard reads it and keeps only its
keys (``shard_of``), projecting just the needed columns.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from spark_windowing.datasource import delta_source, kafka, storage
from spark_windowing.datasource.ddl import DDL_FORMS, parse_ddl
from spark_windowing.datasource.layout import (BATCH_ID_KEY, CURRENT, HISTORY_TABLES, SOURCES2_DIR, TRIGGERS, source_manifest,
                               table_uri)
from spark_windowing.datasource.options import GeneratorConfig, SourceConfig
from spark_windowing._arrow import get_column
from spark_windowing._hash import hash_columns, mix as _mix
from spark_windowing.errors import OptionError

GENERATOR_SCHEMA = pa.schema([
    ("user_id", pa.string()), ("page", pa.string()),
    ("event_time", pa.timestamp("us", tz="UTC")), ("amount", pa.float64()), ("event_id", pa.int64()),
])
_PAGES = np.array(["home", "search", "product", "cart", "checkout"], dtype=object)


# ---------------------------------------------------------------------- schema discovery
def opt(cfg: SourceConfig, name: str) -> str:
    """The option behind ``name`` for this upstream: ``path2``, ``schema2``, ... for a join's stream 2."""
    return name + "2" if cfg.manifest_dir == SOURCES2_DIR else name


def upstream_schema(cfg: SourceConfig) -> pa.Schema:
    """The upstream's Arrow schema (driver side, at load())."""
    if cfg.kafka is not None:
        return kafka.row_schema(cfg.kafka.value_format, cfg.schema_ddl)
    if cfg.schema_ddl:
        return parse_ddl(cfg.schema_ddl, option=opt(cfg, "schema"))
    if cfg.source == "generator":
        return GENERATOR_SCHEMA
    if cfg.source == "panes":
        return panes_schema(cfg.path)
    if cfg.source == "delta":
        return delta_stream(cfg, refresh=True).schema
    files = list_files(cfg)
    if not files:
        raise OptionError(opt(cfg, "schema"), None, DDL_FORMS,
                          why=f"{cfg.path} has no {cfg.source} files yet to take the schema from; pass it")
    return read_files(cfg, files[:1], columns=None).schema


# ---------------------------------------------------------------------- positions (driver)
def initial_position(cfg: SourceConfig) -> Any:
    if cfg.kafka is not None:
        return kafka.initial_position(cfg.kafka)
    if cfg.source == "panes":
        return -1
    if cfg.source == "delta":
        return -1 if cfg.starting_version is None else cfg.starting_version - 1
    return 0


def latest_position(cfg: SourceConfig, start: Any, max_files: int | None, max_rows: int | None) -> Any:
    """The furthest position to read up to from ``start``, within the read limits."""
    if cfg.kafka is not None:
        return kafka.latest_position(cfg.kafka, start, max_rows)
    if cfg.source == "generator":
        end = start + (max_rows or cfg.generator.events_per_batch)
        if cfg.generator.total_events is not None:
            end = min(end, cfg.generator.total_events)
        return max(start, end)
    if cfg.source == "panes":
        return panes_latest_batch(cfg.path, start, max_files)
    if cfg.source == "delta":
        from deltalake import DeltaTable
        latest = DeltaTable(cfg.path).version()
        if (max_files is None and max_rows is None) or latest <= start:
            return max(start, latest)
        end, files, rows = start, 0, 0
        while end < latest:
            added = delta_commit_files(cfg, end + 1)
            n = sum(f.rows if f.rows is not None else _row_count(f.uri) for f in added) if max_rows is not None else 0
            if end > start and ((max_files is not None and files + len(added) > max_files)
                                or (max_rows is not None and rows + n > max_rows)):
                break
            files, rows, end = files + len(added), rows + n, end + 1
        return end
    manifest = update_manifest(cfg)
    end = len(manifest)
    if max_files is not None:
        end = min(end, start + max_files)
    if max_rows is not None and end > start:
        rows, stop = 0, start
        while stop < end:
            n = _row_count(manifest[stop], cfg.source)
            if stop > start and rows + n > max_rows:
                break
            rows, stop = rows + n, stop + 1
        end = stop
    return max(start, end)


def _row_count(uri: str, source: str = "parquet") -> int:
    """Rows in a file, from the parquet footer (cheap) or by reading json/csv."""
    fs, path = storage.filesystem(uri)
    if source in ("parquet", "delta"):
        with fs.open_input_file(path) as f:
            return pq.ParquetFile(f).metadata.num_rows
    with fs.open_input_stream(path) as f:
        return (pajson.read_json(f) if source == "json" else pacsv.read_csv(f)).num_rows


def plan(cfg: SourceConfig, start: Any, end: Any) -> Any:
    """What a micro-batch reads: a file list, a generator index range, Kafka offset ranges."""
    if cfg.kafka is not None:
        return kafka.plan(cfg.kafka, start, end)
    if cfg.source == "generator":
        return [int(start), int(end)]
    if cfg.source == "panes":
        return panes_files(cfg.path, int(start), int(end))
    if cfg.source == "delta":
        files = [f for v in range(int(start) + 1, int(end) + 1) for f in delta_commit_files(cfg, v)]
        return {"stream": delta_stream(cfg), "files": files}
    return read_manifest(cfg)[int(start):int(end)]


_DELTA_STREAMS: dict[str, delta_source.DeltaStream] = {}


def delta_stream(cfg: SourceConfig, *, refresh: bool = False) -> delta_source.DeltaStream:
    """The ``delta`` upstream as the stream reads it: its schema when this driver first opened
    it (at ``load()``), kept for the life of the driver process (see ``spark_windowing.datasource.delta_source``)."""
    if refresh or cfg.path not in _DELTA_STREAMS:
        _DELTA_STREAMS[cfg.path] = delta_source.open_stream(cfg.path, opt(cfg, "path"))
    return _DELTA_STREAMS[cfg.path]


def delta_commit_files(cfg: SourceConfig, version: int) -> list[delta_source.AddedFile]:
    """The files commit ``version`` of the ``delta`` upstream adds to the stream."""
    return delta_source.added_files(delta_stream(cfg), version, skip_change_commits=cfg.skip_change_commits,
                                    ignore_deletes=cfg.ignore_deletes)


def delta_added_files(path: str, version: int) -> list[str]:
    """Files added by ``version`` (in a stable order)."""
    from deltalake import DeltaTable
    now = set(DeltaTable(path, version=version).file_uris())
    before = set(DeltaTable(path, version=version - 1).file_uris()) if version > 0 else set()
    return sorted(now - before)


def list_files(cfg: SourceConfig) -> list[str]:
    fs, root = storage.filesystem(cfg.path)
    suffix = {"parquet": ".parquet", "json": ".json", "csv": ".csv"}[cfg.source]
    try:
        infos = fs.get_file_info(storage.selector(root))
    except FileNotFoundError:
        raise OptionError(opt(cfg, "path"), cfg.path, f"a directory of {cfg.source} files",
                          why="does not exist") from None
    files = [i for i in infos if i.is_file and (i.path.endswith(suffix) or i.path.endswith(suffix + "l"))
             and not i.base_name.startswith((".", "_"))]
    files.sort(key=lambda i: (i.mtime_ns or 0, i.path))
    return [storage.join_uri(cfg.path, root, i.path) for i in files]


def manifest_path(cfg: SourceConfig) -> str:
    return source_manifest(cfg.state_location, cfg.manifest_dir)


def read_manifest(cfg: SourceConfig) -> list[str]:
    raw = storage.read_bytes(manifest_path(cfg), missing_ok=True)
    return [] if raw is None else json.loads(raw)


def update_manifest(cfg: SourceConfig) -> list[str]:
    """Append newly discovered files to the manifest (driver only); return the manifest."""
    manifest = read_manifest(cfg)
    seen = set(manifest)
    new = [f for f in list_files(cfg) if f not in seen]
    if new:
        manifest = manifest + new
        storage.write_atomic(manifest_path(cfg), json.dumps(manifest).encode())
    return manifest


# ---------------------------------------------------------------------- the pane tables of a windowed query
def panes_schema(root: str) -> pa.Schema:
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
                files.extend(delta_added_files(uri, version))
    return files


# ---------------------------------------------------------------------- reading (executors)
def cap_position(cfg: SourceConfig, up: Any, target: Any, start: Any) -> Any:
    """availableNow: ``up`` limited to the position the query started with as its target."""
    if cfg.kafka is not None:
        return kafka.cap(up, target, start)
    return min(up, max(target, start))


def read_batch(cfg: SourceConfig, planned: Any, columns: list[str] | None) -> pa.Table:
    if cfg.kafka is not None:
        t = kafka.read_ranges(cfg.kafka, (cfg.kafka.value_format, cfg.schema_ddl), planned["ranges"])
        return t if columns is None else t.select(kafka.with_record_columns(columns))
    if cfg.source == "generator":
        return generate(cfg.generator, planned[0], planned[1])
    if cfg.source == "delta":
        return delta_source.read_added_files(planned["stream"], planned["files"], columns)
    if not planned:
        return upstream_schema_cached(cfg, columns).empty_table()
    return read_files(cfg, planned, columns)


_SCHEMA_CACHE: dict[tuple, pa.Schema] = {}


def upstream_schema_cached(cfg: SourceConfig, columns: list[str] | None) -> pa.Schema:
    key = (cfg.source, cfg.path, tuple(columns or ()))
    if key not in _SCHEMA_CACHE:
        schema = upstream_schema(cfg)
        _SCHEMA_CACHE[key] = schema if columns is None else pa.schema([schema.field(c) for c in columns])
    return _SCHEMA_CACHE[key]


def read_files(cfg: SourceConfig, files: list[str], columns: list[str] | None) -> pa.Table:
    tables = []
    for uri in files:
        fs, path = storage.filesystem(uri)
        if cfg.source in ("parquet", "delta", "panes"):
            tables.append(pq.read_table(path, filesystem=fs, columns=columns))
        else:
            with fs.open_input_stream(path) as f:
                t = pajson.read_json(f) if cfg.source == "json" else pacsv.read_csv(f)
            tables.append(t.select(columns) if columns else t)
    if cfg.schema_ddl:
        target = parse_ddl(cfg.schema_ddl)
        tables = [t.cast(pa.schema([target.field(n) for n in t.column_names])) for t in tables]
    return pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]


def generate(g: GeneratorConfig, start: int, end: int) -> pa.Table:
    """Events ``start..end-1``; deterministic in ``(seed, index)``."""
    i = np.arange(start, end, dtype=np.int64)
    h = _mix(i, g.seed)
    key = (h % g.keys).astype(np.int64)
    base = g.start_time + i * g.event_interval
    jitter = (_mix(i, g.seed + 1) % (g.disorder + 1)).astype(np.int64) if g.disorder else 0
    t = base - jitter
    if g.late_fraction > 0:
        late = (_mix(i, g.seed + 2) % 1_000_000) < int(g.late_fraction * 1_000_000)
        t = np.where(late, t - 100 * max(g.disorder, g.event_interval) - 3_600_000_000, t)
    amount = ((_mix(i, g.seed + 3) % 10_000) / 100.0).astype(np.float64)
    page = _PAGES[(_mix(i, g.seed + 4) % len(_PAGES)).astype(np.int64)]
    users = pc.binary_join_element_wise(pa.array(["user"] * len(i), pa.string()), pc.cast(pa.array(key), pa.string()), "-")
    return pa.table({
        "user_id": users, "page": pa.array(page.tolist(), pa.string()),
        "event_time": pa.array(t, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        "amount": pa.array(amount), "event_id": pa.array(i),
    }, schema=GENERATOR_SCHEMA)


# ---------------------------------------------------------------------- sharding
def key_hash(table: pa.Table, key_columns: tuple[str, ...]) -> np.ndarray:
    """A stable uint64 hash of the key columns per row (per distinct key, not per row)."""
    return hash_columns([get_column(table, name) for name in key_columns], table.num_rows)


def shard_of(table: pa.Table, key_columns: tuple[str, ...], shards: int) -> np.ndarray:
    """Shard number per row: the key hash modulo the shard count."""
    if shards == 1 or not key_columns or table.num_rows == 0:
        return np.zeros(table.num_rows, dtype=np.int64)
    return (key_hash(table, key_columns) % np.uint64(shards)).astype(np.int64)