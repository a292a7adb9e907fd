"""Helpers shared by the sink, table and crash tests (imported by them, never collected)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from spark_windowing.datasource.tables.delta import BUCKET_COLUMN

TABLE_NAMES = ("triggers", "retractions", "current")


def run_pipeline(spark, path: Path, checkpoint: Path, *, batches: int, keys: int = 4,
                 source_options: dict[str, str] | None = None, sink_options: dict[str, str] | None = None,
                 transform=None):
    """test_panes -> windowed sink, until the source is exhausted; returns the stopped query."""
    reader = spark.readStream.format("test_panes").option("batches", str(batches)).option("keys", str(keys))
    for k, v in (source_options or {}).items():
        reader = reader.option(k, v)
    frame = reader.load()
    if transform is not None:
        frame = transform(frame)
    writer = (frame.writeStream.format("windowed").option("path", str(path))
              .option("checkpointLocation", str(checkpoint)))
    for k, v in (sink_options or {}).items():
        writer = writer.option(k, v)
    query = writer.start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return query


def read_delta(path: Path, table: str) -> pa.Table:
    return pane_table(path / table)


def pane_table(uri, version: int | None = None) -> pa.Table:
    """A pane table's rows as ``deltalake`` reads them, without ``current``'s partition column
    (``window_end_bucket``, a function of ``window_end``)."""
    table = DeltaTable(str(uri), version=version).to_pyarrow_table()
    if BUCKET_COLUMN in table.column_names:
        table = table.drop_columns([BUCKET_COLUMN])
    return table


def rows(table: pa.Table) -> list[tuple]:
    """Rows as sorted tuples, timestamps as integer microseconds (a multiset: duplicates kept)."""
    columns = []
    for column in table.columns:
        if pa.types.is_timestamp(column.type):
            column = pc.cast(column.cast(pa.timestamp("us", tz="UTC")), pa.int64())
        columns.append(column.to_pylist())
    out = list(zip(*columns)) if columns else []
    return sorted(out, key=lambda r: tuple((v is None, v) for v in r))


def run_tables(root: Path, current_drop: tuple[str, ...] = ()) -> dict[str, list[tuple]]:
    """A run's tables under ``root`` (``panes/<table>`` and the late table ``late``) as rows,
    without the batch time (each run's wall clock) and, in ``current``, ``current_drop``."""
    root = Path(root)
    out = {t: rows(pane_table(root / "panes" / t).drop_columns(
        ["batch_time", *(current_drop if t == "current" else ())])) for t in TABLE_NAMES}
    out["late"] = rows(DeltaTable(str(root / "late")).to_pyarrow_table().select(["k", "ts", "v", "reason"]))
    return out


def table_rows(path: Path) -> dict[str, list[tuple]]:
    return {t: rows(read_delta(path, t)) for t in TABLE_NAMES}


def data_files(path: Path, table: str) -> set[str]:
    """Parquet files present in a table directory (committed or not)."""
    return {p.name for p in (path / table).glob("*.parquet")}


def committed_files(path: Path, table: str) -> set[str]:
    return {Path(u).name for u in DeltaTable(str(path / table)).file_uris()}
