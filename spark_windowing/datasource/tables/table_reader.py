"""Batch reads of the pane tables the sink writes: Spark SQL over panes without the Delta jars.

>>> (spark.read.format("windowed")                               # doctest: +SKIP
...       .option("path", "/lake/panes/clicks").option("table", "current").load())
>>> spark.sql("CREATE TEMPORARY VIEW clicks USING windowed "     # doctest: +SKIP
...           "OPTIONS (path '/lake/panes/clicks', table 'current')")
>>> spark.sql(TOP_KEYS_PER_WINDOW_SQL).show()                    # doctest: +SKIP

Options (case-insensitive):

* ``path`` (required): the sink's root ``P``; for ``table=late``, the source's ``lateDataPath``.
* ``table`` (required): ``current`` (latest pane per key and window), ``triggers`` (every
  TRIGGER row) or ``retractions`` (every RETRACTION row), read from ``P/<table>``; or ``late``:
  the late-data table (dropped events with their ``reason``), read from ``path`` itself.
* ``versionAsOf``: a Delta table version to read (time travel); default the latest.

The DataFrame is the table's snapshot at the version pinned when the read is planned (a query
never mixes two versions), read through ``deltalake`` (delta-rs): one Spark partition per group
of data files (about 128 MiB each). Columns and types are the table's pane schema
(``spark_windowing.datasource._types`` mapping; timestamps are Spark ``TimestampType``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping

import pyarrow as pa
import pyarrow.dataset as pads
from deltalake import DeltaTable
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from spark_windowing.datasource.tables import delta
from spark_windowing.datasource._types import arrow_to_spark_schema, spark_to_arrow_schema
from spark_windowing.errors import OptionError

__all__ = ["table_schema", "PaneTableReader", "TableOptions", "TOP_KEYS_PER_WINDOW_SQL",
           "ACCEPTED_TABLES"]

ACCEPTED_TABLES = "'current', 'triggers', 'retractions' (under the sink's path) or 'late' (at the lateDataPath)"
#: ``table=late``: the late-data table a windowed source writes to its ``lateDataPath``.
LATE = "late"
TARGET_PARTITION_BYTES = 128 * 1024 * 1024

#: "Top keys per window": the 3 keys with the highest ``total`` in each window, over the
#: ``current`` table of a pipeline keyed by ``user_id`` with ``sum(amount) AS total``, after
#: ``CREATE TEMPORARY VIEW clicks USING windowed OPTIONS (path '<P>', table 'current')``.
TOP_KEYS_PER_WINDOW_SQL = """\
SELECT window_start, window_end, user_id, total, rank
FROM (
  SELECT window_start, window_end, user_id, total,
         ROW_NUMBER() OVER (PARTITION BY window_start, window_end
                            ORDER BY total DESC, user_id) AS rank
  FROM clicks
)
WHERE rank <= 3
ORDER BY window_start, window_end, rank"""


@dataclass(frozen=True)
class TableOptions:
    """The options of a pane-table read, parsed once on the driver."""

    root: str
    table: str
    version: int | None = None

    @property
    def uri(self) -> str:
        return self.root if self.table == LATE else delta.table_uri(self.root, self.table)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "TableOptions":
        opts = {k.lower(): v for k, v in options.items()}
        table = (opts.get("table") or "").strip().lower()
        if table not in delta.TABLES and table != LATE:
            raise OptionError("table", opts.get("table"), ACCEPTED_TABLES,
                              why="names the pane table to read")
        path = opts.get("path")
        if not path or not path.strip():
            accepted = ("the windowed source's lateDataPath" if table == LATE
                        else "the sink's root directory or URI (its option 'path')")
            raise OptionError("path", path, accepted, why=f"required to read the {table} table")
        raw = opts.get("versionasof")
        version = None
        if raw is not None:
            version = int(raw) if raw.strip().isdigit() else -1
            if version < 0:
                raise OptionError("versionAsOf", raw, "a Delta table version, an integer >= 0")
        return cls(root=delta.normalize_root(path), table=table, version=version)

    def open(self) -> DeltaTable:
        """The pinned Delta table; a clear error when there is none at the path."""
        table = delta.open_table(self.uri)
        if table is None:
            if self.table == LATE:
                raise FileNotFoundError(
                    f"no late-data table at {self.uri}: option path={self.root!r} is not a Delta table "
                    "(a windowed source with option lateDataPath creates it there when its query starts)")
            raise FileNotFoundError(
                f"no pane table at {self.uri}: option path={self.root!r} holds no '{self.table}' "
                "Delta table (a windowed sink creates current, triggers and retractions there "
                "when its query starts)")
        if self.version is not None:
            table.load_as_version(self.version)
        return table


def table_schema(options: Mapping[str, str]) -> StructType:
    """The Spark schema of the pane table named by ``options``."""
    table = TableOptions.parse(options).open()
    schema = pa.schema(table.schema().to_arrow())
    if delta.BUCKET_COLUMN in schema.names:   # current's partition column: not a pane column
        schema = schema.remove(schema.get_field_index(delta.BUCKET_COLUMN))
    return arrow_to_spark_schema(schema)


class PaneTableReader(DataSourceReader):
    """Reads one snapshot of a pane table; picklable (plain fields only)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = TableOptions.parse(options)
        table = self.options.open()
        self.version = table.version()
        self.arrow_schema = spark_to_arrow_schema(schema)

    def partitions(self) -> list[InputPartition]:
        table = self._snapshot()
        actions = pa.table(table.get_add_actions(flatten=True))
        sizes = dict(zip(actions["path"].to_pylist(), actions["size_bytes"].to_pylist()))
        groups: list[list[str]] = [[]]
        group_bytes = 0
        for fragment in table.to_pyarrow_dataset().get_fragments():
            size = sizes.get(fragment.path, 0)
            if groups[-1] and group_bytes + size > TARGET_PARTITION_BYTES:
                groups.append([])
                group_bytes = 0
            groups[-1].append(fragment.path)
            group_bytes += size
        return [InputPartition(group) for group in groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        wanted = set(partition.value)
        if not wanted:
            return
        dataset = self._snapshot().to_pyarrow_dataset()
        fragments = [f for f in dataset.get_fragments() if f.path in wanted]
        subset = pads.FileSystemDataset(fragments, dataset.schema, dataset.format, dataset.filesystem)
        for batch in subset.to_batches(columns=self.arrow_schema.names):
            yield batch.cast(self.arrow_schema)

    def _snapshot(self) -> DeltaTable:
        return DeltaTable(self.options.uri, version=self.version)
