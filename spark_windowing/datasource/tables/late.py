"""The late-data table: a Delta table of the events no window took (too late for their windows, or
without a readable event time), one row per event with the upstream event's columns plus
``spark_windowing.panes.LATE_FIELDS`` (reason, watermark, batch). Both ``format("windowed")``
(``reader``) and ``window(df)`` (``window_df``) create it empty when a query starts and append to it
exactly once per writer and batch.

The state location records the late table its batches wrote to (``<stateLocation>/late.json``:
the path and the table's Delta ``metaData.id``). A restart whose state holds committed batches
while that table is missing, or is another table created anew at the path (the late table alone
deleted), is refused with an ``OptionError`` naming ``lateDataPath`` (``check_late_table``):
creating it empty would lose every late row those batches wrote, silently. The ways out: restore
the table, or start over with a new ``checkpointLocation`` and ``stateLocation``. A state location
that records no late table (a first start, ``lateDataPath`` added on a restart, a state written
before the record existed) or another path (``lateDataPath`` changed on purpose) is not checked.
"""

from __future__ import annotations

import json

import pyarrow as pa

from spark_windowing._arrow import empty_table
from spark_windowing.datasource import storage
from spark_windowing.datasource.storage import layout
from spark_windowing.errors import OptionError

__all__ = ["create_late_table", "append_late_rows", "check_late_table", "record_late_table", "open_late_table"]

#: The ways out of a lost late table (``check_late_table``'s error).
WAYS_OUT = ("the late table this query's state was written with, restored at that path (e.g. from a backup or "
            "your storage's versioning); or a new checkpointLocation and a new stateLocation to start the query "
            "over (its panes and late rows from the beginning)")


def open_late_table(path: str, schema: pa.Schema, *, state: str, has_batches: bool) -> None:
    """A query starts (driver): the late table is checked against what ``state`` recorded
    (``check_late_table``), created empty when there is none, and recorded in ``state``."""
    check_late_table(state, path, has_batches=has_batches)
    create_late_table(path, schema)
    record_late_table(state, path)


def check_late_table(state: str, path: str, *, has_batches: bool) -> None:
    """Raise ``OptionError`` (``lateDataPath``) when ``state`` holds committed batches
    (``has_batches``) that wrote late rows to the table it recorded at ``path``, and that table is
    missing there or another one (its Delta table id differs): the late table alone was deleted."""
    recorded = _recorded(state)
    if not has_batches or recorded is None or recorded.get("path") != path:
        return
    now = _table_id(path)
    if now == recorded.get("id"):
        return
    what = ("is missing" if now is None else
            f"is another table (Delta table id {now}, not {recorded.get('id')}): it was deleted and created anew")
    raise OptionError("lateDataPath", path, WAYS_OUT,
                      why=f"the late table there {what}, but this query's state at {state} holds committed "
                          "micro-batches that wrote their late rows to it: going on with an empty late table would "
                          "lose those rows silently")


def record_late_table(state: str, path: str) -> None:
    """Record in ``state`` the late table at ``path`` (its Delta table id), unless it is recorded."""
    table = _table_id(path)
    if table is None:
        return
    record = {"path": path, "id": table}
    if _recorded(state) != record:
        storage.write_atomic(layout.late_marker(state), json.dumps(record, sort_keys=True).encode())


def create_late_table(path: str, schema: pa.Schema) -> None:
    """Create the late-data Delta table at ``path`` with ``schema``, empty, unless it exists."""
    if _is_delta_table(path):
        return
    from deltalake import write_deltalake
    write_deltalake(path, empty_table(schema), mode="append", schema_mode="merge")


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


def _recorded(state: str) -> dict | None:
    raw = storage.read_bytes(layout.late_marker(state), missing_ok=True)
    return json.loads(raw) if raw else None


def _table_id(path: str) -> str | None:
    """The Delta table id of the table at ``path``; None when there is none."""
    from spark_windowing.datasource.tables.delta import open_table, table_id
    table = open_table(path)
    return None if table is None else table_id(table)


def _is_delta_table(uri: str) -> bool:
    from deltalake import DeltaTable
    return DeltaTable.is_deltatable(uri)
