"""Rows an upstream cannot read, kept instead of failing the stream (Spark's ``PERMISSIVE`` mode).

A JSON line that does not parse or whose values do not fit the schema (``"v": "NaN"`` in a double
column, ``"not a time"`` in a timestamp), a CSV line with too many or too few fields, a Parquet
value that does not cast, a Kafka value that does not decode: each becomes one row whose schema
columns are all null, whose ``_corrupt_record`` holds its raw text, and whose ``_origin`` says
where it came from (``file:line`` / ``file:row N``; Kafka rows carry topic, partition and offset).
The operator sends every row with a ``_corrupt_record`` to the late-data table as ``malformed``
(``spark_windowing.operator.elements``); the other rows of the same file or batch go on as usual.

Vectorized: a block of lines is parsed in one Arrow call; only a block that fails is cut in halves
(``parse_lines``), so a file with ``b`` bad lines of ``n`` costs about ``b · log2(n)`` extra
parses, and a clean file one. Casting works the same way per column (``cast_rows``).
"""

from __future__ import annotations

import io
import json
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_windowing._arrow import empty_table
from spark_windowing.panes import CORRUPT_RECORD, ORIGIN

#: The columns every file upstream appends to its schema (Kafka: ``_corrupt_record`` only).
CORRUPT_FIELDS = (pa.field(CORRUPT_RECORD, pa.string()), pa.field(ORIGIN, pa.string()))
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)


def parse_block(lines: list[bytes], fmt: str, schema: pa.Schema, names: list[str] | None = None) -> pa.Table | None:
    """``lines`` (JSON objects, or CSV records with the columns ``names``, default the schema's)
    parsed into ``schema`` in one call; None when the block does not parse or fit."""
    import pyarrow.csv as pacsv
    import pyarrow.json as pajson
    buf = b"\n".join(lines) + b"\n"
    try:
        if fmt == "json":
            t = pajson.read_json(io.BytesIO(buf), parse_options=pajson.ParseOptions(
                explicit_schema=schema, unexpected_field_behavior="ignore"))
        else:
            t = pacsv.read_csv(io.BytesIO(buf), read_options=pacsv.ReadOptions(column_names=names or schema.names),
                               convert_options=pacsv.ConvertOptions(
                                   column_types=schema, strings_can_be_null=True, include_columns=schema.names,
                                   include_missing_columns=True),
                               parse_options=pacsv.ParseOptions(ignore_empty_lines=False))
        if t.num_rows != len(lines):
            return None
        return t.select(schema.names).cast(schema)
    except _ARROW_ERRORS:
        return None


def parse_lines(lines: list[bytes], fmt: str, schema: pa.Schema, names: list[str] | None = None
                ) -> tuple[pa.Table, np.ndarray]:
    """Every line as a row of ``schema``, and the mask of the lines that could not be read (their
    row is all null). A failing block is bisected down to the lines that fail alone."""
    bad = np.zeros(len(lines), dtype=bool)
    tables = _parse_or_split(lines, 0, fmt, schema, names, bad)
    return (pa.concat_tables(tables) if tables else empty_table(schema)), bad


def _parse_or_split(lines, start, fmt, schema, names, bad) -> list[pa.Table]:
    t = parse_block(lines, fmt, schema, names) if lines else empty_table(schema)
    if t is not None:
        return [t]
    if len(lines) == 1:
        bad[start] = True
        return [nulls(schema, 1)]
    mid = len(lines) // 2
    return (_parse_or_split(lines[:mid], start, fmt, schema, names, bad)
            + _parse_or_split(lines[mid:], start + mid, fmt, schema, names, bad))


def cast_rows(table: pa.Table, schema: pa.Schema) -> tuple[pa.Table, np.ndarray]:
    """``table`` cast to ``schema`` (missing columns null), and the mask of the rows with a value
    that does not cast (their row is all null). Columns that cast whole cost one cast each."""
    bad = np.zeros(table.num_rows, dtype=bool)
    cols = []
    for f in schema:
        if f.name not in table.column_names:
            cols.append(pa.nulls(table.num_rows, f.type))
            continue
        col = table.column(f.name).combine_chunks()
        cols.append(_cast_or_split(col, f.type, 0, bad))
    out = pa.Table.from_arrays(cols, schema=schema)
    return (out if not bad.any() else blank(out, bad)), bad


def _cast_or_split(col: pa.Array, to: pa.DataType, start: int, bad: np.ndarray) -> pa.Array:
    try:
        return col.cast(to)
    except _ARROW_ERRORS:
        if len(col) == 1:
            bad[start] = True
            return pa.nulls(1, to)
    mid = len(col) // 2
    return pa.concat_arrays([_cast_or_split(col.slice(0, mid), to, start, bad),
                             _cast_or_split(col.slice(mid), to, start + mid, bad)])


def nulls(schema: pa.Schema, n: int) -> pa.Table:
    return pa.table({f.name: pa.nulls(n, f.type) for f in schema}, schema=schema)


def blank(table: pa.Table, mask: np.ndarray) -> pa.Table:
    """``table`` with every column null in the rows of ``mask``."""
    keep = pa.array(~mask)
    return pa.Table.from_arrays([pc.if_else(keep, c, pa.nulls(len(c), c.type)) for c in table.columns],
                                schema=table.schema)


def with_corrupt(table: pa.Table, bad: np.ndarray, raw: Callable[[int], str], origin: Callable[[int], str]
                 ) -> pa.Table:
    """``table`` plus ``_corrupt_record`` (``raw(i)`` for each bad row ``i``) and ``_origin``
    (``origin(i)`` for bad rows; null for the good ones, which need no pointer)."""
    idx = np.flatnonzero(bad).tolist()
    rec, org = [None] * table.num_rows, [None] * table.num_rows
    for i in idx:   # bad rows only: a file's good rows cost nothing here
        rec[i], org[i] = raw(i), origin(i)
    return table.append_column(CORRUPT_FIELDS[0], pa.array(rec, pa.string())) \
                .append_column(CORRUPT_FIELDS[1], pa.array(org, pa.string()))


def clean(table: pa.Table) -> pa.Table:
    """``table`` plus the corrupt-row columns, all null (every row was read)."""
    return with_corrupt(table, np.zeros(table.num_rows, dtype=bool), str, str)


def row_text(table: pa.Table, i: int) -> str:
    """One row of a table as JSON text (what a Parquet row that does not cast looked like)."""
    return json.dumps(table.slice(i, 1).to_pylist()[0], default=str)
