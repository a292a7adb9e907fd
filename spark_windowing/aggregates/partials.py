"""The partial algebra of the built-in aggregates: a batch's partial state per (key, window) row
(counts ``a<i>:n``, sums ``a<i>:s``, best values ``a<i>:v`` and their times ``a<i>:t``, Python
objects ``a<i>:o``) and what the operator does with partials — combine them (per-slide
pre-aggregation), fold them into state rows, subtract retracted ones, merge rows (sessions) and
reset rows (discarding mode).

``numpy_partials`` makes the numeric partials (count / sum / avg / min / max of integer and float
columns) over any reducer with ``rows``, ``sizes``, ``count``, ``sum``, ``min``, ``max``: the
operator's ``_groups.Groups`` (pairs grouped by target row) and the buffered kinds'
``_groups.Ranges`` (windows as ranges of a sorted buffer) share it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_windowing._groups import Groups, Ranges
from spark_windowing.aggregates import ranked
from spark_windowing.aggregates.binding import BoundAggregate
from spark_windowing.errors import OptionError

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
            values, valid = values_and_validity(partials[p + "v"].take(pa.array(src)))
            count = grp.count(valid)
            v = (grp.min if f == "min" else grp.max)(values, valid, fill=0)
            new_parts[p + "v"] = pa.array(v, mask=count == 0)
    return grp.rows, new_res, new_parts


def numpy_groupable(aggs: list[BoundAggregate], pairs: pa.Table) -> bool:
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


def values_and_validity(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
    """A column's values as NumPy (nulls as 0) and its validity mask (None: no nulls)."""
    if col.null_count == 0:
        return col.to_numpy(), None
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    return (col.fill_null(0).to_numpy() if not pa.types.is_null(col.type) else np.zeros(len(col), np.int64)), valid


def numpy_partials(aggs: list[BoundAggregate], pairs: pa.Table, grp: Groups | Ranges, ts: np.ndarray,
                   hold_ts: np.ndarray | None) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, Any]]:
    """``preaggregate`` for ``numpy_groupable`` aggregates: the same rows (``grp``'s), counts,
    holds and partials, by ``grp``'s reductions (``Groups``: dense labels, in the pairs' order;
    ``Ranges``: ranges of ``pairs``, the buffered window kinds)."""
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
        values, valid = values_and_validity(col)
        n = grp.count(valid)
        partials[p + "n"] = n
        if f in ("sum", "avg"):
            partials[p + "s"] = grp.sum(values, valid)
        else:
            v = (grp.min if f == "min" else grp.max)(values, valid, fill=0)
            partials[p + "v"] = pa.array(v, mask=n == 0)
    return grp.rows, res, partials


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

