"""Aggregations: parsed from the ``aggregate`` option, bound to the upstream schema, computed
incrementally per (key, window).

Built-ins (SQL null semantics: nulls are ignored; an aggregate over no non-null value is null,
counts are 0):

=====================  ==========================================================================
``sum(x)``             int64 for integer input, float64 otherwise
``count(*)``           elements; ``count(x)``: non-null values
``avg(x)``             float64
``min(x)``/``max(x)``  numbers, timestamps, dates, strings, booleans
``first(x)``           value of the element with the smallest event time (ties: earliest arrival)
``last(x)``            value of the element with the largest event time (ties: latest arrival)
``collect_list(x)``    non-null values in arrival order (upstream order within a micro-batch)
``count_distinct(x)``  distinct non-null values
``top(n, x, c, ...)``  the rows whose ``x`` ranks in the n largest, ties kept (SQL ``RANK() <= n``),
                       as a list of structs ``{x, c, ...}`` (the columns' types), best first;
                       ``bottom(n, ...)`` the n smallest; ``max_rows(x, c, ...)`` = ``top(1, ...)``,
                       ``min_rows(x, c, ...)`` = ``bottom(1, ...)`` (``spark_windowing.ranked``)
``most_frequent(n, x)`` the non-null values of ``x`` whose count ranks in the n largest, ties kept,
                       as a list of structs ``{x, count}``, most frequent first, equal counts by
                       value (NEXMark q5's "the auctions with the most bids" in one aggregate)
=====================  ==========================================================================

Each may carry ``AS alias``; the default name is ``func(x)``, e.g. ``sum(amount)``.

Custom accumulation: ``module:Class`` (or ``module:Class(arg, ...)``, arguments passed as strings)
names a class with::

    output_fields = [("total", pa.int64()), ...]    # the pane columns it produces
    def initial(self) -> acc
    def add(self, acc, elements: pa.Table) -> acc   # one (key, window)'s new elements, arrival order
    def merge(self, accs: list) -> acc              # session merges
    def output(self, acc) -> dict                   # {column: value} for output_fields
    def retract(self, acc, elements) -> acc         # optional: take back RETRACTION rows (window=inherit)

Per batch, the built-ins pre-aggregate all (key, window) groups with one Arrow ``group_by`` and
merge the partials into row-aligned NumPy state with vectorized operations.

(Long module: every built-in aggregate's arithmetic, at each step of its life — parse, bind,
pre-aggregate, combine, merge, subtract, output — sits in one place, so a new aggregate is added here only.)
"""

from __future__ import annotations

import importlib
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_windowing import ranked
from spark_windowing._groups import Groups
from spark_windowing.errors import OptionError
from spark_windowing.process import BoundProcess, PaneBuffer, PaneInfo

AGGREGATE_FORMS = ("a comma-separated list of sum(x), count(*), count(x), avg(x), min(x), max(x), first(x), "
                   "last(x), collect_list(x), count_distinct(x), top(n, x, col, ...), bottom(n, x, col, ...), "
                   "max_rows(x, col, ...), min_rows(x, col, ...), most_frequent(n, x), each optionally followed by 'AS <name>'; "
                   "or module:Class for a custom accumulation")
FUNCS = ("sum", "count", "avg", "min", "max", "first", "last", "collect_list", "count_distinct")
_ITEM = re.compile(r"^\s*([A-Za-z_]\w*)\s*\(\s*(\*|[A-Za-z_][\w.]*|`[^`]+`)\s*\)\s*(?:(?i:AS)\s+([A-Za-z_]\w*|`[^`]+`))?\s*$")
_RANKED = re.compile(r"^\s*(top|bottom|max_rows|min_rows|most_frequent)\s*\(([^()]*)\)\s*(?:(?i:AS)\s+([A-Za-z_]\w*|`[^`]+`))?\s*$",
                     re.IGNORECASE)
_NAME = re.compile(r"^([A-Za-z_][\w.]*|`[^`]+`)$")
_CUSTOM = re.compile(r"^\s*([A-Za-z_][\w.]*):([A-Za-z_]\w*)\s*(\([^()]*\))?\s*(?:(?i:AS)\s+([A-Za-z_]\w*))?\s*$")


@dataclass(frozen=True)
class AggregateSpec:
    """One aggregate of the ``aggregate`` option (unbound: no types yet)."""

    func: str            # one of FUNCS, "count_star", "custom" or "process"
    column: str | None   # input column (None for count(*), custom and process)
    alias: str
    target: str | None = None  # "module:Class" for custom, "module:function" for process
    hidden: bool = False       # internal (join side counters): kept in state, not a pane column
    n: int = 0                 # ranked rows (``spark_windowing.ranked``): the rank kept
    carry: tuple[str, ...] = ()   # ranked rows: the input columns carried beside ``column``
    labels: tuple[str, ...] = ()  # ranked rows: the struct's field names (``column``, then ``carry``)


def _split_top_level(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def parse_aggregates(text: str) -> tuple[AggregateSpec, ...]:
    """Parse the ``aggregate`` option; raise OptionError naming the bad item."""
    specs: list[AggregateSpec] = []
    if not str(text).strip():
        raise OptionError("aggregate", text, AGGREGATE_FORMS, why="empty")
    for item in _split_top_level(str(text)):
        custom = _CUSTOM.match(item)
        if custom:
            args = custom.group(3) or ""
            specs.append(AggregateSpec("custom", None, custom.group(4) or custom.group(2),
                                       target=f"{custom.group(1)}:{custom.group(2)}{args.replace(' ', '')}"))
            continue
        rank = _RANKED.match(item)
        if rank:
            specs.append(_parse_ranked(text, item, rank))
            continue
        m = _ITEM.match(item)
        if not m:
            raise OptionError("aggregate", text, AGGREGATE_FORMS, why=f"cannot parse {item.strip()!r}")
        func, col, alias = m.group(1).lower(), m.group(2).strip("`"), m.group(3)
        if func not in FUNCS:
            raise OptionError("aggregate", text, AGGREGATE_FORMS, why=f"unknown aggregate function {m.group(1)!r}")
        if col == "*":
            if func != "count":
                raise OptionError("aggregate", text, AGGREGATE_FORMS, why=f"{func}(*) is not allowed; only count(*)")
            func, col = "count_star", None
        name = alias.strip("`") if alias else f"{m.group(1).lower()}({m.group(2)})"
        specs.append(AggregateSpec(func, col, name))
    names = [s.alias for s in specs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise OptionError("aggregate", text, AGGREGATE_FORMS, why=f"duplicate output name(s) {sorted(dup)}; use AS")
    return tuple(specs)


def _parse_ranked(text: str, item: str, m: re.Match) -> AggregateSpec:
    """``top(n, x, c, ...)``, ``bottom(n, ...)``, ``max_rows(x, c, ...)``, ``min_rows(x, ...)``,
    ``most_frequent(n, x)``."""
    func = m.group(1).lower()
    args = [a.strip() for a in m.group(2).split(",")]
    n = 1
    if func in ("top", "bottom", ranked.FREQUENT):
        if not args or not args[0].isdigit() or int(args[0]) < 1:
            raise OptionError("aggregate", text, AGGREGATE_FORMS,
                              why=f"{item.strip()!r}: {func}'s first argument is how many ranks, a positive integer")
        n, args = int(args[0]), args[1:]
    bad = [a for a in args if not _NAME.match(a)]
    if not args or bad:
        raise OptionError("aggregate", text, AGGREGATE_FORMS,
                          why=f"{item.strip()!r}: needs the value column, then the columns to carry, by name"
                              + (f" ({bad[0]!r} is not a column name)" if bad else ""))
    cols = [a.strip("`") for a in args]
    if func == ranked.FREQUENT:
        if len(cols) != 1 or cols[0] == "count":
            raise OptionError("aggregate", text, AGGREGATE_FORMS,
                              why=f"{item.strip()!r}: most_frequent(n, x) takes one column, not named 'count' "
                                  "(the struct's other field)")
        alias = m.group(3).strip("`") if m.group(3) else f"{func}({cols[0]})"
        return AggregateSpec(func, cols[0], alias, n=n, labels=(cols[0], "count"))
    labels = tuple(dict.fromkeys(cols))
    alias = m.group(3).strip("`") if m.group(3) else f"{func}({cols[0]})"
    return AggregateSpec(func, cols[0], alias, n=n, carry=labels[1:], labels=labels)


def load_custom(target: str, option: str = "aggregate") -> Any:
    """Import ``module:Class`` or ``module:Class(arg, ...)`` and instantiate it (arguments are
    passed as strings); raise OptionError if it is not there or refuses its arguments."""
    module, _, name = target.partition(":")
    name, _, rest = name.partition("(")
    args = [a.strip() for a in rest.rstrip(")").split(",") if a.strip()] if rest else []
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise OptionError(option, target, "module:Class importable on the driver and the workers (ship its module "
                          "with spark.sparkContext.addPyFile(...) or spark-submit --py-files: docs/windows.md, "
                          "'Your own aggregate class')", why=str(e)) from None
    try:
        obj = cls(*args)
    except (TypeError, ValueError) as e:
        raise OptionError(option, target, f"arguments that {module}:{name} accepts", why=str(e)) from None
    for attr in ("initial", "add", "merge", "output", "output_fields"):
        if not hasattr(obj, attr):
            raise OptionError(option, target, "a class with output_fields, initial(), add(), merge(), output()",
                              why=f"{target} has no {attr!r}")
    return obj


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _orderable(t: pa.DataType) -> bool:
    return (_numeric(t) or pa.types.is_temporal(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t) or pa.types.is_boolean(t))


@dataclass
class BoundAggregate:
    """An aggregate bound to its input type: knows its state columns and output field."""

    spec: AggregateSpec
    index: int
    input_type: pa.DataType | None
    custom: Any = None
    keep_all: bool = False   # ranked rows: keep every row (RETRACTION rows may come), not the candidates
    carry_types: tuple[pa.DataType, ...] = ()  # ranked rows: the carried columns' types
    _np_dtype: Any = field(default=None, repr=False)

    # ---- layout ----
    @property
    def prefix(self) -> str:
        return f"a{self.index}:"

    def output_fields(self) -> list[pa.Field]:
        f, t = self.spec.func, self.input_type
        if self.spec.hidden:
            return []
        if f == "custom":
            return [pa.field(n, ty) for n, ty in _custom_fields(self.custom)]
        if f == "process":
            return list(self.custom.fields)
        out = {"sum": pa.int64() if t is not None and pa.types.is_integer(t) else pa.float64(),
               "count": pa.int64(), "count_star": pa.int64(), "count_distinct": pa.int64(),
               "avg": pa.float64(), "collect_list": pa.list_(t) if t is not None else None}.get(f, t)
        if f in ranked.FUNCS:
            out = pa.list_(pa.struct(list(zip(self.spec.labels, (t, *self.carry_types)))))
        if f == ranked.FREQUENT:
            out = pa.list_(pa.struct([(self.spec.labels[0], t), ("count", pa.int64())]))
        return [pa.field(self.spec.alias, out)]

    def value_dtype(self):
        t = self.input_type
        if self.spec.func == "sum":
            return np.int64 if pa.types.is_integer(t) else np.float64
        if self.spec.func == "avg":
            return np.float64
        if t is not None and (pa.types.is_integer(t) or pa.types.is_floating(t)):
            return t.to_pandas_dtype()
        if t is not None and (pa.types.is_timestamp(t)):
            return np.dtype(f"datetime64[{t.unit}]")
        if t is not None and pa.types.is_boolean(t):
            return np.bool_
        return object

    def state_columns(self) -> dict[str, tuple[Any, Any]]:
        """name -> (numpy dtype, default value)."""
        p, f = self.prefix, self.spec.func
        if f in ("count", "count_star"):
            return {p + "n": (np.int64, 0)}
        if f in ("sum", "avg"):
            dt = self.value_dtype()
            return {p + "s": (dt, 0), p + "n": (np.int64, 0)}
        if f in ("min", "max"):
            return {p + "v": (self.value_dtype(), None), p + "n": (np.int64, 0)}
        if f in ("first", "last"):
            return {p + "v": (self.value_dtype(), None), p + "t": (np.int64, 0), p + "n": (np.int64, 0)}
        if f in ("collect_list", "count_distinct", "custom", "process", *ranked.PYTHON_STATE):
            return {p + "o": (object, None)}
        raise AssertionError(f)

    def fresh_objects(self, n: int) -> np.ndarray:
        out = np.empty(n, dtype=object)
        f = self.spec.func
        for i in range(n):
            out[i] = ([] if f == "collect_list" else set() if f == "count_distinct" else
                      PaneBuffer() if f == "process" else Counter() if f in ranked.PYTHON_STATE else self.custom.initial())
        return out

    # ---- pre-aggregation of a batch ----
    def arrow_aggs(self, col: str | None) -> list[tuple[str, str]]:
        f = self.spec.func
        if f in ("sum", "avg"):
            return [(col, "sum"), (col, "count")]
        if f == "count":
            return [(col, "count")]
        if f in ("min", "max"):
            return [(col, f), (col, "count")]
        if f == "collect_list":
            return [(col, "list")]
        if f == "count_distinct":
            return [(col, "distinct")]
        return []


def _custom_fields(obj: Any) -> list[tuple[str, pa.DataType]]:
    fields = obj.output_fields
    if isinstance(fields, pa.Schema):
        return [(f.name, f.type) for f in fields]
    return [(n, t) for n, t in fields]


def bind_aggregates(specs: tuple[AggregateSpec, ...], schema: pa.Schema, text: str = "",
                    evictor: Any = None, retracting_input: bool = False) -> list[BoundAggregate]:
    """Resolve input columns and types; raise OptionError for unknown columns or bad types.
    ``evictor``: the process function's evictor (``spark_windowing.process``);
    ``retracting_input``: RETRACTION rows may arrive (``window=inherit``)."""
    bound = []
    for i, s in enumerate(specs):
        t = None
        custom = None
        carry_types: tuple[pa.DataType, ...] = ()
        if s.func == "custom":
            custom = load_custom(s.target or "")
        elif s.func == "process":
            custom = BoundProcess(s.target or "", schema, evictor)
        elif s.column is not None:
            if s.column not in schema.names:
                raise OptionError("aggregate", text or s.alias, AGGREGATE_FORMS,
                                  why=f"column {s.column!r} is not an upstream column {schema.names}")
            t = schema.field(s.column).type
            if s.func in ("sum", "avg") and not (_numeric(t) or pa.types.is_null(t)):
                raise OptionError("aggregate", text or s.alias, AGGREGATE_FORMS,
                                  why=f"{s.func}({s.column}) needs a numeric column, {s.column!r} is {t}")
            if pa.types.is_decimal(t) and s.func not in ranked.PYTHON_STATE:   # ranked rows carry their type
                t = pa.float64()
            if s.func in ("min", "max", *ranked.PYTHON_STATE) and not (_orderable(t) or pa.types.is_null(t)):
                raise OptionError("aggregate", text or s.alias, AGGREGATE_FORMS,
                                  why=f"{s.func}({s.column}) needs an orderable column, {s.column!r} is {t}")
            if s.func in ranked.FUNCS:
                carry_types = tuple(_carried_type(schema, c, s, text) for c in s.carry)
        bound.append(BoundAggregate(s, i, t, custom, keep_all=retracting_input, carry_types=carry_types))
    return bound


def _carried_type(schema: pa.Schema, column: str, s: AggregateSpec, text: str) -> pa.DataType:
    if column not in schema.names:
        raise OptionError("aggregate", text or s.alias, AGGREGATE_FORMS,
                          why=f"{s.alias} carries column {column!r}, which is not an upstream column {schema.names}")
    return schema.field(column).type


# ---- state operations (used by the operator) -------------------------------------------------

def _col_name(i: int) -> str:
    return f"__v{i}"


def preaggregate(aggs: list[BoundAggregate], pairs: pa.Table, g: np.ndarray, ts: np.ndarray,
                 hold_ts: np.ndarray | None, arrival: np.ndarray | None = None, groups: Groups | None = None
                 ) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, Any]]:
    """Group (element, window) pairs by target row id ``g``; return (rows, counts/holds, partials).
    (Long: one Arrow ``group_by`` over the specs every aggregate contributes, then its result
    columns handed back per aggregate.)

    ``pairs`` holds the elements' columns (one row per pair, arrival order), ``ts`` their event
    times, ``hold_ts`` the times that count for the watermark hold (NaT-like = MAX where they don't),
    ``arrival`` their arrival numbers (process functions' buffers; default: the pairs' order).
    Sums, counts, minima and maxima of numeric columns are reduced in NumPy (``_groups``), over
    ``groups`` when the caller already has ``g``'s grouping (rows then come in its order);
    other aggregates go through Arrow's hash group-by.
    """
    if _numpy_groupable(aggs, pairs):
        return _preaggregate_numpy(aggs, pairs, groups or Groups(g), ts, hold_ts)
    cols: dict[str, Any] = {"__g": pa.array(g, pa.int64()), "__ts": pa.array(ts, pa.int64())}
    specs: list[tuple[str, str]] = [("__ts", "count"), ("__ts", "min"), ("__ts", "max")]
    if hold_ts is not None:
        cols["__h"] = pa.array(hold_ts, pa.int64(), mask=hold_ts == np.iinfo(np.int64).max)
        specs += [("__h", "min"), ("__h", "max")]
    for a in aggs:
        if a.spec.column is not None and a.spec.func not in ("first", "last", *ranked.PYTHON_STATE):
            name = _col_name(a.index)
            arr = _typed(pairs.column(a.spec.column))
            if a.spec.func in ("sum", "avg") and not pa.types.is_integer(arr.type):
                arr = pc.cast(arr, pa.float64())
            cols[name] = arr
            specs += a.arrow_aggs(name)
    table = pa.table(cols)
    out = table.group_by("__g", use_threads=False).aggregate(specs)
    rows = out.column("__g").to_numpy()
    res: dict[str, np.ndarray] = {
        "n": out.column("__ts_count").to_numpy(),
        "min_ts": out.column("__ts_min").to_numpy(),
        "max_ts": out.column("__ts_max").to_numpy(),
    }
    if hold_ts is not None:
        big = np.iinfo(np.int64).max
        res["hold_min"] = out.column("__h_min").fill_null(big).to_numpy()
        res["hold_max"] = out.column("__h_max").fill_null(np.iinfo(np.int64).min).to_numpy()
    partials: dict[str, Any] = {}
    for a in aggs:
        name = _col_name(a.index)
        f = a.spec.func
        if f in ("sum", "avg"):
            partials[a.prefix + "s"] = out.column(f"{name}_sum").fill_null(0).to_numpy()
            partials[a.prefix + "n"] = out.column(f"{name}_count").to_numpy()
        elif f == "count":
            partials[a.prefix + "n"] = out.column(f"{name}_count").to_numpy()
        elif f == "count_star":
            partials[a.prefix + "n"] = res["n"]
        elif f in ("min", "max"):
            partials[a.prefix + "v"] = out.column(f"{name}_{f}")
            partials[a.prefix + "n"] = out.column(f"{name}_count").to_numpy()
        elif f in ("collect_list", "count_distinct"):
            partials[a.prefix + "o"] = out.column(f"{name}_{'list' if f == 'collect_list' else 'distinct'}")
    _first_last(aggs, pairs, g, ts, rows, partials)
    _custom_partials(aggs, pairs, g, rows, partials)
    _ranked_partials(aggs, pairs, g, rows, partials)
    _frequency_partials(aggs, pairs, g, rows, partials)
    for a in aggs:
        if a.spec.func == "process":
            arr = np.arange(len(g), dtype=np.int64) if arrival is None else arrival
            partials[a.prefix + "o"] = a.custom.groups(pairs, g, ts, arr, rows)
    return rows, res, partials


def input_columns(aggs: list[BoundAggregate], events: pa.Table) -> pa.Table:
    """The columns of ``events`` the aggregates read (all of them for custom accumulations)."""
    if any(a.spec.func == "custom" for a in aggs):
        return events
    needed = {a.spec.column for a in aggs if a.spec.column is not None}
    needed.update(c for a in aggs for c in a.spec.carry)
    for a in aggs:
        if a.spec.func == "process":
            needed.update(a.custom.stored)
    return events.select(sorted(needed))


#: Aggregates whose partial states combine by sum/min/max (usable for per-slide pre-aggregation).
COMBINABLE = frozenset({"sum", "avg", "count", "count_star", "min", "max"})


def combine_partials(aggs: list[BoundAggregate], g: np.ndarray, src: np.ndarray, res: dict[str, np.ndarray],
                     partials: dict[str, Any]) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, Any]]:
    """Combine partial aggregates (rows ``src`` of ``res``/``partials``) per target row ``g``:
    the second stage of per-slide pre-aggregation. Only for ``COMBINABLE`` aggregates. Numeric
    partials are combined in NumPy (``_groups``), others (min/max of strings, ...) by Arrow."""
    if all(_numpy_combinable(v) for v in partials.values()):
        return _combine_partials_numpy(aggs, Groups(g), src, res, partials)
    take = pa.array(src)
    cols: dict[str, Any] = {"__g": pa.array(g, pa.int64()), "n": pa.array(res["n"][src]),
                            "min_ts": pa.array(res["min_ts"][src]), "max_ts": pa.array(res["max_ts"][src])}
    specs = [("n", "sum"), ("min_ts", "min"), ("max_ts", "max")]
    if "hold_min" in res:
        cols["hold_min"], cols["hold_max"] = pa.array(res["hold_min"][src]), pa.array(res["hold_max"][src])
        specs += [("hold_min", "min"), ("hold_max", "max")]
    for a in aggs:
        p, f = a.prefix, a.spec.func
        for name, part in ((p + "s", "sum"), (p + "n", "sum"), (p + "v", f)):
            if name in partials:
                v = partials[name]
                cols[name] = v.take(take) if isinstance(v, (pa.Array, pa.ChunkedArray)) else pa.array(v[src])
                specs.append((name, part if name != p + "v" else ("min" if f == "min" else "max")))
    out = pa.table(cols).group_by("__g", use_threads=False).aggregate(specs)
    rows = out.column("__g").to_numpy()
    new_res = {"n": out.column("n_sum").to_numpy(), "min_ts": out.column("min_ts_min").to_numpy(),
               "max_ts": out.column("max_ts_max").to_numpy()}
    if "hold_min" in res:
        new_res["hold_min"] = out.column("hold_min_min").to_numpy()
        new_res["hold_max"] = out.column("hold_max_max").to_numpy()
    new_parts: dict[str, Any] = {}
    for a in aggs:
        p, f = a.prefix, a.spec.func
        if p + "s" in partials:
            new_parts[p + "s"] = out.column(f"{p}s_sum").to_numpy()
        if p + "n" in partials:
            new_parts[p + "n"] = out.column(f"{p}n_sum").to_numpy()
        if p + "v" in partials:
            new_parts[p + "v"] = out.column(f"{p}v_{'min' if f == 'min' else 'max'}")
    return rows, new_res, new_parts


def _numpy_combinable(values: Any) -> bool:
    """A partial NumPy can combine: a NumPy array, or a signed integer / float Arrow array
    without NaN."""
    if isinstance(values, np.ndarray):
        return True
    t = values.type
    if pa.types.is_floating(t):
        return not pc.any(pc.is_nan(values)).as_py()
    return pa.types.is_signed_integer(t)


def _combine_partials_numpy(aggs: list[BoundAggregate], grp: Groups, src: np.ndarray, res: dict[str, np.ndarray],
                            partials: dict[str, Any]) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, Any]]:
    """``combine_partials`` for numeric partials: the same rows (ascending), counts, holds and
    partials."""
    new_res = {"n": grp.sum(res["n"][src]), "min_ts": grp.min(res["min_ts"][src], fill=0),
               "max_ts": grp.max(res["max_ts"][src], fill=0)}
    if "hold_min" in res:
        new_res["hold_min"] = grp.min(res["hold_min"][src], fill=np.iinfo(np.int64).max)
        new_res["hold_max"] = grp.max(res["hold_max"][src], fill=np.iinfo(np.int64).min)
    new_parts: dict[str, Any] = {}
    for a in aggs:
        p, f = a.prefix, a.spec.func
        for name in (p + "s", p + "n"):
            if name in partials:
                new_parts[name] = grp.sum(np.asarray(partials[name])[src])
        if p + "v" in partials:
            values, valid = _values_and_validity(partials[p + "v"].take(pa.array(src)))
            count = grp.count(valid)
            v = (grp.min if f == "min" else grp.max)(values, valid, fill=0)
            new_parts[p + "v"] = pa.array(v, mask=count == 0)
    return grp.rows, new_res, new_parts


def _numpy_groupable(aggs: list[BoundAggregate], pairs: pa.Table) -> bool:
    """Whether every aggregate is a count, or a sum/avg/min/max of a signed integer or float
    column (min/max: without NaN, which NumPy and Arrow order differently)."""
    for a in aggs:
        f = a.spec.func
        if f == "count_star" or (f == "count" and a.spec.column is not None):
            continue
        if f not in ("sum", "avg", "min", "max"):
            return False
        col = pairs.column(a.spec.column)
        t = col.type
        if not (pa.types.is_signed_integer(t) or pa.types.is_floating(t)):
            return False
        if f in ("min", "max") and pa.types.is_floating(t) and pc.any(pc.is_nan(col)).as_py():
            return False
    return True


def _values_and_validity(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
    """A column's values as NumPy (nulls as 0) and its validity mask (None: no nulls)."""
    if col.null_count == 0:
        return col.to_numpy(), None
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    return (col.fill_null(0).to_numpy() if not pa.types.is_null(col.type) else np.zeros(len(col), np.int64)), valid


def _preaggregate_numpy(aggs: list[BoundAggregate], pairs: pa.Table, grp: Groups, ts: np.ndarray,
                        hold_ts: np.ndarray | None) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, Any]]:
    """``preaggregate`` for ``_numpy_groupable`` aggregates: the same rows (``grp``'s), counts,
    holds and partials, by dense-label reductions in the pairs' order."""
    res: dict[str, np.ndarray] = {"n": grp.sizes, "min_ts": grp.min(ts, fill=0), "max_ts": grp.max(ts, fill=0)}
    if hold_ts is not None:
        held = hold_ts != np.iinfo(np.int64).max
        res["hold_min"] = grp.min(hold_ts, fill=np.iinfo(np.int64).max)
        res["hold_max"] = grp.max(hold_ts, held, fill=np.iinfo(np.int64).min)
    partials: dict[str, Any] = {}
    for a in aggs:
        p, f = a.prefix, a.spec.func
        if f == "count_star":
            partials[p + "n"] = res["n"]
            continue
        col = pairs.column(a.spec.column)
        if f == "count":
            partials[p + "n"] = grp.count(None if col.null_count == 0 else col.is_valid().to_numpy(zero_copy_only=False))
            continue
        values, valid = _values_and_validity(col)
        n = grp.count(valid)
        partials[p + "n"] = n
        if f in ("sum", "avg"):
            partials[p + "s"] = grp.sum(values, valid)
        else:
            v = (grp.min if f == "min" else grp.max)(values, valid, fill=0)
            partials[p + "v"] = pa.array(v, mask=n == 0)
    return grp.rows, res, partials


def _typed(arr):
    """Arrow's hash aggregates have no kernels for the null type (an all-null column of a first
    bundle whose type was inferred); an all-null int64 column aggregates the same."""
    return pa.nulls(len(arr), pa.int64()) if pa.types.is_null(arr.type) else arr


def _first_last(aggs, pairs, g, ts, rows, partials) -> None:
    fl = [a for a in aggs if a.spec.func in ("first", "last")]
    if not fl:
        return
    order = np.lexsort((np.arange(len(ts)), ts))  # by time, then arrival
    cols: dict[str, Any] = {"__g": pa.array(g[order], pa.int64())}
    specs = []
    for a in fl:
        name = _col_name(a.index)
        v = _typed(pairs.column(a.spec.column)).take(pa.array(order))
        t = pa.array(ts[order], pa.int64(), mask=np.asarray(v.is_null()))
        cols[name], cols[name + "t"] = v, t
        specs += [(name, a.spec.func), (name + "t", "min" if a.spec.func == "first" else "max"),
                  (name, "count")]
    out = pa.table(cols).group_by("__g", use_threads=False).aggregate(specs)
    pos = np.empty(int(rows.max()) + 1 if len(rows) else 0, dtype=np.int64)
    pos[out.column("__g").to_numpy()] = np.arange(out.num_rows)
    take = pa.array(pos[rows])
    for a in fl:
        name = _col_name(a.index)
        partials[a.prefix + "v"] = out.column(f"{name}_{a.spec.func}").take(take)
        partials[a.prefix + "t"] = out.column(f"{name}t_{'min' if a.spec.func == 'first' else 'max'}").take(take).fill_null(0).to_numpy()
        partials[a.prefix + "n"] = out.column(f"{name}_count").take(take).to_numpy()


def _custom_partials(aggs, pairs, g, rows, partials) -> None:
    cs = [a for a in aggs if a.spec.func == "custom"]
    if not cs:
        return
    order = np.argsort(g, kind="stable")
    table = pairs.take(pa.array(order))
    groups = _per_row(g[order], rows, lambda i, j: table.slice(i, j - i))
    for a in cs:
        partials[a.prefix + "o"] = groups


def _ranked_partials(aggs, pairs, g, rows, partials) -> None:
    """Per group of ``rows``, the row tuples a ranked-rows aggregate folds in: its candidates
    (``ranked.candidates``), or every row with a value when it keeps all."""
    for a in aggs:
        if a.spec.func not in ranked.FUNCS:
            continue
        values = _typed(pairs.column(a.spec.column))
        desc = ranked.best_first(a.spec.func)
        idx = (np.flatnonzero(np.asarray(values.is_valid())) if a.keep_all
               else ranked.candidates(g, values, a.spec.n, desc))
        idx = idx[np.argsort(g[idx], kind="stable")]
        tuples = ranked.row_tuples(pairs, (a.spec.column, *a.spec.carry), idx)
        partials[a.prefix + "o"] = _per_row(g[idx], rows, lambda i, j: tuples[i:j])


def _frequency_partials(aggs, pairs, g, rows, partials) -> None:
    """Per group of ``rows``, ``most_frequent``'s counts of each non-null value: one Arrow
    ``group_by`` over (group, value), then a dict per group."""
    for a in aggs:
        if a.spec.func != ranked.FREQUENT:
            continue
        values = _typed(pairs.column(a.spec.column))
        counted = (pa.table({"g": pa.array(g, pa.int64()), "v": values}).filter(values.is_valid())
                   .group_by(["g", "v"], use_threads=False).aggregate([([], "count_all")]))
        cg = counted.column("g").to_numpy()
        order = np.argsort(cg, kind="stable")
        vals = counted.column("v").take(pa.array(order)).to_pylist()
        counts = counted.column("count_all").take(pa.array(order)).to_pylist()
        partials[a.prefix + "o"] = _per_row(cg[order], rows, lambda i, j: dict(zip(vals[i:j], counts[i:j])))


def _per_row(sorted_g: np.ndarray, rows: np.ndarray, part: Callable[[int, int], Any]) -> np.ndarray:
    """Per state row of ``rows``, ``part(i, j)`` of its span ``[i, j)`` in ``sorted_g`` (the
    pairs' target rows, ascending): an object array aligned with ``rows``."""
    lo, hi = np.searchsorted(sorted_g, rows, side="left"), np.searchsorted(sorted_g, rows, side="right")
    out = np.empty(len(rows), dtype=object)
    out[:] = [part(i, j) for i, j in zip(lo.tolist(), hi.tolist())]
    return out


def _to_np(arr: pa.Array | pa.ChunkedArray, dtype) -> np.ndarray:
    if dtype is object:
        out = np.empty(len(arr), dtype=object)
        out[:] = arr.to_pylist()
        return out
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_timestamp(arr.type):
        arr = arr.cast(pa.timestamp(arr.type.unit))
    return arr.to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def merge_partials(aggs: list[BoundAggregate], cols: dict[str, np.ndarray], rows: np.ndarray,
                   partials: dict[str, Any]) -> None:
    """Fold a batch's partial aggregates into the state rows ``rows`` (unique)."""
    for a in aggs:
        p, f = a.prefix, a.spec.func
        if f in ("count", "count_star"):
            cols[p + "n"][rows] += partials[p + "n"]
        elif f in ("sum", "avg"):
            cols[p + "s"][rows] += partials[p + "s"].astype(cols[p + "s"].dtype, copy=False)
            cols[p + "n"][rows] += partials[p + "n"]
        elif f in ("min", "max", "first", "last"):
            pn = partials[p + "n"]
            valid = pn > 0
            r = rows[valid]
            pv = _to_np(partials[p + "v"].filter(pa.array(valid)), cols[p + "v"].dtype)
            old_n = cols[p + "n"][r]
            if f in ("min", "max"):
                old = np.where(old_n == 0, pv, cols[p + "v"][r])  # no None comparisons
                better = (old_n == 0) | ((pv < old) if f == "min" else (pv > old))
            else:
                pt = partials[p + "t"][valid]
                old_t = cols[p + "t"][r]
                better = (old_n == 0) | ((pt < old_t) if f == "first" else (pt >= old_t))
                cols[p + "t"][r[better]] = pt[better]
            cols[p + "v"][r[better]] = pv[better]
            cols[p + "n"][rows] += pn
        elif f == "collect_list":
            store = cols[p + "o"]
            for r, values in zip(rows.tolist(), partials[p + "o"].to_pylist()):
                store[r].extend(v for v in values if v is not None)
        elif f == "count_distinct":
            store = cols[p + "o"]
            for r, values in zip(rows.tolist(), partials[p + "o"].to_pylist()):
                store[r].update(v for v in values if v is not None)
        elif f == "custom":
            store = cols[p + "o"]
            for r, elements in zip(rows.tolist(), partials[p + "o"]):
                store[r] = a.custom.add(store[r], elements)
        elif f in ranked.FUNCS:
            store, n, desc = cols[p + "o"], a.spec.n, ranked.best_first(f)
            for r, tuples in zip(rows.tolist(), partials[p + "o"]):
                if tuples:
                    store[r] = ranked.add(store[r], tuples, n, desc, a.keep_all)
        elif f == ranked.FREQUENT:
            store = cols[p + "o"]
            for r, counts in zip(rows.tolist(), partials[p + "o"]):
                store[r].update(counts)
        elif f == "process":
            a.custom.add(cols[p + "o"], rows, partials[p + "o"])


#: Aggregates that can subtract a RETRACTION row of inherited panes (``window=inherit``);
#: a custom accumulation can when it has ``retract(acc, elements) -> acc``.
RETRACTABLE = frozenset({"sum", "avg", "count", "count_star", "collect_list", *ranked.PYTHON_STATE})


def check_no_retractions(aggs: list[BoundAggregate], retracted: np.ndarray, text: str | None = None) -> None:
    """RETRACTION rows of inherited panes (``window=inherit``) need aggregates that can subtract
    them: raise OptionError, before any state change, when ``retracted`` holds one and an aggregate
    cannot (a process function, ``min``/``max``/``first``/``last``/``count_distinct``, a custom
    accumulation without ``retract``). Checked per batch, not at ``load()``: the panes of a
    discarding or accumulating query have none, and any aggregate takes them."""
    if not retracted.any():
        return
    n = int(retracted.sum())
    for a in aggs:
        if a.spec.func == "process":
            raise OptionError("process", a.spec.target, "with window=inherit: input without RETRACTION rows "
                              "(the panes of a discarding or accumulating query)",
                              why=f"{n} RETRACTION row(s) arrived; a process function's "
                                  "buffered elements cannot take back a retracted row")
        if (a.spec.func == "custom" and hasattr(a.custom, "retract")) or a.spec.func in RETRACTABLE:
            continue
        cannot = f"{a.spec.target} has no retract(acc, elements)" if a.spec.func == "custom" \
            else f"{a.spec.alias} cannot take back a retracted input row"
        raise OptionError("aggregate", text or a.spec.alias,
                          "with window=inherit over input that has RETRACTION rows (an accumulating_and_retracting "
                          "upstream): sum, count, avg, collect_list, top, bottom, max_rows, min_rows, or "
                          "module:Class with retract(acc, elements); "
                          "any aggregate over a discarding or accumulating upstream",
                          why=f"{n} RETRACTION row(s) arrived; {cannot}")


def subtract_partials(aggs: list[BoundAggregate], cols: dict[str, np.ndarray], rows: np.ndarray,
                      partials: dict[str, Any]) -> None:
    """Take a batch's partial aggregates of retracted input rows out of the state rows ``rows``
    (``window=inherit``): counts and sums subtract, collect_list removes one occurrence per
    value, custom accumulations get ``retract``."""
    for a in aggs:
        p, f = a.prefix, a.spec.func
        if f in ("count", "count_star"):
            cols[p + "n"][rows] -= partials[p + "n"]
        elif f in ("sum", "avg"):
            cols[p + "s"][rows] -= partials[p + "s"].astype(cols[p + "s"].dtype, copy=False)
            cols[p + "n"][rows] -= partials[p + "n"]
        elif f == "collect_list":
            store = cols[p + "o"]
            for r, values in zip(rows.tolist(), partials[p + "o"].to_pylist()):
                for v in values:
                    if v is not None and v in store[r]:
                        store[r].remove(v)
        elif f == "custom":
            store = cols[p + "o"]
            for r, elements in zip(rows.tolist(), partials[p + "o"]):
                store[r] = a.custom.retract(store[r], elements)
        elif f in ranked.FUNCS:
            store = cols[p + "o"]
            for r, tuples in zip(rows.tolist(), partials[p + "o"]):
                store[r] = ranked.retract(store[r], tuples)
        elif f == ranked.FREQUENT:
            store = cols[p + "o"]
            for r, counts in zip(rows.tolist(), partials[p + "o"]):
                store[r] = ranked.frequent_retract(store[r], counts)
        else:  # check_no_retractions() rejects the rest before a retracted row gets here
            raise AssertionError(f"{f} is not retractable")


def merge_rows(aggs: list[BoundAggregate], cols: dict[str, np.ndarray], src: int, dst: int) -> None:
    """Fold row ``src``'s aggregate state into row ``dst`` (session merges)."""
    for a in aggs:
        p, f = a.prefix, a.spec.func
        if f in ("count", "count_star"):
            cols[p + "n"][dst] += cols[p + "n"][src]
        elif f in ("sum", "avg"):
            cols[p + "s"][dst] += cols[p + "s"][src]
            cols[p + "n"][dst] += cols[p + "n"][src]
        elif f in ("min", "max", "first", "last"):
            if cols[p + "n"][src] > 0:
                if cols[p + "n"][dst] == 0:
                    better = True
                elif f == "min":
                    better = cols[p + "v"][src] < cols[p + "v"][dst]
                elif f == "max":
                    better = cols[p + "v"][src] > cols[p + "v"][dst]
                elif f == "first":
                    better = cols[p + "t"][src] < cols[p + "t"][dst]
                else:
                    better = cols[p + "t"][src] >= cols[p + "t"][dst]
                if better:
                    cols[p + "v"][dst] = cols[p + "v"][src]
                    if f in ("first", "last"):
                        cols[p + "t"][dst] = cols[p + "t"][src]
                cols[p + "n"][dst] += cols[p + "n"][src]
        elif f == "collect_list":
            cols[p + "o"][dst] = cols[p + "o"][dst] + cols[p + "o"][src]
        elif f == "count_distinct":
            cols[p + "o"][dst] = cols[p + "o"][dst] | cols[p + "o"][src]
        elif f == "custom":
            cols[p + "o"][dst] = a.custom.merge([cols[p + "o"][dst], cols[p + "o"][src]])
        elif f in ranked.FUNCS:
            cols[p + "o"][dst] = ranked.merge(cols[p + "o"][dst], cols[p + "o"][src], a.spec.n,
                                              ranked.best_first(f), a.keep_all)
        elif f == ranked.FREQUENT:
            cols[p + "o"][dst] = cols[p + "o"][dst] + cols[p + "o"][src]
        elif f == "process":
            cols[p + "o"][dst] = cols[p + "o"][dst].merged(cols[p + "o"][src])


def reset_rows(aggs: list[BoundAggregate], cols: dict[str, np.ndarray], rows: np.ndarray,
               finished: bool = False) -> None:
    """Clear the aggregate state of ``rows`` (discarding mode after a firing; ``finished``
    windows). A process function's buffer keeps a discarded pane to report it as expired."""
    for a in aggs:
        if a.spec.func == "process":
            (a.custom.clear if finished else a.custom.discard)(cols[a.prefix + "o"], rows)
            continue
        for name, (dt, default) in a.state_columns().items():
            if name.endswith(":o"):
                cols[name][rows] = a.fresh_objects(len(rows))
            elif name.endswith(":v") and cols[name].dtype != object:
                pass  # guarded by the count column
            else:
                cols[name][rows] = 0 if default is None else default


def outputs(aggs: list[BoundAggregate], cols: dict[str, np.ndarray], rows: np.ndarray,
            pane: Callable[[], PaneInfo] | None = None) -> list[pa.Array]:
    """The pane's aggregate columns for ``rows``, typed as ``output_fields``. ``pane`` describes
    the firing (process functions: evicts and calls the function, once per pane)."""
    arrays: list[pa.Array] = []
    for a in aggs:
        p, f = a.prefix, a.spec.func
        if a.spec.hidden:
            continue
        if f == "process":
            assert pane is not None, "process functions are only called by a firing"
            arrays += a.custom.fire(cols[p + "o"][rows], pane())
        elif f in ("count", "count_star"):
            arrays.append(pa.array(cols[p + "n"][rows], pa.int64()))
        elif f == "sum":
            n = cols[p + "n"][rows]
            arrays.append(pa.array(cols[p + "s"][rows], a.output_fields()[0].type, mask=n == 0))
        elif f == "avg":
            n = cols[p + "n"][rows]
            with np.errstate(invalid="ignore", divide="ignore"):
                arrays.append(pa.array(cols[p + "s"][rows] / np.maximum(n, 1), pa.float64(), mask=n == 0))
        elif f in ("min", "max", "first", "last"):
            n = cols[p + "n"][rows]
            v = cols[p + "v"][rows]
            t = a.output_fields()[0].type
            if v.dtype == object:
                vals = [x if k > 0 else None for x, k in zip(v.tolist(), n.tolist())]
                arrays.append(pa.array(vals, t))
            else:
                arrays.append(pa.array(v, mask=n == 0).cast(t))
        elif f == "collect_list":
            arrays.append(pa.array([list(x) for x in cols[p + "o"][rows]], a.output_fields()[0].type))
        elif f == "count_distinct":
            arrays.append(pa.array([len(x) for x in cols[p + "o"][rows]], pa.int64()))
        elif f in ranked.FUNCS:
            n, desc, names = a.spec.n, ranked.best_first(f), a.spec.labels
            arrays.append(pa.array([ranked.output(x, n, desc, names) for x in cols[p + "o"][rows]],
                                   a.output_fields()[0].type))
        elif f == ranked.FREQUENT:
            arrays.append(pa.array([ranked.frequent_output(x, a.spec.n, a.spec.labels) for x in cols[p + "o"][rows]],
                                   a.output_fields()[0].type))
        elif f == "custom":
            outs = [a.custom.output(x) for x in cols[p + "o"][rows]]
            for fld in a.output_fields():
                arrays.append(pa.array([o.get(fld.name) for o in outs], fld.type))
    return arrays
