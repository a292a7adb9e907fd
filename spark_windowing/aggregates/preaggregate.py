"""Pre-aggregation of a batch: (element, window) pairs grouped by target state row into partial
aggregates (``aggregates.partials`` has their algebra) — in NumPy for numeric columns, by one
Arrow ``group_by`` otherwise, with the first/last, custom, ranked-rows, most_frequent and process
function partials beside."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_windowing._groups import Groups
from spark_windowing.aggregates import ranked
from spark_windowing.aggregates.binding import BoundAggregate
from spark_windowing.aggregates.partials import numpy_groupable, numpy_partials

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
    if numpy_groupable(aggs, pairs):
        return numpy_partials(aggs, pairs, groups or Groups(g), ts, hold_ts)
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

