"""The pane schema: the rows the operator emits, the Spark source yields and the sink writes.

A pane row is::

    <key columns> · window_start · window_end · <aggregate columns> · kind · pane_timing
    · pane_index · is_final · pane_timestamp · watermark · batch_time · batch_seq

* ``window_start`` / ``window_end``: the half-open window ``[start, end)``, UTC microseconds.
  Global windows are reported as ``[0001-01-01T00:00:00, 9999-12-31T23:59:59.999999]``.
* ``kind``: ``TRIGGER`` (a fired pane) or ``RETRACTION`` (withdraws an earlier TRIGGER of the
  same key and window; it carries that pane's values, ``pane_index``, ``pane_timing`` and
  ``pane_timestamp``, so it matches the row it retracts).
* ``pane_timing``: ``EARLY`` (watermark before the window end), ``ON_TIME`` (the first pane
  fired by the watermark passing the end), ``LATE`` (any later one).
* ``pane_index``: 0-based per key and window; a session merge starts a new window at 0 (Beam).
* ``is_final``: no further pane will follow for this key and window.
* ``pane_timestamp``: from the timestamp combiner (``end_of_window`` gives ``window_end - 1µs``).
* ``watermark``: the input watermark the pane was produced at (null before any watermark).
* ``batch_time`` / ``batch_seq``: the micro-batch (processing) time and sequence number.
"""

from __future__ import annotations

import pyarrow as pa

TIMESTAMP = pa.timestamp("us", tz="UTC")

KIND_TRIGGER = "TRIGGER"
KIND_RETRACTION = "RETRACTION"
TIMING_EARLY = "EARLY"
TIMING_ON_TIME = "ON_TIME"
TIMING_LATE = "LATE"

WINDOW_FIELDS: tuple[pa.Field, ...] = (
    pa.field("window_start", TIMESTAMP, nullable=False),
    pa.field("window_end", TIMESTAMP, nullable=False),
)

METADATA_FIELDS: tuple[pa.Field, ...] = (
    pa.field("kind", pa.string(), nullable=False),
    pa.field("pane_timing", pa.string(), nullable=False),
    pa.field("pane_index", pa.int64(), nullable=False),
    pa.field("is_final", pa.bool_(), nullable=False),
    pa.field("pane_timestamp", TIMESTAMP, nullable=False),
    pa.field("watermark", TIMESTAMP, nullable=True),
    pa.field("batch_time", TIMESTAMP, nullable=False),
    pa.field("batch_seq", pa.int64(), nullable=False),
)

# Late-data rows: the upstream event's own columns, then these.
LATE_REASON_MALFORMED = "malformed"      # null/unparseable timestamp or null key
LATE_REASON_TOO_LATE = "too_late"        # window end + allowed lateness <= watermark
LATE_REASON_CLOSED = "closed"            # the window's trigger had finished
LATE_REASON_FUTURE = "future"            # event time further ahead of processing time than maxEventTimeAhead

#: An input column an upstream fills for a row it could not read (the row's raw text; its other
#: columns are null): the operator sends such a row to the late output as ``malformed``. Spark's
#: name for it (``columnNameOfCorruptRecord``). ``ORIGIN``: where that row came from (file:line).
CORRUPT_RECORD = "_corrupt_record"
ORIGIN = "_origin"

LATE_FIELDS: tuple[pa.Field, ...] = (
    pa.field("reason", pa.string(), nullable=False),
    pa.field("window_start", TIMESTAMP, nullable=True),
    pa.field("window_end", TIMESTAMP, nullable=True),
    pa.field("watermark", TIMESTAMP, nullable=True),
    pa.field("batch_time", TIMESTAMP, nullable=False),
    pa.field("batch_seq", pa.int64(), nullable=False),
)


def pane_schema(key_fields: list[pa.Field], aggregate_fields: list[pa.Field]) -> pa.Schema:
    """The Arrow schema of pane rows for the given key and aggregate columns."""
    return pa.schema([*key_fields, *WINDOW_FIELDS, *aggregate_fields, *METADATA_FIELDS])


def split_pane_schema(schema: pa.Schema) -> tuple[list[pa.Field], list[pa.Field]]:
    """Split a pane schema into (key fields, aggregate fields); raise ValueError if it is not one.

    Key fields are those before ``window_start``; aggregate fields those between ``window_end``
    and ``kind``. The window and metadata columns must be present with their types.
    """
    names = schema.names
    required = [f.name for f in (*WINDOW_FIELDS, *METADATA_FIELDS)]
    missing = [n for n in required if n not in names]
    if missing:
        raise ValueError(f"not a pane schema: missing column(s) {missing}; a pane schema has "
                         f"<keys>, {', '.join(required[:2])}, <aggregates>, {', '.join(required[2:])}")
    for f in (*WINDOW_FIELDS, *METADATA_FIELDS):
        got = schema.field(f.name).type
        if not got.equals(f.type) and not (pa.types.is_timestamp(got) and pa.types.is_timestamp(f.type)):
            raise ValueError(f"not a pane schema: column {f.name!r} has type {got}, expected {f.type}")
    i_start, i_end, i_kind = names.index("window_start"), names.index("window_end"), names.index("kind")
    if not (i_start + 1 == i_end < i_kind):
        raise ValueError("not a pane schema: expected <keys>, window_start, window_end, <aggregates>, kind, ...")
    return [schema.field(i) for i in range(i_start)], [schema.field(i) for i in range(i_end + 1, i_kind)]
