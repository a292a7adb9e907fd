"""Aggregates bound to the upstream schema: ``bind_aggregates`` resolves each ``AggregateSpec``'s
input column and type (or loads its custom accumulation or process function) into a
``BoundAggregate``, which knows its state columns, their fresh values and its output field."""

from __future__ import annotations

import importlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from spark_windowing._old_paths import current_module
from spark_windowing.aggregates import ranked
from spark_windowing.aggregates.parsing import AGGREGATE_FORMS, AggregateSpec
from spark_windowing.aggregates.process import BoundProcess, PaneBuffer
from spark_windowing.errors import OptionError


def load_custom(target: str, option: str = "aggregate") -> Any:
    """Import ``module:Class`` or ``module:Class(arg, ...)`` and instantiate it (arguments are
    passed as strings); raise OptionError if it is not there or refuses its arguments."""
    module, _, name = target.partition(":")
    name, _, rest = name.partition("(")
    args = [a.strip() for a in rest.rstrip(")").split(",") if a.strip()] if rest else []
    try:
        cls = getattr(importlib.import_module(current_module(module)), name)
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
    ``evictor``: the process function's evictor (``spark_windowing.aggregates.process``);
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
