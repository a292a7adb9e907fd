"""The late-data table: a Delta table of the events no window took (too late for their windows, or
without a readable event time), one row per event with the upstream event's columns plus
``spark_windowing.panes.LATE_FIELDS`` (reason, watermark, batch). Both ``format("windowed")``
(``reader``) and ``window(df)`` (``window_df``) create it empty when a query starts and append to it
exactly once per writer and batch."""

from __future__ import annotations

import pyarrow as pa

__all__ = ["create_late_table", "append_late_rows"]


def create_late_table(path: str, schema: pa.Schema) -> None:
    """Create the late-data Delta table at ``path`` with ``schema``, empty, unless it exists."""
    if _is_delta_table(path):
        return
    from deltalake import write_deltalake
    write_deltalake(path, schema.empty_table(), mode="append", schema_mode="merge")


def append_late_rows(path: str, app_id: str, seq: int, late: pa.Table) -> None:
    """Append ``late`` to the Delta table at ``path`` unless the writer ``app_id`` has already
    committed its batch ``seq`` (Delta's application transaction, committed with the rows): a
    replayed batch appends nothing twice."""
    from deltalake import CommitProperties, Transaction, write_deltalake

    from spark_windowing.datasource.tables.delta import open_table, user_metadata
    table = open_table(path)   # one log read: the check and the append's snapshot
    if table is not None:
        done = table.transaction_version(app_id)
        if done is not None and done >= seq:
            return
    write_deltalake(path if table is None else table, late, mode="append", schema_mode="merge",
                    commit_properties=CommitProperties(app_transactions=[Transaction(app_id, seq)],
                                                       custom_metadata=user_metadata(app_id, seq),
                                                       max_commit_retries=50))


def _is_delta_table(uri: str) -> bool:
    from deltalake import DeltaTable
    return DeltaTable.is_deltatable(uri)
