"""The operator's input: an upstream schema checked against the spec, and a micro-batch read into
its elements.

An element is an input row with an event time, a key and, where the window needs them, a session
gap (``gapColumn``) or the window it already belongs to (``window=inherit``: the pane rows of
another windowed query, whose ``RETRACTION`` rows take back an earlier row). A row whose time,
key, gap or inherited window cannot be read, or that its upstream could not read at all (its
``_corrupt_record`` is set), is not an element: ``read_elements`` marks it invalid and the
operator sends it to the late output as ``malformed``. An element whose time is more than
``maxEventTimeAhead`` ahead of the processing time (a device with a wrong clock) goes there as
``future`` (``future_mask``): it neither enters a window nor moves a watermark.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_windowing._arrow import field_type, get_column, to_micros
from spark_windowing._time import MIN_TIME, UNIT_FACTORS
from spark_windowing.errors import OptionError
from spark_windowing.operator import join
from spark_windowing.operator.spec import OperatorSpec
from spark_windowing.panes import CORRUPT_RECORD, KIND_RETRACTION

#: The key column of a query without key columns (every element has the one key 0).
NOKEY = "__nokey"


@dataclass
class Elements:
    """A batch's elements as the step reads them: input rows, key columns, event times (µs),
    session gaps (gapColumn) and, for window=inherit, the inherited bounds and retraction flags."""

    events: pa.Table
    key_table: pa.Table
    ts: np.ndarray
    gap: np.ndarray | None = None
    iws: np.ndarray | None = None
    iwe: np.ndarray | None = None
    retract: np.ndarray | None = None

    def select(self, mask: np.ndarray) -> "Elements":
        sel = pa.array(mask)
        pick = (lambda a: None if a is None else a[mask])
        return Elements(self.events.filter(sel), self.key_table.filter(sel), self.ts[mask], pick(self.gap),
                        pick(self.iws), pick(self.iwe), pick(self.retract))


def check_input(spec: OperatorSpec, schema: pa.Schema) -> None:
    """``OptionError`` naming the option whose column ``schema`` lacks or cannot serve: key
    columns, the event-time column, the inherited window's bounds, the gap column, join's side."""
    if spec.join is not None and join.SIDE_COLUMN not in schema.names:
        raise OptionError("join", spec.join.how, "input built by spark_windowing.operator.join.union (both streams)",
                          why=f"input columns {schema.names} have no {join.SIDE_COLUMN!r}")
    for k in spec.key_columns:
        if field_type(schema, k) is None:
            raise OptionError("keyColumns", ",".join(spec.key_columns), f"columns of {schema.names}",
                              why=f"no column {k!r}")
    if spec.timestamp_column is not None:
        t = field_type(schema, spec.timestamp_column)
        if t is None:
            raise OptionError("timestampColumn", spec.timestamp_column, f"a column of {schema.names}",
                              why="no such column")
        if not (pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_integer(t)
                or pa.types.is_floating(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
                or pa.types.is_null(t)):
            raise OptionError("timestampColumn", spec.timestamp_column,
                              "a timestamp, date, ISO-8601 string, or numeric epoch column with timestampUnit",
                              why=f"column has type {t}")
    if spec.window.inherit:
        for name in (spec.window.start_column, spec.window.end_column):
            t = field_type(schema, name)
            if t is None or not (pa.types.is_timestamp(t) or pa.types.is_integer(t) or pa.types.is_null(t)):
                raise OptionError("window", "inherit", "inherit over input with timestamp columns "
                                  "window_start and window_end (e.g. the pane rows of another windowed query)",
                                  why=f"column {name!r} is {'missing' if t is None else t}")
    gap_col = getattr(spec.window, "gap_column", None)
    if gap_col is not None and field_type(schema, gap_col) is None:
        raise OptionError("window", spec.window.spec(), f"gapColumn naming a column of {schema.names}",
                          why=f"no column {gap_col!r}")


def read_elements(spec: OperatorSpec, key_fields: list[pa.Field], events: pa.Table,
                  event_times: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[Elements, np.ndarray]:
    """Every row of ``events`` as an element, and the mask of those that are valid (a time, key,
    gap and inherited window that parse). ``event_times``: the times already parsed by the
    caller (not modified)."""
    if event_times is None:
        ts, valid = column_micros(spec, events, spec.timestamp_column)
    else:
        ts, valid = event_times[0], event_times[1].copy()
    gap = None
    gap_col = getattr(spec.window, "gap_column", None)
    if gap_col is not None:
        gap, gap_ok = _gaps(spec, events, gap_col)
        valid &= gap_ok
    keys = key_table(spec, key_fields, events)
    for name in keys.column_names:
        valid &= ~np.asarray(keys.column(name).is_null().to_numpy(zero_copy_only=False))
    valid &= ~corrupt_mask(events)
    el = Elements(events, keys, ts, gap)
    if spec.window.inherit:
        el.iws, ok_s = column_micros(spec, events, spec.window.start_column)
        el.iwe, ok_e = column_micros(spec, events, spec.window.end_column)
        valid &= ok_s & ok_e & (el.iwe > el.iws)
        el.retract = _retracted(events)
    return el, valid


def corrupt_mask(events: pa.Table) -> np.ndarray:
    """The rows an upstream could not read (``_corrupt_record`` set; ``spark_windowing.panes``)."""
    if CORRUPT_RECORD not in events.column_names:
        return np.zeros(events.num_rows, dtype=bool)
    return np.asarray(events.column(CORRUPT_RECORD).is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def future_mask(spec: OperatorSpec, ts: np.ndarray, processing_time: int) -> np.ndarray:
    """The events whose time is more than ``spec.max_time_ahead`` ahead of ``processing_time``
    (all false without a bound, or before any processing time is known)."""
    if spec.max_time_ahead is None or processing_time <= MIN_TIME:
        return np.zeros(len(ts), dtype=bool)
    return ts > processing_time + spec.max_time_ahead


def column_micros(spec: OperatorSpec, events: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """A time column (timestamp, date, ISO string, or numeric epoch in ``timestampUnit``,
    default ms) as µs, with a validity mask."""
    return to_micros(get_column(events, name), spec.timestamp_unit)


def key_table(spec: OperatorSpec, key_fields: list[pa.Field], events: pa.Table) -> pa.Table:
    """The key columns of ``events``, cast to the bound key types (``NOKEY`` without keys)."""
    if not spec.key_columns:
        return pa.table({NOKEY: pa.array(np.zeros(events.num_rows, dtype=np.int8))})
    return pa.table({f.name: get_column(events, f.name).cast(f.type) for f in key_fields})


def _gaps(spec: OperatorSpec, events: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    col = get_column(events, name)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_duration(col.type):
        us = col.cast(pa.duration("us")).cast(pa.int64())
    else:
        factor = UNIT_FACTORS[spec.timestamp_unit or "ms"]
        us = pc.multiply(col.cast(pa.float64()), float(factor)).cast(pa.int64(), safe=False)
    g = us.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return g, g > 0


def _retracted(events: pa.Table) -> np.ndarray:
    """Input rows that take back an earlier row (``kind = 'RETRACTION'``), for window=inherit."""
    if "kind" not in events.column_names:
        return np.zeros(events.num_rows, dtype=bool)
    col = events.column("kind")
    return np.asarray(pc.fill_null(pc.equal(col.cast(pa.string()), KIND_RETRACTION), False)
                      .to_numpy(zero_copy_only=False), dtype=bool)
