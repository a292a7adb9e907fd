"""Arrow helpers every layer shares: column access by dotted path, time columns as int64
microseconds, and dense integer ids for rows (hashing). A leaf: it imports nothing of the project
but the time constants.

>>> import pyarrow as pa
>>> to_micros(pa.array([1, None, 3]), "s")[0].tolist(), to_micros(pa.array([1, None, 3]), "s")[1].tolist()
([1000000, 0, 3000000], [True, False, True])
>>> [ids.tolist() for ids in factorize([pa.table({"k": ["a", "b"]}), pa.table({"k": ["b", "c"]})])]
[[0, 1], [1, 2]]
"""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_windowing._time import UNIT_FACTORS


def pd():
    """pandas, imported on first use: its hashing (factorize) serves the operator's group-bys, and
    the Python processes Spark starts only to plan a query or drive offsets need not pay its ~0.3 s
    import."""
    import pandas
    return pandas


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of no rows with ``schema`` (pyarrow's ``Schema.empty_table`` imports pandas, ~0.2 s
    in a planning process that needs none)."""
    return pa.Table.from_batches([], schema=schema)


def field_type(schema: pa.Schema, dotted: str) -> pa.DataType | None:
    """The type of a column, or of a struct field by dotted path (``payload.ts``); None if absent."""
    parts = dotted.split(".")
    if parts[0] not in schema.names:
        return dotted in schema.names and schema.field(dotted).type or None
    t = schema.field(parts[0]).type
    for p in parts[1:]:
        if not pa.types.is_struct(t) or t.get_field_index(p) < 0:
            return None
        t = t.field(p).type
    return t


def get_column(table: pa.Table, dotted: str) -> pa.ChunkedArray | pa.Array:
    """A column by name, or a struct field by dotted path (``payload.ts``)."""
    if dotted in table.column_names:
        return table.column(dotted)
    parts = dotted.split(".")
    col = table.column(parts[0])
    for p in parts[1:]:
        col = pc.struct_field(col, p)
    return col


def to_micros(col: pa.Array | pa.ChunkedArray, unit: str | None) -> tuple[np.ndarray, np.ndarray]:
    """A time column (timestamp, date, ISO string, or numeric epoch in ``unit``, default ms) as
    µs, with a validity mask (null / unparseable -> invalid)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    t = col.type
    if pa.types.is_null(t):
        return np.zeros(len(col), dtype=np.int64), np.zeros(len(col), dtype=bool)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        col = parse_iso(col)
        t = col.type
    if pa.types.is_timestamp(t):
        us = col.cast(pa.timestamp("us", tz=t.tz)).cast(pa.int64())
    elif pa.types.is_date(t):
        us = pc.multiply(col.cast(pa.date32()).cast(pa.int64()), 86_400_000_000)
    else:
        factor = UNIT_FACTORS[unit or "ms"]
        if pa.types.is_floating(t):
            us = pc.round(pc.multiply(col.cast(pa.float64()), float(factor))).cast(pa.int64(), safe=False)
        else:
            us = pc.multiply(col.cast(pa.int64()), factor)
    valid = ~np.asarray(us.is_null().to_numpy(zero_copy_only=False))
    if pa.types.is_floating(t):
        valid &= np.isfinite(col.cast(pa.float64()).fill_null(0).to_numpy(zero_copy_only=False))
    return us.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64), valid


def parse_iso(col: pa.Array) -> pa.Array:
    """ISO-8601 strings -> timestamp[us, UTC]; unparseable values become null."""
    try:
        return col.cast(pa.timestamp("us", tz="UTC"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        out = []
        for s in col.to_pylist():
            try:
                d = datetime.fromisoformat(s.replace("Z", "+00:00")) if s is not None else None
            except ValueError:
                d = None
            if d is not None and d.tzinfo is None:
                d = d.replace(tzinfo=timezone.utc)
            out.append(d)
        return pa.array(out, pa.timestamp("us", tz="UTC"))


def factorize(tables: list[pa.Table]) -> list[np.ndarray]:
    """Dense integer ids for the rows of same-schema tables, consistent across them (hashing)."""
    sizes = [t.num_rows for t in tables]
    if sum(sizes) == 0:
        return [np.zeros(0, dtype=np.int64) for _ in tables]
    tables = [t if t.schema.equals(tables[0].schema) else t.cast(tables[0].schema) for t in tables]
    ids = None
    for name in tables[0].column_names:
        parts = [t.column(name) for t in tables]
        col = pa.chunked_array([c for p in parts for c in p.chunks], type=parts[0].type).combine_chunks() \
            if len(parts) > 1 else parts[0].combine_chunks()
        if pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_temporal(col.type):
            values = col.to_numpy(zero_copy_only=False)
        else:
            values = col.to_numpy(zero_copy_only=False).astype(object)
        part = pd().factorize(values)[0].astype(np.int64)
        ids = part if ids is None else pd().factorize(ids * (int(part.max()) + 1) + part)[0].astype(np.int64)
    assert ids is not None
    out, pos = [], 0
    for s in sizes:
        out.append(ids[pos:pos + s])
        pos += s
    return out
