"""Two streams merged per key and window (Apex's ``WindowedMergeOperator``, Flink's window
``join`` / ``coGroup``).

The operator is fed the *union* of both streams, one table per micro-batch, with a side column
``join_side`` (1 or 2). Its columns:

* the shared columns, under stream 1's names: the key columns (stream 2's cast to stream 1's
  types), the timestamp column (both sides as ``timestamp[us, UTC]``; an unparseable value is
  null, so the row goes to the late output as ``malformed``) and a session ``gapColumn``;
* stream 1's other columns under their own names (null on stream-2 rows);
* every column ``c`` of stream 2 as ``__s2_c`` (null on stream-1 rows), and ``__s1_c`` for a
  shared column of stream 1 that ``aggregate`` reads;
* ``join_side`` and two hidden markers (``__join_on1`` / ``__join_on2``: 1 on the side's rows).

``aggregate`` is rewritten to read stream 1's columns, ``aggregate2`` stream 2's
(``count(*)`` counts the side's marker); since every aggregate ignores nulls, each reads only its
side's rows. Two hidden counters ``count(__join_on1)`` / ``count(__join_on2)`` give the elements of
each side in the pane; when a window fires, ``join`` decides whether its pane is emitted:

==========  =================================================================================
``inner``   both sides have elements in the pane (Flink's window join)
``left``    stream 1 has elements in the pane
``outer``   either side has elements in the pane
``cogroup`` every pane the trigger fires, both sides' aggregates (Flink's coGroup)
==========  =================================================================================

"In the pane" follows the accumulation mode: the elements since the last firing under
``discarding``, all of the window's elements under the accumulating modes. A suppressed pane is
not counted in ``pane_index`` and retracts nothing; so under ``discarding`` a window whose last
firing is suppressed (nothing new since an early pane) has no pane with ``is_final``. Under the
accumulating modes a pane's contents only grow, so once a window's pane is emitted, every later
firing of it is too.

The merged watermark is the earlier of the two streams' watermarks, never decreasing
(``merge_watermarks``).

>>> from spark_windowing.testing import TestStream
>>> s = TestStream(window="tumbling(10 milliseconds)", key_columns="k", join="inner",
...                aggregate="sum(v) AS v1", aggregate2="collect_list(w) AS w2")
>>> s.add_elements([{"k": "a", "ts": 1, "v": 5}, {"k": "b", "ts": 2, "v": 7}],
...                stream2=[{"k": "a", "ts": 3, "w": "x"}])
>>> s.advance_watermark_to(10)
>>> [(p["k"], p["v1"], p["w2"]) for p in s.take_panes()]
[('a', 5, ['x'])]
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from spark_windowing._arrow import empty_table, field_type, get_column, to_micros
from spark_windowing._time import MIN_TIME
from spark_windowing.aggregates.parsing import AggregateSpec, parse_aggregates
from spark_windowing.errors import OptionError

__all__ = ["JOIN_KINDS", "JoinSpec", "JoinWatermark", "build_join", "gate", "merge_watermarks", "union", "union_schema"]

JOIN_KINDS = ("inner", "left", "outer", "cogroup")
SIDE_COLUMN = "join_side"
ON1, ON2 = "__join_on1", "__join_on2"
N1, N2 = "__join_n1", "__join_n2"
S1, S2 = "__s1_", "__s2_"
_TS = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class JoinSpec:
    """How the second stream is merged in (names are stream 2's own column names)."""

    how: str
    key_columns2: tuple[str, ...]
    timestamp_column2: str
    aggregate2_text: str

    def describe(self) -> dict[str, object]:
        return {"how": self.how, "keys2": list(self.key_columns2), "ts2": self.timestamp_column2,
                "aggregate2": self.aggregate2_text}


def build_join(*, how: str, aggregate: str, aggregate2: str | None, key_columns: tuple[str, ...],
               key_columns2: tuple[str, ...] | None, timestamp_column: str | None,
               timestamp_column2: str | None, window) -> tuple[JoinSpec, tuple[AggregateSpec, ...]]:
    """Validate the join options; return the join spec and the side-aware aggregates
    (``aggregate``'s, then ``aggregate2``'s, then the two hidden side counters)."""
    kind = str(how).strip().lower()
    if kind not in JOIN_KINDS:
        raise OptionError("join", how, ", ".join(JOIN_KINDS))
    if window.count_based or window.mixed or window.inherit:
        raise OptionError("window", window.spec(), "tumbling, sliding, session, cumulate or global with join",
                          why="count, mixed, record_sliding and inherited windows are not joinable in this version")
    if not timestamp_column:
        raise OptionError("timestampColumn", timestamp_column, "an event-time column of stream 1 with join",
                          why="streams are merged in event time")
    keys2 = tuple(key_columns2) if key_columns2 else tuple(key_columns)
    if len(keys2) != len(key_columns):
        raise OptionError("keyColumns2", ",".join(keys2), f"{len(key_columns)} column(s), as keyColumns "
                          f"{','.join(key_columns) or '(none)'}", why="the streams are joined key column by key column")
    side1 = parse_aggregates(aggregate)
    if aggregate2 is None or not str(aggregate2).strip():  # the same aggregates over stream 2, names + "_2"
        side2 = tuple(replace(a, alias=a.alias + "_2") for a in side1)
        text2 = ", ".join(f"{a.func.replace('count_star', 'count')}({a.column or '*'}) AS `{a.alias}`"
                          if a.func != "custom" else str(a.target) for a in side2)
    else:
        text2 = str(aggregate2)
        side2 = _parse2(text2)
    clash = sorted({a.alias for a in side1} & {a.alias for a in side2})
    if clash:
        raise OptionError("aggregate2", text2, "output names different from aggregate's (use AS)",
                          why=f"{clash} would be two pane columns of the same name")
    for a in (*side1, *side2):
        if a.func == "custom":
            raise OptionError("aggregate" if a in side1 else "aggregate2", aggregate if a in side1 else text2,
                              "built-in aggregates with join", why="custom accumulations see one stream's rows")
    shared = {*key_columns, timestamp_column}
    gap = getattr(window, "gap_column", None)
    if gap:
        shared.add(gap)
    aggs = [_side(a, 1, shared) for a in side1] + [_side(a, 2, shared) for a in side2]
    aggs += [AggregateSpec("count", ON1, N1, hidden=True), AggregateSpec("count", ON2, N2, hidden=True)]
    spec = JoinSpec(kind, keys2, (timestamp_column2 or timestamp_column).strip(), text2)
    return spec, tuple(aggs)


def _parse2(text: str) -> tuple[AggregateSpec, ...]:
    try:
        return parse_aggregates(text)
    except OptionError as e:
        raise OptionError("aggregate2", text, e.accepted, why=e.why) from None


def _side(a: AggregateSpec, side: int, shared: set[str]) -> AggregateSpec:
    """``a`` reading only its side's rows in the union."""
    if a.func == "count_star":
        return AggregateSpec("count", ON1 if side == 1 else ON2, a.alias)
    if a.column is None:
        return a
    prefix = S2 if side == 2 else S1

    def column(c: str) -> str:
        return prefix + c if side == 2 or c in shared else c
    return replace(a, column=column(a.column), carry=tuple(column(c) for c in a.carry))


def side_counts(aggs: list, cols: dict[str, np.ndarray], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The elements of stream 1 and of stream 2 in windows ``rows``: the hidden counters
    ``N1`` / ``N2`` (their ``a<i>:n`` state columns), found by alias."""
    by_alias = {a.spec.alias: a for a in aggs}
    return cols[f"{by_alias[N1].prefix}n"][rows], cols[f"{by_alias[N2].prefix}n"][rows]


def gate(how: str, n1: np.ndarray, n2: np.ndarray) -> np.ndarray:
    """Which fired panes are emitted, from the elements of each side in the pane."""
    if how == "inner":
        return (n1 > 0) & (n2 > 0)
    if how == "left":
        return n1 > 0
    if how == "outer":
        return (n1 > 0) | (n2 > 0)
    return np.ones(len(n1), dtype=bool)


@dataclass(frozen=True)
class JoinWatermark:
    """Per-stream watermarks and the merged one (what a join's offsets carry between batches)."""

    wm: int = MIN_TIME
    wm1: int = MIN_TIME
    wm2: int = MIN_TIME

    def advance(self, strategy, *, max_event1: int | None, max_event2: int | None, batch_time: int,
                last_input1: int | None, last_input2: int | None, max_col1: int | None = None,
                max_col2: int | None = None, started: int | None = None) -> "JoinWatermark":
        """Each stream's watermark from its own events (``strategy``), merged by
        ``merge_watermarks``. A stream without events yet holds the merged watermark back —
        unless ``strategy.idle_timeout`` has passed since ``started`` (the query's first batch
        time): then only the other stream's watermark counts (Flink's idle inputs), and this
        stream's first events may be late."""
        w1 = strategy.advance(current=self.wm1, max_event=max_event1, max_column=max_col1,
                              batch_time=batch_time, last_input=last_input1)
        w2 = strategy.advance(current=self.wm2, max_event=max_event2, max_column=max_col2,
                              batch_time=batch_time, last_input=last_input2)
        idle = (strategy.idle_timeout is not None and started is not None
                and batch_time - started > strategy.idle_timeout)
        m1 = w2 if idle and w1 <= MIN_TIME else w1
        m2 = w1 if idle and w2 <= MIN_TIME else w2
        return JoinWatermark(merge_watermarks(self.wm, m1, m2), w1, w2)


def merge_watermarks(current: int, wm1: int, wm2: int) -> int:
    """The merged watermark: the earlier of the streams' watermarks, never below ``current``
    (Flink's two-input operators, Apex's WindowedMergeOperator).

    >>> merge_watermarks(5, 10, 7), merge_watermarks(5, 10, 3)
    (7, 5)
    """
    return max(int(current), min(int(wm1), int(wm2)))


# ---------------------------------------------------------------------- the union
def _shared(spec) -> list[tuple[str, str]]:
    """(stream-1 name, stream-2 name) of the columns both sides fill."""
    j = spec.join
    pairs = list(zip(spec.key_columns, j.key_columns2))
    gap = getattr(spec.window, "gap_column", None)
    if gap:
        pairs.append((gap, gap))
    return pairs


def _type(schema: pa.Schema, name: str, option: str, value: str) -> pa.DataType:
    t = field_type(schema, name)
    if t is None:
        raise OptionError(option, value, f"columns of {schema.names}", why=f"no column {name!r}")
    return t


def _compatible(a: pa.DataType, b: pa.DataType) -> bool:
    def family(t):
        return ("int" if pa.types.is_integer(t) else "str" if pa.types.is_string(t) or pa.types.is_large_string(t)
                else "float" if pa.types.is_floating(t) else str(t))
    return a.equals(b) or family(a) == family(b) or pa.types.is_null(b)


def union_schema(schema1: pa.Schema, schema2: pa.Schema, spec) -> pa.Schema:
    """The operator's input schema for ``spec`` (a join) over these stream schemas; raise
    OptionError for a missing or incompatible column of either stream."""
    j = spec.join
    shared = _shared(spec)
    fields: dict[str, pa.DataType] = {}
    for f in schema1:
        fields[f.name] = f.type
    for c1, c2 in shared:
        t1 = _type(schema1, c1, "keyColumns", ",".join(spec.key_columns))
        t2 = _type(schema2, c2, "keyColumns2", ",".join(j.key_columns2))
        if not _compatible(t1, t2):
            raise OptionError("keyColumns2", ",".join(j.key_columns2), f"columns of the types of keyColumns",
                              why=f"stream 2's {c2!r} is {t2}, stream 1's {c1!r} is {t1}")
        fields[c1] = t1
    _type(schema1, spec.timestamp_column, "timestampColumn", spec.timestamp_column)
    _type(schema2, j.timestamp_column2, "timestampColumn2", j.timestamp_column2)
    fields[spec.timestamp_column] = _TS
    for col in (c for a in spec.aggregates if a.column is not None and not a.hidden for c in (a.column, *a.carry)):
        if col.startswith(S2):
            if col[len(S2):] not in schema2.names:
                raise OptionError("aggregate2", j.aggregate2_text,
                                  f"aggregates over columns of stream 2 {schema2.names}",
                                  why=f"no column {col[len(S2):]!r}")
        elif col.startswith(S1):
            fields[col] = _type(schema1, col[len(S1):], "aggregate", spec.aggregate_text)
    for f in schema2:
        fields[S2 + f.name] = f.type
    fields[SIDE_COLUMN] = pa.int8()
    fields[ON1] = pa.int8()
    fields[ON2] = pa.int8()
    return pa.schema([pa.field(n, t) for n, t in fields.items()])


def union(t1: pa.Table | None, t2: pa.Table | None, spec, schema: pa.Schema) -> pa.Table:
    """One micro-batch of both streams as the operator's input (``schema`` from ``union_schema``):
    stream 1's rows first, then stream 2's, each in upstream order."""
    parts = []
    n1 = 0 if t1 is None else t1.num_rows
    n2 = 0 if t2 is None else t2.num_rows
    shared = _shared(spec)
    for side, t, n in ((1, t1, n1), (2, t2, n2)):
        if not n:
            continue
        cols: dict[str, pa.Array] = {}
        for f in schema:
            name = f.name
            v = None
            if name == spec.timestamp_column:
                v = _timestamps(get_column(t, name if side == 1 else spec.join.timestamp_column2), spec.timestamp_unit)
            elif name in (c1 for c1, _ in shared):
                src = name if side == 1 else dict(shared)[name]
                v = get_column(t, src)
            elif name == SIDE_COLUMN:
                v = pa.array(np.full(n, side, dtype=np.int8))
            elif name in (ON1, ON2):
                v = pa.array(np.ones(n, np.int8)) if name == (ON1 if side == 1 else ON2) else None
            elif side == 1 and name.startswith(S1):
                v = get_column(t, name[len(S1):])
            elif side == 2 and name.startswith(S2) and name[len(S2):] in t.column_names:
                v = t.column(name[len(S2):])
            elif side == 1 and not name.startswith((S1, S2)) and name in t.column_names:
                v = t.column(name)
            if v is None:
                v = pa.nulls(n, f.type)
            elif not v.type.equals(f.type):
                v = v.cast(f.type)
            cols[name] = v
        parts.append(pa.table(cols, schema=schema))
    if not parts:
        return empty_table(schema)
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _timestamps(col, unit: str | None) -> pa.Array:
    us, valid = to_micros(col, unit)
    return pa.array(us, pa.int64(), mask=~valid).cast(_TS)


def side_masks(events: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks of stream 1's and stream 2's rows of a union table."""
    side = events.column(SIDE_COLUMN).to_numpy(zero_copy_only=False)
    return side == 1, side == 2
